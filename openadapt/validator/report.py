"""The validation report (RFC 008-shaped) and its compact rendering for the designer."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from openadapt.sandbox.base import SandboxInfo


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"  # the check itself could not run (e.g. the sandbox killed it)


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNUSABLE = "unusable"  # not an environment package at all
    ERROR = "error"  # the validator failed, not the package


TRACEBACK_CHARS = 1200
EXIT_CODES = {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.UNUSABLE: 2, Verdict.ERROR: 3}


class CheckResult(BaseModel):
    check_id: str
    level: str
    status: Status
    measured: dict[str, Any] = Field(default_factory=dict)
    evidence: list[str] = Field(default_factory=list)
    remediation: str | None = None
    traceback: str | None = Field(default=None, description="frames in the package's own files, trimmed")
    duration_s: float = 0.0


class ValidationReport(BaseModel):
    report_schema_version: str = "1"
    package: str
    package_name: str | None = None
    package_digest: str | None = None
    tiers: list[int] = Field(default_factory=list)
    verdict: Verdict
    checks: list[CheckResult] = Field(default_factory=list)
    sandbox: SandboxInfo
    timings: dict[str, float] = Field(default_factory=dict)
    candidate_output: str = Field(default="", description="what the package printed (capped)")
    openadapt_version: str = ""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def failing(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status in (Status.FAIL, Status.ERROR)]

    def check(self, check_id: str) -> CheckResult:
        for c in self.checks:
            if c.check_id == check_id:
                return c
        raise KeyError(check_id)

    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for c in self.checks:
            counts[c.status.value] = counts.get(c.status.value, 0) + 1
        return {"verdict": self.verdict.value, "counts": counts,
                "failing": [c.check_id for c in self.failing], "sandbox": self.sandbox.backend,
                "isolated": self.sandbox.isolated, "digest": self.package_digest}

    def designer_feedback(self, max_chars: int = 6000) -> str:
        """What an LLM needs to fix the package: each failing check, its evidence, the trimmed traceback
        and the remediation; passing and skipped checks are only counted."""
        if self.verdict == Verdict.PASS:
            return "All checks passed."
        lines = [f"Validation {self.verdict.value}: {len(self.failing)} failing check(s)."]
        for c in self.failing:
            lines.append(f"\n## {c.check_id} ({c.status.value})")
            lines.extend(f"- {e[:300]}" for e in c.evidence[:6])
            if c.remediation:
                lines.append(f"Fix: {c.remediation}")
            if c.traceback:  # the end of a traceback holds the exception and the offending frame
                lines.append("Traceback (package frames):\n" + c.traceback[-TRACEBACK_CHARS:])
        skipped = [c.check_id for c in self.checks if c.status == Status.SKIP]
        if skipped:
            lines.append(f"\n({len(skipped)} check(s) skipped because a check they depend on failed.)")
        text = "\n".join(lines)
        if len(text) > max_chars:
            text = text[: max_chars - 40].rstrip() + "\n... [feedback truncated]"
        return text
