"""The typed OpenEnv WebSocket client of a package, built from the package itself.

A family package has no model classes in its files (they come from its family and domain), so its `client.py`
asks for its client here instead of declaring one.
"""

from __future__ import annotations

from pathlib import Path

from openadapt.envpkg.loader import load, resolve
from openadapt.kit.client import OpenAdaptClient


def package_client(root: Path | str, name: str = "PackageEnv", *, trust: bool = False) -> type[OpenAdaptClient]:
    """An `OpenAdaptClient` subclass speaking the package's own action and observation classes."""
    pkg = load(resolve(str(root)), trust=trust)
    return type(name, (OpenAdaptClient,), {"action_type": pkg.action_cls, "observation_type": pkg.observation_cls,
                                          "__module__": __name__})
