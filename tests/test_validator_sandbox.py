"""Sandbox backends: the docker container spec and its no-engine error, backend selection, the process
backend's explicit 'not isolated' report, the bwrap command line, and the CLI's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest
from typer.testing import CliRunner

from openadapt.cli import app
from openadapt.sandbox import bwrap
from openadapt.sandbox.base import import_root
from openadapt.sandbox.docker import PACKAGE_MOUNT, connect, container_spec
from openadapt.validator import SandboxUnavailable, Validator, Verdict
from openadapt.validator.report import CheckResult, SandboxInfo, Status, ValidationReport
from openadapt.validator.service import make_sandbox

FIXTURE = Path(__file__).parent / "fixtures" / "guess_env"


@pytest.fixture
def no_docker(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")


def test_docker_container_spec_is_locked_down(tmp_path):
    spec = container_spec(tmp_path, {"tiers": [1, 2], "episodes": 5, "timeout_s": 30, "memory_mb": 512},
                          image="my/validator:1", memory_mb=768, cpus=0.5)
    assert spec["image"] == "my/validator:1"
    assert spec["network_mode"] == "none" and spec["network_disabled"] is True
    assert spec["read_only"] is True and spec["tmpfs"] == {"/tmp": "rw,noexec,nosuid,nodev,size=256m,mode=1777"}
    assert spec["volumes"] == {str(tmp_path): {"bind": PACKAGE_MOUNT, "mode": "ro"}}
    assert spec["user"] == "65534:65534" and spec["cap_drop"] == ["ALL"]
    assert spec["security_opt"] == ["no-new-privileges"]
    assert spec["mem_limit"] == spec["memswap_limit"] == "768m"
    assert spec["pids_limit"] == 512 and spec["nano_cpus"] == 500_000_000
    assert spec["environment"]["PYTHONHASHSEED"] == "1"  # the worker's; its twin takes another
    assert all(isinstance(u, docker.types.Ulimit) for u in spec["ulimits"])
    request = json.loads(spec["command"][-1])
    assert spec["command"][:6] == ["python", "-s", "-P", "-m", "openadapt.validator.worker", "--once"]
    assert request["package"] == PACKAGE_MOUNT and request["tiers"] == [1, 2]
    assert not any("KEY" in k or "TOKEN" in k for k in spec["environment"])


def test_docker_without_engine_is_a_clear_error(no_docker):
    with pytest.raises(SandboxUnavailable, match="no Docker engine answers.*--sandbox bwrap"):
        connect()
    with pytest.raises(SandboxUnavailable, match="no Docker engine"):
        Validator("docker")


def test_auto_falls_back_to_bwrap_without_docker(no_docker, tmp_path):
    sandbox = make_sandbox("auto", tmp_path)
    assert sandbox.name == "bwrap" and sandbox.isolated
    sandbox.close()


def test_auto_refuses_when_nothing_isolates(no_docker, monkeypatch, tmp_path):
    monkeypatch.setattr(bwrap, "available", lambda: "bwrap is not installed (apt-get install bubblewrap)")
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap.*--sandbox process"):
        make_sandbox("auto", tmp_path)


def test_bwrap_command_isolates(tmp_path):
    sandbox = bwrap.BwrapSandbox(tmp_path)
    try:
        argv = sandbox.worker_command()
        for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent", "--clearenv", "--new-session"):
            assert flag in argv
        assert argv[argv.index("--remount-ro") + 1] == "/"
        assert f"--reuid={sandbox.uid}" in argv and "--no-new-privs" in argv and "--bounding-set=-all" in argv
        assert "/work/main/.git" not in argv and str(Path.home()) not in argv[argv.index("--"):]
        env = sandbox.worker_env()
        assert set(env) - {"PYTHONPATH"} == {"PATH", "LANG", "PYTHONDONTWRITEBYTECODE", "HOME", "OMP_NUM_THREADS"}
        assert env.get("PYTHONPATH") == (str(import_root()) if import_root() else None)  # openadapt's own code only
        # The scratch is a tmpfs of the sandbox's disk budget, never a writable host directory.
        scratch = argv.index("/tmp/scratch")
        assert argv[scratch - 1] == "--tmpfs" and argv[scratch - 2] == str(256 * 1024 * 1024)
        assert "--bind" not in argv
        assert str(sandbox.scratch) not in argv
    finally:
        sandbox.close()


def test_concurrent_bwrap_sandboxes_get_distinct_uids(tmp_path):
    first, second = bwrap.BwrapSandbox(tmp_path / "a"), bwrap.BwrapSandbox(tmp_path / "b")
    try:
        assert first.uid != second.uid
    finally:
        first.close()
        second.close()


def test_process_backend_says_it_is_not_isolated():
    with Validator("process", episodes=4) as validator:
        report = validator.validate(FIXTURE, [1])
    assert report.verdict == Verdict.PASS, report.designer_feedback()
    assert report.sandbox.backend == "process" and not report.sandbox.isolated
    assert any("NOT ISOLATED" in note for note in report.sandbox.notes)


def test_designer_feedback_is_compact_and_skips_passing_checks():
    report = ValidationReport(
        package="x", verdict=Verdict.FAIL, sandbox=SandboxInfo(backend="bwrap", isolated=True),
        checks=[CheckResult(check_id="runtime.api_contract", level="runtime", status=Status.PASS),
                CheckResult(check_id="runtime.reward_bounds", level="runtime", status=Status.FAIL,
                            evidence=["ECI 1 seed 3 step 2: reward nan"] * 20, remediation="keep rewards finite",
                            traceback='  File "server/env.py", line 9, in step\n    return nan\nValueError: x' * 200),
                CheckResult(check_id="semantic.floor_gap", level="semantic", status=Status.SKIP)],
    )
    text = report.designer_feedback(max_chars=2000)
    assert "runtime.reward_bounds" in text and "keep rewards finite" in text
    assert "runtime.api_contract" not in text
    assert len(text) <= 2000 and "1 check(s) skipped" in text
    assert text.count("ECI 1 seed 3") == 6  # evidence capped per check
    assert 'File "server/env.py"' in text and len(text) < len(report.checks[1].traceback)  # traceback tail only
    assert report.summary()["failing"] == ["runtime.reward_bounds"] and report.exit_code == 1


runner = CliRunner()


def test_cli_validate_exit_codes(tmp_path, no_docker):
    passing = runner.invoke(app, ["validate", str(FIXTURE), "--eci", "1", "--episodes", "4", "--json"])
    assert passing.exit_code == 0, passing.output
    assert json.loads(passing.output)["verdict"] == "pass"
    broken = tmp_path / "pkg"
    broken.mkdir()
    (broken / "openenv.yaml").write_text("name: pkg\nopenadapt: {}\n")
    failing = runner.invoke(app, ["validate", str(broken), "--episodes", "4"])
    assert failing.exit_code == 1 and "static.manifest" in failing.output
    unusable = runner.invoke(app, ["validate", str(tmp_path / "nothing-here")])
    assert unusable.exit_code == 2 and "no such directory" in unusable.output
    bad_flag = runner.invoke(app, ["validate", str(FIXTURE), "--sandbox", "chroot"])
    assert bad_flag.exit_code == 2
    no_engine = runner.invoke(app, ["validate", str(FIXTURE), "--sandbox", "docker"])
    assert no_engine.exit_code == 3 and "no Docker engine" in no_engine.output
