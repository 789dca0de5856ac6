"""Containment under bwrap: hostile packages are contained, reported as clear failures within their time
bound, and leave no process or file behind on the host."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from openadapt.validator import Status, Validator, Verdict

FIXTURE = Path(__file__).parent / "fixtures" / "guess_env"
ENV_FILE = "server/guess_env_environment.py"
HOOK = "self._target = rng.randint(0, 99)"
TIMEOUT_S = 8.0
SECRET = "openadapt-test-secret-7c1f"


@pytest.fixture(scope="module")
def validator():
    os.environ["OPENADAPT_TEST_API_KEY"] = SECRET  # must never reach the sandbox
    try:
        with Validator("bwrap", episodes=4, timeout_s=TIMEOUT_S) as v:
            v.warm_up()
            yield v
    finally:
        os.environ.pop("OPENADAPT_TEST_API_KEY", None)


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


def hostile(tmp_path: Path, code: str) -> Path:
    """A copy of the valid fixture whose reset() first runs `code` (indented into generate())."""
    root = tmp_path / "guess_env"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__"))
    body = "\n".join("        " + line for line in code.strip().splitlines())
    path = root / ENV_FILE
    path.write_text(path.read_text().replace(HOOK, body.strip() + "\n        " + HOOK, 1))
    return root


def sandbox_processes(validator: Validator) -> list[int]:
    """Host pids running as the sandbox's uid."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == validator.sandbox.uid:
                    pids.append(int(entry))
            except FileNotFoundError:
                continue
    return pids


def run(validator: Validator, root: Path):
    started = time.monotonic()
    report = validator.validate(root)
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT_S + 15, f"took {elapsed:.1f} s"
    # Nothing left behind: only the worker itself runs as the sandbox uid, and the scratch space is empty.
    assert len(sandbox_processes(validator)) == 1, sandbox_processes(validator)
    assert not any(validator.sandbox.scratch.iterdir())
    assert not any(validator.sandbox.inbox.iterdir())
    return report


def failed_with(report, text: str) -> bool:
    return any(text in " ".join(c.evidence) for c in report.failing)


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


def test_fork_bomb_is_contained(validator, tmp_path):
    root = hostile(tmp_path, """
import os
while True:
    os.fork()
""")
    report = run(validator, root)
    assert report.verdict == Verdict.FAIL


def test_memory_bomb_is_contained(validator, tmp_path):
    root = hostile(tmp_path, """
hoard = []
while True:
    hoard.append(bytearray(64 * 1024 * 1024))
""")
    report = run(validator, root)
    assert report.check("runtime.resource_bounds").status == Status.FAIL
    # RLIMIT_AS turns the bomb into a MemoryError; on a loaded machine the wall-clock kill may come first.
    assert failed_with(report, "MemoryError") or failed_with(report, "stopped during this check")


def test_cpu_spin_that_swallows_interrupts_is_killed(validator, tmp_path):
    root = hostile(tmp_path, """
while True:
    try:
        while True:
            pass
    except BaseException:
        pass
""")
    report = run(validator, root)
    assert report.verdict == Verdict.FAIL
    assert failed_with(report, "stopped during this check") or failed_with(report, "CPU")


def test_setsid_grandchild_dies_with_the_sandbox(validator, tmp_path):
    root = hostile(tmp_path, """
import subprocess
subprocess.Popen(["sleep", "987654"], start_new_session=True, stdout=subprocess.DEVNULL)
""")
    run(validator, root)  # asserts that no sandbox-uid process but the worker survives
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).startswith("sleep 987654")]
    assert leftovers == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


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


def test_sleeping_forever_times_out(validator, tmp_path):
    root = hostile(tmp_path, """
import time
time.sleep(10 ** 6)
""")
    report = run(validator, root)
    assert report.check("runtime.resource_bounds").status == Status.FAIL
    assert failed_with(report, "did not return within")


def test_import_that_never_returns(validator, tmp_path):
    root = hostile(tmp_path, "pass")
    models = root / "models.py"
    models.write_text("import time\ntime.sleep(10 ** 6)\n" + models.read_text())
    report = run(validator, root)
    assert report.check("static.imports").status == Status.FAIL
    assert failed_with(report, "did not return within") or failed_with(report, "stopped during this check")
