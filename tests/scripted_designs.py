"""Scripted designer replies built from the code_lock exemplar (a small valid custom-mechanics package), for the
loopback chat-completions server."""

from __future__ import annotations

import json

from openadapt.designer.prompting import exemplar

NAME = "lock_game"
ENV_FILE = "custom/environment.py"
BUG = ("target = rng.randint(0, 99)", "target = rng.randint(0, 99)\n        raise KeyError('targets')")


def design_files(bug: bool = False, spec: dict | None = None) -> dict[str, str]:
    files = dict(exemplar())
    if spec is not None:
        files["spec.json"] = json.dumps(spec, indent=2)
    files["README.md"] = "A lock opens with a hidden code found from higher/lower hints."
    if bug:
        files[ENV_FILE] = files[ENV_FILE].replace(*BUG)
    return files


def as_reply(files: dict[str, str], prose: str = "Here is the package.") -> str:
    blocks = [f"```{'json' if p.endswith('json') else 'python'} path={p}\n{t.rstrip()}\n```" for p, t in files.items()]
    return prose + "\n\n" + "\n\n".join(blocks) + "\n\nLet me know if you need changes."


def design_reply(bug: bool = False, prose: str = "Here is the package.", spec: dict | None = None) -> str:
    return as_reply(design_files(bug, spec), prose)

