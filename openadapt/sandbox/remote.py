"""Text environments of an untrusted package, stepped inside a sandbox by a long-lived host process.

    with SandboxedTextEnvs("generated_envs/my_env", n=8) as pool:
        first = pool.envs[0].reset(seed=3, eci=1)
        after = pool.envs[0].step('{"tool": "inspect_logs", "service": "orders-db"}')

One sandboxed process (bwrap, or the explicitly unsafe process backend) holds all `n` environments, so
OpenEnv's import is paid once per package, not per environment or step.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from openadapt.envpkg.textenv import TextStep
from openadapt.errors import OpenAdaptError
from openadapt.sandbox.base import SandboxUnavailable, WorkerDied, WorkerHandle
from openadapt.sandbox.choice import PackageRefused, SandboxChoice, make_sandbox, stage_package

REQUEST_TIMEOUT_S = 30.0


class RemoteEnvError(OpenAdaptError):
    """The sandboxed environment failed or stopped answering."""


class RemoteTextEnv:
    """One environment inside the sandbox (a `TextEnv`)."""

    def __init__(self, pool: SandboxedTextEnvs, env_id: int):
        self.pool = pool
        self.env_id = env_id

    def system_prompt(self) -> str:
        return self.pool.system_prompt()

    def reset(self, seed: int, eci: int) -> TextStep:
        return TextStep.model_validate(self.pool.call({"op": "reset", "env": self.env_id, "seed": seed,
                                                       "eci": eci})["step"])

    def step(self, completion: str) -> TextStep:
        return TextStep.model_validate(self.pool.call({"op": "step", "env": self.env_id,
                                                       "completion": completion})["step"])

    def suggest(self, policy: str) -> str:
        """The package's own non-privileged policy's next completion, computed inside the sandbox."""
        return str(self.pool.call({"op": "suggest", "env": self.env_id, "policy": policy})["completion"])


class SandboxedTextEnvs:
    def __init__(self, package: Path | str, n: int = 1, sandbox: SandboxChoice | str = SandboxChoice.AUTO,
                 memory_mb: int = 1024):
        self._tmp = Path(tempfile.mkdtemp(prefix="openadapt-envhost-"))
        try:
            choice = SandboxChoice.parse(sandbox)
            box = make_sandbox(SandboxChoice.BWRAP if choice is SandboxChoice.AUTO else choice, self._tmp)
        except SandboxUnavailable:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        if box is None:
            raise SandboxUnavailable("stepping environments in docker is not supported; use bwrap")
        box.prepare()
        staged = box.inbox / "package"
        try:
            stage_package(Path(package), staged)
        except PackageRefused as refused:
            box.close()
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise RemoteEnvError(f"the package cannot be staged into the sandbox: {refused}") from None
        self.sandbox = box
        try:
            self.handle = WorkerHandle(box, box.worker_command("openadapt.sandbox.env_host",
                                                               box.inside(staged), str(memory_mb)))
        except WorkerDied as exc:
            box.close()
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise RemoteEnvError(f"the package did not load in the sandbox: {exc}") from None
        self.section = self.handle.hello["section"]
        self.isolated = box.isolated
        ids = self.call({"op": "make", "n": n})["ids"]
        self.envs = [RemoteTextEnv(self, i) for i in ids]
        self._system: str | None = None

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = self.handle.request(message, REQUEST_TIMEOUT_S)
        except WorkerDied as exc:
            raise RemoteEnvError(f"the sandboxed environment stopped: {exc}") from None
        if not reply.get("ok"):
            raise RemoteEnvError(f"the sandboxed environment failed: {reply.get('error')}")
        return reply

    def system_prompt(self) -> str:
        if self._system is None:
            self._system = self.call({"op": "system_prompt"})["text"]
        return self._system

    def close(self) -> None:
        self.handle.close()
        self.sandbox.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> SandboxedTextEnvs:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
