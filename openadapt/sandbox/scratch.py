"""A size-limited scratch directory for one candidate: a private tmpfs of the declared size.

In the forked child that runs a candidate (single-threaded, before any package code): a new user and mount
namespace (unprivileged: the uid maps to itself), mount propagation made private, a tmpfs of `size_bytes`
(nosuid, nodev, noexec) mounted over the candidate's scratch directory, then every capability of the new
namespace dropped and the process made dumpable again (so the worker, same uid, can measure the tmpfs through
/proc/PID/root). The tmpfs disappears with the candidate's last process: nothing to clean up, nothing reaches
the host's disk. Writes beyond the size fail with ENOSPC.

Where the kernel refuses (Docker's default seccomp profile forbids unshare, some hosts disable unprivileged user
namespaces) the caller falls back to the sandbox's shared, size-limited tmpfs and says so.
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 16384, 1 << 18
PR_SET_DUMPABLE = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def private_tmpfs(path: str, size_bytes: int) -> str | None:
    """Mount a private tmpfs of `size_bytes` over `path`; None on success, else why not (nothing changed that
    matters: a failed unshare leaves the process as it was)."""
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    try:
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER | CLONE_NEWNS)")
    except OSError as exc:
        return str(exc)
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
        options = f"size={int(size_bytes)},mode=0700,uid={uid},gid={gid}".encode()
        _check(libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options),
               "mount the scratch tmpfs")
    except OSError as exc:
        drop_capabilities()
        return str(exc)
    drop_capabilities()
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    return None


def drop_capabilities() -> None:
    """Clear the effective, permitted and inheritable sets (the new user namespace granted them all)."""
    libc = _libc()
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    libc.capset(ctypes.byref(header), data)


def usage_bytes(path: str) -> int | None:
    """Bytes used on the filesystem holding `path` (a tmpfs: exactly what was written to it)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def tree_bytes(path: str, max_entries: int = 5000) -> int:
    """Bytes of the files under `path` (the fallback measure where the scratch is not a filesystem of its own)."""
    total, seen, stack = 0, 0, [path]
    while stack and seen < max_entries:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                continue
    return total
