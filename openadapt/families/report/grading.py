"""The deterministic graders of the three tasks (each a score in [0, 1]) and their feedback lines.

- header: the share of the three header fields that match exactly.
- summary: 0.35 x header + 0.65 x the share of the summary metrics that match.
- full: 0.35 x the summary score + 0.20 x KPI rows (right row at the right position; extra rows count against)
  + 0.20 x the PDF (expected lines found in the text pypdf extracts; halved when the draft changed after it was
  generated) + 0.25 x delivery (the designated recipient received the current PDF; half for an outdated one).

The same checks drive the per-step progress credit, and `check_report` shows their feedback lines: that is the
only place a subject's hidden house style (ECI 4+) is ever put into words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from openadapt.families.report.domain import ReportDomain
from openadapt.families.report.formats import Formats
from openadapt.families.report.mail import MailApi
from openadapt.families.report.pdf import Layout
from openadapt.families.report.world import Episode

PARTIAL = 0.25  # progress credit for a value that is stored but wrong, relative to a right one
SUMMARY_WEIGHTS = {"header": 0.35, "metrics": 0.65}
FULL_WEIGHTS = {"summary": 0.35, "kpi_rows": 0.20, "pdf": 0.20, "delivery": 0.25}
PENALTY_EACH = 0.1
PENALTY_CAP = 0.5
_NUMBERED = re.compile(r"^\d+\. ")


@dataclass
class PdfState:
    version: int = 0  # 0: never finalised
    lines: list[str] = field(default_factory=list)  # text pypdf extracted from the latest PDF
    current: bool = False  # the draft has not changed since


@dataclass
class Grade:
    score: float
    parts: dict[str, float]
    lines: list[str]


class Grader:
    """The checks of one domain's reports."""

    def __init__(self, domain: ReportDomain, formats: Formats, layout: Layout):
        h = domain.header
        self.formats, self.layout = formats, layout
        self.header = domain.header_fields
        self.metrics = domain.metric_fields
        self.kinds = {h.title_field: "text", h.subject_field: "name", h.date_field: "date",
                      **{m.field: m.kind for m in domain.metrics}}

    def check_value(self, ep: Episode, kind: str, expected: str, stored: str | None) -> tuple[str, str]:
        """(status, note): ok, missing, format (the right value written the wrong way) or wrong."""
        if stored is None:
            return "missing", "missing"
        if stored.strip() == expected:
            return "ok", "ok"
        if self.formats.same_value(kind, stored, expected):
            return "format", f"right value, wrong format: {self.formats.rule(kind, ep.style)}"
        return "wrong", "wrong value"

    def field_status(self, ep: Episode, name: str, stored: str | None) -> tuple[str, str]:
        return self.check_value(ep, self.kinds[name], ep.expected[name], stored)

    def row_status(self, ep: Episode, index: int, row: tuple[str, str] | None) -> tuple[str, str]:
        if row is None:
            return "missing", "missing"
        want = ep.rows[index]
        if " ".join(row[0].split()).casefold() != want.label.casefold():
            return "wrong", "wrong KPI for this position"
        if row[0].strip() != want.label:
            return "format", "right KPI, but write its label exactly as in report_kpis"
        return self.check_value(ep, want.kind, want.value, row[1])

    def grade(self, ep: Episode, draft: dict[str, str], rows: list[tuple[str, str]], pdf: PdfState,
              mail: MailApi) -> Grade:
        lines: list[str] = []
        field_ok = {}
        for name in ep.task.fields:
            status, note = self.field_status(ep, name, draft.get(name))
            field_ok[name] = status == "ok"
            lines.append(f"{name}: {note}")
        header = sum(field_ok[f] for f in self.header) / len(self.header)
        if ep.task.kind == "header":
            return _finish({"header": header}, {"header": 1.0}, lines)
        metrics = sum(field_ok[f] for f in self.metrics) / len(self.metrics)
        parts = {"header": header, "metrics": metrics}
        if not ep.task.kpi_rows:
            return _finish(parts, SUMMARY_WEIGHTS, lines)
        summary = sum(parts[k] * w for k, w in SUMMARY_WEIGHTS.items())
        parts = {"summary": summary, "kpi_rows": self._rows_score(ep, rows, lines),
                 "pdf": self._pdf_score(ep, pdf, lines), "delivery": _delivery_score(ep, pdf, mail, lines)}
        return _finish(parts, FULL_WEIGHTS, lines)

    def _rows_score(self, ep: Episode, rows: list[tuple[str, str]], lines: list[str]) -> float:
        hits = 0
        for i in range(len(ep.rows)):
            status, note = self.row_status(ep, i, rows[i] if i < len(rows) else None)
            hits += status == "ok"
            lines.append(f"kpi row {i + 1}: {note}")
        extra = max(0, len(rows) - len(ep.rows))
        if extra:
            lines.append(f"kpi rows: {extra} row(s) more than the report type defines")
        return hits / (len(ep.rows) + extra)

    def expected_pdf_lines(self, ep: Episode) -> list[str]:
        printed = self.layout.lines(ep.expected, [(r.label, r.value) for r in ep.rows])
        return [line for line in printed if line not in self.layout.headings]

    def _pdf_score(self, ep: Episode, pdf: PdfState, lines: list[str]) -> float:
        if pdf.version == 0:
            lines.append("pdf: not finalised")
            return 0.0
        expected = self.expected_pdf_lines(ep)
        found = set(pdf.lines)
        hits = sum(line in found for line in expected)
        extra = max(0, sum(bool(_NUMBERED.match(line)) for line in pdf.lines) - len(ep.rows))
        score = hits / (len(expected) + extra)
        note = "" if pdf.current else " (stale: the draft changed after finalize_pdf; finalize again)"
        lines.append(f"pdf: {hits} of {len(expected)} expected lines found in the PDF text{note}")
        return score if pdf.current else score / 2


def credit(status: str) -> float:
    """Progress credit of one checked item."""
    return 1.0 if status == "ok" else 0.0 if status == "missing" else PARTIAL


def _finish(parts: dict[str, float], weights: dict[str, float], lines: list[str]) -> Grade:
    score = round(sum(parts[k] * w for k, w in weights.items()), 6)
    lines.append(f"score: {score:.3f}")
    return Grade(score, {k: round(v, 6) for k, v in parts.items()}, lines)


def _delivery_score(ep: Episode, pdf: PdfState, mail: MailApi, lines: list[str]) -> float:
    version = mail.delivered.get(ep.designated)
    if version is None:
        note = "delivered, but not to the designated recipient" if mail.delivered else "not delivered"
        lines.append(f"delivery: {note}")
        return 0.0
    if version == pdf.version and pdf.current:
        lines.append("delivery: the designated recipient received the current PDF")
        return 1.0
    lines.append("delivery: the designated recipient received an outdated PDF")
    return 0.5


def penalty(ep: Episode, mail: MailApi, unknown_recipients: int) -> float:
    """Delivery misconduct: retrying an address that failed permanently, inventing an address, or sending the
    subject's report to anyone but the designated recipient."""
    misdirected = sum(1 for address in mail.delivered if address != ep.designated)
    return -min(PENALTY_CAP, PENALTY_EACH * (mail.loops + unknown_recipients + misdirected))
