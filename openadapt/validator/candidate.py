"""A candidate under validation: the player process that runs its code, and the judge's watch over it.

The player is a child confined before any package code runs: its own session, rlimits (address space, CPU
seconds, processes, file size, descriptors), a private tmpfs of the package's declared disk as its scratch, a
seccomp filter whose refusals are reported to the judge (and which refuses any signal aimed at the validator's
own processes), an audit hook that records escape attempts, and stdout/stderr redirected into a capped pipe. It
then answers the judge's requests (`player.py`).

The judge holds a `Candidate`: it sends one request at a time and, while it waits, does everything that bounds
the package, outside the package's interpreter: it times the call (and kills the player when it overruns its
limit), polls the player's pidfd (its exit is noticed at once), answers the seccomp listener, reads the audit
records and the output, samples the scratch tmpfs, and at the end kills everything the package left running.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from openadapt.sandbox import scratch as scratch_fs
from openadapt.sandbox.limits import limit_process
from openadapt.validator.checks.base import PlayerGone, StepTimeout

OUTPUT_CAP = 64 * 1024  # bytes of candidate output kept for the report
OUTPUT_LIMIT = 1024 * 1024  # more than this is a failing check (an output flood)
OUTPUT_KILL = 16 * 1024 * 1024  # past this the player is killed: draining a flood must not stall the judge
REPLY_LIMIT = 4 * 1024 * 1024  # a reply line longer than this is no answer the judge reads
POLL_S = 0.05  # how often the judge looks at the scratch while it waits
GRACE_S = 0.3  # past a call's limit, the judge waits this long for a late reply before it kills the player
DEFAULT_DISK_MB = 64
DEFAULT_DISK_CAP_MB = 256
DISK_HEADROOM = 1024 * 1024  # the tmpfs is this much larger than declared: a fill shows as "over"
MAX_VIOLATIONS = 60
PR_SET_DUMPABLE = 4
SIGNALS = {
    6: "SIGABRT: the interpreter aborted, typically a C allocation or a thread start failing at the memory limit",
    9: "SIGKILL: killed by a hard limit (the CPU-time limit, or the out-of-memory killer of the sandbox's cgroup)",
    11: "SIGSEGV: a crash in native code",
    24: "SIGXCPU: its CPU-time limit",
    25: "SIGXFSZ: its file-size limit",
    31: "SIGSYS: a forbidden system call",
}


def set_dumpable(on: bool) -> None:
    """A non-dumpable process's /proc files belong to root: the package (same uid) cannot open the judge's memory
    through /proc/<pid>/mem. The player makes itself dumpable again, so the judge can sample its scratch."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 1 if on else 0, 0, 0, 0)


# ---- the player: confinement --------------------------------------------------------------------------------
def _declared(package: str) -> tuple[int, int]:
    """disk_mb and memory_mb the package declares (`validation.resources`), read as bounded data."""
    from openadapt import safeyaml

    try:
        raw = safeyaml.load_file(Path(package) / "openenv.yaml", "openenv.yaml", max_bytes=256 * 1024)
        resources = (raw.get("validation") or {}).get("resources") or {}
        disk = int(resources.get("disk_mb", DEFAULT_DISK_MB))
        memory = int(resources.get("memory_mb", 512))
        return (disk if disk > 0 else DEFAULT_DISK_MB), memory
    except Exception:  # noqa: BLE001  (static.manifest reports a broken manifest; here only the defaults matter)
        return DEFAULT_DISK_MB, 512


def _close_other_fds(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _peak_rss_mb(pid: int | str = "self") -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _confine(request: dict, output_fd: int, keep: set[int]) -> tuple[dict, int | None]:
    """Confine this freshly forked child before any package code runs; returns the facts for the report and
    the seccomp listener fd (to hand to the judge) if there is one."""
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
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
        adj.write("1000")  # under a cgroup memory limit, the kernel kills the player, not the judge
    from openadapt.sandbox.seccomp import apply_filter_with_listener

    seccomp_note, listener_fd = apply_filter_with_listener(True, tuple(int(p) for p in request.get("protect", ())))
    facts = {
        "rss_at_start_mb": round(_peak_rss_mb(), 1), "scratch": scratch, "seccomp": seccomp_note,
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


def run_player(request: dict, fds: dict[str, int], notify: socket.socket, keep: tuple[int, ...] = ()) -> None:
    """In the forked child: confine, then answer the judge's requests. Never returns."""
    try:
        set_dumpable(True)
        facts, listener_fd = _confine(request, fds["output"], {fds["requests"], fds["replies"], fds["audit"],
                                                                notify.fileno(), *keep})
        if listener_fd is not None:  # the judge answers refused calls; the package must never hold this fd
            socket.send_fds(notify, [b"L"], [listener_fd])
            os.close(listener_fd)
        notify.close()
        os.write(fds["replies"], (json.dumps({"id": 0, "setup": facts}) + "\n").encode())
        from openadapt.sandbox import audit
        from openadapt.validator import player

        audit.install(request["package"], facts["scratch"], fds["audit"], _read_roots())
        player.serve(Path(request["package"]), fds["requests"], fds["replies"])
        os._exit(0)
    except BaseException:  # noqa: BLE001  (the child must never return into the judge's loop)
        try:
            os.write(2, traceback.format_exc().encode()[-4000:])
        finally:
            os._exit(70)


# ---- processes ----------------------------------------------------------------------------------------------
def descendants(root: int) -> list[int]:
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
    """Reaps every child of this process (orphans are reparented to it: it is a subreaper), keeping the exit
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


def sweep(reaper: Reaper, spare: set[int], spare_descendants: bool = True) -> int:
    """Kill everything below this process except `spare` (and, with `spare_descendants`, what they started),
    then reap it."""
    killed = 0
    for _ in range(5):
        spared = set(spare)
        if spare_descendants:
            for pid in spare:
                spared.update(descendants(pid))
        pids = [p for p in descendants(os.getpid()) if p not in spared]
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


def describe_exit(status: int) -> str | None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"killed by signal {sig}" + (f" ({SIGNALS[sig]})" if sig in SIGNALS else "")
    if os.WEXITSTATUS(status) != 0:
        return f"exited with status {os.WEXITSTATUS(status)}"
    return None


def player_pipes() -> tuple[dict[str, int], dict[str, int]]:
    """(the judge's ends, the player's ends) of the request, reply, output and audit pipes."""
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    output_r, output_w = os.pipe()
    audit_r, audit_w = os.pipe()
    return ({"requests": requests_w, "replies": replies_r, "output": output_r, "audit": audit_r},
            {"requests": requests_r, "replies": replies_w, "output": output_w, "audit": audit_w})


# ---- the judge's watch --------------------------------------------------------------------------------------
class Candidate:
    """A player under watch, and the judge's channel to it."""

    def __init__(self, request: dict, pid: int, fds: dict[str, int], notify: socket.socket, reaper: Reaper,
                 deadline: float, *, label: str = "the package's process", own_child: bool = True):
        self.request, self.pid, self.fds, self.notify, self.reaper = request, pid, fds, notify, reaper
        self.deadline, self.label, self.own_child = deadline, label, own_child
        self.started = time.monotonic()
        self.setup: dict = {}
        self.output, self.output_bytes, self.buffer, self.audit_buffer = bytearray(), 0, b"", b""
        self.killed_for: str | None = None
        self.status: tuple[int, object] | None = None
        self.gone = False
        self.disk_peak, self._disk_sampled = 0, 0.0
        self.swept, self.sweep_s = 0, 0.0
        self.violations: dict[tuple, dict] = {}
        self.listener = None
        self.replies: dict[int, dict] = {}
        self.next_id = 0
        self.poller = select.poll()
        for name in ("replies", "output", "audit"):
            os.set_blocking(fds[name], False)
            self.poller.register(fds[name], select.POLLIN)
        self.poller.register(notify.fileno(), select.POLLIN)
        self.pidfd = None
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(pid)
            self.poller.register(self.pidfd, select.POLLIN)

    # ---- the channel ------------------------------------------------------------------------------------------
    def start(self, limit_s: float = 30.0) -> dict:
        """Wait for the player's first line (its confinement facts)."""
        self.setup = self._wait(0, time.monotonic() + limit_s, "starting the package's process")["setup"]
        return self.setup

    def call(self, request: dict[str, Any], limit_s: float, label: str) -> tuple[dict[str, Any], float]:
        if self.gone:
            raise PlayerGone(self.why_gone())
        self.next_id += 1
        wanted = self.next_id
        data = (json.dumps({**request, "id": wanted}, default=str) + "\n").encode()
        started = time.monotonic()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fds["requests"], view):]
        except OSError:
            self._lost()
            raise PlayerGone(self.why_gone()) from None
        reply = self._wait(wanted, min(started + limit_s + GRACE_S, self.deadline), label, limit_s)
        return reply, time.monotonic() - started

    def _wait(self, wanted: int, until: float, label: str, limit_s: float | None = None) -> dict:
        while wanted not in self.replies:
            now = time.monotonic()
            if self.gone:
                raise PlayerGone(self.why_gone())
            if now >= until:
                if until >= self.deadline:
                    self.kill(f"timeout after {self.request['timeout_s']} s")
                    raise PlayerGone(self.why_gone())
                self.kill(f"{label} ran past its {limit_s:g} s limit")
                raise StepTimeout(f"{label} did not return within {limit_s:g} s (the validator stopped it "
                                  f"{GRACE_S:g} s later)")
            for fd, events in self.poller.poll(min(POLL_S, until - now) * 1000):
                self._event(fd, events)
            if self.killed_for and not self.gone:
                self.kill(self.killed_for)
            self._check_exit()
            self._sample_disk()
        return self.replies.pop(wanted)

    def service(self, busy, limit_s: float) -> None:
        """Do the watch's work (answer refused calls, read audit records and output) while `busy()` holds: for
        exchanges the judge has with the package outside this channel (its server, over a socket)."""
        until = time.monotonic() + limit_s
        while busy() and not self.gone and time.monotonic() < until:
            for fd, events in self.poller.poll(POLL_S * 1000):
                self._event(fd, events)
            self._check_exit()

    def peak_memory_mb(self) -> float:
        return _peak_rss_mb(self.pid)

    def why_gone(self) -> str:
        if self.killed_for:
            return f"{self.label} was stopped: {self.killed_for}"
        if self.status is not None:
            return f"{self.label} {describe_exit(self.status[0]) or 'exited'}"
        return f"{self.label} ended"

    # ---- events ---------------------------------------------------------------------------------------------
    def _check_exit(self) -> None:
        if self.own_child:
            self.reaper.reap()
            if self.pid in self.reaper.exits:
                self.status = self.reaper.exits.pop(self.pid)
                self._lost()
        elif not os.path.exists(f"/proc/{self.pid}") or _state(self.pid) in ("Z", "X"):
            self._lost()

    def _lost(self) -> None:
        if not self.gone:
            self.gone = True
            self._drain()

    def _event(self, fd: int, events: int) -> None:
        if fd == self.pidfd:
            self.poller.unregister(fd)
            self._check_exit()
            if not self.own_child:
                self._lost()
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
        except (BlockingIOError, OSError):
            return
        if not chunk:
            self.poller.unregister(fd)
            if fd == self.fds["replies"]:
                self._lost()
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
            if self.output_bytes > OUTPUT_KILL and not self.killed_for:
                self.killed_for = f"output flood (over {OUTPUT_KILL // (1024 * 1024)} MiB)"
        elif fd == self.fds["audit"]:
            self.audit_buffer += chunk
            *lines, self.audit_buffer = self.audit_buffer.split(b"\n")
            for line in lines:
                self._audit(line)
        else:
            self.buffer += chunk
            if len(self.buffer) > REPLY_LIMIT and b"\n" not in self.buffer:
                self.killed_for = f"a reply of over {REPLY_LIMIT // (1024 * 1024)} MiB"
                return
            *lines, self.buffer = self.buffer.split(b"\n")
            for line in lines:
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict) and isinstance(message.get("id"), int):
                    self.replies[message["id"]] = message

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
                                    "file": str(record["file"]), "line": int(record["line"]), "count": 1,
                                    "process": self.label}

    def _seccomp(self, record: dict) -> None:
        from openadapt.sandbox.seccomp import describe_call

        what = describe_call(record)
        key = ("seccomp", what)
        if key in self.violations:
            self.violations[key]["count"] += 1
        elif len(self.violations) < MAX_VIOLATIONS:
            self.violations[key] = {"source": "seccomp", "event": record.get("syscall"), "detail": what,
                                    "pid": record.get("pid"), "count": 1, "process": self.label}

    def _answer_pending(self) -> None:
        if self.listener is None:
            return
        probe = select.poll()
        probe.register(self.listener.fd, select.POLLIN)
        for _ in range(256):
            if not any(ev & select.POLLIN for _, ev in probe.poll(0)):
                return
            record = self.listener.handle()
            if record is None:
                return
            self._seccomp(record)

    def _drain(self) -> None:
        """Read what is buffered in the pipes now, without waiting for writers that may never close them."""
        for _ in range(64):
            progressed = False
            for fd in (self.fds["replies"], self.fds["output"], self.fds["audit"]):
                try:
                    chunk = os.read(fd, 65536)
                except (BlockingIOError, OSError):
                    continue
                if chunk:
                    progressed = True
                    self._consume(fd, chunk)
            self._answer_pending()
            if not progressed or self.output_bytes > OUTPUT_KILL:
                return

    def _sample_disk(self, force: bool = False) -> None:
        disk = self.setup.get("disk")
        if not disk or (self.gone and not force):
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

    # ---- the end --------------------------------------------------------------------------------------------
    def kill(self, why: str | None = None) -> None:
        if why and not self.killed_for:
            self.killed_for = why
        self._sample_disk(force=True)
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                target()
        if self.own_child and self.status is None:
            self.status = self.reaper.wait(self.pid, 5.0)
        self._lost()

    def end(self, spare: set[int]) -> None:
        """Stop the player (a clean close of its requests first), then kill whatever it left running."""
        self._sample_disk(force=True)
        with contextlib.suppress(OSError):
            os.close(self.fds["requests"])
        until = time.monotonic() + 0.2
        while not self.gone and time.monotonic() < until:
            for fd, events in self.poller.poll(20):
                self._event(fd, events)
            self._check_exit()
        self.kill()
        if self.own_child:
            swept_at = time.monotonic()
            self.swept = sweep(self.reaper, spare)
            self.sweep_s = round(time.monotonic() - swept_at, 4)
        self._drain()
        for name in ("replies", "output", "audit"):
            with contextlib.suppress(OSError):
                os.close(self.fds[name])
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
        self.notify.close()
        if self.listener is not None:
            self.listener.close()

    def result(self) -> dict:
        status, usage = self.status if self.status is not None else (None, None)
        disk = dict(self.setup.get("disk") or {})
        disk["peak_bytes"] = self.disk_peak
        baseline_rss_mb = float(self.setup.get("rss_at_start_mb") or 0.0)
        memory = {"baseline_rss_mb": round(baseline_rss_mb, 1)}
        if usage is not None and baseline_rss_mb:
            memory["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
            memory["growth_mb"] = round(usage.ru_maxrss / 1024 - baseline_rss_mb, 1)
            memory["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)
        return {
            "player_stopped_for": self.killed_for,
            "player_exit": describe_exit(status) if status is not None else None,
            "output": self.output.decode("utf-8", "replace"), "output_bytes": self.output_bytes,
            "seccomp": self.setup.get("seccomp"), "seccomp_listener": self.setup.get("seccomp_listener", False),
            "rlimits": self.setup.get("rlimits", {}), "disk": disk, "memory": memory,
            "declared_memory_mb": self.setup.get("declared_memory_mb"),
            "swept_processes": self.swept, "sweep_s": self.sweep_s,
        }
