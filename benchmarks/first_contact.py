"""First contact: the README's two commands on a fresh clone, as a new user runs them, timed.

    python benchmarks/first_contact.py                          # a clone under /tmp: set-up, then the main job
    python benchmarks/first_contact.py --parent "/tmp/my dir"   # a clone in a path with a space
    python benchmarks/first_contact.py --tests                  # and then the test command (what CI runs)

It clones this checkout's HEAD (committed work only, as CI and a user see it), runs the README's main command
(`bash scripts/setup.sh && .venv/bin/openadapt generate "..."`, taken from the README, with `--json` added so the
outcome can be read), and prints the seconds of each part, the outcome, and what the package is about: its
family, its entities, whether the prompt's world is in it and whether a shipped example's names are. Run it
before a designer change lands; the figures go to docs/benchmarks.md ("First contact"). The set-up reuses pip's
cache and the models under ~/.cache/openadapt when they are there, as a returning user's would.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
MODELS = Path(os.environ.get("OPENADAPT_MODELS_DIR", Path.home() / ".cache" / "openadapt" / "models"))


def readme_commands(readme: str) -> tuple[str, str]:
    """The README's main command and its test command: the first two fenced bash blocks of its quick start."""
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    main = next(b for b in blocks if "openadapt generate" in b)
    tests = next(b for b in blocks if "scripts/test.sh" in b)
    return main.strip(), tests.strip()


def timed(command: str, cwd: Path, log: Path) -> tuple[int, float]:
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run(["bash", "-c", command], cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode
    return code, time.monotonic() - started


def gigabytes(folder: Path) -> float:
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e9, 2)


def shipped_names() -> set[str]:
    """Every entity name of the shipped example domains (a package that reuses them copied another world)."""
    names: set[str] = set()
    for path in [*REPO.glob("openadapt/families/*/examples/*.yaml"), *REPO.glob("openadapt/seed_envs/*/domain.yaml")]:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for value in data.values():
            for item in value if isinstance(value, list) else []:
                if isinstance(item, dict):
                    names.update(str(item[k]).lower() for k in ("name", "id") if k in item)
    return names


def describe(package: Path, task: str) -> dict:
    provenance = json.loads((package / "provenance.json").read_text())
    domain = yaml.safe_load((package / "domain.yaml").read_text()) if (package / "domain.yaml").is_file() else {}
    names = {str(i[k]).lower() for v in domain.values() if isinstance(v, list) for i in v if isinstance(i, dict)
             for k in ("name", "id") if k in i}
    words = {w for w in re.findall(r"[a-z]{4,}", task.lower())}
    text = (package / "domain.yaml").read_text().lower() if domain else ""
    return {"family": provenance["designer"].get("family"), "attempts": len(provenance["attempts"]),
            "verdict": provenance["validation"].get("verdict"), "isolated": provenance["validation"].get("isolated"),
            "entities": sorted(names)[:20], "prompt_words_in_domain": sorted(w for w in words if w in text),
            "shipped_names_reused": sorted(names & shipped_names())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parent", type=Path, default=None, help="where to clone (default: a new folder in /tmp)")
    parser.add_argument("--tests", action="store_true", help="then run the README's test command, timed")
    args = parser.parse_args()
    parent = args.parent or Path(tempfile.mkdtemp(prefix="openadapt-first-contact-"))
    parent.mkdir(parents=True, exist_ok=True)
    clone = parent / "openadapt"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True,
                            check=True).stdout.strip()
    main_command, test_command = readme_commands((clone / "README.md").read_text(encoding="utf-8"))
    setup, _, generate = main_command.partition(" && ")
    task = shlex.split(generate)[2]
    result: dict = {"commit": commit, "clone": str(clone), "task": task}
    code, result["setup_s"] = timed(setup, clone, parent / "setup.log")
    result["disk"] = {"venv_gb": gigabytes(clone / ".venv"), "models_gb": gigabytes(MODELS)}
    if code != 0:
        sys.exit(print(json.dumps({**result, "setup_exit": code, "log": str(parent / "setup.log")}, indent=2)))
    code, result["generate_s"] = timed(f"{generate} --json > ../generate.json", clone, parent / "generate.log")
    out = json.loads((parent / "generate.json").read_text() or "{}")
    result.update(generate_exit=code, published=bool(out.get("ok")), name=out.get("name"),
                  reason=out.get("reason"))
    if out.get("ok"):
        result["package"] = describe(clone / "generated_envs" / out["name"], task)
    if args.tests:
        result["tests_exit"], result["tests_s"] = timed(test_command, clone, parent / "tests.log")
    result = {k: round(v) if k.endswith("_s") else v for k, v in result.items()}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
