"""Find an environment package (`PATH` or `seed:NAME`) and load its classes.

A *family* package (format v2 without `mechanics:`) carries data only: loading it reads its `domain.yaml` into
openadapt's own engine and imports none of the package's files, so it runs anywhere (it is trusted like a seed).
A package with its own mechanics (v1, or v2 `custom/` code) is untrusted generated code: it is imported here only
when the caller explicitly opts in (`trust=True`, `--trust` on the CLI); otherwise it runs in the sandbox.
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
from openadapt.kit.section import PackageSection

SEED_PREFIX = "seed:"
SEEDS_DIR = Path(__file__).resolve().parent.parent / "seed_envs"


def seed_names() -> list[str]:
    return sorted(p.parent.name for p in SEEDS_DIR.glob("*/openenv.yaml"))


@dataclass(frozen=True)
class PackageRef:
    """A located package: its directory, its parsed manifest, and whether it is one of openadapt's seeds."""

    root: Path
    manifest: PackageManifest
    seed: bool

    @property
    def data_only(self) -> bool:
        """A family package: no code of its own runs when it is loaded."""
        return self.manifest.openadapt.mechanics is None

    @property
    def trusted(self) -> bool:
        return self.seed or self.data_only

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def label(self) -> str:
        return f"seed:{self.name}" if self.seed else str(self.root)


def locate(ref: str) -> Path:
    """The directory `seed:NAME` or a path names, without reading its manifest; UsageError with one clear line
    when there is none."""
    if ref.startswith(SEED_PREFIX):
        name = ref[len(SEED_PREFIX):]
        if name not in seed_names():
            raise UsageError(f"unknown seed {name!r}; available seeds: {', '.join(seed_names())}")
        return SEEDS_DIR / name
    root = Path(ref).expanduser()
    if not root.exists():
        raise UsageError(f"{ref}: no such directory (expected a package directory or seed:NAME)")
    if not root.is_dir():
        raise UsageError(f"{ref}: not a directory (expected a package directory or seed:NAME)")
    return root.resolve()


def resolve(ref: str) -> PackageRef:
    """`seed:NAME` or a directory holding `openenv.yaml`; raises UsageError/ManifestError with one clear line."""
    root = locate(ref)
    return PackageRef(root, parse_manifest(root), seed=root.parent == SEEDS_DIR)


class LoadedPackage:
    """The classes and text protocol of a package, ready to make environments."""

    def __init__(self, ref: PackageRef, prefix: str | None = None):
        self.ref = ref
        self.family = None  # the BoundFamily of a family package
        section = ref.manifest.openadapt
        if section.mechanics is None:
            self._bind_family(section)
        else:
            self._import_mechanics(section, prefix or module_prefix(ref))
        try:
            self.action_cls.model_validate({})
        except Exception as exc:
            raise ManifestError(f"{ref.label}: the action class must validate from an empty payload (give every "
                                f"field a default): {exc}") from None

    def _bind_family(self, section: PackageSection) -> None:
        from openadapt.families import get_family
        from openadapt.families.yamlio import read_domain_file

        family = get_family(section.family_name, section.family_version)
        source = self.ref.root / section.domain
        domain = family.parse_domain(read_domain_file(source), source=f"{self.ref.label}: {section.domain}")
        self.family = family.bind(domain, section)
        self.env_cls = self.family.env_cls
        self.action_cls = self.family.action_cls
        self.observation_cls = self.family.observation_cls
        self.oracle_cls = family.oracle
        self.heuristic_cls = family.heuristic
        self._templates = (family.prompts, "system.j2", "observation.j2")
        self._context = self.family.context

    def _import_mechanics(self, section: PackageSection, prefix: str) -> None:
        self._prefix = prefix
        m = section.mechanics
        self.env_cls = self._attr(m.environment).bind(section)
        self.action_cls = self._attr(m.action)
        self.observation_cls = self._attr(m.observation)
        self.oracle_cls = self._attr(m.policies.oracle)
        self.heuristic_cls = self._attr(m.policies.heuristic) if m.policies.heuristic else None
        self._templates = (self.ref.root, m.text_protocol.system_template, m.text_protocol.observation_template)
        self._context = self.env_cls.prompt_context()

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
    def section(self) -> PackageSection:
        return self.ref.manifest.openadapt

    @cached_property
    def protocol(self):
        from openadapt.kit.protocol import TextProtocol

        root, system, observation = self._templates
        return TextProtocol(root, system, observation, self.action_cls, context=self._context)

    def make_env(self):
        return self.env_cls()


def module_prefix(ref: PackageRef) -> str:
    if ref.seed:
        return f"openadapt.seed_envs.{ref.name}"
    _source_only(ref)
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


def _source_only(ref: PackageRef) -> None:
    """A package's code runs from its source, as the validator read it: a bare .pyc module is refused, and this
    process keeps its bytecode elsewhere (`sys.pycache_prefix`), so a package's own __pycache__ is never read
    (nor written: the checkout stays as the user has it)."""
    stray = sorted(str(p.relative_to(ref.root)) for p in ref.root.rglob("*.py[co]") if "__pycache__" not in p.parts)
    if stray:
        raise ManifestError(f"{ref.label}: compiled bytecode ({', '.join(stray[:3])}) is not part of a package: "
                            "delete it and ship the source")
    if sys.pycache_prefix is None:
        import tempfile

        sys.pycache_prefix = tempfile.mkdtemp(prefix="openadapt-pycache-")


def load(ref: PackageRef | str, *, trust: bool = False) -> LoadedPackage:
    """Import a package's classes into this process (seeds always; others only with `trust=True`)."""
    if isinstance(ref, str):
        ref = resolve(ref)
    if not ref.trusted and not trust:
        raise UntrustedPackageError(
            f"{ref.label} ships its own mechanics code, which is untrusted: validate it in the sandbox "
            "(`openadapt validate`) or pass --trust to run it in this process"
        )
    return LoadedPackage(ref)
