"""Find an environment package (`PATH` or `seed:NAME`) and load its classes.

Loading imports package code into this process. openadapt's own seed packages are trusted; any other package
is untrusted generated code and is only imported here when the caller explicitly opts in (`trust=True`,
`--trust` on the CLI). Otherwise it must run inside the validator's sandbox.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from openadapt.envpkg.manifest import PackageManifest, parse_manifest
from openadapt.errors import ManifestError, UntrustedPackageError, UsageError

SEED_PREFIX = "seed:"
SEEDS_DIR = Path(__file__).resolve().parent.parent / "seed_envs"


def seed_names() -> list[str]:
    return sorted(p.parent.name for p in SEEDS_DIR.glob("*/openenv.yaml"))


@dataclass(frozen=True)
class PackageRef:
    """A located package: its directory, its parsed manifest, and whether it is one of openadapt's seeds."""

    root: Path
    manifest: PackageManifest
    trusted: bool

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def label(self) -> str:
        return f"seed:{self.name}" if self.trusted else str(self.root)


def resolve(ref: str) -> PackageRef:
    """`seed:NAME` or a directory holding `openenv.yaml`; raises UsageError/ManifestError with one clear line."""
    if ref.startswith(SEED_PREFIX):
        name = ref[len(SEED_PREFIX):]
        if name not in seed_names():
            raise UsageError(f"unknown seed {name!r}; available seeds: {', '.join(seed_names())}")
        root = SEEDS_DIR / name
        return PackageRef(root, parse_manifest(root), trusted=True)
    root = Path(ref).expanduser()
    if not root.exists():
        raise UsageError(f"{ref}: no such directory (expected a package directory or seed:NAME)")
    if not root.is_dir():
        raise UsageError(f"{ref}: not a directory (expected a package directory or seed:NAME)")
    root = root.resolve()
    return PackageRef(root, parse_manifest(root), trusted=root.parent == SEEDS_DIR)


class LoadedPackage:
    """The classes and text protocol of an imported package."""

    def __init__(self, ref: PackageRef, module_prefix: str):
        self.ref = ref
        self._prefix = module_prefix
        section = ref.manifest.openadapt
        self.env_cls = self._attr(section.environment)
        self.action_cls = self._attr(section.action)
        self.observation_cls = self._attr(section.observation)
        self.oracle_cls = self._attr(section.policies.oracle)
        self.heuristic_cls = self._attr(section.policies.heuristic) if section.policies.heuristic else None
        try:
            self.action_cls.model_validate({})
        except Exception as exc:
            raise ManifestError(
                f"{ref.label}: action class {section.action} must validate from an empty payload "
                f"(give every field a default): {exc}"
            ) from None

    def _attr(self, spec: str) -> Any:
        module_name, attr = spec.split(":")
        try:
            module = importlib.import_module(f"{self._prefix}.{module_name}")
        except ModuleNotFoundError as exc:
            raise ManifestError(f"{self.ref.label}: cannot import module {module_name!r} named in the manifest "
                                f"({exc})") from None
        try:
            return getattr(module, attr)
        except AttributeError:
            raise ManifestError(f"{self.ref.label}: module {module_name!r} has no {attr!r}") from None

    @property
    def section(self):
        return self.ref.manifest.openadapt

    @cached_property
    def protocol(self):
        from openadapt.kit.protocol import TextProtocol

        tp = self.section.text_protocol
        return TextProtocol(self.ref.root, tp.system_template, tp.observation_template, self.action_cls,
                            context=self.env_cls.prompt_context())

    def make_env(self):
        return self.env_cls()


def module_prefix(ref: PackageRef) -> str:
    if ref.root.parent == SEEDS_DIR:
        return f"openadapt.seed_envs.{ref.name}"
    digest = hashlib.sha1(str(ref.root).encode()).hexdigest()[:10]
    prefix = f"openadapt_pkg_{ref.name}_{digest}"
    if prefix not in sys.modules:
        init = ref.root / "__init__.py"
        spec = importlib.util.spec_from_file_location(
            prefix, init if init.exists() else None, submodule_search_locations=[str(ref.root)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[prefix] = module
        if init.exists():
            spec.loader.exec_module(module)
    return prefix


def load(ref: PackageRef | str, *, trust: bool = False) -> LoadedPackage:
    """Import a package's classes into this process (seeds always; others only with `trust=True`)."""
    if isinstance(ref, str):
        ref = resolve(ref)
    if not ref.trusted and not trust:
        raise UntrustedPackageError(
            f"{ref.label} is not one of openadapt's seed packages, so its code is untrusted: validate it in the "
            "sandbox (`openadapt validate`) or pass --trust to run it in this process"
        )
    return LoadedPackage(ref, module_prefix(ref))
