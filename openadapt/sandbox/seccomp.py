"""A seccomp filter for candidate code (defence in depth beneath namespaces and an unprivileged uid).

It refuses the system calls an environment never needs and an escape would: new namespaces, mounts, tracing
other processes, kernel keyrings and modules, BPF, perf. `clone3` answers ENOSYS (its flags live in memory a
filter cannot read, so glibc falls back to `clone`, whose CLONE_NEWUSER flag the filter does see), as Docker's
default profile does. Applied in the forked child that runs a candidate, after the worker's own setup. Needs
libseccomp (pyseccomp); absent, reports say so.

With `listener=True` the refused calls go to a user-space listener (SECCOMP_RET_USER_NOTIF) instead of failing in
the kernel directly: the worker, outside the candidate, answers each with EPERM and records it (which call,
from which process), so an attempt is evidence, not just a failure the package may swallow. Where the kernel or
libseccomp cannot notify, the same calls fail with EPERM unrecorded and reports say so.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os

CLONE_NEWUSER = 0x10000000
DENIED = (
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "ptrace", "process_vm_readv",
    "process_vm_writev", "bpf", "keyctl", "add_key", "request_key", "kexec_load", "init_module", "finit_module",
    "delete_module", "perf_event_open", "userfaultfd", "swapon", "swapoff", "reboot", "open_by_handle_at",
    "fsopen", "fsmount", "move_mount", "open_tree", "pidfd_getfd", "kcmp",
)
PTRACE_REQUESTS = {16: "PTRACE_ATTACH", 0x4206: "PTRACE_SEIZE", 0: "PTRACE_TRACEME", 4: "PTRACE_POKETEXT",
                   5: "PTRACE_POKEDATA"}
# Calls that signal a process named by its pid (first argument): refused when it names a protected process (the
# validator's own), its process group, or every process (-1). pid_t is 32 bits: compared under a 32-bit mask.
SIGNAL_CALLS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open")
PID_MASK = 0xFFFFFFFF


def _import_pyseccomp():
    """pyseccomp locates libseccomp with ctypes.util.find_library, which shells out to ldconfig; inside a
    minimal sandbox that lookup can come back empty although the library is there (and it costs a subprocess),
    so the libraries' standard sonames are tried first for the duration of the import."""
    import ctypes.util

    original = ctypes.util.find_library
    sonames = {"seccomp": "libseccomp.so.2", "c": "libc.so.6"}

    def find(name: str) -> str | None:
        soname = sonames.get(name)
        if soname is not None:  # loadable by its soname: no ldconfig subprocess needed
            with contextlib.suppress(OSError):
                ctypes.CDLL(soname)
                return soname
        return original(name)

    ctypes.util.find_library = find
    try:
        import pyseccomp
    finally:
        ctypes.util.find_library = original
    return pyseccomp


def apply_filter() -> str | None:
    """Load the filter into this process (inherited by its children); returns why not, or None when loaded."""
    note, _ = apply_filter_with_listener(listener=False)
    return note


def apply_filter_with_listener(listener: bool = True, protect: tuple[int, ...] = ()) -> tuple[str | None, int | None]:
    """Load the filter; with `listener`, refused calls notify the returned fd (None when notification is not
    available: they then fail with EPERM). `protect`: pids no signal may reach from here (the validator's).
    Returns (why the filter is not loaded or None, listener fd)."""
    try:
        sc = _import_pyseccomp()
    except Exception as exc:  # libseccomp or the binding missing
        return f"seccomp unavailable ({type(exc).__name__}: {exc})", None
    if listener:
        try:
            return _load(sc, sc.NOTIFY, protect)
        except Exception:  # noqa: BLE001  (an old kernel or libseccomp: no user notification)
            pass
    try:
        return _load(sc, sc.ERRNO(errno.EPERM), protect)
    except Exception as exc:
        return f"seccomp filter not loaded ({type(exc).__name__}: {exc})", None


def _load(sc, action: int, protect: tuple[int, ...] = ()) -> tuple[None, int | None]:
    flt = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in DENIED:
        try:
            flt.add_rule(action, name)
        except Exception:  # a syscall this architecture does not have
            continue
    targets = {PID_MASK} | {pid & PID_MASK for pid in protect} | {-pid & PID_MASK for pid in protect}
    for name in SIGNAL_CALLS:
        for target in sorted(targets):
            with contextlib.suppress(Exception):
                flt.add_rule(action, name, sc.Arg(0, sc.MASKED_EQ, PID_MASK, target))
    flt.add_rule(action, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    with contextlib.suppress(Exception):
        flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    flt.load()
    if action != sc.NOTIFY:
        return None, None
    fd = sc._libseccomp.seccomp_notify_fd(flt._filter)
    if fd < 0:
        raise OSError(-fd, "no seccomp listener")
    return None, fd


class Listener:
    """The worker's side of a candidate's seccomp listener: answer each refused call with EPERM, record it."""

    def __init__(self, fd: int):
        self.fd = fd
        self.sc = _import_pyseccomp()
        self._names: dict[tuple[int, int], str] = {}

    def handle(self) -> dict | None:
        """Receive one pending notification (call only when the fd polls POLLIN), refuse it; its description."""
        sc, lib = self.sc, self.sc._libseccomp
        req = ctypes.POINTER(sc._Notif)()
        resp = ctypes.POINTER(sc._NotifResp)()
        if lib.seccomp_notify_alloc(ctypes.byref(req), ctypes.byref(resp)) != 0:
            return None
        try:
            if lib.seccomp_notify_receive(self.fd, req) != 0:
                return None  # the caller died between the poll and the receive
            n = req.contents
            resp.contents.id = n.id
            resp.contents.val = 0
            resp.contents.error = -errno.EPERM
            resp.contents.flags = 0
            lib.seccomp_notify_respond(self.fd, resp)  # fails harmlessly when the caller is gone
            return {"syscall": self._name(n.data.arch, n.data.nr), "pid": int(n.pid),
                    "args": [int(a) for a in n.data.args[:3]]}
        finally:
            lib.seccomp_notify_free(req, resp)

    def _name(self, arch: int, nr: int) -> str:
        key = (arch, nr)
        if key not in self._names:
            try:
                self._names[key] = self.sc.resolve_syscall(arch, nr).decode()
            except Exception:  # noqa: BLE001
                self._names[key] = f"syscall {nr}"
        return self._names[key]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def describe_call(record: dict) -> str:
    """A refused call in words: `ptrace(PTRACE_ATTACH, pid 1)`, `unshare(CLONE_NEWUSER)`, ..."""
    name, args = record.get("syscall", "?"), record.get("args", [0, 0, 0])
    if name == "ptrace":
        return f"ptrace({PTRACE_REQUESTS.get(args[0], args[0])}, pid {args[1]})"
    if name in ("unshare", "clone"):
        flags = args[0]
        names = [label for bit, label in ((CLONE_NEWUSER, "CLONE_NEWUSER"), (0x00020000, "CLONE_NEWNS"),
                                          (0x40000000, "CLONE_NEWNET"), (0x20000000, "CLONE_NEWPID"))
                 if flags & bit]
        return f"{name}({' | '.join(names) or hex(flags)})"
    if name in SIGNAL_CALLS:
        pid = args[0] & PID_MASK
        pid = pid - (1 << 32) if pid >= 1 << 31 else pid
        return f"{name}(pid {pid}{f', signal {args[1]}' if name in ('kill', 'tkill') else ''})"
    return f"{name}()"
