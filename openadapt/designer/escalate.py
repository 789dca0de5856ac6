"""The designer's side of an escalation: with an LLM endpoint, a package with custom mechanics is rewritten from
the escalation prompt and repaired from the validator's feedback, through the same design loop as `generate`.
Family packages (and everything when no LLM is configured) are re-certified at the target tier by the
curriculum's `Recertifier`: their engines already implement all five tiers."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from openadapt import __version__
from openadapt.curriculum.escalation import (
    PACKAGE_DIR,
    SKIPPED,
    EscalationRequest,
    EscalationResult,
    Recertifier,
    certify,
    reject,
)
from openadapt.designer import prompting
from openadapt.designer.base import Candidate
from openadapt.designer.custom import CustomDesigner
from openadapt.designer.loop import run_design
from openadapt.designer.provenance import Provenance
from openadapt.envpkg.manifest import parse_manifest
from openadapt.envpkg.render import content_digest, template_versions
from openadapt.llm.endpoint import LLMClient, LLMConfig


def package_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*"))
            if p.is_file() and not any(part in SKIPPED for part in p.relative_to(root).parts)}


class EscalatingDesigner(CustomDesigner):
    """The custom-mechanics designer, asked first to make the target tier harder."""

    def __init__(self, client: Any, name: str, request: EscalationRequest, files: dict[str, str]):
        super().__init__(client, name, request.task, prompting)
        self.request = request
        self._written = {p: t for p, t in files.items() if p.startswith("custom/") or p == "README.md"}

    def design(self) -> Candidate:
        r = self.request
        messages = prompting.escalation_messages(self.name, r.task, self._written, r.current, r.target, r.solve_rate)
        return self._ask(messages, merge=True)


class DesignerEscalator:
    """An `Escalator` for the curriculum: LLM rewrites for custom mechanics, re-certification otherwise."""

    def __init__(self, llm: LLMConfig | None):
        self.llm = llm

    def escalate(self, request: EscalationRequest, validator: Any) -> EscalationResult:
        manifest = parse_manifest(request.package)
        section = manifest.openadapt
        if self.llm is None or section.mechanics is None or section.format_version == 1:
            return Recertifier().escalate(request, validator)  # families (and v1 packages) have their tiers
        return self._rewrite(request, validator, manifest.name)

    def _rewrite(self, request: EscalationRequest, validator: Any, name: str) -> EscalationResult:
        designer = EscalatingDesigner(LLMClient(self.llm), name, request, package_files(request.package))
        provenance = Provenance(openadapt_version=__version__, name=name,
                                task=f"{request.task} [escalation: ECI {request.current} -> {request.target}]",
                                designer=designer.info, template_versions=template_versions(),
                                created_at=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat())
        started = time.monotonic()
        work = request.dest.with_name(f".{request.dest.name}.work-{os.getpid()}-{secrets.token_hex(3)}")
        try:
            result = run_design(designer, validator, name=PACKAGE_DIR, work=work, max_attempts=request.max_attempts,
                                attempts=provenance.attempts, tiers=list(range(1, request.target + 1)),
                                certify=lambda report: certify(report, request.target))
        except BaseException:
            provenance.duration_s = round(time.monotonic() - started, 3)
            work.mkdir(parents=True, exist_ok=True)
            provenance.write(work)
            reject(request, "stopped while escalating", work)
            raise
        provenance.duration_s = round(time.monotonic() - started, 3)
        if result.ok:
            provenance.validation = result.report.summary()
            provenance.validated_digest = provenance.content_digest = content_digest(package_files(result.stage))
            provenance.write(result.stage.parent)
            os.replace(result.stage.parent, request.dest)  # atomic: the version appears whole or not at all
            shutil.rmtree(work, ignore_errors=True)  # earlier attempts live on in provenance.json
            return EscalationResult(ok=True, package=request.dest / PACKAGE_DIR, validation=provenance.validation)
        work.mkdir(parents=True, exist_ok=True)
        provenance.write(work)
        failing = provenance.attempts[-1].failing_checks if provenance.attempts else []
        reason = result.reason or "not certified"
        return EscalationResult(ok=False, reason=reason, failing_checks=failing,
                                rejected_dir=reject(request, reason, work))
