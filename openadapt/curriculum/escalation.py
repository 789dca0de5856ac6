"""What the curriculum asks of a designer, and the default answer when there is none.

The curriculum does not know how a harder tier is made: it hands an `EscalationRequest` to an `Escalator` and
trains on whatever comes back certified. `Recertifier` (no designer involved) certifies the package's own
target tier again: every family package implements all five tiers, so for those escalating means proving, in the
sandbox, that the target tier still passes every check (the oracle still solves it, a shallow heuristic does not
find it easier). A designer (`openadapt.designer.escalate`) may instead rewrite the package.

Either way the result is a folder `dest/` holding `package/` (exactly what the solver will load),
`validation.json` and `provenance.json`; a refused escalation leaves its evidence under `rejected_root/`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from openadapt import __version__
from openadapt.envpkg.manifest import parse_manifest
from openadapt.kit.eci import Tier
from openadapt.validator import ValidationReport, Verdict

PACKAGE_DIR = "package"
PROVENANCE_FILE = "provenance.json"
SKIPPED = ("__pycache__", PROVENANCE_FILE)


class EscalationRequest(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    package: Path = Field(description="the package now being trained on")
    task: str = Field(description="what the environment is for (the original prompt, or the package's task)")
    current: Tier
    target: Tier
    solve_rate: float = Field(description="the windowed solve rate that triggered the escalation")
    dest: Path = Field(description="folder for the certified version (must not exist)")
    rejected_root: Path = Field(description="folder under which refused attempts are kept")
    max_attempts: int = Field(default=3, ge=1, description="designer repair attempts within this round")


class EscalationResult(BaseModel):
    ok: bool
    package: Path | None = None  # dest/package when certified
    reason: str | None = None
    rejected_dir: Path | None = None
    failing_checks: list[str] = Field(default_factory=list)
    validation: dict[str, Any] = Field(default_factory=dict)  # the certifying report's summary


class Escalator(Protocol):
    def escalate(self, request: EscalationRequest, validator: Any) -> EscalationResult: ...


def copy_package(root: Path, dest: Path) -> None:
    """A plain copy of a package's files (no caches), for the run's record of what it trained on."""
    shutil.copytree(root, dest, ignore=shutil.ignore_patterns(*SKIPPED))


def certify(report: ValidationReport, target: int) -> ValidationReport:
    """A pass only counts when the target tier was among the tiers validated."""
    if report.verdict == Verdict.PASS and target not in report.tiers:
        report.verdict = Verdict.FAIL  # a package that silently dropped the tier it was asked for
    return report


def reject(request: EscalationRequest, reason: str, evidence: Path | None = None,
           record: dict[str, Any] | None = None) -> Path:
    """Keep a refused escalation's evidence under rejected_root/eciN-STAMP-HEX/ with REJECTED.json."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = request.rejected_root / f"eci{request.target}-{stamp}-{secrets.token_hex(3)}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    if evidence is not None and evidence.exists():
        os.replace(evidence, folder)
    else:
        folder.mkdir()
    (folder / "REJECTED.json").write_text(json.dumps({"reason": reason, "target_eci": request.target,
                                                      **(record or {})}, indent=2) + "\n")
    return folder


class Recertifier:
    """Certify the package's own target tier (no designer)."""

    def escalate(self, request: EscalationRequest, validator: Any) -> EscalationResult:
        section = parse_manifest(request.package).openadapt
        if request.target not in section.eci_tiers:
            reason = (f"the package declares ECI {section.eci_tiers}, not {request.target}; only an LLM designer "
                      "can write a new tier (configure an endpoint: OPENADAPT_BASE_URL, OPENADAPT_MODEL)")
            return EscalationResult(ok=False, reason=reason, rejected_dir=reject(request, reason))
        work = request.dest.with_name(f".{request.dest.name}.work-{os.getpid()}-{secrets.token_hex(3)}")
        copy_package(request.package, work / PACKAGE_DIR)
        report = certify(validator.validate(work / PACKAGE_DIR, tiers=list(range(1, request.target + 1))),
                         request.target)
        (work / "validation.json").write_text(report.model_dump_json(indent=2))
        record = {"designer": "recertify", "openadapt_version": __version__, "task": request.task,
                  "escalation": f"ECI {request.current} -> {request.target}", "validation": report.summary()}
        if report.verdict != Verdict.PASS:
            failing = [c.check_id for c in report.failing]
            reason = f"the harder tier failed validation: {', '.join(failing)}"
            return EscalationResult(ok=False, reason=reason, failing_checks=failing,
                                    rejected_dir=reject(request, reason, work, record))
        (work / PROVENANCE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        os.replace(work, request.dest)  # atomic: the version appears whole or not at all
        return EscalationResult(ok=True, package=request.dest / PACKAGE_DIR, validation=report.summary())
