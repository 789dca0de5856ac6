"""Lint and format the code a designer writes (custom mechanics), before the validator sees it.

`ruff format` gives the package one readable style for its reviewers; `ruff check --fix` removes what is safely
fixable (unused imports, import order). What is left is recorded, not fatal: the validator decides whether the
package works. The code is only read and rewritten as text here, never imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from openadapt.envpkg.render import write_files

RUFF_ARGS = ["--line-length", "120", "--target-version", "py311"]
SELECT = "E,F,I,UP,B,SIM"


def _ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)


def tidy(files: dict[str, str], prefix: str = "custom/") -> tuple[dict[str, str], list[str]]:
    """`files` with the Python files under `prefix` formatted and safely fixed, and the lint problems left."""
    code = [path for path in files if path.startswith(prefix) and path.endswith(".py")]
    if not code:
        return files, []
    with tempfile.TemporaryDirectory(prefix="openadapt-lint-") as tmp:
        root = Path(tmp)
        write_files({path: files[path] for path in code}, root)
        formatted = _ruff("format", "--no-cache", *RUFF_ARGS, *code, cwd=root)
        if formatted.returncode not in (0, 1) and "No module named ruff" in formatted.stderr:
            return files, ["ruff is not installed: the custom code was not linted"]
        _ruff("check", "--no-cache", "--fix", "--select", SELECT, *RUFF_ARGS, *code, cwd=root)
        report = _ruff("check", "--no-cache", "--select", SELECT, "--output-format", "json", *RUFF_ARGS, *code,
                       cwd=root)
        out = dict(files)
        for path in code:
            out[path] = (root / path).read_text(encoding="utf-8")
    try:
        problems = [f"{p['filename'].split(tmp)[-1].lstrip('/')}:{p['location']['row']}: {p['code']} {p['message']}"
                    for p in json.loads(report.stdout or "[]")]
    except (json.JSONDecodeError, KeyError, TypeError):
        problems = []
    return out, problems
