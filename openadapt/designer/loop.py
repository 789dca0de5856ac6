"""The one design loop, shared by `generate` and the curriculum's escalation.

    propose (designer) -> stage -> validate in the sandbox -> feedback -> repair -> ... -> certified or out of
    attempts

The loop owns no publishing: it returns the certified stage folder (or none) and records every attempt; the
caller moves the package where it belongs and keeps failed attempts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from openadapt.designer.base import Candidate, Designer
from openadapt.designer.deadline import NO_DEADLINE, Deadline
from openadapt.designer.provenance import AttemptRecord
from openadapt.envpkg.render import write_files
from openadapt.validator import ValidationReport, Verdict

Progress = Callable[[str, int, str], None]  # (phase, attempt, detail)
DRAFT_FILE = "draft.yaml"  # an unusable attempt's draft, beside where its package would have been staged


class LoopResult(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    ok: bool
    stage: Path | None = None  # the certified package folder
    candidate: Candidate | None = None
    report: ValidationReport | None = None
    reason: str | None = None


def unusable_feedback(candidate: Candidate) -> str:
    return "The reply could not be used:\n" + "\n".join(f"- {p}" for p in candidate.problems)


def run_design(designer: Designer, validator: Any, *, name: str, work: Path, max_attempts: int,
               attempts: list[AttemptRecord], tiers: list[int] | None = None,
               certify: Callable[[ValidationReport], ValidationReport] | None = None,
               progress: Progress | None = None, deadline: Deadline = NO_DEADLINE) -> LoopResult:
    """Run up to `max_attempts` attempts, appending one `AttemptRecord` each to `attempts` as it goes (so a
    caller interrupted mid-loop still has every finished attempt). No attempt starts after `deadline` (the
    designer itself stops asking its model then)."""
    report = progress or (lambda phase, attempt, detail: None)
    previous: Candidate | None = None
    feedback = ""
    for attempt in range(1, max_attempts + 1):
        if attempt > 1 and deadline.passed:
            return LoopResult(ok=False, candidate=previous, reason=failure_reason(attempts, deadline))
        record = AttemptRecord(attempt=attempt)
        attempts.append(record)
        report("designing" if attempt == 1 else "repairing", attempt, designer.info.backend)
        started = time.monotonic()
        candidate = designer.design() if previous is None else designer.repair(previous, feedback, attempt)
        record.design_s = round(time.monotonic() - started, 3)
        record.usage, record.retries = candidate.usage, candidate.retries
        record.parse_problems = list(candidate.problems)
        record.notes = dict(candidate.notes)
        previous = candidate
        last = attempt == max_attempts or designer.deterministic or deadline.passed
        if not candidate.usable:
            if candidate.draft:
                write_files({DRAFT_FILE: candidate.draft}, work / f"attempt-{attempt}")
            feedback = unusable_feedback(candidate)
            record.feedback_sent = None if last else feedback
            if last:
                break
            continue
        stage = work / f"attempt-{attempt}" / name
        write_files(candidate.files, stage)
        report("validating", attempt, str(stage))
        started = time.monotonic()
        result = validator.validate(stage, tiers=tiers)
        if certify is not None:
            result = certify(result)
        record.note_validation(result, time.monotonic() - started, stage.parent)
        if result.verdict == Verdict.PASS:
            return LoopResult(ok=True, stage=stage, candidate=candidate, report=result)
        feedback = result.designer_feedback()
        record.feedback_sent = None if last else feedback
        if last:
            return LoopResult(ok=False, candidate=candidate, report=result, reason=failure_reason(attempts, deadline))
    return LoopResult(ok=False, candidate=previous, reason=failure_reason(attempts, deadline))


def failure_reason(attempts: list[AttemptRecord], deadline: Deadline = NO_DEADLINE) -> str:
    if not attempts:
        return "no attempt was made"
    last = attempts[-1]
    stopped = f"{deadline} was reached; " if deadline.passed else ""
    if last.failing_checks:
        return f"{stopped}validation failed after {len(attempts)} attempt(s): {', '.join(last.failing_checks)}"
    return f"{stopped}no usable design after {len(attempts)} attempt(s): {'; '.join(last.parse_problems)[:300]}"
