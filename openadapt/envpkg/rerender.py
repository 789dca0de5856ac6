"""`openadapt render PACKAGE`: write a package's boilerplate again from openadapt's templates (after a template
change), keeping everything that is the package's own: its domain.yaml or custom/ code, README.md, provenance.

The inputs are those the validator's `static.boilerplate` check renders with: the package name and `openadapt:`
section from the manifest, and the tags and reward floor margin of its `validation:` block. `openenv.yaml` is
rewritten only when its `validation:` block is the one the template renders (else it is the package's own and is
kept, and said so). Only the manifest is read: no code of the package is imported or run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from openadapt.envpkg.loader import resolve
from openadapt.envpkg.manifest import MANIFEST_FILE
from openadapt.envpkg.render import boilerplate
from openadapt.errors import UsageError

DEFAULT_FLOOR_MARGIN = 0.3
ADDED = ("execution",)  # validation keys newer templates add: a block that lacks only these is still the template's


class RenderResult(BaseModel):
    package: str
    root: Path
    written: list[str] = Field(default_factory=list, description="files whose content changed (or would, --check)")
    unchanged: list[str] = Field(default_factory=list)
    kept: dict[str, str] = Field(default_factory=dict, description="file -> why it was left as it is")
    checked_only: bool = False

    @property
    def up_to_date(self) -> bool:
        return not self.written


def render_inputs(validation: dict[str, Any]) -> tuple[list[str], float]:
    """The tags (without the family tag, which the template adds) and floor margin of a `validation:` block."""
    tags = [str(t) for t in ((validation.get("types") or {}).get("tags") or []) if not str(t).startswith("family:")]
    margin = float((validation.get("reward") or {}).get("floor_margin") or DEFAULT_FLOOR_MARGIN)
    return tags, margin


def rerender(package: str, *, check: bool = False) -> RenderResult:
    """Re-render the boilerplate of `package` (a directory or seed:NAME); with `check`, write nothing and only
    report what differs."""
    ref = resolve(package)
    if ref.manifest.openadapt.format_version < 2:
        raise UsageError(f"{ref.label} is a format-v{ref.manifest.openadapt.format_version} package: all its files "
                         "are its own, there is no boilerplate to render (docs/environment-package.md)")
    validation = ref.manifest.raw.get("validation") or {}
    tags, margin = render_inputs(validation)
    expected = boilerplate(ref.name, ref.manifest.openadapt, tags, floor_margin=margin,
                           task_distribution=validation.get("task_distribution"))
    result = RenderResult(package=ref.label, root=ref.root, checked_only=check)
    for path, text in expected.items():
        target = ref.root / path
        rendered = (yaml.safe_load(text) or {}).get("validation") if path == MANIFEST_FILE else None
        if path == MANIFEST_FILE and _without(rendered, ADDED) != _without(validation, ADDED):
            result.kept[path] = "its validation: block is the package's own (not the template's); edit it by hand"
            continue
        if target.is_file() and target.read_text(encoding="utf-8", errors="replace") == text:
            result.unchanged.append(path)
            continue
        result.written.append(path)
        if not check:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    return result


def _without(block: dict[str, Any] | None, keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in (block or {}).items() if k not in keys}
