"""Escalation: produce the next, harder tier of a package and have the validator certify it.

With an LLM the designer rewrites the package from the escalation prompt (then repairs it from the validator's
feedback, like `generate`). The offline designer cannot write new code: its blueprints (and openadapt's seeds)
already implement all five tiers, so escalating means certifying the package's own tier `target` again, in the
sandbox, with every check, the tier-separation check (a shallow heuristic may not find the harder tier easier)
and the oracle (it must still solve) included. A package that does not declare the target tier cannot be
escalated offline, and says so.

Either way the result is a folder `dest/` holding `package/` (exactly what the solver will load),
`validation.json` and `provenance.json`; a refused escalation leaves every attempt with its report under
`rejected_root/`, never under `dest`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from openadapt import __version__
from openadapt.designer.llm import LLMClient, LLMConfig
from openadapt.designer.package import DesignError, assemble, content_digest, template_versions, write_package
from openadapt.designer.prompting import escalation_messages, repair_messages
from openadapt.designer.provenance import AttemptRecord, DesignerInfo, Provenance
from openadapt.designer.reply import parse_reply
from openadapt.envpkg.manifest import parse_manifest
from openadapt.validator import ValidationReport, Validator, Verdict

PACKAGE_DIR = "package"
SKIPPED = ("__pycache__", "provenance.json")


class EscalationRequest(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    package: Path = Field(description="the package now being trained on")
    task: str = Field(description="what the environment is for (the original prompt, or the package's task)")
    current: int = Field(ge=1, le=4)
    target: int = Field(ge=2, le=5)
    solve_rate: float = Field(description="the windowed solve rate that triggered the escalation")
    dest: Path = Field(description="folder for the certified version (must not exist)")
    rejected_root: Path = Field(description="folder under which refused attempts are kept")
    llm: LLMConfig | None = None
    max_attempts: int = Field(default=3, ge=1)


class EscalationResult(BaseModel):
    ok: bool
    package: Path | None = None  # dest/package when certified
    reason: str | None = None
    rejected_dir: Path | None = None
    failing_checks: list[str] = Field(default_factory=list)
    provenance: Provenance


def package_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*"))
            if p.is_file() and not any(part in SKIPPED for part in p.relative_to(root).parts)}


def escalate(request: EscalationRequest, validator: Validator) -> EscalationResult:
    manifest = parse_manifest(request.package)
    name = manifest.name
    offline = request.llm is None
    designer = (DesignerInfo(backend="offline", blueprint=name) if offline else
                DesignerInfo(backend="openai-compatible", model=request.llm.model, base_url=request.llm.base_url))
    provenance = Provenance(openadapt_version=__version__, name=name,
                            task=f"{request.task} [escalation: ECI {request.current} -> {request.target}]",
                            designer=designer, template_versions=template_versions(),
                            created_at=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat())
    started = time.monotonic()
    work = request.dest.with_name(f".{request.dest.name}.work-{os.getpid()}-{secrets.token_hex(3)}")
    tiers = list(range(1, request.target + 1))
    current = package_files(request.package)
    files, feedback = current, ""
    client = None if offline else LLMClient(request.llm)
    try:
        for attempt in range(1, (1 if offline else request.max_attempts) + 1):
            record = AttemptRecord(attempt=attempt)
            provenance.attempts.append(record)
            t0 = time.monotonic()
            if offline:
                if request.target not in manifest.openadapt.eci_tiers:
                    record.parse_problems.append(
                        f"{name} declares ECI {manifest.openadapt.eci_tiers}, not {request.target}; the offline "
                        "designer cannot write a new tier (configure an LLM endpoint: OPENADAPT_BASE_URL, "
                        "OPENADAPT_MODEL)")
                    break
                candidate = current
            else:
                messages = (escalation_messages(name, request.task, current, request.current, request.target,
                                                request.solve_rate) if attempt == 1
                            else repair_messages(name, request.task, files, feedback, attempt - 1))
                completion = client.complete(messages)
                record.usage, record.retries = completion.usage, completion.retries
                parsed = parse_reply(completion.text, completion.finish_reason)
                record.parse_problems = parsed.problems
                if not parsed.usable:
                    feedback = "The reply could not be used:\n" + "\n".join(f"- {p}" for p in parsed.problems)
                    record.feedback_sent = feedback
                    continue
                try:
                    candidate = assemble(name, parsed.spec, parsed.files, tags=["openadapt", "generated", "llm"])
                except DesignError as exc:
                    feedback = f"The design could not be assembled: {exc}"
                    record.parse_problems.append(str(exc))
                    record.feedback_sent = feedback
                    continue
            record.design_s = round(time.monotonic() - t0, 3)
            files = candidate
            stage = work / f"attempt-{attempt}" / PACKAGE_DIR
            write_package(files, stage)
            t1 = time.monotonic()
            report = _certify(validator, stage, request.target, tiers)
            record.note_validation(report, time.monotonic() - t1, stage.parent)
            if report.verdict == Verdict.PASS:
                provenance.validation = report.summary()
                provenance.validated_digest = provenance.content_digest = content_digest(files)
                provenance.duration_s = round(time.monotonic() - started, 3)
                provenance.write(stage.parent)
                os.replace(stage.parent, request.dest)  # atomic: the version appears whole or not at all
                shutil.rmtree(work, ignore_errors=True)  # earlier attempts live on in provenance.json
                return EscalationResult(ok=True, package=request.dest / PACKAGE_DIR, provenance=provenance)
            feedback = report.designer_feedback()
            record.feedback_sent = feedback if attempt < request.max_attempts and not offline else None
    except BaseException:
        _reject(work, request, provenance, "stopped while escalating", started)
        raise
    last = provenance.attempts[-1]
    reason = (f"the harder tier failed validation: {', '.join(last.failing_checks)}" if last.failing_checks
              else f"no usable escalation: {'; '.join(last.parse_problems)[:300]}")
    rejected = _reject(work, request, provenance, reason, started)
    return EscalationResult(ok=False, reason=reason, rejected_dir=rejected, failing_checks=last.failing_checks,
                            provenance=provenance)


def _certify(validator: Validator, package: Path, target: int, tiers: list[int]) -> ValidationReport:
    report = validator.validate(package, tiers=tiers)
    if report.verdict == Verdict.PASS and target not in report.tiers:
        report.verdict = Verdict.FAIL  # a package that silently dropped the tier it was asked for
    return report


def _reject(work: Path, request: EscalationRequest, provenance: Provenance, reason: str, started: float) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = request.rejected_root / f"eci{request.target}-{stamp}-{secrets.token_hex(3)}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    if work.exists():
        os.replace(work, folder)
    else:
        folder.mkdir()
    provenance.duration_s = round(time.monotonic() - started, 3)
    provenance.write(folder)
    (folder / "REJECTED.json").write_text(json.dumps({"reason": reason, "target_eci": request.target},
                                                     indent=2) + "\n")
    return folder


def copy_package(root: Path, dest: Path) -> None:
    """A plain copy of a package's files (no caches), for the run's record of what it trained on."""
    shutil.copytree(root, dest, ignore=shutil.ignore_patterns(*SKIPPED))
