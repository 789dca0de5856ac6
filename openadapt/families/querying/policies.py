"""Reference policies of the querying family: the privileged oracle and a shallow heuristic that trusts the
documentation (the baseline a trained agent must beat). Both read the domain through the environment."""

from __future__ import annotations

import difflib
import re
from typing import Any

from openadapt.families.domain import template_pattern
from openadapt.families.querying.database import RENAMED, adapter_sql, key_column, render_sql
from openadapt.families.querying.domain import QueryingDomain, Question
from openadapt.kit import Policy

_COLUMN_LINE = re.compile(r"^  - ([a-z][a-z0-9_]*) [A-Z]+")


class QueryingOracle(Policy):
    """Knows where the drift put everything, and walks the shortest honest path: list the tables when a stale
    copy of one it needs exists, describe every live table its query reads (where the hidden constraints are
    documented), then submit the reference query rewritten for the live schema."""

    name = "oracle"
    privileged = True

    def act(self, observation: Any) -> Any:
        env, case = self.env, self.env.oracle_view()
        make = env.action_type
        plan = [make(tool="list_tables")] if case.needs_listing else []
        plan += [make(tool="describe_table", table=t) for t in case.oracle_tables]
        done = observation.metadata.get("step", 0)
        if done < len(plan):
            return plan[done]
        return make(tool="submit_answer", sql=case.oracle_sql)


def match_question(domain: QueryingDomain, text: str) -> tuple[Question, dict[str, str]] | None:
    """The question template a question's text was filled from, and its slot values."""
    for question in domain.questions:
        slots = dict.fromkeys((s.name for s in question.slots), ".+?")
        found = template_pattern(question.text, capture=slots, flags=re.DOTALL).fullmatch(text)
        if found:
            return question, found.groupdict()
    return None


def described_columns(schema: list[str], table: str) -> list[tuple[str, str]] | None:
    """(column, its line) for a table described in `schema`; None when it has not been described."""
    header = f"TABLE {table} ("
    lines, inside = [], False
    for line in schema:
        if line.startswith("TABLE "):
            inside = line.startswith(header)
            if inside:
                lines = []
            continue
        if inside and (m := _COLUMN_LINE.match(line)):
            lines.append((m.group(1), line))
    return lines if any(line.startswith(header) for line in schema) else None


class DocumentedSchemaHeuristic(Policy):
    """What a shallow agent does: recognise the question, write the reference query over the documented schema,
    and map each documented name onto the live database by what the documentation says (a name that still
    exists is taken at face value; a missing one is looked up by its '(renamed from ...)' note, else by the
    closest spelling). It describes the tables it uses, but never reads what the comments say about units,
    deletions, moves or staleness, and never checks the data."""

    name = "heuristic"

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        self.domain: QueryingDomain = env.domain
        found = match_question(self.domain, observation.question)
        self.question, values = found if found else (self.domain.questions[0], {})
        values = {s.name: values.get(s.name, "?") for s in self.question.slots}
        self.reference = render_sql(self.domain, self.question, values)
        self.read = env.question_reads()[self.question.id]
        self.submitted = False

    def _live_table(self, observation: Any, table: str, claimed: set[str]) -> str | None:
        if table in observation.tables:
            return table
        if not observation.catalog:
            return None
        note = RENAMED.format(old=table)
        for line in observation.catalog:
            if note in line:
                return line.split(" ", 1)[0]
        free = [t for t in observation.tables if t not in claimed] or observation.tables
        return difflib.get_close_matches(table, free, n=1, cutoff=0.0)[0]

    def act(self, observation: Any) -> Any:
        make = self.env.action_type
        if self.submitted and observation.error:
            return make(tool="submit_answer", value="0")  # its query does not run: give up with a guess
        names: dict[str, str | None] = {}
        for table in self.read:
            names[table] = self._live_table(observation, table, {n for n in names.values() if n})
        if None in names.values():
            return make(tool="list_tables")
        for live in names.values():
            if described_columns(observation.described, live) is None:
                return make(tool="describe_table", table=live)
        sources = {}
        for table, live in names.items():
            columns = described_columns(observation.described, live) or []
            present = [c for c, _ in columns]
            exprs, identity = [], live == table
            need = [key_column(self.domain.table(table)).name, *self.read[table]]
            for column in dict.fromkeys(need):
                mapped = self._live_column(column, columns, present)
                identity = identity and mapped == column
                exprs.append(f"{mapped} AS {column}")
            if not identity:
                sources[table] = f"SELECT {', '.join(exprs)} FROM main.{live}"
        self.submitted = True
        return make(tool="submit_answer", sql=adapter_sql(self.reference, sources))

    @staticmethod
    def _live_column(column: str, columns: list[tuple[str, str]], present: list[str]) -> str:
        if column in present:
            return column
        note = RENAMED.format(old=column)
        for name, line in columns:
            if note in line:
                return name
        guess = difflib.get_close_matches(column, present, n=1, cutoff=0.0)
        return guess[0] if guess else column
