"""Resource limits for processes that run package code."""

from __future__ import annotations

import resource

NPROC = 256
NOFILE = 256
FILE_BYTES = 16 * 1024 * 1024


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def limit_process(cpu_s: float | None, memory_mb: int, file_bytes: int = FILE_BYTES) -> dict[str, int]:
    """rlimits for a process about to run package code (address space on top of what it maps already).
    Returns what was set (soft = hard, so package code cannot raise them)."""
    # The address-space limit sits on top of what the forked worker already maps (shared, copy-on-write).
    address_space = _vm_size_bytes() + memory_mb * 1024 * 1024
    applied: dict[str, int] = {}
    for name, limit, value in (
        ("address_space_bytes", resource.RLIMIT_AS, address_space),
        ("processes", resource.RLIMIT_NPROC, NPROC),
        ("file_bytes", resource.RLIMIT_FSIZE, int(file_bytes)),
        ("open_files", resource.RLIMIT_NOFILE, NOFILE),
        ("core_bytes", resource.RLIMIT_CORE, 0),
    ):
        soft, hard = resource.getrlimit(limit)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, value))
        applied[name] = value
    if cpu_s is not None:  # soft limit first: SIGXCPU, then the hard limit's SIGKILL a second later
        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_s) + 2, int(cpu_s) + 3))
        applied["cpu_s"] = int(cpu_s) + 2
    return applied
