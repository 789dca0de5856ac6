"""A seccomp filter for candidate code (defence in depth beneath namespaces and an unprivileged uid).

It refuses, with EPERM, the system calls an environment never needs and an escape would: new namespaces,
mounts, tracing other processes, kernel keyrings and modules, BPF, perf. Applied in the forked child that runs
a candidate, after the worker's own setup. Needs libseccomp (pyseccomp); absent, reports say so.
"""

from __future__ import annotations

import errno

CLONE_NEWUSER = 0x10000000
DENIED = (
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "ptrace", "process_vm_readv",
    "process_vm_writev", "bpf", "keyctl", "add_key", "request_key", "kexec_load", "init_module", "finit_module",
    "delete_module", "perf_event_open", "userfaultfd", "swapon", "swapoff", "reboot",
)


def _import_pyseccomp():
    """pyseccomp locates libseccomp with ctypes.util.find_library, which shells out to ldconfig; inside a
    minimal sandbox that lookup can come back empty although the library is there, so fall back to the
    libraries' standard sonames for the duration of the import."""
    import ctypes.util

    original = ctypes.util.find_library
    sonames = {"seccomp": "libseccomp.so.2", "c": "libc.so.6"}
    ctypes.util.find_library = lambda name: original(name) or sonames.get(name)
    try:
        import pyseccomp
    finally:
        ctypes.util.find_library = original
    return pyseccomp


def apply_filter() -> str | None:
    """Load the filter into this process (inherited by its children); returns why not, or None when loaded."""
    try:
        sc = _import_pyseccomp()
    except Exception as exc:  # libseccomp or the binding missing
        return f"seccomp unavailable ({type(exc).__name__}: {exc})"
    try:
        flt = sc.SyscallFilter(defaction=sc.ALLOW)
        for name in DENIED:
            try:
                flt.add_rule(sc.ERRNO(errno.EPERM), name)
            except Exception:  # a syscall this architecture does not have
                continue
        flt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
        flt.load()
    except Exception as exc:
        return f"seccomp filter not loaded ({type(exc).__name__}: {exc})"
    return None
