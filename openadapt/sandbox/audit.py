"""Records what package code *attempts* inside the sandbox (Python audit hooks, PEP 578).

The sandbox is the enforcement: namespaces, an unprivileged uid, seccomp and rlimits make these attempts fail.
This module only makes them visible, so that a package that tries to escape (and fails harmlessly) does not
pass validation and later run for real under `--trust`. The hook is installed in the player, whose own code
opens no socket, starts no process and writes nowhere: every watched event there is the package's doing, from
whichever thread, module or file name it comes (frame file names are the package's to choose, so they decide
nothing). A record names the innermost frame as evidence (file relative to the package where it is the
package's, line).

Records are JSON lines written straight to a pipe the worker reads (`os.write` of less than PIPE_BUF bytes is
atomic, so threads and forked copies cannot interleave them), deduplicated per process and capped.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable

MAX_RECORDS = 200  # per process
MAX_DETAIL = 300
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

NETWORK = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
           "socket.gethostbyname", "socket.gethostbyaddr", "socket.gethostbyname_ex"}
PROCESSES = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
             "os.kill", "os.killpg", "signal.pthread_kill"}
NATIVE = {"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle"}
READS = {"open", "os.listdir", "os.scandir"}
WRITES = {"os.remove", "os.rmdir", "os.rename", "os.mkdir", "os.symlink", "os.link", "os.chmod", "os.chown",
          "os.truncate", "os.utime"}
TAMPERING = {"sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "resource.setrlimit",
             "resource.prlimit", "sys._current_frames"}
WATCHED = frozenset(NETWORK | PROCESSES | NATIVE | READS | WRITES | TAMPERING)

SYSTEM_READS = ("/usr/", "/lib/", "/lib64/", "/bin/", "/sbin/", "/etc/localtime", "/etc/timezone", "/etc/hosts",
                "/etc/nsswitch.conf", "/etc/ld.so.cache", "/etc/mime.types", "/dev/null", "/dev/zero",
                "/dev/urandom", "/dev/random", "/proc/self/", "/proc/cpuinfo", "/proc/meminfo",
                "/sys/devices/system/cpu/")


class AuditRecorder:
    """The hook's state: what is allowed, where records go, what was already sent by this process."""

    def __init__(self, package_root: str, scratch: str, fd: int, read_roots: Iterable[str] = ()):
        self.root = package_root.rstrip("/") + "/"
        self.scratch = scratch.rstrip("/") + "/"
        self.fd = fd
        self.reads = tuple(dict.fromkeys([self.root, self.scratch, *SYSTEM_READS,
                                          *(r.rstrip("/") + "/" for r in read_roots if r)]))
        self.writes = (self.scratch, "/dev/null")
        self.sent: set[tuple[str, str, str, int]] = set()

    # ---- classification ----------------------------------------------------------------------------------
    def _path(self, value) -> str | None:
        if isinstance(value, int) or value is None:
            return None  # a file descriptor: already open, nothing new is reached
        try:
            path = os.fsdecode(value)
        except TypeError:
            return None
        return os.path.normpath(os.path.join(os.getcwd(), path)) if not path.startswith("/") else os.path.normpath(path)

    def _allowed(self, path: str, prefixes: tuple[str, ...]) -> bool:
        probe = path + "/"
        own = f"/proc/{os.getpid()}/"
        return probe.startswith(own) or any(probe.startswith(p) or path == p.rstrip("/") for p in prefixes)

    def describe(self, event: str, args: tuple) -> str | None:
        """What the attempt was, or None when it is harmless (a read of the package, a write to scratch)."""
        if event == "open":
            path = self._path(args[0])
            if path is None:
                return None
            mode, flags = args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
            if writing and not self._allowed(path, self.writes):
                return f"open {path} for writing (outside the scratch directory)"
            if not writing and not self._allowed(path, self.reads):
                return f"read {path} (outside the package, its scratch and the Python installation)"
            return None
        if event in ("os.listdir", "os.scandir"):
            path = self._path(args[0] if args else ".")
            if path is None or self._allowed(path, self.reads):
                return None
            return f"list the directory {path}"
        if event in WRITES:
            paths = [p for p in (self._path(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))) if p]
            outside = [p for p in paths if not self._allowed(p, self.writes)]
            return f"{event.removeprefix('os.')} {outside[0]} (outside the scratch directory)" if outside else None
        if event in ("os.kill", "os.killpg"):
            return f"send signal {args[1]} to {'process group' if event == 'os.killpg' else 'process'} {args[0]}"
        if event == "signal.pthread_kill":
            return f"send signal {args[1]} to thread {args[0]}"
        if event == "subprocess.Popen":
            return f"start a process: {_short(args[1] if len(args) > 1 and args[1] else args[0])}"
        if event in ("os.exec", "os.posix_spawn", "os.spawn"):
            return f"{event.removeprefix('os.')} a program: {_short(args[0] if event != 'os.spawn' else args[1])}"
        if event == "os.system":
            return f"run a shell command: {_short(args[0])}"
        if event in ("os.fork", "os.forkpty"):
            return "fork the process (os.fork)"
        if event == "ctypes.dlopen":
            return f"load a native library via ctypes: {_short(args[0])}"
        if event.startswith("ctypes.dlsym"):
            return f"call native code via ctypes: look up {_short(args[1] if len(args) > 1 else args)}"
        if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
            return f"{event.removeprefix('socket.')} to {_address(args[1] if len(args) > 1 else args)}"
        if event == "socket.bind":
            return f"listen on {_address(args[1] if len(args) > 1 else args)}"
        if event.startswith("socket.get"):
            return f"resolve the host name {_short(args[0])}"
        if event == "sys.addaudithook":
            return "install an audit hook (tampering with the validator's monitoring)"
        if event.startswith("gc."):
            return f"inspect the interpreter's objects ({event})"
        if event.startswith("resource."):
            return f"change its resource limits ({event}{_short(args)})"
        if event == "sys._current_frames":
            return "inspect other threads' frames (sys._current_frames)"
        return None

    # ---- the hook ------------------------------------------------------------------------------------------
    def __call__(self, event: str, args: tuple) -> None:
        # Events the hook itself causes (sys._getframe) are not watched, so it never re-enters.
        if event not in WATCHED:
            return
        try:
            detail = self.describe(event, args)
            if detail is None:
                return
            where = self._where()
            key = (event, detail[:80], where[0], where[1])
            if key in self.sent or len(self.sent) >= MAX_RECORDS:
                return
            self.sent.add(key)
            line = json.dumps({"event": event, "detail": detail[:MAX_DETAIL], "file": where[0], "line": where[1],
                               "pid": os.getpid()}) + "\n"
            os.write(self.fd, line.encode("utf-8", "replace")[:3000])
        except Exception:  # noqa: BLE001  (the hook must never break the code it watches)
            pass

    def _where(self) -> tuple[str, int]:
        """The innermost frame of the package's files if there is one, else the innermost frame: evidence of
        where the attempt was made (a file name can be forged; whether it is recorded never depends on it)."""
        frame = sys._getframe(2)
        innermost = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("?", 0)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(self.root):
                return filename[len(self.root):], frame.f_lineno
            frame = frame.f_back
        return innermost


def _address(value) -> str:
    if isinstance(value, tuple) and len(value) >= 2:
        return f"{value[0]}:{value[1]}"
    return _short(value)


def _short(value) -> str:
    text = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return text if len(text) <= 160 else text[:157] + "..."


def install(package_root: str, scratch: str, fd: int, read_roots: Iterable[str] = ()) -> AuditRecorder:
    """Install the recorder for this process and its forked copies (audit hooks cannot be removed)."""
    recorder = AuditRecorder(package_root, scratch, fd, read_roots)
    sys.addaudithook(recorder)
    return recorder
