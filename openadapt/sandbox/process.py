"""process backend: rlimits and a clean environment only. NOT isolated: the candidate runs as the current user
with the network and the filesystem reachable. Used only when asked for by name (`--sandbox process`); every
report then says the run was not isolated."""

from __future__ import annotations

from pathlib import Path

from openadapt.sandbox.base import Sandbox, SandboxInfo, interpreter


class ProcessSandbox(Sandbox):
    name = "process"
    isolated = False

    def inside(self, host_path: Path) -> str:
        return str(host_path)

    def worker_command(self, module: str = "openadapt.validator.worker", *args: str,
                       env: dict[str, str] | None = None) -> list[str]:
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        return [*prefix, *interpreter(module, *args)]

    def info(self) -> SandboxInfo:
        return SandboxInfo(
            backend=self.name, isolated=False, network="host network (NOT isolated)", limits=self.bounds(),
            notes=["NOT ISOLATED: the package ran as the current user with only rlimits, a private scratch tmpfs "
                   "where the kernel allows one and a clean environment; it could read files and reach the network",
                   *self.bound_notes()],
        )
