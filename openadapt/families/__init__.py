"""Environment families: mechanics engines written once, each running any valid domain of its schema.

Each family is one sub-package here (`openadapt/families/<name>/`) that calls `register_family(...)` when
imported, in the manner of Reasoning Gym's `register_dataset`. Listing the names is cheap (a directory scan);
`get_family(name)` imports the one family asked for (and with it OpenEnv).

    family = get_family("diagnosis")
    domain = family.load_example("incident_triage")
    bound = family.bind(domain, family.section(task="..."))
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING

from openadapt.errors import UsageError

if TYPE_CHECKING:
    from openadapt.families.base import Family

_HERE = Path(__file__).resolve().parent
_REGISTRY: dict[str, Family] = {}


def family_names() -> list[str]:
    """Every family shipped with openadapt, without importing any of them."""
    return sorted(m.name for m in pkgutil.iter_modules([str(_HERE)]) if m.ispkg)


def register_family(family: Family) -> Family:
    if family.name in _REGISTRY and _REGISTRY[family.name] is not family:
        raise ValueError(f"family {family.name!r} is registered twice")
    _REGISTRY[family.name] = family
    return family


def get_family(name: str, version: int | None = None) -> Family:
    """The family `name` (optionally checking its version); UsageError naming the known ones otherwise."""
    if name not in _REGISTRY:
        if name not in family_names():
            raise UsageError(f"unknown family {name!r}; available families: {', '.join(family_names())}")
        importlib.import_module(f"openadapt.families.{name}")
        if name not in _REGISTRY:
            raise RuntimeError(f"openadapt.families.{name} did not register a family")
    family = _REGISTRY[name]
    if version is not None and version != family.version:
        raise UsageError(f"family {name}@{version} is not available: this openadapt has {family.ref}")
    return family


def all_families() -> list[Family]:
    return [get_family(name) for name in family_names()]
