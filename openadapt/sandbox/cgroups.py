"""A cgroup around a whole sandbox (the bwrap or process worker and everything it starts): CPU quota, memory
and process-count limits, where the host lets openadapt create one.

cgroup v2 is used when its unified hierarchy has the pids and memory controllers and openadapt may enable them
for a child group; otherwise cgroup v1 when its pids/memory/cpu hierarchies are writable. Neither (an
unprivileged user without delegation, a container's read-only /sys/fs/cgroup): `create` returns None and the
reason, the sandbox runs under rlimits alone, and reports say so.

The worker is placed in the group by a two-line shell wrapper that writes its own pid to each hierarchy's
`cgroup.procs` and then execs the real command, so the group holds the process from its first instruction
(no `preexec_fn`, which is unsafe in a threaded host). After starting, the host checks the membership.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000
_counter = itertools.count()
WRAPPER = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" 2>/dev/null; shift; n=$((n - 1)); done; '
           'exec "$@"')


@dataclass(frozen=True)
class CgroupLimits:
    memory_mb: int
    pids: int
    cpus: float


@dataclass
class Cgroup:
    version: int
    dirs: dict[str, Path]  # controller (v1) or "unified" (v2) -> the group's directory
    limits: CgroupLimits
    controllers: list[str] = field(default_factory=list)

    @property
    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in dict.fromkeys(self.dirs.values())]

    def wrap(self, argv: list[str]) -> list[str]:
        files = [str(p) for p in self.procs_files]
        return ["/bin/sh", "-c", WRAPPER, "sh", str(len(files)), *files, *argv]

    def members(self) -> set[int]:
        pids: set[int] = set()
        for procs in self.procs_files:
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in procs.read_text().split())
        return pids

    def contains(self, pid: int) -> bool:
        return all(_has(procs, pid) for procs in self.procs_files)

    def describe(self) -> str:
        mem = f"memory {self.limits.memory_mb} MiB" if "memory" in self.controllers else None
        pids = f"{self.limits.pids} processes" if "pids" in self.controllers else None
        cpu = f"{self.limits.cpus:g} CPU" if "cpu" in self.controllers else None
        return f"cgroup v{self.version}: " + ", ".join(x for x in (cpu, mem, pids) if x)

    def counters(self) -> dict[str, int]:
        """How often each limit was hit so far (cumulative: compare two readings)."""
        out: dict[str, int] = {}
        if self.version == 2:
            d = self.dirs["unified"]
            out["pids_max_hits"] = _keyed(d / "pids.events", "max")
            out["oom_kills"] = _keyed(d / "memory.events", "oom_kill")
            out["memory_max_hits"] = _keyed(d / "memory.events", "max")
            out["cpu_throttled"] = _keyed(d / "cpu.stat", "nr_throttled")
        else:
            if "pids" in self.dirs:
                out["pids_max_hits"] = _keyed(self.dirs["pids"] / "pids.events", "max")
            if "memory" in self.dirs:
                out["oom_kills"] = _keyed(self.dirs["memory"] / "memory.oom_control", "oom_kill")
                out["memory_max_hits"] = _int(self.dirs["memory"] / "memory.failcnt")
            if "cpu" in self.dirs:
                out["cpu_throttled"] = _keyed(self.dirs["cpu"] / "cpu.stat", "nr_throttled")
        return out

    def kill_all(self) -> None:
        for _ in range(20):
            pids = self.members()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for d in dict.fromkeys(self.dirs.values()):
            for _ in range(50):  # a killed process leaves its group a moment later
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def _has(procs: Path, pid: int) -> bool:
    try:
        return str(pid) in procs.read_text().split()
    except OSError:
        return False


def _int(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _keyed(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
    except (OSError, ValueError):
        pass
    return 0


def _mounts(mounts_text: str) -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of every cgroup filesystem."""
    found = []
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            found.append((parts[1], parts[2], set(parts[3].split(","))))
    return found


def _own_paths(self_cgroup_text: str) -> dict[str, str]:
    """controller (or "" for v2) -> this process's group path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    for line in self_cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in (parts[1].split(",") if parts[1] else [""]):
                paths[controller.removeprefix("name=")] = parts[2]
    return paths


def _name(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_counter)}"


def _sweep_stale(base: Path, prefix: str) -> None:
    """Remove empty groups left by earlier hosts that died (their pid is gone)."""
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            parts = entry.name.split("-")
            ours = entry.name.startswith(prefix + "-") and len(parts) >= 3 and parts[-2].isdigit()
            if ours and entry.is_dir() and not Path(f"/proc/{parts[-2]}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()


def create(limits: CgroupLimits, prefix: str = "openadapt-sandbox", *, mounts_text: str | None = None,
           self_cgroup_text: str | None = None, root: Path = Path("/")) -> tuple[Cgroup | None, str]:
    """A new group with `limits`, or None and why not. `root` (and the texts) let tests use a fake tree."""
    if mounts_text is None:
        mounts_text = _read(root / "proc/self/mounts")
    if self_cgroup_text is None:
        self_cgroup_text = _read(root / "proc/self/cgroup")
    mounts, own = _mounts(mounts_text), _own_paths(self_cgroup_text)
    reasons = []
    v2 = next(((m, o) for m, t, o in mounts if t == "cgroup2"), None)
    if v2 is not None:
        group, why = _create_v2(root / v2[0].lstrip("/"), own.get("", "/"), limits, prefix)
        if group is not None:
            return group, group.describe()
        reasons.append(why)
    group, why = _create_v1(root, mounts, own, limits, prefix)
    if group is not None:
        return group, group.describe() + (f" (v2 not used: {reasons[0]})" if reasons else "")
    reasons.append(why)
    return None, "; ".join(r for r in reasons if r)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _create_v2(mount: Path, own: str, limits: CgroupLimits, prefix: str) -> tuple[Cgroup | None, str]:
    base = mount / own.lstrip("/")
    available = set(_read(base / "cgroup.controllers").split())
    wanted = [c for c in ("pids", "memory", "cpu") if c in available]
    if not {"pids", "memory"} <= set(wanted):
        return None, (f"cgroup v2 at {mount} lacks the pids/memory controllers (it has: "
                      f"{' '.join(sorted(available)) or 'none'})")
    enabled = set(_read(base / "cgroup.subtree_control").split())
    missing = [c for c in wanted if c not in enabled]
    if missing:
        try:
            (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
        except OSError as exc:  # EBUSY: the group holds processes (no internal processes); EACCES: no delegation
            return None, (f"cgroup v2: cannot enable {' '.join(missing)} for groups under {base} ({exc.strerror}); "
                          "run openadapt in a delegated, empty cgroup to get cgroup limits")
    _sweep_stale(base, prefix)
    group_dir = base / _name(prefix)
    try:
        group_dir.mkdir()
        (group_dir / "pids.max").write_text(str(limits.pids))
        (group_dir / "memory.max").write_text(str(limits.memory_mb * 1024 * 1024))
        if (group_dir / "memory.swap.max").exists():
            (group_dir / "memory.swap.max").write_text("0")
        if "cpu" in wanted:
            (group_dir / "cpu.max").write_text(f"{int(limits.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
    except OSError as exc:
        with contextlib.suppress(OSError):
            group_dir.rmdir()
        return None, f"cgroup v2: cannot create a group under {base} ({exc.strerror})"
    return Cgroup(2, {"unified": group_dir}, limits, wanted), ""


def _create_v1(root: Path, mounts, own: dict[str, str], limits: CgroupLimits,
               prefix: str) -> tuple[Cgroup | None, str]:
    dirs: dict[str, Path] = {}
    for controller in ("pids", "memory", "cpu"):
        mount = next((m for m, t, o in mounts if t == "cgroup" and controller in o), None)
        if mount is not None:
            dirs[controller] = root / mount.lstrip("/") / own.get(controller, "/").lstrip("/")
    if not {"pids", "memory"} <= set(dirs):
        return None, "no cgroup v1 pids/memory hierarchy is mounted"
    name = _name(prefix)
    made: dict[str, Path] = {}
    try:
        for controller, base in dirs.items():
            _sweep_stale(base, prefix)
            group_dir = base / name
            group_dir.mkdir()
            made[controller] = group_dir
        (made["pids"] / "pids.max").write_text(str(limits.pids))
        memory = str(limits.memory_mb * 1024 * 1024)
        (made["memory"] / "memory.limit_in_bytes").write_text(memory)
        if (made["memory"] / "memory.memsw.limit_in_bytes").exists():
            (made["memory"] / "memory.memsw.limit_in_bytes").write_text(memory)
        if "cpu" in made:
            (made["cpu"] / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (made["cpu"] / "cpu.cfs_quota_us").write_text(str(int(limits.cpus * CPU_PERIOD_US)))
    except OSError as exc:
        for group_dir in made.values():
            with contextlib.suppress(OSError):
                group_dir.rmdir()
        return None, f"cgroup v1 is not writable here ({exc.strerror}: {exc.filename})"
    return Cgroup(1, made, limits, list(made)), ""
