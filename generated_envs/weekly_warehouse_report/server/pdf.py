"""The report PDF: the lines a report prints, rendered with fpdf2 at finalize_pdf, read back with pypdf.

The grader checks the text pypdf extracts from the very bytes that were generated (and served for download),
not the draft they came from: a PDF that was not regenerated after an edit prints the old values.
"""

from __future__ import annotations

import datetime as dt
import io

from fpdf import FPDF
from pypdf import PdfReader

try:
    from .catalogue import METRIC_FIELDS, PDF_LABELS
except ImportError:  # standalone `uvicorn server.app:app`
    from server.catalogue import METRIC_FIELDS, PDF_LABELS

SECTION_HEADINGS = ("Summary metrics", "Key performance indicators")
_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)  # fixed creation date: same draft, same bytes


def report_lines(values: dict[str, str], rows: list[tuple[str, str]]) -> list[str]:
    """The report as printed: title, labelled header and metric lines, numbered KPI rows (their order shows)."""
    lines = [values.get("title", "")]
    lines += [f"{PDF_LABELS[f]}: {values.get(f, '')}" for f in ("customer_name", "report_date")]
    lines.append(SECTION_HEADINGS[0])
    lines += [f"{PDF_LABELS[f]}: {values.get(f, '')}" for f in METRIC_FIELDS]
    lines.append(SECTION_HEADINGS[1])
    lines += [f"{i}. {label}: {value}" for i, (label, value) in enumerate(rows, 1)]
    return lines


def _printable(text: str) -> str:
    """The core PDF fonts are latin-1: anything else prints as '?' (and so will not match the expected text)."""
    return text.encode("latin-1", "replace").decode("latin-1")


def render(lines: list[str]) -> bytes:
    pdf = FPDF(format="A4")
    pdf.set_creation_date(_EPOCH)
    pdf.set_title(_printable(lines[0]) or "Daily report")
    pdf.set_author("openadapt weekly_warehouse_report")
    pdf.add_page()
    for index, line in enumerate(lines):
        heading = index == 0 or line in SECTION_HEADINGS
        pdf.set_font("Helvetica", style="B" if heading else "", size=16 if index == 0 else 11)
        pdf.cell(0, 9 if heading else 7, _printable(line), new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def extract_lines(data: bytes) -> list[str]:
    """The text lines pypdf reads from a PDF, whitespace-normalised."""
    reader = PdfReader(io.BytesIO(data))
    text = "\n".join(page.extract_text() or "" for page in reader.pages)
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]
