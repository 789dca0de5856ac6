"""Provenance of a generated package (`provenance.json`): who designed it, every attempt, what the validator said.
Deterministic JSON, for review in a pull request."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from openadapt.designer.base import DesignerInfo
from openadapt.errors import UsageError
from openadapt.llm.endpoint import Usage

PROVENANCE_FILE = "provenance.json"
MAX_PROVENANCE_BYTES = 8 * 2**20
VOLATILE_FIELDS = ("created_at", "duration_s", "design_s", "validation_s")  # differ run to run


class AttemptRecord(BaseModel):
    attempt: int
    design_s: float = 0.0
    validation_s: float = 0.0
    parse_problems: list[str] = Field(default_factory=list)
    failing_checks: list[str] = Field(default_factory=list)
    verdict: str | None = None
    feedback_sent: str | None = None  # what went back to the designer after this attempt
    notes: dict[str, Any] = Field(default_factory=dict)  # what the designer decided (e.g. the family, and why)
    usage: Usage = Field(default_factory=Usage)
    retries: list[str] = Field(default_factory=list)

    def note_validation(self, report: Any, seconds: float, folder: Path) -> None:
        """Record a ValidationReport's verdict here and keep the full report as folder/validation.json."""
        self.validation_s = round(seconds, 3)
        self.verdict = report.verdict.value
        self.failing_checks = [c.check_id for c in report.failing]
        (folder / "validation.json").write_text(report.model_dump_json(indent=2))


class Provenance(BaseModel):
    provenance_version: int = 2
    openadapt_version: str
    name: str
    name_source: str = "task"  # --name, example, task (its words), designer (its translation), transliteration
    task: str  # as the user wrote it
    task_english: str | None = None  # the designer model's translation the name was made from
    designer: DesignerInfo
    template_versions: dict[str, str]
    attempts: list[AttemptRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    validation: dict[str, Any] = Field(default_factory=dict)
    validated_digest: str | None = None  # the files the validator passed (before README and provenance)
    content_digest: str | None = None  # the final files, provenance.json excluded
    created_at: str = ""
    duration_s: float = 0.0

    def write(self, folder: Path) -> None:
        """Deterministic, diff-friendly JSON (sorted keys, two-space indent), written atomically."""
        target = folder / PROVENANCE_FILE
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, target)

    @classmethod
    def read(cls, folder: Path) -> Provenance:
        """The provenance of a package folder; UsageError naming the file and what is wrong with it (it is data a
        pull request may have changed: bounded in size, parsed without recursion limits being reached)."""
        path = folder / PROVENANCE_FILE
        try:
            if path.is_symlink() or path.stat().st_size > MAX_PROVENANCE_BYTES:
                raise ValueError(f"not a regular file of at most {MAX_PROVENANCE_BYTES // 2**20} MiB")
            return cls.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            why = f"{where}: {first['msg']}" if where else first["msg"]
        except (OSError, ValueError) as exc:
            why = str(exc) or type(exc).__name__
        raise UsageError(f"{path} is unreadable ({why[:200]})")


def stable(data: Any) -> Any:
    """Provenance data without the fields that legitimately differ between two runs of the same prompt."""
    if isinstance(data, dict):
        return {k: stable(v) for k, v in data.items() if k not in VOLATILE_FIELDS}
    if isinstance(data, list):
        return [stable(v) for v in data]
    return data
