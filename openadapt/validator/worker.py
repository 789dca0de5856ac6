"""The validator's worker: runs inside the sandbox, pays OpenEnv's import once, forks one child per candidate.

Protocol: JSON lines. The host writes requests on stdin (`{"op": "validate", "package": DIR, "tiers": [...],
"episodes": N, "timeout_s": T, "memory_mb": M}`, `{"op": "ping"}`, `{"op": "shutdown"}`) and reads one reply
line per request on stdout. The child that runs a candidate gets rlimits, a seccomp filter, its own scratch
directory and its stdout/stderr redirected into a capped pipe; it streams each check result to the worker as it
completes, so a child killed mid-check (timeout, crash, resource limit) still yields a precise report. After
every request the worker kills everything the candidate left running (it is a child subreaper).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from openadapt.sandbox.limits import limit_process

OUTPUT_CAP = 64 * 1024  # bytes of candidate output kept for the report
OUTPUT_LIMIT = 1024 * 1024  # more than this is a failing check (an output flood)
OUTPUT_KILL = 16 * 1024 * 1024  # past this the child is killed: draining a flood must not stall the worker
PR_SET_CHILD_SUBREAPER = 36


def _warm_imports() -> None:
    """Everything a validation needs, imported once so forked children start warm."""
    import openenv.core.env_server.http_server  # noqa: F401  (the ~4 s gradio import)
    import openenv.validation.runner  # noqa: F401
    import uvicorn  # noqa: F401
    import websockets.sync.client  # noqa: F401

    import openadapt.validator.checks  # noqa: F401

    # Move everything imported so far out of the collector's reach: otherwise the first collection in a forked
    # child touches every object's header and copies the whole (shared, copy-on-write) heap.
    gc.collect()
    gc.freeze()


def _run_child(request: dict, results_fd: int, output_fd: int, protocol_fd: int) -> None:
    """In the forked child: confine, then run every check, streaming results. Never returns."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # the candidate must not read the worker's requests
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        os.close(protocol_fd)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = sys.stdout
        scratch = tempfile.mkdtemp(prefix="candidate-", dir=request.get("scratch") or None)
        os.chdir(scratch)
        os.environ["HOME"] = os.environ["TMPDIR"] = scratch
        tempfile.tempdir = scratch
        limit_process(float(request["timeout_s"]), int(request["memory_mb"]))
        from openadapt.sandbox.seccomp import apply_filter

        seccomp_note = apply_filter()
        out = os.fdopen(results_fd, "w", buffering=1)

        def send(kind: str, payload) -> None:
            # The pid lets the worker ignore copies of this process a fork bomb may have made.
            out.write(json.dumps({"kind": kind, "pid": os.getpid(), "data": payload}) + "\n")

        send("seccomp", seccomp_note)
        from openadapt.validator.checks import Context, run_checks
        from openadapt.validator.checks.final import _peak_rss_mb

        ctx = Context(Path(request["package"]), list(request["tiers"]), int(request["episodes"]))
        ctx._cache["rss_at_start"] = _peak_rss_mb()
        run_checks(ctx, lambda result: send("check", result.model_dump(mode="json")),
                   lambda check_id: send("stage", check_id))
        out.flush()
        os._exit(0)
    except BaseException:  # noqa: BLE001  (the child must never return into the worker's loop)
        try:
            os.write(2, traceback.format_exc().encode()[-4000:])
        finally:
            os._exit(70)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, frontier = [], [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.append(child)
            frontier.append(child)
    return found


def _sweep() -> int:
    """Kill everything below this worker (orphans are reparented to it: it is a subreaper) and reap it."""
    killed = 0
    for _ in range(5):
        pids = _descendants(os.getpid())
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                if os.waitpid(-1, os.WNOHANG) == (0, 0):
                    time.sleep(0.005)
            except ChildProcessError:
                break
    return killed


def validate(request: dict, protocol_fd: int) -> dict:
    results_r, results_w = os.pipe()
    output_r, output_w = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(results_r)
        os.close(output_r)
        _run_child(request, results_w, output_w, protocol_fd)
    os.close(results_w)
    os.close(output_w)
    deadline = started + float(request["timeout_s"])
    checks, stage, seccomp = [], None, None
    output, output_bytes, buffer = bytearray(), 0, b""
    killed_for = None
    open_fds = {results_r, output_r}
    while open_fds:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            killed_for = f"timeout after {request['timeout_s']} s"
            break
        ready, _, _ = select.select(list(open_fds), [], [], min(remaining, 0.5))
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.discard(fd)
                continue
            if fd == output_r:
                output_bytes += len(chunk)
                if len(output) < OUTPUT_CAP:
                    output.extend(chunk[: OUTPUT_CAP - len(output)])
                if output_bytes > OUTPUT_KILL:
                    killed_for = f"output flood (over {OUTPUT_KILL // (1024 * 1024)} MiB)"
                    open_fds.clear()
                    break
            else:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    try:
                        message = json.loads(line)
                    except ValueError:  # interleaved writes from forked copies of the child
                        continue
                    if message.get("pid") != pid:
                        continue
                    if message["kind"] == "check":
                        checks.append(message["data"])
                        stage = None
                    elif message["kind"] == "stage":
                        stage = message["data"]
                    else:
                        seccomp = message["data"]
    if killed_for:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    swept = _sweep()
    for fd in (results_r, output_r):
        with contextlib.suppress(OSError):
            os.close(fd)
    exit_info = None
    if os.WIFSIGNALED(status):
        exit_info = f"killed by signal {os.WTERMSIG(status)}"
    elif os.WEXITSTATUS(status) != 0:
        exit_info = f"exited with status {os.WEXITSTATUS(status)}"
    return {
        "checks": checks, "interrupted_stage": stage, "killed_for": killed_for, "child_exit": exit_info,
        "output": output.decode("utf-8", "replace"), "output_bytes": output_bytes, "seccomp": seccomp,
        "swept_processes": swept, "duration_s": round(time.monotonic() - started, 4),
    }


def _cleanup_scratch(scratch: str | None) -> None:
    if not scratch:
        return
    for entry in Path(scratch).glob("candidate-*"):
        shutil.rmtree(entry, ignore_errors=True)


def serve() -> None:
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints from libraries go to stderr, never into the protocol stream
    protocol = os.fdopen(protocol_fd, "w", buffering=1)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    started = time.monotonic()
    _warm_imports()
    warm_s = round(time.monotonic() - started, 3)
    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        if op == "shutdown":
            break
        try:
            if op == "ping":
                reply = {"ok": True, "warm_s": warm_s, "pid": os.getpid(), "uid": os.getuid()}
            elif op == "validate":
                reply = {"ok": True, **validate(request, protocol_fd)}
                _cleanup_scratch(request.get("scratch"))
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except Exception as exc:  # a worker bug: report it, keep serving
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        protocol.write(json.dumps(reply) + "\n")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--once"]:  # one validation, report on stdout (the docker backend's mode)
        request = json.loads(argv[1])
        _warm_imports()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        protocol_fd = os.dup(1)
        os.dup2(2, 1)
        reply = {"ok": True, **validate(request, protocol_fd)}
        os.write(protocol_fd, (json.dumps(reply) + "\n").encode())
        return
    serve()


if __name__ == "__main__":
    main(sys.argv[1:])
