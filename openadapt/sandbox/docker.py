"""docker backend: one container per validation, from an image that has openadapt installed (the user's: no
registry is reachable from here to pull one). No network, read-only root, a size-limited tmpfs as the only
writable place (noexec, nosuid, nodev), memory/pids/CPU limits (the engine's cgroup), every capability dropped,
no-new-privileges, Docker's default seccomp profile, an unprivileged user, the staged package mounted read-only,
a hard wall-clock kill, logs read before the container is removed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openadapt.sandbox.base import HASH_SEED, SandboxInfo, SandboxResources, SandboxUnavailable

DEFAULT_IMAGE = "openadapt-validator:latest"
PACKAGE_MOUNT = "/sandbox/package"


def container_spec(package: Path, request: dict[str, Any], image: str = DEFAULT_IMAGE,
                   memory_mb: int = 1024, cpus: float = 1.0, disk_mb: int = 256, pids: int = 512) -> dict[str, Any]:
    """The exact keyword arguments given to `docker.containers.run`."""
    import docker

    worker_request = {**request, "package": PACKAGE_MOUNT, "scratch": "/tmp"}
    return {
        "image": image,
        # -s -P, not -I: the container's environment is ours, and -I would drop its PYTHONHASHSEED
        "command": ["python", "-s", "-P", "-m", "openadapt.validator.worker", "--once", json.dumps(worker_request)],
        "detach": True,
        "network_mode": "none",
        "network_disabled": True,
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,noexec,nosuid,nodev,size={int(disk_mb)}m,mode=1777"},
        "volumes": {str(package): {"bind": PACKAGE_MOUNT, "mode": "ro"}},
        "user": "65534:65534",
        "mem_limit": f"{memory_mb}m",
        "memswap_limit": f"{memory_mb}m",
        "pids_limit": int(pids),
        "nano_cpus": int(cpus * 1e9),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ulimits": [docker.types.Ulimit(name="nofile", soft=256, hard=256),
                    docker.types.Ulimit(name="core", soft=0, hard=0)],
        "environment": {"PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp", "OMP_NUM_THREADS": "1",
                        "PYTHONHASHSEED": HASH_SEED},
        "working_dir": "/tmp",
    }


def connect():
    """A docker client, or SandboxUnavailable saying why there is none."""
    try:
        import docker
    except ImportError:
        raise SandboxUnavailable("the docker Python SDK is not installed: pip install 'openadapt-rl[docker]'") from None
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:
        raise SandboxUnavailable(f"no Docker engine answers ({type(exc).__name__}: {str(exc)[:160]}); start "
                                 "dockerd, or use --sandbox bwrap") from None
    return client


class DockerRunner:
    """Runs one validation per container and returns the worker's reply."""

    name = "docker"
    isolated = True

    def __init__(self, image: str = DEFAULT_IMAGE, resources: SandboxResources | None = None):
        self.client = connect()
        self.image = image
        self.resources = resources or SandboxResources()

    def run(self, package: Path, request: dict[str, Any], hard_timeout_s: float) -> dict[str, Any]:
        r = self.resources
        spec = container_spec(package, request, self.image, memory_mb=r.memory_mb, cpus=r.cpus, disk_mb=r.disk_mb,
                              pids=r.pids)
        container = self.client.containers.run(**spec)
        try:
            try:
                container.wait(timeout=hard_timeout_s)
            except Exception:
                container.kill()
                return {"ok": False, "error": f"container killed after {hard_timeout_s:.0f} s"}
            logs = container.logs(stdout=True, stderr=False).decode("utf-8", "replace").strip().splitlines()
            return json.loads(logs[-1]) if logs else {"ok": False, "error": "the container printed no report"}
        finally:
            container.remove(force=True)

    def info(self) -> SandboxInfo:
        r = self.resources
        return SandboxInfo(backend="docker", isolated=True, uid=65534, network="none",
                           limits={"cgroup": f"docker: {r.cpus:g} CPU, memory {r.memory_mb} MiB, {r.pids} processes",
                                   "scratch_tmpfs_bytes": r.disk_mb * 1024 * 1024},
                           notes=[f"image {self.image}; read-only root, a {r.disk_mb} MiB tmpfs /tmp (noexec), caps "
                                  "dropped, no-new-privileges, the engine's cgroup limits"])
