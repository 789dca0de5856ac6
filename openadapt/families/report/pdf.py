"""The report PDF: the lines a report prints, rendered with fpdf2 at finalize_pdf, read back with pypdf.

The grader checks the text pypdf extracts from the very bytes that were generated (and served for download),
not the draft they came from: a PDF that was not regenerated after an edit prints the old values.
"""

from __future__ import annotations

import datetime as dt
import io

from fpdf import FPDF
from pypdf import PdfReader

from openadapt.families.report.domain import ReportDomain

_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)  # fixed creation date: same draft, same bytes


class Layout:
    """What a report of one domain prints, in order."""

    def __init__(self, domain: ReportDomain):
        h = domain.header
        self.title = h.title_field
        self.labelled = ((h.subject_field, h.subject_label), (h.date_field, h.date_label))
        self.metrics = tuple((m.field, m.label) for m in domain.metrics)
        self.headings = (domain.metrics_heading, domain.kpis_heading)

    def lines(self, values: dict[str, str], rows: list[tuple[str, str]]) -> list[str]:
        """Title, labelled header and metric lines, numbered KPI rows (their order shows)."""
        lines = [values.get(self.title, "")]
        lines += [f"{label}: {values.get(f, '')}" for f, label in self.labelled]
        lines.append(self.headings[0])
        lines += [f"{label}: {values.get(f, '')}" for f, label in self.metrics]
        lines.append(self.headings[1])
        lines += [f"{i}. {label}: {value}" for i, (label, value) in enumerate(rows, 1)]
        return lines


def _printable(text: str) -> str:
    """The core PDF fonts are latin-1: anything else prints as '?' (and so will not match the expected text)."""
    return text.encode("latin-1", "replace").decode("latin-1")


def render(lines: list[str], headings: tuple[str, ...]) -> bytes:
    pdf = FPDF(format="A4")
    pdf.set_creation_date(_EPOCH)
    pdf.set_title(_printable(lines[0]) or "Report")
    pdf.set_author("openadapt report family")
    pdf.add_page()
    for index, line in enumerate(lines):
        heading = index == 0 or line in headings
        pdf.set_font("Helvetica", style="B" if heading else "", size=16 if index == 0 else 11)
        pdf.cell(0, 9 if heading else 7, _printable(line), new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def extract_lines(data: bytes) -> list[str]:
    """The text lines pypdf reads from a PDF, whitespace-normalised."""
    reader = PdfReader(io.BytesIO(data))
    text = "\n".join(page.extract_text() or "" for page in reader.pages)
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]
