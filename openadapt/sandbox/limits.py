"""Resource limits for processes that run package code."""

from __future__ import annotations

import resource


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def limit_process(cpu_s: float | None, memory_mb: int) -> None:
    """rlimits for a process about to run package code (address space on top of what it maps already)."""
    # The address-space limit sits on top of what the forked worker already maps (shared, copy-on-write).
    address_space = _vm_size_bytes() + memory_mb * 1024 * 1024
    for limit, value in (
        (resource.RLIMIT_AS, address_space),
        (resource.RLIMIT_NPROC, 256),
        (resource.RLIMIT_FSIZE, 16 * 1024 * 1024),
        (resource.RLIMIT_NOFILE, 256),
        (resource.RLIMIT_CORE, 0),
    ):
        soft, hard = resource.getrlimit(limit)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, value))
    if cpu_s is not None:  # soft limit first: SIGXCPU, then the hard limit's SIGKILL a second later
        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_s) + 2, int(cpu_s) + 3))
