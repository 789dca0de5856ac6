"""The environments a training run steps: in this process for trusted seeds (or with `trust=True`), in one
long-lived sandbox process otherwise (untrusted package code never runs in the trainer)."""

from __future__ import annotations

from openadapt.envpkg.loader import load, resolve
from openadapt.envpkg.textenv import LocalTextEnv, TextEnv
from openadapt.sandbox import SandboxChoice
from openadapt.sandbox.remote import SandboxedTextEnvs
from openadapt.training.slots import SlottedTextEnv


class TextEnvPool:
    """`n` text environments of one package: in this process for trusted seeds (or with `trust=True`), in a
    sandbox process otherwise; with `slots`, seen through value slots (`training.slots`). Use as a context
    manager; `.envs` are the environments."""

    def __init__(self, ref: str, n: int, *, trust: bool = False, sandbox: SandboxChoice | str = SandboxChoice.AUTO,
                 slots: bool = False):
        package = resolve(ref)
        self.label = package.label
        self.section = package.manifest.openadapt
        self._remote = None
        if package.trusted or trust:
            pkg = load(package, trust=True)
            self.envs: list[TextEnv] = [LocalTextEnv(pkg) for _ in range(n)]
            self.isolated = False
            self.in_process = True
        else:
            self._remote = SandboxedTextEnvs(package.root, n, sandbox=sandbox)
            self.envs = list(self._remote.envs)
            self.isolated = self._remote.isolated
            self.in_process = False
        if slots:
            self.envs = [SlottedTextEnv(env) for env in self.envs]

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()

    def __enter__(self) -> TextEnvPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
