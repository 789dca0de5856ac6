"""How results look: tables for anything structured (never a raw dict), and progress that is a live line on a
terminal and plain lines in a log."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from rich.table import Table

from openadapt.cli.shell import err, out

COUNT_WORDS = {"pass": "passed", "fail": "failed", "error": "errored", "skip": "skipped"}


def kv_table(title: str | None, rows: Iterable[tuple[str, Any]]) -> Table:
    """A two-column table: a label and its value."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, value if isinstance(value, str) else describe(value))
    return table


def grid(title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]], *,
         right: Iterable[str] = ()) -> Table:
    """A table with a header; cells that are not text are described in words."""
    aligned = set(right)
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="right" if column in aligned else "left")
    for row in rows:
        table.add_row(*(cell if isinstance(cell, str) else describe(cell) for cell in row))
    return table


def describe(value: Any) -> str:
    """A value in words: mappings as `key value` pairs, lists joined, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {describe(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list | tuple):
        return ", ".join(describe(v) for v in value) or "-"
    return str(value)


def counts(found: Mapping[str, int]) -> str:
    """Check counts in words: `25 passed, 2 skipped`."""
    parts = [f"{n} {COUNT_WORDS.get(status, status)}" for status, n in found.items() if n]
    return ", ".join(parts) or "no checks"


def print_json(data: Any) -> None:
    text = data.model_dump_json(indent=2) if hasattr(data, "model_dump_json") else json.dumps(
        data, indent=2, sort_keys=True, default=str)
    sys.stdout.write(text + "\n")


def show(*renderables: Any) -> None:
    for renderable in renderables:
        out.print(renderable)


class Progress:
    """Progress on stderr: on a terminal, a spinner line showing the latest step above the lines already
    printed; elsewhere (a log, CI), plain lines only. Never on stdout, so a command's --json output stays whole."""

    def __init__(self, first: str = "starting"):
        self.live = err.is_terminal
        self.first = first
        self._status: Any = None

    def __enter__(self) -> Progress:
        if self.live:
            self._status = err.status(self.first, spinner="dots")
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)

    def update(self, text: str) -> None:
        """The spinner's text (terminal only: a log gets the lines, not every update)."""
        if self._status is not None:
            self._status.update(text)

    def line(self, text: str) -> None:
        """A line that stays, on a terminal and in a log."""
        err.print(text, markup=False, soft_wrap=True)


def validation_text(summary: Mapping[str, Any]) -> str:
    """A validation summary (`ValidationReport.summary()`) in words."""
    if not summary:
        return "not validated"
    isolation = "isolated" if summary.get("isolated") else "NOT isolated"
    failing = summary.get("failing") or []
    text = f"{summary.get('verdict', '?')}: {counts(summary.get('counts') or {})} in {summary.get('sandbox', '?')} "
    return text + f"({isolation})" + (f"; failing: {', '.join(failing)}" if failing else "")
