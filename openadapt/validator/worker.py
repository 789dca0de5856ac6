"""The validator's worker: runs inside the sandbox, pays OpenEnv's import once, forks one child per candidate.

Protocol: JSON lines. The host writes requests on stdin (`{"op": "validate", "package": DIR, "tiers": [...],
"episodes": N, "timeout_s": T, "memory_mb": M, "disk_mb_cap": D}`, `{"op": "ping"}`, `{"op": "shutdown"}`) and
reads one reply line per request on stdout.

The child that runs a candidate is confined before any package code runs: its own session, rlimits (address
space, CPU seconds, processes, file size, descriptors), a private tmpfs of the package's declared disk as its
scratch directory, a seccomp filter whose refusals are reported to the worker, an audit hook that records escape
attempts, and stdout/stderr redirected into a capped pipe. It streams each check result to the worker as it
completes, so a child killed mid-check (timeout, crash, resource limit) still yields a precise report.

Everything that bounds the candidate is enforced here, outside the candidate's interpreter: the worker polls
the child's pidfd (its exit is noticed at once, even while orphans it left hold the output pipes open), reaps
every zombie, kills the call in progress when it overruns its deadline in the shared guard page, samples the
scratch tmpfs, and after every request kills everything the candidate left running (it is a child subreaper).

A second interpreter (the *twin*, started by the worker with another PYTHONHASHSEED) plays a few episodes of the
same package, so that episodes that depend on string hashing are caught.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from openadapt.sandbox import scratch as scratch_fs
from openadapt.sandbox.base import interpreter
from openadapt.sandbox.limits import limit_process
from openadapt.validator.guard import GRACE_S, CallGuard

OUTPUT_CAP = 64 * 1024  # bytes of candidate output kept for the report
OUTPUT_LIMIT = 1024 * 1024  # more than this is a failing check (an output flood)
OUTPUT_KILL = 16 * 1024 * 1024  # past this the child is killed: draining a flood must not stall the worker
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05  # how often the worker looks at deadlines and the scratch while a candidate runs
DRAIN_S = 0.05  # after the child exits, what its leftovers may still say before they are killed
TWIN_WAIT_S = 15.0  # after the candidate, how long the twin's episodes may still take
TWIN_STEP_LIMIT_S = 10.0  # one reset() or step() of the twin's (the candidate's bound is checks.base.STEP_TIMEOUT_S)
DEFAULT_DISK_MB = 64
DEFAULT_DISK_CAP_MB = 256
DISK_HEADROOM = 1024 * 1024  # the tmpfs is this much larger than declared: a fill shows as "over"
MAX_VIOLATIONS = 60
HASH_CHECK = "runtime.hash_seed_determinism"
SIGNALS = {
    6: "SIGABRT: the interpreter aborted, typically a C allocation or a thread start failing at the memory limit",
    9: "SIGKILL: killed by a hard limit (the CPU-time limit, or the out-of-memory killer of the sandbox's cgroup)",
    11: "SIGSEGV: a crash in native code",
    24: "SIGXCPU: its CPU-time limit",
    25: "SIGXFSZ: its file-size limit",
    31: "SIGSYS: a forbidden system call",
}


def _warm_imports(server: bool = True) -> None:
    """Everything a validation needs, imported once so forked children start warm."""
    if server:
        import openenv.core.env_server.http_server  # noqa: F401  (the ~4 s gradio import)
        import openenv.validation.runner  # noqa: F401
        import uvicorn  # noqa: F401
        import websockets.sync.client  # noqa: F401

    import jinja2.sandbox  # noqa: F401
    import yaml  # noqa: F401

    import openadapt.envpkg.client  # noqa: F401
    import openadapt.envpkg.loader  # noqa: F401
    import openadapt.kit.protocol  # noqa: F401
    import openadapt.sandbox.audit  # noqa: F401
    import openadapt.sandbox.seccomp  # noqa: F401
    import openadapt.validator.checks  # noqa: F401

    if server:
        import openadapt.envpkg.serving  # noqa: F401
    import importlib

    import openadapt.kit

    for module in sorted(set(openadapt.kit._EXPORTS.values())):  # the kit every package builds on (lazy names)
        with contextlib.suppress(Exception):
            importlib.import_module(f"openadapt.kit.{module}")
    from openadapt.sandbox.seccomp import _import_pyseccomp

    with contextlib.suppress(Exception):  # loads libseccomp once (its lookup shells out to ldconfig)
        _import_pyseccomp()

    # Move everything imported so far out of the collector's reach: otherwise the first collection in a forked
    # child touches every object's header and copies the whole (shared, copy-on-write) heap.
    gc.collect()
    gc.freeze()


FAMILY_LINE = re.compile(rb"^\s*family:\s*['\"]?([a-z][a-z0-9_]*)", re.MULTILINE)


def _warm_family(package: str) -> None:
    """Import the openadapt family a package names (trusted code of openadapt's own) in this long-lived process,
    before forking its candidate: the next validations of that family start warm. The manifest is only searched
    for the name (no YAML parsing outside the confined child); any failure is left to static.family."""
    try:
        with open(Path(package) / "openenv.yaml", "rb") as handle:
            found = FAMILY_LINE.search(handle.read(256 * 1024))
        if found:
            from openadapt.families import family_names, get_family

            name = found.group(1).decode()
            if name in family_names() and f"openadapt.families.{name}" not in sys.modules:
                get_family(name)
                gc.freeze()  # out of the forked children's collector, like the warm imports
    except Exception:  # noqa: BLE001
        pass


def _light_openenv() -> None:
    """For the twin, which only plays episodes: make the OpenEnv modules the kit needs importable without running
    `openenv.core`'s and `openenv.core.env_server`'s __init__, which import the web server, gradio and pandas
    (~4 s). The two packages become stubs that import a name's own submodule when it is first asked for (read
    from the real __init__'s `from .module import name` lines); a name they cannot place imports the real
    package, as before."""
    import ast
    import importlib
    import types

    import openenv

    root = Path(openenv.__path__[0])

    def stub(name: str, folder: Path) -> types.ModuleType:
        places: dict[str, str] = {}
        star: list[str] = []
        try:
            tree = ast.parse((folder / "__init__.py").read_text())
        except (OSError, SyntaxError):
            tree = ast.Module(body=[], type_ignores=[])
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if node.level == 1:
                source = f"{name}.{node.module}"
            elif node.level == 0 and node.module.startswith(name + "."):
                source = node.module
            else:
                continue
            for alias in node.names:
                if alias.name == "*":
                    star.append(source)
                else:
                    places[alias.asname or alias.name] = source
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        module.__package__ = name

        def __getattr__(attr: str):
            if attr.startswith("__"):
                raise AttributeError(attr)
            if attr in places:
                return getattr(importlib.import_module(places[attr]), attr)
            for other in star:
                with contextlib.suppress(AttributeError, ImportError):
                    return getattr(importlib.import_module(other), attr)
            for key in ("openenv.core.rubrics", "openenv.core.env_server", "openenv.core"):  # unknown: the real ones
                if getattr(sys.modules.get(key), "_openadapt_stub", False):
                    del sys.modules[key]
            return getattr(importlib.import_module(name), attr)

        module.__getattr__ = __getattr__
        module._openadapt_stub = True
        return module

    for name, folder in (("openenv.core", root / "core"), ("openenv.core.env_server", root / "core" / "env_server"),
                         ("openenv.core.rubrics", root / "core" / "rubrics")):  # rubrics: no LLM judge, no openai
        sys.modules.setdefault(name, stub(name, folder))


# ---- the child: confinement ---------------------------------------------------------------------------------
def _declared(package: str) -> tuple[int, int]:
    """disk_mb and memory_mb the package declares (`validation.resources`), read as plain YAML data."""
    try:
        import yaml

        with open(Path(package) / "openenv.yaml", "rb") as handle:
            raw = yaml.safe_load(handle.read(1024 * 1024))
        resources = (raw.get("validation") or {}).get("resources") or {}
        disk = int(resources.get("disk_mb", DEFAULT_DISK_MB))
        memory = int(resources.get("memory_mb", 512))
        return (disk if disk > 0 else DEFAULT_DISK_MB), memory
    except Exception:  # noqa: BLE001  (static.manifest reports a broken manifest; here only the defaults matter)
        return DEFAULT_DISK_MB, 512


def _close_other_fds(keep: set[int]) -> None:
    """Close every inherited descriptor but stdio and `keep` (the worker's protocol, the twin's pipes...)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _confine(request: dict, output_fd: int, keep: set[int], listener: bool) -> tuple[dict, int | None]:
    """Confine this freshly forked child before any package code runs; returns the facts for the report and
    the seccomp listener fd (to hand to the worker) if there is one."""
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the candidate must not read the worker's requests
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    _close_other_fds(keep)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = sys.stdout
    scratch = tempfile.mkdtemp(prefix="candidate-", dir=request.get("scratch") or None)
    declared_disk, declared_memory = _declared(request["package"])
    cap = int(request.get("disk_mb_cap") or DEFAULT_DISK_CAP_MB)
    disk_mb = min(declared_disk, cap)
    disk_bytes = disk_mb * 1024 * 1024 + DISK_HEADROOM
    rlimits = limit_process(float(request["timeout_s"]), int(request["memory_mb"]), file_bytes=disk_bytes)
    tmpfs_problem = scratch_fs.private_tmpfs(scratch, disk_bytes)
    os.chdir(scratch)
    os.environ["HOME"] = os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adj:
        adj.write("1000")  # under a cgroup memory limit, the kernel kills the candidate, not the worker
    from openadapt.sandbox.seccomp import apply_filter_with_listener

    seccomp_note, listener_fd = apply_filter_with_listener(listener)
    from openadapt.validator.checks.base import peak_rss_mb

    facts = {
        "rss_at_start_mb": round(peak_rss_mb(), 1), "scratch": scratch, "seccomp": seccomp_note,
        "seccomp_listener": listener_fd is not None,
        "rlimits": rlimits, "disk": {"declared_mb": declared_disk, "limit_mb": disk_mb, "cap_mb": cap,
                                     "tmpfs_bytes": disk_bytes, "private_tmpfs": tmpfs_problem is None,
                                     "private_tmpfs_problem": tmpfs_problem},
        "declared_memory_mb": declared_memory,
    }
    return facts, listener_fd


def _read_roots() -> list[str]:
    import openadapt

    roots = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.abspath(openadapt.__file__))]
    return roots + [p for p in sys.path if p and os.path.isabs(p)]


def _run_child(request: dict, results_fd: int, output_fd: int, audit_fd: int, notify_sock: socket.socket,
               page) -> None:
    """In the forked child: confine, then run every check, streaming results. Never returns."""
    try:
        facts, listener_fd = _confine(request, output_fd, {results_fd, audit_fd, notify_sock.fileno()},
                                      listener=True)
        if listener_fd is not None:  # the worker answers refused calls; the package must never hold this fd
            socket.send_fds(notify_sock, [b"L"], [listener_fd])
            os.close(listener_fd)
        notify_sock.close()
        out = os.fdopen(results_fd, "w", buffering=1)
        main_pid = os.getpid()

        def send(kind: str, payload) -> None:
            if os.getpid() != main_pid:  # a copy the package forked: it must not run the validator's checks
                os._exit(0)
            out.write(json.dumps({"kind": kind, "pid": main_pid, "data": payload}) + "\n")

        send("setup", facts)
        from openadapt.sandbox import audit
        from openadapt.validator.checks import Context, run_checks

        ctx = Context(Path(request["package"]), list(request["tiers"]), int(request["episodes"]),
                      guard=CallGuard(page), timeout_s=float(request["timeout_s"]),
                      memory_mb=int(request["memory_mb"]))
        ctx._cache["rss_at_start"] = facts["rss_at_start_mb"]
        audit.install(request["package"], facts["scratch"], audit_fd, _read_roots())
        run_checks(ctx, lambda result: send("check", result.model_dump(mode="json")),
                   lambda check_id: send("stage", check_id))
        send("done", {"disk_bytes": scratch_fs.usage_bytes(facts["scratch"]) if facts["disk"]["private_tmpfs"]
                      else scratch_fs.tree_bytes(facts["scratch"])})
        out.flush()
        os._exit(0)
    except BaseException:  # noqa: BLE001  (the child must never return into the worker's loop)
        try:
            os.write(2, traceback.format_exc().encode()[-4000:])
        finally:
            os._exit(70)


# ---- the worker: watching a candidate -----------------------------------------------------------------------
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


class Reaper:
    """Reaps every child of the worker (orphans are reparented to it: it is a subreaper), keeping the exit
    status and resource usage of the ones it watches."""

    def __init__(self):
        self.exits: dict[int, tuple[int, object]] = {}

    def reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exits[pid] = (status, usage)

    def wait(self, pid: int, timeout_s: float) -> tuple[int, object] | None:
        deadline = time.monotonic() + timeout_s
        while pid not in self.exits:
            self.reap()
            if pid in self.exits or time.monotonic() > deadline:
                break
            time.sleep(0.002)
        return self.exits.pop(pid, None)


def _sweep(reaper: Reaper, spare: set[int], spare_descendants: bool = True) -> int:
    """Kill everything below this worker except `spare` (the twin, and its own candidate unless
    `spare_descendants` is false), then reap it."""
    killed = 0
    for _ in range(5):
        spared = set(spare)
        if spare_descendants:
            for pid in spare:
                spared.update(_descendants(pid))
        pids = [p for p in _descendants(os.getpid()) if p not in spared]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") and _state(p) != "Z" for p in pids):
            reaper.reap()
            time.sleep(0.002)
        reaper.reap()
    return killed


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def _describe_exit(status: int) -> str | None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"killed by signal {sig}" + (f" ({SIGNALS[sig]})" if sig in SIGNALS else "")
    if os.WEXITSTATUS(status) != 0:
        return f"exited with status {os.WEXITSTATUS(status)}"
    return None


class Watch:
    """One candidate under watch: its pipes, its exit, its deadlines, its scratch, its escape attempts."""

    def __init__(self, request: dict, pid: int, fds: dict[str, int], notify: socket.socket, guard: CallGuard,
                 reaper: Reaper, twin: Twin | None, twin_request: dict | None = None):
        self.request, self.pid, self.fds, self.notify, self.guard = request, pid, fds, notify, guard
        self.reaper, self.twin = reaper, twin
        self.twin_request, self.ticket = twin_request, None
        self.started = time.monotonic()
        self.deadline = self.started + float(request["timeout_s"])
        self.checks: list[dict] = []
        self.stage: str | None = None
        self.setup: dict = {}
        self.output, self.output_bytes, self.buffer, self.audit_buffer = bytearray(), 0, b"", b""
        self.killed_for: str | None = None
        self.status: tuple[int, object] | None = None
        self.done = False
        self.disk_peak, self._disk_sampled = 0, 0.0
        self.swept, self.sweep_s = 0, 0.0
        self.violations: dict[tuple, dict] = {}
        self.listener = None
        self.fingerprint: dict | None = None
        self.poller = select.poll()
        for name in ("results", "output", "audit"):
            self.poller.register(fds[name], select.POLLIN)
        self.poller.register(notify.fileno(), select.POLLIN)
        self.pidfd = None
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(pid)
            self.poller.register(self.pidfd, select.POLLIN)

    # ---- the loop -------------------------------------------------------------------------------------------
    def run(self) -> None:
        while True:
            now = time.monotonic()
            if now >= self.deadline:
                self.killed_for = f"timeout after {self.request['timeout_s']} s"
                break
            for fd, events in self.poller.poll(min(POLL_S, self.deadline - now) * 1000):
                self._event(fd, events)
                if self.killed_for:
                    break
            if self.killed_for:
                break
            self.reaper.reap()
            if self.pid in self.reaper.exits:
                self.status = self.reaper.exits.pop(self.pid)
                break
            overdue = self.guard.overdue()
            if overdue is not None:
                what, limit = overdue
                self.killed_for = (f"{what} ran past its {limit:g} s limit and did not stop when interrupted (the "
                                   f"validator killed it {GRACE_S:g} s later)")
                break
            self._sample_disk()
        if self.status is None:  # killed: the whole session of the child (its setsid() escapes are swept below)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.status = self.reaper.wait(self.pid, 5.0)
        self._sample_disk(force=True)
        self._drain()  # what the child wrote before it ended, and what its leftovers write in the next moment
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # its process group at once (a fork bomb's copies), then the rest
        spare = {self.twin.pid} if self.twin is not None and self.twin.alive else set()
        swept_at = time.monotonic()
        self.swept = _sweep(self.reaper, spare)
        self.sweep_s = round(time.monotonic() - swept_at, 4)
        self._drain(deadline_s=0.0)
        for fd in (*self.fds.values(), self.pidfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.notify.close()
        if self.listener is not None:
            self.listener.close()

    def _event(self, fd: int, events: int) -> None:
        if fd == self.pidfd:
            self.poller.unregister(fd)  # readable once the child exited: reaped right after
            return
        if self.listener is not None and fd == self.listener.fd:
            if events & select.POLLIN:
                record = self.listener.handle()
                if record is not None:
                    self._seccomp(record)
            elif events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                self.poller.unregister(fd)
            return
        if fd == self.notify.fileno():
            self._receive_listener()
            return
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        if not chunk:
            self.poller.unregister(fd)
            return
        self._consume(fd, chunk)

    def _receive_listener(self) -> None:
        from openadapt.sandbox.seccomp import Listener

        try:
            _, fds, _, _ = socket.recv_fds(self.notify, 16, 1)
        except OSError:
            fds = []
        self.poller.unregister(self.notify.fileno())
        if fds:
            self.listener = Listener(fds[0])
            self.poller.register(self.listener.fd, select.POLLIN)

    def _consume(self, fd: int, chunk: bytes) -> None:
        if fd == self.fds["output"]:
            self.output_bytes += len(chunk)
            if len(self.output) < OUTPUT_CAP:
                self.output.extend(chunk[: OUTPUT_CAP - len(self.output)])
            if self.output_bytes > OUTPUT_KILL and not self.killed_for and self.status is None:
                self.killed_for = f"output flood (over {OUTPUT_KILL // (1024 * 1024)} MiB)"
        elif fd == self.fds["audit"]:
            self.audit_buffer += chunk
            *lines, self.audit_buffer = self.audit_buffer.split(b"\n")
            for line in lines:
                self._audit(line)
        else:
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\n")
            for line in lines:
                self._message(line)

    def _message(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:  # interleaved writes from forked copies of the child
            return
        if not isinstance(message, dict) or message.get("pid") != self.pid:
            return
        kind, data = message.get("kind"), message.get("data")
        if kind == "check":
            if data.get("check_id") == HASH_CHECK:
                self.fingerprint = (data.get("measured") or {}).pop("_fingerprint", None)
            self.checks.append(data)
            self.stage = None
            self._sample_disk(force=True)
        elif kind == "stage":
            self.stage = data
            if data == HASH_CHECK and self.twin_request is not None and self.twin is not None and self.ticket is None:
                # The package got this far: the twin plays its episodes now, alongside the remaining checks.
                self.ticket = self.twin.send(self.twin_request)
        elif kind == "setup":
            self.setup = data
        elif kind == "done":
            self.done = True
            self.disk_peak = max(self.disk_peak, int((data or {}).get("disk_bytes") or 0))

    def _audit(self, line: bytes) -> None:
        try:
            record = json.loads(line)
            key = (record["event"], record["detail"], record["file"], record["line"])
        except (ValueError, KeyError, TypeError):
            return
        if key in self.violations:
            self.violations[key]["count"] += 1
        elif len(self.violations) < MAX_VIOLATIONS:
            self.violations[key] = {"source": "audit", "event": record["event"], "detail": str(record["detail"]),
                                    "file": str(record["file"]), "line": int(record["line"]), "count": 1}

    def _seccomp(self, record: dict) -> None:
        from openadapt.sandbox.seccomp import describe_call

        what = describe_call(record)
        key = ("seccomp", what)
        if key in self.violations:
            self.violations[key]["count"] += 1
        elif len(self.violations) < MAX_VIOLATIONS:
            self.violations[key] = {"source": "seccomp", "event": record.get("syscall"), "detail": what,
                                    "pid": record.get("pid"), "count": 1}

    def _answer_pending(self) -> None:
        """Answer (and record) every refused call waiting on the listener now, without blocking."""
        probe = select.poll()
        probe.register(self.listener.fd, select.POLLIN)
        for _ in range(256):
            if not any(ev & select.POLLIN for _, ev in probe.poll(0)):
                return
            record = self.listener.handle()
            if record is None:
                return
            self._seccomp(record)

    def _drain(self, deadline_s: float = DRAIN_S) -> None:
        """Read what is buffered in the pipes without waiting for writers that may never close them."""
        end = time.monotonic() + deadline_s
        for fd in (self.fds["results"], self.fds["output"], self.fds["audit"]):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, False)
        while True:
            progressed = False
            for fd in (self.fds["results"], self.fds["output"], self.fds["audit"]):
                try:
                    chunk = os.read(fd, 65536)
                except (BlockingIOError, OSError):
                    continue
                if chunk:
                    progressed = True
                    self._consume(fd, chunk)
                if self.output_bytes > OUTPUT_KILL:
                    return
            if self.listener is not None:
                self._answer_pending()
            if not progressed and time.monotonic() >= end:
                return
            if not progressed:
                time.sleep(0.005)

    def _sample_disk(self, force: bool = False) -> None:
        disk = self.setup.get("disk")
        if not disk or self.status is not None and not force:
            return
        now = time.monotonic()
        if disk["private_tmpfs"]:
            used = scratch_fs.usage_bytes(f"/proc/{self.pid}/root{self.setup['scratch']}")
        elif force or now - self._disk_sampled > 0.2:  # walking a tree costs more than a statvfs
            self._disk_sampled = now
            used = scratch_fs.tree_bytes(self.setup["scratch"])
        else:
            used = None
        if used is not None:
            self.disk_peak = max(self.disk_peak, used)

    # ---- the result -----------------------------------------------------------------------------------------
    def result(self) -> dict:
        status, usage = self.status if self.status is not None else (None, None)
        # A child that finished every check has nothing more to say: a signal after that is the sweep's.
        exit_info = None
        if status is not None and not self.done:
            exit_info = _describe_exit(status) or "exited (status 0) before its checks were done"
        disk = dict(self.setup.get("disk") or {})
        disk["peak_bytes"] = self.disk_peak
        baseline_rss_mb = float(self.setup.get("rss_at_start_mb") or 0.0)
        memory = {"baseline_rss_mb": round(baseline_rss_mb, 1)}
        if usage is not None and baseline_rss_mb:
            memory["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
            memory["growth_mb"] = round(usage.ru_maxrss / 1024 - baseline_rss_mb, 1)
            memory["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)
        return {
            "checks": self.checks, "interrupted_stage": self.stage if not self.done else None,
            "killed_for": self.killed_for, "child_exit": exit_info,
            "output": self.output.decode("utf-8", "replace"), "output_bytes": self.output_bytes,
            "seccomp": self.setup.get("seccomp"), "seccomp_listener": self.setup.get("seccomp_listener", False),
            "rlimits": self.setup.get("rlimits", {}), "disk": disk, "memory": memory,
            "declared_memory_mb": self.setup.get("declared_memory_mb"),
            "violations": list(self.violations.values()), "swept_processes": self.swept, "sweep_s": self.sweep_s,
            "duration_s": round(time.monotonic() - self.started, 4), "completed": self.done,
        }


# ---- the twin: a second interpreter, another hash seed ------------------------------------------------------
class Twin:
    """The worker's handle on its twin (same sandbox, same uid, PYTHONHASHSEED different from the worker's)."""

    def __init__(self):
        own = os.environ.get("PYTHONHASHSEED", "")
        self.hash_seed = "2" if own != "2" else "3"
        self.worker_hash_seed = own or "random"
        env = {**os.environ, "PYTHONHASHSEED": self.hash_seed}
        self.proc = subprocess.Popen(interpreter("openadapt.validator.worker", "--twin"),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True)
        self.pid = self.proc.pid
        self.alive = True
        self.ready = False
        self.buffer = b""
        self.next_id = 0
        os.set_blocking(self.proc.stdout.fileno(), False)

    def send(self, message: dict) -> int | None:
        if not self.alive:
            return None
        self.next_id += 1
        try:
            self.proc.stdin.write((json.dumps({**message, "id": self.next_id}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.alive = False
            return None
        return self.next_id

    def reply(self, wanted: int, timeout_s: float, reaper: Reaper) -> dict | None:
        """The reply to request `wanted` (older replies are dropped), or None past the timeout."""
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                with contextlib.suppress(ValueError):
                    message = json.loads(line)
                    if message.get("op") == "ready":
                        self.ready = True
                    elif message.get("id") == wanted:
                        return message
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.alive:
                return None
            select.select([fd], [], [], min(remaining, POLL_S))
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                chunk = None
            if chunk == b"":
                self.alive = False
            elif chunk:
                self.buffer += chunk
            reaper.reap()
            if self.pid in reaper.exits:
                reaper.exits.pop(self.pid)
                self.alive = False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.stdin.write(b'{"op": "shutdown"}\n')
            self.proc.stdin.flush()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=2)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()


def _compare_fingerprints(main: dict, twin_reply: dict | None, twin: Twin | None) -> dict:
    """The hash-seed check's verdict: the candidate's episodes against the twin's, episode by episode."""
    seeds = (f"PYTHONHASHSEED={twin.worker_hash_seed if twin else '?'} (the validator) and "
             f"PYTHONHASHSEED={twin.hash_seed if twin else '?'} (a second interpreter)")
    if twin_reply is None:
        if twin is not None and not twin.alive:  # alive when it was given the package: something killed it
            return {"status": "fail", "evidence": ["the second interpreter died while it played the package's "
                                                   "episodes (under PYTHONHASHSEED=" + twin.hash_seed + ")"]}
        why = "the second interpreter is not available" if twin is None else \
            "the second interpreter did not finish its episodes in time"
        return {"status": "skip", "evidence": [f"not compared: {why}"]}
    if twin_reply.get("timed_out"):
        return {"status": "skip", "evidence": [f"not compared: the second interpreter ran out of time "
                                               f"({twin_reply.get('error')})"]}
    if not twin_reply.get("ok"):
        return {"status": "fail", "evidence": [f"under PYTHONHASHSEED={twin.hash_seed} the package failed where it "
                                               f"ran under the validator's: {str(twin_reply.get('error'))[:300]}"]}
    other = twin_reply.get("fingerprint") or {}
    problems, compared = [], 0
    for key, rows in main.items():
        theirs = other.get(key)
        compared += 1
        if theirs is None:
            problems.append(f"{key}: not played under the second hash seed")
            continue
        for step, (a, b) in enumerate(zip(rows, theirs, strict=False)):
            if a[0] != b[0]:
                problems.append(f"{key}: {seeds} gave different episodes, first at observation {step}: "
                                f"{_difference(a[1], b[1])}")
                break
        else:
            if len(rows) != len(theirs):
                problems.append(f"{key}: {seeds} gave episodes of {len(rows) - 1} and {len(theirs) - 1} steps")
    if problems:
        return {"status": "fail", "evidence": problems[:6], "measured": {"episodes": compared,
                                                                         "differing": len(problems)}}
    return {"status": "pass", "measured": {"episodes": compared, "hash_seeds": [twin.worker_hash_seed,
                                                                                twin.hash_seed]}}


def _violations_check(watch: Watch) -> dict:
    """runtime.sandbox_violations, decided here (outside the candidate) from what the audit hook and the seccomp
    listener reported: what the package attempted that the sandbox refused, with the evidence."""
    from openadapt.validator.checks import REGISTRY

    spec = next(c for c in REGISTRY if c.id == "runtime.sandbox_violations")
    records = list(watch.violations.values())
    mechanisms = ["Python audit hooks in the candidate (network, processes, native code, files, tampering)"]
    mechanisms.append("seccomp user notification (refused system calls reported to the worker)"
                      if watch.setup.get("seccomp_listener") else "seccomp refusals not reported (no listener here)")
    result = {"check_id": spec.id, "level": spec.level, "status": "pass", "evidence": [],
              "measured": {"attempts": sum(int(r.get("count", 1)) for r in records), "mechanisms": mechanisms}}
    if records:
        evidence = []
        for r in records:
            times = f" ({r['count']} times)" if int(r.get("count", 1)) > 1 else ""
            if r.get("source") == "seccomp":
                evidence.append(f"the kernel refused {r['detail']} (seccomp){times}")
            else:
                evidence.append(f"{r['detail']}, at {r['file']} line {r['line']}{times}")
        result.update(status="fail", evidence=evidence[:20], remediation=spec.remediation)
    return result


def _difference(a: str, b: str) -> str:
    start = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, start - 60)
    return f"...{a[lo:start + 60]!r}... versus ...{b[lo:start + 60]!r}..."


# ---- a validation -------------------------------------------------------------------------------------------
def validate(request: dict, twin: Twin | None = None, reaper: Reaper | None = None) -> dict:
    reaper = reaper or Reaper()
    _warm_family(request["package"])
    results_r, results_w = os.pipe()
    output_r, output_w = os.pipe()
    audit_r, audit_w = os.pipe()
    notify_parent, notify_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    guard = CallGuard()
    pid = os.fork()
    if pid == 0:
        notify_parent.close()
        for fd in (results_r, output_r, audit_r):
            os.close(fd)
        _run_child(request, results_w, output_w, audit_w, notify_child, guard.page)
    for fd in (results_w, output_w, audit_w):
        os.close(fd)
    notify_child.close()
    twin_request = None
    if twin is not None and twin.alive:
        # The twin's candidates live in a folder of their own: cleaning up after them must never remove this
        # candidate's scratch (removing a mount point elsewhere unmounts it here).
        twin_scratch = os.path.join(request["scratch"], "twin") if request.get("scratch") else "/tmp/twin"
        twin_request = {"op": "fingerprint", **{k: request[k] for k in ("package", "tiers", "episodes", "timeout_s",
                                                                          "memory_mb")},
                        "scratch": twin_scratch, "disk_mb_cap": request.get("disk_mb_cap")}
    watch = Watch(request, pid, {"results": results_r, "output": output_r, "audit": audit_r}, notify_parent, guard,
                  reaper, twin, twin_request)
    watch.run()
    ticket = watch.ticket
    reply = watch.result()
    reply["checks"].append(_violations_check(watch))
    from openadapt.validator.checks import REGISTRY

    reply["registry"] = [(c.id, c.level, c.where) for c in REGISTRY]
    waited = time.monotonic()
    outcome = reply["hash_seed"] = _hash_seed_outcome(watch, twin, ticket, reaper)
    reply["twin_wait_s"] = round(time.monotonic() - waited, 4)
    check = next((c for c in reply["checks"] if c.get("check_id") == HASH_CHECK), None)
    if outcome is not None and check is not None and check.get("status") == "pass":
        check["status"] = outcome["status"]
        check["evidence"] = outcome.get("evidence", [])
        check["measured"] = outcome.get("measured", {})
        if outcome["status"] == "fail":
            from openadapt.validator.checks import REGISTRY

            check["remediation"] = next(c.remediation for c in REGISTRY if c.id == HASH_CHECK)
    guard.page.close()
    return reply


def _hash_seed_outcome(watch: Watch, twin: Twin | None, ticket: int | None, reaper: Reaper) -> dict | None:
    if watch.fingerprint is None:  # the check did not get as far: the twin's episodes are not needed
        if twin is not None and twin.alive:
            _sweep(reaper, {twin.pid}, spare_descendants=False)  # frees the twin from its candidate
        return None
    if twin is not None and ticket is None:  # the twin was not alive when the check began
        return _compare_fingerprints(watch.fingerprint, None, None)
    remaining = max(0.0, watch.deadline - time.monotonic())
    answer = twin.reply(ticket, min(TWIN_WAIT_S, remaining + 5.0), reaper) if twin and ticket else None
    if answer is None and twin is not None and twin.alive:
        _sweep(reaper, {twin.pid}, spare_descendants=False)
    return _compare_fingerprints(watch.fingerprint, answer, twin)


def _cleanup_scratch(scratch: str | None) -> None:
    if not scratch:
        return
    for entry in Path(scratch).glob("candidate-*"):
        shutil.rmtree(entry, ignore_errors=True)


def _subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


HASH_PROBE = "openadapt"  # hashed in the ping reply: the caller can tell the worker's PYTHONHASHSEED is in effect


def _openadapt_folder() -> str:
    import openadapt

    return str(Path(openadapt.__file__).absolute().parent)


def _start_twin() -> Twin | None:
    try:
        return Twin()
    except OSError:
        return None


def serve() -> None:
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints from libraries go to stderr, never into the protocol stream
    protocol = os.fdopen(protocol_fd, "w", buffering=1)
    _subreaper()
    twin = _start_twin()  # its ~4 s import runs alongside this worker's
    reaper = Reaper()
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
                reply = {"ok": True, "warm_s": warm_s, "pid": os.getpid(), "uid": os.getuid(),
                         "twin": twin is not None and twin.alive, "openadapt": _openadapt_folder(),
                         "hash_probe": hash(HASH_PROBE)}
            elif op == "validate":
                if twin is not None and not twin.alive:
                    twin = _start_twin()  # killed by an earlier candidate: a new one for the next validations
                reply = {"ok": True, **validate(request, twin, reaper)}
                _cleanup_scratch(request.get("scratch"))
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except Exception as exc:  # a worker bug: report it, keep serving
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        protocol.write(json.dumps(reply) + "\n")
    if twin is not None:
        twin.close()


# ---- the twin's side ----------------------------------------------------------------------------------------
def _fingerprint_child(request: dict, results_fd: int, output_fd: int, page) -> None:
    try:
        _confine(request, output_fd, {results_fd}, listener=False)
        from openadapt.envpkg.loader import LoadedPackage, PackageRef
        from openadapt.envpkg.manifest import parse_manifest
        from openadapt.validator.checks import Context
        from openadapt.validator.checks.runtime import fingerprint

        ctx = Context(Path(request["package"]), list(request["tiers"]), int(request["episodes"]),
                      guard=CallGuard(page), timeout_s=float(request["timeout_s"]),
                      memory_mb=int(request["memory_mb"]))
        # The candidate's calls were held to the step bound already; here they only have to finish (the twin
        # shares the machine with the remaining checks).
        ctx.step_limit_s = TWIN_STEP_LIMIT_S
        ctx.manifest = parse_manifest(ctx.root)
        ctx.pkg = ctx.timed(LoadedPackage, PackageRef(ctx.root, ctx.manifest, seed=False), bucket=ctx.import_seconds,
                            limit_s=ctx.import_limit_s, label="importing the package")
        payload = {"ok": True, "fingerprint": fingerprint(ctx)}
    except BaseException as exc:  # noqa: BLE001
        from openadapt.validator.checks.base import StepTimeout

        # A call past its time bound, here where the episodes run alongside the remaining checks, says more of
        # the machine's load than of the package: the comparison is then skipped, not failed.
        payload = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                   "timed_out": isinstance(exc, StepTimeout)}
    try:
        data = (json.dumps(payload) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(results_fd, view):]
    finally:
        os._exit(0)


def _fingerprint(request: dict, reaper: Reaper) -> dict:
    _warm_family(request["package"])
    if request.get("scratch"):
        os.makedirs(request["scratch"], exist_ok=True)
    results_r, results_w = os.pipe()
    output_r, output_w = os.pipe()
    guard = CallGuard()
    pid = os.fork()
    if pid == 0:
        os.close(results_r)
        os.close(output_r)
        _fingerprint_child(request, results_w, output_w, guard.page)
    os.close(results_w)
    os.close(output_w)
    os.set_blocking(output_r, False)
    deadline = time.monotonic() + float(request["timeout_s"])
    data, reply = b"", None
    open_fds = {results_r, output_r}
    while open_fds and time.monotonic() < deadline and guard.overdue() is None:
        ready, _, _ = select.select(list(open_fds), [], [], POLL_S)
        for fd in ready:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                open_fds.discard(fd)
            elif fd == results_r:
                data += chunk
        reaper.reap()
        if pid in reaper.exits and results_r not in open_fds:
            break
        if pid in reaper.exits and not ready:
            break
    with contextlib.suppress(ValueError):
        reply = json.loads(data.split(b"\n", 1)[0]) if data else None
    overdue = guard.overdue()
    if reply is None and (overdue is not None or time.monotonic() >= deadline):
        # Out of time, not out of answers: on a loaded machine the twin's episodes (which run alongside the
        # remaining checks) can take longer than the candidate's. The comparison is skipped, not failed.
        what = f"{overdue[0]} ran past its {overdue[1]:g} s bound" if overdue else \
            f"its episodes took more than {float(request['timeout_s']):g} s"
        reply = {"ok": False, "timed_out": True, "error": f"the second interpreter's candidate: {what}"}
    elif reply is None:
        status = reaper.exits.get(pid)
        reply = {"ok": False, "error": "the second interpreter's candidate stopped without an answer"
                 + (f" ({_describe_exit(status)})" if status is not None and _describe_exit(status) else "")}
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    _sweep(reaper, set())
    reaper.exits.pop(pid, None)
    for fd in (results_r, output_r):
        with contextlib.suppress(OSError):
            os.close(fd)
    _cleanup_scratch(request.get("scratch"))
    guard.page.close()
    return reply


def serve_twin() -> None:
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    protocol = os.fdopen(protocol_fd, "w", buffering=1)
    _subreaper()
    _light_openenv()
    _warm_imports(server=False)
    protocol.write(json.dumps({"op": "ready"}) + "\n")
    reaper = Reaper()
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "shutdown":
            break
        try:
            reply = _fingerprint(request, reaper)
        except Exception as exc:  # noqa: BLE001
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        protocol.write(json.dumps({**reply, "id": request.get("id")}) + "\n")


def main(argv: list[str]) -> None:
    sys.dont_write_bytecode = True  # whatever the environment says: package imports write nothing
    if argv[:1] == ["--twin"]:
        serve_twin()
        return
    if argv[:1] == ["--once"]:  # one validation, report on stdout (the docker backend's mode)
        request = json.loads(argv[1])
        _subreaper()
        twin = _start_twin()
        _warm_imports()
        protocol_fd = os.dup(1)
        os.dup2(2, 1)
        reply = {"ok": True, **validate(request, twin)}
        if twin is not None:
            twin.close()
        os.write(protocol_fd, (json.dumps(reply) + "\n").encode())
        return
    serve()


if __name__ == "__main__":
    main(sys.argv[1:])
