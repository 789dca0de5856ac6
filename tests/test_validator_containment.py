"""Containment under bwrap: hostile packages are contained, reported as clear failures within their time
bound, leave no process or file behind on the host, and every escape attempt is reported with its evidence.

Each validation's time is added to `VALIDATION_SECONDS`, printed at the end of the module (the hostile suite's
validation time, issue 15: under 60 s with test_validator_broken.py, a setsid() grandchild under 10 s).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openadapt.cli import app
from openadapt.validator import Status, Validator, Verdict

FIXTURE = Path(__file__).parent / "fixtures" / "guess_env"
ENV_FILE = "server/guess_env_environment.py"
HOOK = "self._target = rng.randint(0, 99)"
TIMEOUT_S = 8.0
SECRET = "openadapt-test-secret-7c1f"
VALIDATION_SECONDS: list[float] = []  # hostile packages
VALID_SECONDS: list[float] = []  # the valid packages among them


@pytest.fixture(scope="module")
def validator():
    os.environ["OPENADAPT_TEST_API_KEY"] = SECRET  # must never reach the sandbox
    try:
        with Validator("bwrap", episodes=4, timeout_s=TIMEOUT_S) as v:
            v.warm_up()
            yield v
    finally:
        os.environ.pop("OPENADAPT_TEST_API_KEY", None)
        print(f"\n[validation time] {Path(__file__).name}, hostile packages: {sum(VALIDATION_SECONDS):.1f} s over "
              f"{len(VALIDATION_SECONDS)} validations (max {max(VALIDATION_SECONDS, default=0):.1f} s); valid "
              f"packages: {sum(VALID_SECONDS):.1f} s over {len(VALID_SECONDS)}")


@pytest.fixture
def listener():
    """A TCP server on the host's loopback that records any connection."""
    accepted = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                accepted.append(conn)
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


def copy_fixture(tmp_path: Path) -> Path:
    root = tmp_path / "guess_env"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def hostile(tmp_path: Path, code: str) -> Path:
    """A copy of the valid fixture whose reset() first runs `code` (indented into generate())."""
    root = copy_fixture(tmp_path)
    body = "\n".join("        " + line for line in code.strip().splitlines())
    path = root / ENV_FILE
    path.write_text(path.read_text().replace(HOOK, body.strip() + "\n        " + HOOK, 1))
    return root


def hook_line(root: Path, needle: str) -> int:
    """The line of the package's environment file that holds `needle` (what the evidence must point at)."""
    return next(i for i, line in enumerate((root / ENV_FILE).read_text().splitlines(), 1) if needle in line)


def sandbox_processes(validator: Validator) -> list[str]:
    """Command lines of host processes running as the sandbox's uid."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == validator.sandbox.uid:
                    found.append(_cmdline(entry))
            except FileNotFoundError:
                continue
    return found


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def run(validator: Validator, root: Path, bound_s: float = TIMEOUT_S + 15):
    started = time.monotonic()
    report = validator.validate(root)
    elapsed = time.monotonic() - started
    VALIDATION_SECONDS.append(report.timings.get("total_s", elapsed))
    assert elapsed < bound_s, f"took {elapsed:.1f} s"
    # Nothing left behind: only the worker and its twin run as the sandbox uid; the host's scratch and inbox are
    # empty (inside, the scratch is a tmpfs that never touches the host's disk).
    leftovers = [c for c in sandbox_processes(validator) if "openadapt.validator.worker" not in c]
    assert leftovers == [], leftovers
    assert len(sandbox_processes(validator)) <= 2
    assert not any(validator.sandbox.scratch.iterdir())
    assert not any(validator.sandbox.inbox.iterdir())
    dumped = report.model_dump_json()
    assert "/tmp/inbox/pkg-" not in dumped and "openadapt_pkg_" not in dumped  # package-relative paths only
    return report


def failed_with(report, text: str) -> bool:
    return any(text in " ".join(c.evidence) for c in report.failing)


def violations(report) -> str:
    check = report.check("runtime.sandbox_violations")
    assert check.status == Status.FAIL, check
    assert check.remediation and "--trust" in check.remediation
    return " | ".join(check.evidence)


# ---- network, files, secrets ------------------------------------------------------------------------------
def test_loopback_and_external_network_are_unreachable(validator, tmp_path, listener):
    port, accepted = listener
    root = hostile(tmp_path, f"""
import socket
for host, port in (("127.0.0.1", {port}), ("1.1.1.1", 53), ("10.0.0.1", 80)):
    try:
        socket.create_connection((host, port), timeout=2).close()
        raise SystemError(f"connected to {{host}}:{{port}}")
    except OSError as exc:
        errors = getattr(self, "_net_errors", [])
        errors.append(f"{{host}}: {{exc}}")
        self._net_errors = errors
raise ConnectionError(" | ".join(self._net_errors))
""")
    report = run(validator, root)
    assert report.verdict == Verdict.FAIL
    assert failed_with(report, "ConnectionError") and not failed_with(report, "connected to")
    assert accepted == []
    assert f"connect to 127.0.0.1:{port}" in violations(report)


def test_writes_outside_scratch_fail(validator, tmp_path):
    target = tmp_path / "written-by-sandbox"
    root = hostile(tmp_path, f"""
results = []
for path in ({str(target)!r}, "/usr/pwned", "/etc/pwned", "/root/pwned", "/tmp/inbox/pwned", "/work/pwned"):
    try:
        open(path, "w").write("x")
        results.append("WROTE " + path)
    except OSError as exc:
        results.append(type(exc).__name__)
raise PermissionError(";".join(results))
""")
    report = run(validator, root)
    assert failed_with(report, "PermissionError") and not failed_with(report, "WROTE")
    assert not target.exists()
    assert "open /usr/pwned for writing (outside the scratch directory)" in violations(report)


def test_host_secrets_and_environment_are_invisible(validator, tmp_path):
    secret_file = tmp_path / "host-secret.txt"
    secret_file.write_text(SECRET)
    root = hostile(tmp_path, f"""
import os
seen = [os.environ.get("OPENADAPT_TEST_API_KEY", "no-key"), ",".join(sorted(os.environ))]
for path in ({str(secret_file)!r}, "/root/.bash_history", "/etc/shadow", "/work/main/pyproject.toml"):
    try:
        seen.append(open(path).read()[:80])
    except OSError as exc:
        seen.append(type(exc).__name__)
print("SEEN", seen)
raise LookupError(repr(seen))
""")
    report = run(validator, root)
    dumped = report.model_dump_json()
    assert SECRET not in dumped
    assert failed_with(report, "LookupError") and "no-key" in dumped
    assert "OPENADAPT_TEST_API_KEY" not in dumped
    assert "read /etc/shadow" in violations(report)


# ---- escape attempts that fail harmlessly are still reported (issue 15, item 5) ----------------------------
# Each attempt is wrapped so the package otherwise works: the only failing check is runtime.sandbox_violations.
# name -> (code, evidence it must produce, the text of the line the evidence must point at)
ATTEMPTS = {
    "connect_loopback": ("import socket\ntry:\n    socket.create_connection(('127.0.0.1', PORT), timeout=1)\n"
                         "except OSError:\n    pass", ["connect to 127.0.0.1:PORT"], "socket.create_connection"),
    "read_root_file": ("try:\n    open('/root/.openadapt-canary').read()\nexcept OSError:\n    pass",
                       ["read /root/.openadapt-canary"], "open('/root/"),
    "write_outside_scratch": ("try:\n    open('/tmp/escaped.txt', 'w').write('x')\nexcept OSError:\n    pass",
                              ["open /tmp/escaped.txt for writing (outside the scratch directory)"], "escaped.txt"),
    "ptrace_parent": ("import ctypes, os\nctypes.CDLL(None, use_errno=True).ptrace(16, os.getppid(), 0, 0)",
                      ["look up ptrace", "the kernel refused ptrace(PTRACE_ATTACH"], ".ptrace("),
    "unshare_namespace": ("import ctypes\nctypes.CDLL(None, use_errno=True).unshare(0x10000000)",
                          ["look up unshare", "the kernel refused unshare(CLONE_NEWUSER) (seccomp)"], ".unshare("),
}


@pytest.mark.parametrize("name", sorted(ATTEMPTS))
def test_escape_attempt_is_reported(validator, tmp_path, listener, name):
    port, accepted = listener
    code, expected, needle = ATTEMPTS[name]
    root = hostile(tmp_path, code.replace("PORT", str(port)))
    report = run(validator, root)
    assert report.verdict == Verdict.FAIL
    assert [c.check_id for c in report.failing] == ["runtime.sandbox_violations"], report.designer_feedback()
    evidence = violations(report)
    for text in expected:
        assert text.replace("PORT", str(port)) in evidence, evidence
    assert f"at {ENV_FILE} line" in evidence
    assert f"line {hook_line(root, needle)}" in evidence, (needle, evidence)
    assert accepted == []


# ---- processes ----------------------------------------------------------------------------------------------
def test_fork_bomb_is_contained(validator, tmp_path):
    root = hostile(tmp_path, """
import os
while True:
    os.fork()
""")
    report = run(validator, root)
    assert report.verdict == Verdict.FAIL
    assert "fork the process (os.fork)" in violations(report)


def test_setsid_grandchild_costs_seconds_not_the_timeout(validator, tmp_path):
    root = hostile(tmp_path, """
import subprocess
subprocess.Popen(["sleep", "987654"], start_new_session=True, stdout=subprocess.DEVNULL)
""")
    report = run(validator, root, bound_s=10)
    print(f"\n[setsid grandchild] validated in {report.timings['total_s']:.2f} s")
    assert report.timings["total_s"] < 10
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).startswith("sleep 987654")]
    assert leftovers == []
    assert "start a process: sleep 987654" in violations(report)
    # The cause is named: no timeout, no "the package must not exit" for a package that did not exit.
    assert not failed_with(report, "timeout after") and not failed_with(report, "ended early")
    assert all(c.check_id != "runtime.process" for c in report.checks)


def test_output_flood_is_capped(validator, tmp_path):
    root = hostile(tmp_path, """
import sys
chunk = "flood " * 10000
while True:
    sys.stdout.write(chunk)
""")
    report = run(validator, root)
    assert report.check("runtime.output_volume").status == Status.FAIL
    assert len(report.candidate_output) <= 64 * 1024


# ---- memory and disk ----------------------------------------------------------------------------------------
def test_memory_bomb_is_contained(validator, tmp_path):
    root = hostile(tmp_path, """
hoard = []
while True:
    hoard.append(bytearray(64 * 1024 * 1024))
""")
    report = run(validator, root)
    assert report.check("runtime.resource_bounds").status == Status.FAIL
    # RLIMIT_AS turns the bomb into a MemoryError, reported with the figures; on a loaded machine the reset's
    # time limit may come first (the growth is still named), or the cgroup's out-of-memory killer (named too).
    assert (failed_with(report, "exhausted its memory") or failed_with(report, "memory grew by")
            or failed_with(report, "out-of-memory killer")), report.designer_feedback()


def test_disk_is_bounded_by_the_declared_size(validator, tmp_path):
    """guess_env declares disk_mb 16: its scratch is a 17 MiB tmpfs, the 900 MB it tries to write never reach
    the host's disk, and resource_bounds fails with the figure although the package swallowed ENOSPC."""
    used_before = shutil.disk_usage(validator.sandbox.workdir).used
    root = hostile(tmp_path, """
import os
if not os.path.exists("ballast"):
    with open("ballast", "wb") as out:
        try:
            for _ in range(900):
                out.write(b"x" * 1024 * 1024)
        except OSError:
            pass
""")
    report = run(validator, root)
    assert shutil.disk_usage(validator.sandbox.workdir).used - used_before < 50 * 1024 * 1024
    bounds = report.check("runtime.resource_bounds")
    assert bounds.status == Status.FAIL, bounds
    assert "over its declared disk_mb 16" in " ".join(bounds.evidence)
    assert 16 < bounds.measured["disk_peak_mb"] <= 17.5
    assert report.sandbox.limits["candidate_disk"]["private_tmpfs"] is True
    assert any("private tmpfs of 17 MiB" in note for note in report.sandbox.notes)


# ---- time limits a package cannot swallow (issue 15, item 3) ----------------------------------------------
def test_cpu_spin_that_swallows_interrupts_is_killed(validator, tmp_path):
    root = hostile(tmp_path, """
while True:
    try:
        while True:
            pass
    except BaseException:
        pass
""")
    report = run(validator, root, bound_s=6)
    assert report.verdict == Verdict.FAIL
    assert failed_with(report, "reset() did not return within 2 s (the validator stopped it")
    assert report.check("runtime.resource_bounds").status == Status.FAIL


def test_a_replaced_alarm_handler_does_not_stop_the_limit(validator, tmp_path):
    root = hostile(tmp_path, """
import signal, time
signal.signal(signal.SIGALRM, lambda *args: None)
time.sleep(10 ** 6)
""")
    report = run(validator, root, bound_s=6)
    assert failed_with(report, "reset() did not return within 2 s (the validator stopped it")


def test_sleeping_forever_times_out(validator, tmp_path):
    root = hostile(tmp_path, """
import time
time.sleep(10 ** 6)
""")
    report = run(validator, root)
    assert report.check("runtime.resource_bounds").status == Status.FAIL
    assert failed_with(report, "did not return within")


def test_import_that_never_returns(validator, tmp_path):
    root = copy_fixture(tmp_path)
    models = root / "models.py"
    models.write_text("import time\ntime.sleep(10 ** 6)\n" + models.read_text())
    report = run(validator, root)
    assert report.check("static.imports").status == Status.FAIL
    assert failed_with(report, "did not return within") or failed_with(report, "ended during this check")


def test_an_import_that_returns_late_fails(validator, tmp_path):
    """The import returns just past its bound (before the validator stops it): the judge's clock, not the
    package's, says it was late, and it fails."""
    root = copy_fixture(tmp_path)
    models = root / "models.py"
    models.write_text("import time\ntime.sleep(2.1)\n" + models.read_text())
    report = run(validator, root)
    imports = report.check("static.imports")
    assert imports.status == Status.FAIL, imports
    assert "importing the package did not return within 2 s" in imports.evidence[0]
    assert report.verdict == Verdict.FAIL


# ---- package intake (issue 15, item 4) ----------------------------------------------------------------------
def _fifo(root: Path) -> str:
    os.mkfifo(root / "pipe")
    return "pipe is a named pipe (FIFO)"


def _device(root: Path) -> str:
    os.mknod(root / "null-device", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    return "null-device is a device file"


def _socket(root: Path) -> str:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "control.sock"))
    sock.close()
    return "control.sock is a socket"


def _link_out(root: Path) -> str:
    (root / "data.txt").symlink_to("/etc/passwd")
    return "symlink data.txt -> /etc/passwd points outside the package"


def _manifest_link_out(root: Path) -> str:
    real = root.parent / "elsewhere.yaml"
    shutil.move(root / "openenv.yaml", real)
    (root / "openenv.yaml").symlink_to(real)
    return f"symlink openenv.yaml -> {real} points outside the package"


def _oversized(root: Path) -> str:
    (root / "weights.bin").write_bytes(b"\0" * (6 * 1024 * 1024))
    return "weights.bin is 6291456 bytes (limit 5242880 per file)"


INTAKE = {"fifo": _fifo, "device": _device, "socket": _socket, "symlink_out": _link_out,
          "manifest_symlink_out": _manifest_link_out, "oversized_file": _oversized}


@pytest.mark.parametrize("name", sorted(INTAKE))
def test_package_intake_refuses(validator, tmp_path, name):
    root = copy_fixture(tmp_path)
    expected = INTAKE[name](root)
    report = validator.validate(root)
    VALIDATION_SECONDS.append(report.timings.get("total_s", 0.0))
    assert report.verdict == Verdict.UNUSABLE and report.exit_code == 2
    intake = report.check("static.intake")
    assert intake.status == Status.FAIL and expected in intake.evidence, intake.evidence
    assert intake.remediation
    assert not any(validator.sandbox.inbox.iterdir())


def test_a_symlink_inside_the_package_is_copied_as_its_file(validator, tmp_path):
    root = copy_fixture(tmp_path)
    shutil.move(root / "openenv.yaml", root / "manifest.yaml")
    (root / "openenv.yaml").symlink_to("manifest.yaml")
    report = validator.validate(root)
    VALID_SECONDS.append(report.timings.get("total_s", 0.0))
    assert report.verdict == Verdict.PASS, report.designer_feedback()


def test_cli_json_reports_a_named_pipe_with_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    root = copy_fixture(tmp_path)
    os.mkfifo(root / "pipe")
    result = CliRunner().invoke(app, ["validate", str(root), "--json", "--sandbox", "bwrap"])
    assert result.exit_code == 2, result.output
    report = json.loads(result.output)
    assert report["verdict"] == "unusable" and report["checks"][0]["check_id"] == "static.intake"


# ---- prompt templates are sandboxed wherever they are rendered (issue 15, item 6) ---------------------------
def test_templates_render_in_jinja_sandbox(tmp_path):
    from jinja2.exceptions import SecurityError

    from openadapt.kit import AgentAction, AgentObservation
    from openadapt.kit.protocol import TextProtocol

    class Act(AgentAction):
        guess: int | None = None

    marker = tmp_path / "template-ran-a-command"
    (tmp_path / "system.j2").write_text("Answer in JSON: {{ action_schema }}")
    for attack in ("{{ cycler.__init__.__globals__.os.popen('touch " + str(marker) + "').read() }}",
                   "{{ obs.__class__.__mro__[-1].__subclasses__() }}",
                   "{% set x = obs.metadata.update({'owned': 1}) %}{{ obs.metadata }}"):
        (tmp_path / "observation.j2").write_text(attack)
        protocol = TextProtocol(tmp_path, "system.j2", "observation.j2", Act)
        with pytest.raises(SecurityError):
            protocol.render(AgentObservation())
    assert not marker.exists()
    assert "Answer in JSON" in TextProtocol(tmp_path, "system.j2", "observation.j2", Act).system_prompt()


# ---- what bounds the sandbox is stated in the report --------------------------------------------------------
def test_report_states_the_bounds_that_applied(validator):
    report = validator.validate(FIXTURE)
    VALID_SECONDS.append(report.timings.get("total_s", 0.0))
    assert report.verdict == Verdict.PASS, report.designer_feedback()
    limits, notes = report.sandbox.limits, " | ".join(report.sandbox.notes)
    assert limits["candidate_rlimits"]["processes"] == 256 and limits["candidate_rlimits"]["open_files"] == 256
    assert limits["candidate_disk"]["declared_mb"] == 16
    if validator.sandbox.cgroup is not None:
        assert limits["cgroup"].startswith("cgroup v") and "whole sandbox runs in a cgroup" in notes
    else:
        assert limits["cgroup"] is None and "cgroups NOT applied" in notes
    assert "seccomp filter loaded" in notes
