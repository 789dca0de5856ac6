"""Sandbox validator: runs a candidate package in a sandbox (docker, bwrap, or an explicitly unsafe process
mode) and checks it against the OpenEnv quality bar (RFC 008-style check ids), reporting in a form the designer
can act on (`ValidationReport.designer_feedback()`)."""

from openadapt.sandbox.base import SandboxUnavailable
from openadapt.validator.report import CheckResult, Status, ValidationReport, Verdict
from openadapt.validator.service import Validator, validate

__all__ = ["CheckResult", "SandboxUnavailable", "Status", "ValidationReport", "Validator", "Verdict", "validate"]
