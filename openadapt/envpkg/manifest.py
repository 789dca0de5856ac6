"""Reading an environment package's `openenv.yaml`: OpenEnv's fields plus openadapt's section.

OpenEnv's own `validation:` block says what OpenEnv's validator needs; the `openadapt:` section (its model is
`openadapt.kit.section.PackageSection`) says what openadapt's stages need. It is parsed without importing any
package code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from openadapt import safeyaml
from openadapt.errors import ManifestError
from openadapt.kit.section import PackageSection

MANIFEST_FILE = "openenv.yaml"
MAX_MANIFEST_BYTES = 256 * 1024  # a manifest is a page of settings


class PackageManifest(BaseModel):
    """The parts of `openenv.yaml` openadapt relies on."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str | None = None
    app: str
    openadapt: PackageSection
    raw: dict[str, Any] = Field(repr=False)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", value):
            raise ValueError(f"{value!r} must be a lowercase Python identifier (letters, digits, underscores)")
        return value


def _field_path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "openenv.yaml"


def parse_manifest(root: Path) -> PackageManifest:
    """Read and validate `root/openenv.yaml`; every problem is a ManifestError naming the field."""
    source = root / MANIFEST_FILE
    if not source.is_file():
        raise ManifestError(f"{root} is not an environment package: it has no {MANIFEST_FILE}")
    try:
        raw = safeyaml.load_file(source, str(source), max_bytes=MAX_MANIFEST_BYTES)
    except safeyaml.YamlRefused as exc:
        raise ManifestError(f"{source}: {exc.reason.removeprefix('is ')}") from None
    if not isinstance(raw, dict):
        raise ManifestError(f"{source}: must be a YAML mapping")
    if "openadapt" not in raw:
        raise ManifestError(f"{source}: field 'openadapt' is missing (the openadapt section of the manifest)")
    try:
        return PackageManifest.model_validate(
            {"name": raw.get("name"), "version": raw.get("version"), "app": raw.get("app"),
             "openadapt": raw["openadapt"], "raw": raw}
        )
    except ValidationError as exc:
        problems = [
            f"field '{_field_path(err['loc'])}': {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()
        ]
        raise ManifestError(f"{source}: " + "; ".join(problems)) from None
