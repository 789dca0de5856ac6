"""Where a curriculum's first environment version comes from: a seed, a package directory, or a task prompt
handed to the designer. Whatever the source, the version the run trains on is copied into the run directory
and certified by the validator there, so the run keeps exactly what it trained on, with its report."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openadapt import __version__
from openadapt.curriculum.escalation import PACKAGE_DIR, PROVENANCE_FILE, copy_package
from openadapt.curriculum.state import CurriculumError, EnvVersion, now
from openadapt.envpkg.loader import SEED_PREFIX, resolve
from openadapt.errors import UsageError
from openadapt.validator import Validator, Verdict

Emit = Callable[..., None]
# Designs a package for a task prompt under a folder and returns its directory (the designer provides it).
DesignTask = Callable[[str, Path, Validator], Path]


def is_task_prompt(source: str) -> bool:
    """A source that is neither seed:NAME nor an existing path, and does not look like a path either."""
    if source.startswith(SEED_PREFIX) or Path(source).expanduser().exists():
        return False
    if "/" in source or source.endswith((".yaml", ".yml")):
        raise UsageError(f"{source}: no such package directory (a curriculum starts from a task prompt, a "
                         "package directory, or seed:NAME)")
    return True


def check_source(source: str) -> None:
    """Raise UsageError/ManifestError for a source that cannot start a run (before anything is written)."""
    if not source.strip():
        raise UsageError("the source is empty: give a task prompt, a package directory or seed:NAME")
    if not is_task_prompt(source):
        resolve(source)


def first_version(source: str, envs: Path, tier: int, validator: Validator, design: DesignTask | None,
                  emit: Emit) -> EnvVersion:
    envs.mkdir(parents=True, exist_ok=True)
    if is_task_prompt(source):
        if design is None:
            raise UsageError("a curriculum that starts from a task prompt needs a designer; give a package "
                             "directory or seed:NAME instead")
        emit("designing", task=source)
        ref = resolve(str(design(source, envs / ".designed", validator)))
    else:
        ref = resolve(source)
    if tier not in ref.manifest.openadapt.eci_tiers:
        raise UsageError(f"{ref.label} declares ECI {ref.manifest.openadapt.eci_tiers}; it cannot start at {tier}")
    dest = envs / f"v1-eci{tier}"
    shutil.rmtree(dest, ignore_errors=True)  # a start that failed before in this directory
    copy_package(ref.root, dest / PACKAGE_DIR)
    report = validator.validate(dest / PACKAGE_DIR, tiers=ref.manifest.openadapt.eci_tiers)
    (dest / "validation.json").write_text(report.model_dump_json(indent=2))
    emit("validation", target=tier, verdict=report.verdict.value, summary=report.summary())
    if report.verdict != Verdict.PASS:
        raise CurriculumError(f"{ref.label} fails validation ({', '.join(c.check_id for c in report.failing)}); "
                              f"the report is in {dest / 'validation.json'}")
    _write_provenance(ref.root, dest, source)
    return EnvVersion(version=1, eci=tier, ref=ref.label if ref.trusted else str((dest / PACKAGE_DIR).resolve()),
                      folder=str(dest.relative_to(envs.parent)), digest=report.package_digest or "", step=0,
                      created_at=now())


def _write_provenance(root: Path, dest: Path, source: str) -> None:
    generated = root / PROVENANCE_FILE
    if generated.exists():  # a generated package carries its own designer provenance
        (dest / PROVENANCE_FILE).write_text(generated.read_text())
        return
    record: dict[str, Any] = {"source": source, "package": str(root), "openadapt_version": __version__,
                              "note": "hand-written package (openadapt seed or user package), not designed by this run"}
    (dest / PROVENANCE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
