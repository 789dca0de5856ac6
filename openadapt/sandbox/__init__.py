"""The sandbox layer: where untrusted package code runs (validation, training, evaluation, the curriculum).

Backends behind one interface (`base.Sandbox`): bwrap (the default without Docker), docker (a container per
validation), process (explicit opt-in, NOT isolated). `remote.SandboxedTextEnvs` steps a package's environments
in a long-lived sandboxed host (`env_host`). Importing this package is cheap: no OpenEnv, no package code.
"""

from openadapt.sandbox.base import SandboxInfo, SandboxUnavailable, WorkerDied
from openadapt.sandbox.choice import IGNORED, PackageRefused, SandboxChoice, make_sandbox, stage_package

__all__ = ["IGNORED", "PackageRefused", "SandboxChoice", "SandboxInfo", "SandboxUnavailable", "WorkerDied",
           "make_sandbox", "stage_package"]
