"""Escalation: produce the next, harder tier of a package and have the validator certify it.

Family packages (and any package when no LLM is configured) already implement all five tiers: escalating
means certifying the package's own tier `target` again, in the sandbox, with every check, the tier-separation
check (a shallow heuristic may not find the harder tier easier) and the oracle (it must still solve) included.
With an LLM endpoint, a package with custom mechanics is rewritten from the escalation prompt and repaired
from the validator's feedback, through the same design loop as `generate`.

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
from openadapt.designer import prompting
from openadapt.designer.base import Candidate, DesignerInfo
from openadapt.designer.custom import CustomDesigner
from openadapt.designer.llm import LLMClient, LLMConfig
from openadapt.designer.loop import run_design
from openadapt.designer.provenance import Provenance
from openadapt.envpkg.manifest import parse_manifest
from openadapt.envpkg.render import content_digest, template_versions
from openadapt.kit.eci import Tier
from openadapt.validator import ValidationReport, Validator, Verdict

PACKAGE_DIR = "package"
SKIPPED = ("__pycache__", "provenance.json")


class EscalationRequest(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    package: Path = Field(description="the package now being trained on")
    task: str = Field(description="what the environment is for (the original prompt, or the package's task)")
    current: Tier
    target: Tier
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


class Recertify:
    """The package as it is: its target tier is certified again (no designer rewrites anything)."""

    deterministic = True

    def __init__(self, files: dict[str, str], info: DesignerInfo):
        self.files = files
        self.info = info

    def design(self) -> Candidate:
        return Candidate(files=self.files)

    def repair(self, previous: Candidate, feedback: str, attempt: int) -> Candidate:
        return previous


class EscalatingDesigner(CustomDesigner):
    """The custom-mechanics designer, asked first to make the target tier harder."""

    def __init__(self, client, name: str, request: EscalationRequest, files: dict[str, str]):
        super().__init__(client, name, request.task, prompting)
        self.request = request
        self._written = {p: t for p, t in files.items() if p.startswith("custom/") or p == "README.md"}

    def design(self) -> Candidate:
        r = self.request
        messages = prompting.escalation_messages(self.name, r.task, self._written, r.current, r.target, r.solve_rate)
        return self._ask(messages, merge=True)


def escalate(request: EscalationRequest, validator: Validator) -> EscalationResult:
    manifest = parse_manifest(request.package)
    name, section = manifest.name, manifest.openadapt
    current = package_files(request.package)
    rewrite = request.llm is not None and section.mechanics is not None
    if rewrite:
        designer = EscalatingDesigner(LLMClient(request.llm), name, request, current)
    else:
        designer = Recertify(current, DesignerInfo(backend="recertify", family=section.family))
    provenance = Provenance(openadapt_version=__version__, name=name,
                            task=f"{request.task} [escalation: ECI {request.current} -> {request.target}]",
                            designer=designer.info, template_versions=template_versions(),
                            created_at=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat())
    started = time.monotonic()
    work = request.dest.with_name(f".{request.dest.name}.work-{os.getpid()}-{secrets.token_hex(3)}")
    tiers = list(range(1, request.target + 1))
    try:
        if request.target not in section.eci_tiers and not rewrite:
            result = None
            reason = (f"{name} declares ECI {section.eci_tiers}, not {request.target}; only an LLM designer can "
                      "write a new tier (configure an endpoint: OPENADAPT_BASE_URL, OPENADAPT_MODEL)")
        else:
            result = run_design(designer, validator, name=PACKAGE_DIR, work=work,
                                max_attempts=request.max_attempts if rewrite else 1, attempts=provenance.attempts,
                                tiers=tiers, certify=lambda report: _certify(report, request.target))
            reason = result.reason
        if result is not None and result.ok:
            files = package_files(result.stage)
            provenance.validation = result.report.summary()
            provenance.validated_digest = provenance.content_digest = content_digest(files)
            provenance.duration_s = round(time.monotonic() - started, 3)
            provenance.write(result.stage.parent)
            os.replace(result.stage.parent, request.dest)  # atomic: the version appears whole or not at all
            shutil.rmtree(work, ignore_errors=True)  # earlier attempts live on in provenance.json
            return EscalationResult(ok=True, package=request.dest / PACKAGE_DIR, provenance=provenance)
    except BaseException:
        _reject(work, request, provenance, "stopped while escalating", started)
        raise
    failing = provenance.attempts[-1].failing_checks if provenance.attempts else []
    rejected = _reject(work, request, provenance, reason or "not certified", started)
    return EscalationResult(ok=False, reason=reason, rejected_dir=rejected, failing_checks=failing,
                            provenance=provenance)


def _certify(report: ValidationReport, target: int) -> ValidationReport:
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
