"""Which sandbox backend runs untrusted package code, and how a package is staged into it.

`SandboxChoice` is the one type for the user's choice (`--sandbox`, `TrainConfig.sandbox`, ...): any other value
is refused with one message, never silently treated as `auto`.
"""

from __future__ import annotations

import os
import shutil
from enum import StrEnum
from pathlib import Path

from openadapt.errors import UsageError
from openadapt.sandbox.base import Sandbox, SandboxUnavailable

# What never travels into a sandbox with a package (caches, VCS data, environments).
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".git", ".venv", "*.egg-info")


class SandboxChoice(StrEnum):
    AUTO = "auto"  # docker when an engine answers, else bwrap, else refuse
    DOCKER = "docker"
    BWRAP = "bwrap"
    PROCESS = "process"  # explicit opt-in: NOT isolated

    @classmethod
    def parse(cls, value: str | SandboxChoice) -> SandboxChoice:
        try:
            return cls(value)
        except ValueError:
            raise UsageError(f"unknown sandbox {value!r}: use one of {', '.join(c.value for c in cls)}") from None


def make_sandbox(choice: SandboxChoice | str, workdir: Path) -> Sandbox | None:
    """The backend for `choice`; None means docker (which runs one container per validation)."""
    from openadapt.sandbox import bwrap, docker
    from openadapt.sandbox.process import ProcessSandbox

    choice = SandboxChoice.parse(choice)
    if choice is SandboxChoice.PROCESS:
        return ProcessSandbox(workdir)
    if choice is SandboxChoice.BWRAP:
        return bwrap.BwrapSandbox(workdir)
    if choice is SandboxChoice.DOCKER:
        docker.connect()
        return None
    try:
        docker.connect()
        return None
    except SandboxUnavailable as no_docker:
        problem = bwrap.available()
        if problem is None:
            return bwrap.BwrapSandbox(workdir)
        raise SandboxUnavailable(
            f"no sandbox available: {no_docker}; and {problem}. Install bubblewrap (or start Docker), or pass "
            "--sandbox process to run WITHOUT isolation"
        ) from None


def stage_package(source: Path, dest: Path) -> None:
    """Copy a package where the sandbox can read it: readable by the sandbox's uid, writable by nobody there."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest, symlinks=True, ignore=IGNORED)
    for folder, _, names in os.walk(dest):
        os.chmod(folder, 0o755)
        for name in names:
            if not os.path.islink(os.path.join(folder, name)):
                os.chmod(os.path.join(folder, name), 0o644)
