"""Deliberately broken environment packages, each caught by the right check under the bwrap sandbox.

Every defect is a small edit to a copy of the valid fixture `tests/fixtures/guess_env`; the valid fixture, the
seed packages and the exemplar must pass every check (no false failures). Each validation's time is added to
`VALIDATION_SECONDS`, printed at the end of the module (the hostile suite's validation time).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from openadapt.envpkg.loader import SEEDS_DIR
from openadapt.validator import Status, Validator, Verdict

FIXTURE = Path(__file__).parent / "fixtures" / "guess_env"
EXEMPLAR = Path(__file__).resolve().parents[1] / "openadapt" / "designer" / "exemplar" / "code_lock"
ENV_FILE = "server/guess_env_environment.py"
VALIDATION_SECONDS: dict[str, list[float]] = {"broken": [], "valid": []}


class TimedValidator:
    """The module's validator, recording each validation's time (broken and valid packages apart)."""

    def __init__(self, inner: Validator):
        self.inner = inner

    def validate(self, path, tiers=None, kind: str = "broken"):
        report = self.inner.validate(path, tiers)
        VALIDATION_SECONDS[kind].append(report.timings.get("total_s", 0.0))
        return report


@pytest.fixture(scope="module")
def validator():
    with Validator("bwrap", episodes=10, timeout_s=60) as v:
        v.warm_up()
        yield TimedValidator(v)
    for kind, seconds in VALIDATION_SECONDS.items():
        print(f"\n[validation time] {Path(__file__).name}, {kind} packages: {sum(seconds):.1f} s over "
              f"{len(seconds)} validations (max {max(seconds, default=0):.1f} s)")


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
                                        "import secrets\n        self._target = secrets.randbelow(100)"),
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


# Defects the validator used to miss (issue 15, item 7). name -> (mutation, check that must fail)
MISSED = {
    # The answer in a step's feedback (not declared in secret_values, not in the first observation).
    "answer_in_feedback": (lambda r: edit(r / ENV_FILE, 'return Outcome("Higher." if higher else "Lower.")',
                                          'return Outcome(("Higher." if higher else "Lower.") + f" (it is '
                                          '{self._target})")'), "semantic.no_solution_leakage"),
    # The ECI argument ignored: every tier generates the same episodes.
    "eci_ignored": (lambda r: edit(r / ENV_FILE, "self.perturb.chance(self.tier.drop)", "self.perturb.chance(0.0)"),
                    "semantic.tier_separation"),
    # Class-level state: one session's reset replaces another's target.
    "shared_class_state": (lambda r: edit(r / ENV_FILE, "self._target = rng.randint(0, 99)",
                                          "type(self)._target = rng.randint(0, 99)"), "runtime.concurrent_sessions"),
    # Episodes that depend on PYTHONHASHSEED.
    "hash_seed_dependent": (lambda r: edit(r / ENV_FILE, "self._target = rng.randint(0, 99)",
                                           "self._target = (rng.randint(0, 99) + hash('salt')) % 100"),
                            "runtime.hash_seed_determinism"),
    # An observation of 50 MB.
    "observation_50mb": (lambda r: edit(r / ENV_FILE, 'return {"low": self._low, "high": self._high, "hints": '
                                        'self._hints}', 'return {"low": self._low, "high": self._high, "hints": '
                                        '["x" * (50 * 1024 * 1024)]}'), "runtime.api_contract"),
    # A memory leak across resets (class-level ballast).
    "memory_leak": (lambda r: edit(r / ENV_FILE, "self._target = rng.randint(0, 99)",
                                   "type(self)._leak = getattr(type(self), '_leak', []) + [bytearray(64 * 1024 ** 2)]\n"
                                   "        self._target = rng.randint(0, 99)"), "runtime.resource_bounds"),
    # A prompt template that calls into Python.
    "template_calls_python": (lambda r: (r / "prompts" / "observation.j2").write_text(
        "{{ cycler.__init__.__globals__.os.popen('echo pwned').read() }} {{ obs.low }}"), "semantic.text_protocol"),
    # Infinite rewards.
    "inf_reward": (lambda r: append_method(r, OVERRIDE_STEP.replace("UPDATE", '"reward": float("inf")')),
                   "runtime.reward_bounds"),
    # NaN only where the agent does nothing: the oracle is fine, the averages of the floor and the probes are not.
    "nan_for_empty_actions": (lambda r: append_method(r, OVERRIDE_STEP.replace(
        "return obs.model_copy(update={UPDATE})",
        'return obs.model_copy(update={"reward": float("nan")}) if action.guess is None else obs')),
        "semantic.floor_gap"),
}


def broken_copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / "guess_env"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__"))
    {**DEFECTS, **MISSED}[name][0](root)
    return root


def test_at_least_fifteen_defect_classes():
    assert len(DEFECTS) >= 15 and len(MISSED) >= 9


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


@pytest.mark.parametrize("name", sorted(MISSED))
def test_missed_defect_is_caught(validator, tmp_path, name):
    report = validator.validate(broken_copy(tmp_path, name))
    expected = MISSED[name][1]
    assert report.verdict == Verdict.FAIL, report.designer_feedback()
    assert expected in {c.check_id for c in report.failing}, (name, report.designer_feedback())
    check = report.check(expected)
    assert check.evidence and check.remediation
    assert "/tmp/inbox" not in report.model_dump_json()  # package-relative paths only
    evidence = " ".join(check.evidence)
    if name == "answer_in_feedback":
        assert "given away" in evidence and "feedback of observation" in evidence
    if name == "eci_ignored":
        assert "ECI 1 and ECI 2 generate identical episodes" in evidence
    if name == "shared_class_state":
        assert "state is shared between instances" in evidence
    if name == "hash_seed_dependent":
        assert "PYTHONHASHSEED=1" in evidence and "PYTHONHASHSEED=2" in evidence
        assert report.check("runtime.episode_determinism").status == Status.PASS  # same interpreter: same episode
    if name == "observation_50mb":
        assert "bytes of JSON" in evidence and "'hints'" in evidence
    if name == "memory_leak":
        everything = " ".join(e for c in report.failing for e in c.evidence)
        assert "exhausted its memory" in everything and "grown by" in everything
        assert "MemoryError: " not in everything.replace("MemoryError: the package", "")
    if name == "template_calls_python":
        assert "tried to reach Python internals" in evidence and "pwned" not in report.candidate_output
    if name == "nan_for_empty_actions":
        assert "not finite" in evidence
        assert report.check("semantic.exploit_probes").status == Status.FAIL
        assert report.check("semantic.oracle_max").status == Status.PASS


def test_nan_rewards_pass_no_semantic_check(validator, tmp_path):
    """NaN in every reward: oracle_max fails on it by name, and nothing that averages rewards passes."""
    report = validator.validate(broken_copy(tmp_path, "nan_reward"))
    oracle = report.check("semantic.oracle_max")
    assert oracle.status == Status.FAIL and "not finite" in oracle.evidence[0]
    for check_id in ("semantic.floor_gap", "semantic.exploit_probes", "semantic.verifier_determinism",
                     "semantic.tier_separation"):
        assert report.check(check_id).status != Status.PASS, check_id


def test_inf_rewards_fail_the_averages(validator, tmp_path):
    report = validator.validate(broken_copy(tmp_path, "inf_reward"))
    assert report.check("semantic.oracle_max").status == Status.FAIL
    assert "inf" in report.check("semantic.oracle_max").evidence[0]


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


@pytest.mark.parametrize("package", [FIXTURE, SEEDS_DIR / "incident_triage", SEEDS_DIR / "daily_report",
                                     SEEDS_DIR / "enterprise_workflow", EXEMPLAR])
def test_valid_packages_pass_every_check(validator, package):
    report = validator.validate(package, kind="valid")
    assert report.verdict == Verdict.PASS, report.designer_feedback()
    not_passed = [c.check_id for c in report.checks if c.status != Status.PASS
                  and not (c.status == Status.SKIP and "not applicable" in c.evidence[0])]
    assert not not_passed, not_passed
    assert report.sandbox.backend == "bwrap" and report.sandbox.isolated
    assert len(report.package_digest) == 64 and report.package_name
    assert report.check("runtime.sandbox_violations").measured["attempts"] == 0


def test_not_a_package(validator, tmp_path):
    report = validator.validate(tmp_path)
    assert report.verdict == Verdict.UNUSABLE and report.exit_code == 2
    assert report.check("static.manifest").status == Status.FAIL


def test_manifest_that_does_not_parse(validator, tmp_path):
    root = broken_copy(tmp_path, "bad_manifest_tier")
    (root / "openenv.yaml").write_text("openadapt: [unclosed\n")
    report = validator.validate(root)
    assert report.verdict == Verdict.FAIL
    evidence = report.check("static.manifest").evidence[0]
    assert "not valid YAML" in evidence and evidence.startswith("openenv.yaml:")  # no sandbox-internal path


def test_a_package_that_hangs_only_in_the_second_interpreter_fails_the_hash_seed_check(validator, tmp_path):
    """The twin plays its episodes after the player's, with a bound of its own: a package that stalls only under
    the other hash seed fails the comparison with what happened; it is never skipped."""
    root = tmp_path / "slow_twin"
    shutil.copytree(FIXTURE, root)
    edit(root / ENV_FILE, "        self._target = rng.randint(0, 99)",
         "        import os, time\n"
         "        if os.environ.get('PYTHONHASHSEED') in ('2', '3'):  # only the second interpreter is slow\n"
         "            time.sleep(40)\n"
         "        self._target = rng.randint(0, 99)")
    report = validator.validate(root)
    check = report.check("runtime.hash_seed_determinism")
    assert check.status == Status.FAIL, report.designer_feedback()
    assert "under PYTHONHASHSEED=2 (a second interpreter)" in check.evidence[0]
    assert "did not return within 10 s" in check.evidence[0]
