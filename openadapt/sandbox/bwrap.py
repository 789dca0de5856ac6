"""bubblewrap backend: namespaces (no network, private pid/ipc/uts), a read-only system, scratch-only writes
to size-limited tmpfs mounts (nothing reaches the host's disk), an unprivileged uid of its own with no
capabilities, a clean environment, and (where the host allows) a cgroup around the whole sandbox.

As root, bwrap's user namespace maps root to root with full capabilities, so it does not isolate by itself:
`setpriv` drops to a per-sandbox uid, clears groups and every capability and sets no-new-privs before Python
starts. Each concurrent sandbox holds its own uid (RLIMIT_NPROC counts per uid).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from openadapt.sandbox.base import (
    Sandbox,
    SandboxInfo,
    SandboxResources,
    SandboxUnavailable,
    interpreter,
    python_paths,
)

UID_BASE = 61000
UID_SLOTS = 64
TMPFS_BYTES = 256 * 1024 * 1024
SYSTEM_ETC = ("ld.so.cache", "passwd", "group", "hosts", "nsswitch.conf", "localtime")


def available() -> str | None:
    """None when bwrap can run here, else what is missing."""
    for tool in ("bwrap", "setpriv"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian/Ubuntu: apt-get install bubblewrap util-linux)"
    return None


class BwrapSandbox(Sandbox):
    name = "bwrap"
    isolated = True

    def __init__(self, workdir: Path, resources: SandboxResources | None = None):
        super().__init__(workdir, resources)
        problem = available()
        if problem:
            raise SandboxUnavailable(problem)
        self.uid, self._slot_lock = self._claim_uid()

    def _claim_uid(self) -> tuple[int, object]:
        """A uid no other live sandbox uses: a slot held by an exclusive lock for this sandbox's lifetime."""
        slots = Path(os.environ.get("TMPDIR", "/tmp")) / "openadapt-sandbox-uids"
        slots.mkdir(exist_ok=True)
        for slot in range(UID_SLOTS):
            handle = open(slots / f"{slot}.lock", "w")  # noqa: SIM115  (held open: the lock is the claim)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            return UID_BASE + slot, handle
        raise SandboxUnavailable(f"all {UID_SLOTS} sandbox uids are in use")

    def prepare(self) -> None:
        super().prepare()
        self.scratch.chmod(0o700)  # the host side stays empty: inside, /tmp/scratch is a tmpfs

    def inside(self, host_path: Path) -> str:
        for name in ("inbox", "scratch"):
            base = getattr(self, name)
            if host_path == base or base in host_path.parents:
                return str(Path("/tmp") / name / host_path.relative_to(base))
        raise ValueError(f"{host_path} is not visible inside the sandbox")

    def worker_command(self, module: str = "openadapt.validator.worker", *args: str,
                       env: dict[str, str] | None = None) -> list[str]:
        argv = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--clearenv",
                "--ro-bind", "/usr", "/usr"]
        for link in ("bin", "lib", "lib64", "sbin"):
            target = os.readlink(f"/{link}") if os.path.islink(f"/{link}") else None
            if target:
                argv += ["--symlink", target, f"/{link}"]
            elif os.path.isdir(f"/{link}"):
                argv += ["--ro-bind", f"/{link}", f"/{link}"]
        for name in SYSTEM_ETC:
            if os.path.exists(f"/etc/{name}"):
                argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        # /tmp is the sandbox's own tmpfs, mounted before the interpreter's paths so that a virtual environment
        # that lives under the host's /tmp (a CI checkout, say) is bound on top of it, not hidden by it.
        argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp"]
        made: set[str] = {"/", "/usr", "/etc", "/tmp"}
        for path in dict.fromkeys(str(p) for p in python_paths().values()):
            for parent in reversed(Path(path).parents):
                if str(parent) not in made:  # bwrap would create it 0700: the uid could not traverse it
                    argv += ["--perms", "0755", "--dir", str(parent)]
                    made.add(str(parent))
            argv += ["--ro-bind", path, path]
        # The scratch is a tmpfs of the sandbox's disk budget, not a host directory: a package cannot fill the
        # host's disk. Each candidate further gets a private tmpfs of its declared size inside it (worker).
        argv += ["--ro-bind", str(self.inbox), "/tmp/inbox",
                 "--perms", "01777", "--size", str(self.resources.disk_mb * 1024 * 1024), "--tmpfs", "/tmp/scratch",
                 "--remount-ro", "/", "--chdir", "/tmp/scratch"]
        for key, value in {**self.worker_env(), **(env or {})}.items():
            argv += ["--setenv", key, value]
        argv += ["--", "setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
                 *interpreter(module, *args)]
        return argv

    def info(self) -> SandboxInfo:
        return SandboxInfo(
            backend=self.name, isolated=True, uid=self.uid, network="none (private network namespace)",
            limits={"tmpfs_bytes": TMPFS_BYTES, "scratch_tmpfs_bytes": self.resources.disk_mb * 1024 * 1024,
                    **self.bounds()},
            notes=["read-only system, private pid/ipc/uts namespaces, writes only to size-limited tmpfs mounts, "
                   "no capabilities, no-new-privs, clean environment", *self.bound_notes()],
        )

    def close(self) -> None:
        super().close()
        self._slot_lock.close()
