"""The sandbox interface, and the host's handle on a worker running inside one."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

_EOF = object()  # sentinel: the worker closed its stdout
WORKER_START_TIMEOUT_S = 60.0
STDERR_CAP = 32 * 1024
HASH_SEED = "1"  # the worker's PYTHONHASHSEED: validations are reproducible; a second interpreter uses another


@dataclass(frozen=True)
class SandboxResources:
    """What one sandbox (its worker and everything it starts) may use in all: the cgroup's limits where the host
    allows one, and the size of the sandbox's scratch tmpfs, which also caps the disk a package may declare."""

    memory_mb: int = 4096
    pids: int = 512
    cpus: float = 1.0
    disk_mb: int = 256


class SandboxInfo(BaseModel):
    backend: str
    isolated: bool
    uid: int | None = None
    network: str = "none"
    limits: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class SandboxUnavailable(Exception):
    """The requested backend cannot run here; the message says what to install or start."""


class WorkerDied(Exception):
    """The worker process ended or stopped answering."""


def import_root() -> Path | None:
    """The folder `import openadapt` found this very package in, when the interpreter's own environment does not
    hold it (a checkout installed in editable mode, or on PYTHONPATH): the sandbox sees it at the same path and
    puts it first on its interpreter's path, wherever the checkout lives."""
    import openadapt

    package = Path(openadapt.__file__).absolute().parent  # as Python found it: a symlinked home stays as written
    if Path(sys.prefix).resolve() in package.resolve().parents:
        return None  # installed into the environment: its site-packages has it
    return package.parent


def python_paths() -> dict[str, Path]:
    """What the sandbox must see (read-only) to run this very interpreter with openadapt importable: each path as
    Python knows it and, where a symlink lies on the way, where it really is (a venv's interpreter links there)."""
    paths = {"prefix": Path(sys.prefix), "base_prefix": Path(sys.base_prefix)}
    root = import_root()
    if root is not None:
        paths["openadapt"] = root / "openadapt"
    for key, path in list(paths.items()):
        if (real := path.resolve()) != path:
            paths[f"{key} (real)"] = real
    return paths


def interpreter(module: str, *args: str) -> list[str]:
    """argv of this interpreter running MODULE in a sandbox whose whole environment the sandbox sets: no user
    site-packages and no working directory on the path (`-s -P`), but PYTHONPATH and PYTHONHASHSEED honoured
    (`-I` would drop both)."""
    return [sys.executable, "-s", "-P", "-m", module, *args]


class Sandbox(ABC):
    """A backend that can start the validator's worker confined, with a host inbox (read-only inside) where
    candidates are placed, and a writable scratch directory."""

    name: str
    isolated: bool
    uses_cgroup = True

    def __init__(self, workdir: Path, resources: SandboxResources | None = None):
        self.workdir = workdir
        self.inbox = workdir / "inbox"
        self.scratch = workdir / "scratch"
        self.resources = resources or SandboxResources()
        self.cgroup = None  # cgroups.Cgroup once prepared, where the host allows one
        self.cgroup_note = "cgroups not used"
        self.cgroup_placed: bool | None = None

    @abstractmethod
    def worker_command(self, module: str = "openadapt.validator.worker", *args: str,
                       env: dict[str, str] | None = None) -> list[str]:
        """argv that starts `python -m MODULE ARGS` inside the sandbox (with `env` on top of `worker_env`)."""

    @abstractmethod
    def inside(self, host_path: Path) -> str:
        """Where a host path under the inbox or scratch appears inside the sandbox."""

    def worker_env(self) -> dict[str, str]:
        """The whole environment of the worker: nothing from the host's (no API keys, no tokens)."""
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
               "HOME": self.inside(self.scratch), "OMP_NUM_THREADS": "1"}
        root = import_root()
        return env if root is None else {**env, "PYTHONPATH": str(root)}

    def info(self) -> SandboxInfo:
        return SandboxInfo(backend=self.name, isolated=self.isolated, limits=self.bounds(),
                           notes=self.bound_notes())

    def bounds(self) -> dict[str, Any]:
        """What bounds the sandbox as a whole (the per-candidate rlimits are the worker's to report)."""
        placed = self.cgroup is not None and self.cgroup_placed is not False
        return {"cgroup": self.cgroup.describe() if placed else None,
                "cgroup_limits": ({"memory_mb": self.resources.memory_mb, "pids": self.resources.pids,
                                   "cpus": self.resources.cpus} if placed else None)}

    def bound_notes(self) -> list[str]:
        if self.cgroup is not None and self.cgroup_placed is not False:
            return [f"the whole sandbox runs in a {self.cgroup.describe()}"]
        if self.cgroup_placed is False:
            return ["cgroups NOT applied (the worker could not be placed in its group): memory, processes and CPU "
                    "are bounded by per-process rlimits only"]
        return [f"cgroups NOT applied ({self.cgroup_note}): memory, processes and CPU are bounded by per-process "
                "rlimits only (address space, RLIMIT_NPROC per sandbox uid, CPU seconds), not as a whole"]

    def prepare(self) -> None:
        self.inbox.mkdir(parents=True, exist_ok=True)
        self.scratch.mkdir(parents=True, exist_ok=True)
        for folder in (self.workdir, self.inbox):
            folder.chmod(0o755)
        if self.uses_cgroup and self.cgroup is None:
            from openadapt.sandbox import cgroups

            r = self.resources
            self.cgroup, self.cgroup_note = cgroups.create(cgroups.CgroupLimits(r.memory_mb, r.pids, r.cpus))

    def close(self) -> None:
        """Release what the backend holds (its cgroup; a uid slot)."""
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None


class WorkerHandle:
    """A running worker: JSON requests in, one JSON reply out, with a hard wall-clock bound per request."""

    def __init__(self, sandbox: Sandbox, command: list[str] | None = None):
        self.sandbox = sandbox
        self.stderr_tail = bytearray()
        self._buffer = b""
        started = time.monotonic()
        argv = command or sandbox.worker_command(env={"PYTHONHASHSEED": HASH_SEED})
        if sandbox.cgroup is not None:
            argv = sandbox.cgroup.wrap(argv)  # the worker enters the sandbox's cgroup before it starts
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=sandbox.worker_env(), cwd=str(sandbox.scratch), start_new_session=True,
        )
        self._stderr_reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_reader.start()
        self.hello = self.request({"op": "ping"}, WORKER_START_TIMEOUT_S)
        if sandbox.cgroup is not None:
            sandbox.cgroup_placed = sandbox.cgroup.contains(self.proc.pid)
        self.start_s = round(time.monotonic() - started, 3)

    def _drain_stderr(self) -> None:
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):
            self.stderr_tail.extend(chunk)
            del self.stderr_tail[:-STDERR_CAP]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if not self.alive:
            raise WorkerDied(self._death())
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise WorkerDied(self._death()) from None
        line = self._read_line(time.monotonic() + timeout_s)
        if line is _EOF:  # the worker closed its output: it is exiting; report why, with its stderr
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            self._stderr_reader.join(timeout=2)
            raise WorkerDied(self._death())
        if line is None:
            alive = self.alive
            self.kill()
            raise WorkerDied(f"no reply within {timeout_s:.0f} s; sandbox killed" if alive else self._death())
        return json.loads(line)

    def _read_line(self, deadline: float) -> bytes | object | None:
        """One reply line, `_EOF` when the worker closed its output, or None past the deadline (no thread per
        request: select on the pipe)."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return _EOF
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _death(self) -> str:
        code = self.proc.poll()
        tail = self.stderr_tail.decode("utf-8", "replace").strip().splitlines()[-5:]
        return f"worker exited ({code}): " + " | ".join(tail)

    def kill(self) -> None:
        """Kill the whole sandbox (its process group; bwrap's pid namespace takes the rest with it, and the
        cgroup whatever left the group, e.g. a setsid() grandchild under the process backend)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self.sandbox.cgroup is not None:
            self.sandbox.cgroup.kill_all()

    def close(self) -> None:
        if self.alive:
            try:
                self.proc.stdin.write(b'{"op": "shutdown"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=5)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
        self.kill()
