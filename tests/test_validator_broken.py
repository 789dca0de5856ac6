"""Deliberately broken environment packages, each caught by the right check under the bwrap sandbox.

Every defect is a small edit to a copy of the valid fixture `tests/fixtures/guess_env`; the valid fixture and
the seed packages must pass every check (no false failures).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from openadapt.envpkg.loader import SEEDS_DIR
from openadapt.validator import Status, Validator, Verdict

FIXTURE = Path(__file__).parent / "fixtures" / "guess_env"
ENV_FILE = "server/guess_env_environment.py"


@pytest.fixture(scope="module")
def validator():
    with Validator("bwrap", episodes=10, timeout_s=60) as v:
        yield v


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def manifest(root: Path, mutate) -> None:
    data = yaml.safe_load((root / "openenv.yaml").read_text())
    mutate(data)
    (root / "openenv.yaml").write_text(yaml.safe_dump(data))


def append_method(root: Path, code: str) -> None:
    """Add methods to the environment class (the class is the last thing in its module)."""
    path = root / ENV_FILE
    path.write_text(path.read_text() + "\n" + code)


OVERRIDE_STEP = """
    def step(self, action, timeout_s=None, **kwargs):
        obs = super().step(action)
        return obs.model_copy(update={UPDATE})
"""

# name -> (mutation, the check id that must fail)
DEFECTS = {
    "syntax_error": (lambda r: edit(r / ENV_FILE, "def observe(self)", "def observe(self("), "static.imports"),
    "import_error": (lambda r: edit(r / ENV_FILE, "from typing import Any",
                                    "from typing import Any\nimport no_such_dependency"), "static.imports"),
    "reset_raises": (lambda r: edit(r / ENV_FILE, "self._target = rng.randint(0, 99)",
                                    "raise KeyError('targets')"), "runtime.api_contract"),
    "step_returns_dict": (lambda r: append_method(r, OVERRIDE_STEP.replace(
        "return obs.model_copy(update={UPDATE})", "return obs.model_dump()")), "runtime.api_contract"),
    "nan_reward": (lambda r: append_method(r, OVERRIDE_STEP.replace("UPDATE", '"reward": float("nan")')),
                   "runtime.reward_bounds"),
    "reward_out_of_range": (lambda r: append_method(r, OVERRIDE_STEP.replace("UPDATE", '"reward": 5.0')),
                            "runtime.reward_bounds"),
    "never_ends": (lambda r: append_method(r, OVERRIDE_STEP.replace("UPDATE", '"done": False')),
                   "runtime.episode_termination"),
    "metadata_missing": (lambda r: append_method(r, OVERRIDE_STEP.replace("UPDATE", '"metadata": {}')),
                         "runtime.metadata_contract"),
    "nondeterministic": (lambda r: edit(r / ENV_FILE, "self._target = rng.randint(0, 99)",
                                        "import random as _r\n        self._target = _r.randint(0, 99)"),
                         "runtime.episode_determinism"),
    "seed_ignored": (lambda r: edit(r / ENV_FILE, "self._target = rng.randint(0, 99)", "self._target = 42"),
                     "runtime.seed_variation"),
    "state_leaks_between_episodes": (lambda r: edit(r / ENV_FILE, "self._low, self._high, self._hints = 0, 99, []",
                                                    "self._low, self._high = 0, 99\n"
                                                    "        self._hints = getattr(self, '_hints', [])"),
                                     "runtime.episode_isolation"),
    "state_loses_episode_id": (lambda r: append_method(r, """
    def step(self, action, timeout_s=None, **kwargs):
        obs = super().step(action)
        if self._state.step_count >= 2:
            self._state.episode_id = "lost"
        return obs
"""), "runtime.state_contract"),
    "answer_leaked": (lambda r: edit(r / ENV_FILE, 'return {"low": self._low,',
                                     'return {"feedback_extra": 0} and {"low": self._low, "hints": '
                                     '[f"psst: the number is {self._target}"] + self._hints} or {"low": self._low,'),
                      "semantic.no_solution_leakage"),
    "constant_action_wins": (lambda r: edit(r / ENV_FILE, "if action.guess == self._target:",
                                            "if action.guess is not None:"), "semantic.exploit_probes"),
    "oracle_wrong": (lambda r: edit(r / "policies.py", "guess=self.env.oracle_view()",
                                    "guess=(self.env.oracle_view() + 1) % 100"), "semantic.oracle_max"),
    "do_nothing_rewarded": (lambda r: manifest(r, lambda d: d["openadapt"].update(invalid_action_reward=0.9)
                                               or d["openadapt"].update(reward_range=[-0.2, 1.0])),
                            "semantic.floor_gap"),
    "template_breaks": (lambda r: (r / "prompts" / "observation.j2").write_text("{{ obs.no_such_field }}"),
                        "semantic.text_protocol"),
    "step_hangs": (lambda r: edit(r / ENV_FILE, 'return Outcome("Say a number.", error="missing_guess")',
                                  'import time; time.sleep(3600)'), "runtime.resource_bounds"),
    "memory_bomb": (lambda r: edit(r / ENV_FILE, "self._target = rng.randint(0, 99)",
                                   "self._ballast = bytearray(8 * 1024 ** 3)\n        self._target = 1"),
                    "runtime.resource_bounds"),
    "output_flood": (lambda r: edit(r / ENV_FILE, "self._target = rng.randint(0, 99)",
                                    "print('x' * 200_000)\n        self._target = rng.randint(0, 99)"),
                     "runtime.output_volume"),
    "bad_manifest_tier": (lambda r: manifest(r, lambda d: d["openadapt"].update(eci_tiers=[1, 7])),
                          "static.manifest"),
    "missing_dockerfile": (lambda r: (r / "server" / "Dockerfile").unlink(), "static.files"),
    "openenv_block_invalid": (lambda r: manifest(r, lambda d: d["validation"]["reward"].update(oracle_tolerance=0.5)),
                              "static.openenv"),
    "privileged_observation_field": (lambda r: edit(r / "models.py", 'hints: list[str]',
                                                    'hidden_answer: int = 0\n    hints: list[str]'),
                                     "semantic.oracle_containment"),
}


def broken_copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / "guess_env"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__"))
    DEFECTS[name][0](root)
    return root


def test_at_least_fifteen_defect_classes():
    assert len(DEFECTS) >= 15


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_defect_is_caught_by_the_right_check(validator, tmp_path, name):
    report = validator.validate(broken_copy(tmp_path, name))
    expected = DEFECTS[name][1]
    failing = {c.check_id for c in report.failing}
    assert report.verdict == Verdict.FAIL, report.designer_feedback()
    assert expected in failing, f"{name}: expected {expected}, failing {sorted(failing)}"
    check = report.check(expected)
    assert check.evidence and check.remediation
    feedback = report.designer_feedback()
    assert expected in feedback and len(feedback) < 6000


def test_dependent_checks_are_skipped_not_failed(validator, tmp_path):
    report = validator.validate(broken_copy(tmp_path, "syntax_error"))
    assert report.check("static.imports").status == Status.FAIL
    runtime = [c for c in report.checks if c.check_id.startswith(("runtime.api", "runtime.dummy", "semantic."))]
    assert runtime and all(c.status == Status.SKIP for c in runtime)
    assert all("depends on" in c.evidence[0] for c in runtime)


def test_traceback_points_into_the_package(validator, tmp_path):
    report = validator.validate(broken_copy(tmp_path, "reset_raises"))
    tb = report.check("runtime.api_contract").traceback
    assert tb and 'File "server/guess_env_environment.py"' in tb and "KeyError: 'targets'" in tb
    assert "raise KeyError('targets')" in report.designer_feedback()


@pytest.mark.parametrize("package", [FIXTURE, SEEDS_DIR / "incident_triage"])
def test_valid_packages_pass_every_check(validator, package):
    report = validator.validate(package)
    assert report.verdict == Verdict.PASS, report.designer_feedback()
    assert all(c.status == Status.PASS for c in report.checks)
    assert report.sandbox.backend == "bwrap" and report.sandbox.isolated
    assert len(report.package_digest) == 64 and report.package_name


def test_not_a_package(validator, tmp_path):
    report = validator.validate(tmp_path)
    assert report.verdict == Verdict.UNUSABLE and report.exit_code == 2
    assert report.check("static.manifest").status == Status.FAIL


def test_manifest_that_does_not_parse(validator, tmp_path):
    root = broken_copy(tmp_path, "bad_manifest_tier")
    (root / "openenv.yaml").write_text("openadapt: [unclosed\n")
    report = validator.validate(root)
    assert report.verdict == Verdict.FAIL
    assert "not valid YAML" in report.check("static.manifest").evidence[0]
