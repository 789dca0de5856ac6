"""The querying engine: answer a business question with SQL against a live SQLite database whose schema has
drifted from its documentation; the answer is checked by executing it.

Each episode is generated from the domain by the seed: fresh rows from the tables' generators, one question with
its slots drawn from the data, and its reference answer (the question's SQL on the documented schema). The agent
queries a drifted copy (`database.plan_drift` / `build_live`): renamed tables and columns (noise), a data
dictionary with comments withheld or cut short and NULLs in optional fields (noise, drop), stale tables and
decoy columns beside the real ones, some wearing the documented name (distractors), and hidden constraints on
what the question reads, only visible by describing the table (hidden_constraints, depth): soft-deleted rows to
exclude, a column re-stored in another unit, columns moved to a side table. Nothing here knows what the tables
are: the domain says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

from openadapt.families.domain import fill
from openadapt.families.engine import FamilyEnvironment, per_domain
from openadapt.families.querying.database import (
    MAX_RESULT_ROWS,
    ORDER_SENSITIVE,
    LiveTable,
    Placement,
    adapter_sql,
    build_live,
    canonical_db,
    draw_slots,
    generate_rows,
    informative,
    live_db,
    norm_rows,
    oracle_sources,
    plan_drift,
    question_reads,
    render_sql,
    same_result,
    same_value,
    sandbox,
)
from openadapt.families.querying.domain import QueryingDomain, Question
from openadapt.kit import Outcome, QueryRejected, TierProfile

TOOLS = ("list_tables", "describe_table", "run_query", "submit_answer")
QUESTION_TRIES = 24
DRIFT_TRIES = 6
NULL_SHARE = 0.5  # share of the tier's noise rate at which optional values are NULL


@dataclass
class Case:
    """The privileged truth of one episode (what the oracle reads; never served)."""

    question: Question
    text: str
    reference: str  # the reference SQL, slots filled, on the documented schema
    gold: list[tuple]  # its result, normalised
    gold_cells: list[str]  # its result as SQLite printed it
    read: dict[str, list[str]]  # documented tables and columns the reference reads
    placement: Placement
    tables: dict[str, LiveTable]  # the live database, by live name
    oracle_sql: str  # the reference rewritten for the live database
    oracle_tables: list[str]  # live tables that query reads (an honest agent describes them)
    needs_listing: bool  # a stale copy of a table it reads exists: the catalogue tells them apart
    min_steps: int
    fallback: bool = False  # the drift could not be verified and was dropped (never expected)
    distractor_tables: set[str] = field(default_factory=set)
    decoy_columns: set[tuple[str, str]] = field(default_factory=set)


@dataclass
class Verdict:
    correctness: float = 0.0
    efficiency: float = 0.0
    grounding: float = 0.0
    penalty: float = 0.0
    solved: bool = False


class QueryingEnvironment(FamilyEnvironment):
    domain: ClassVar[QueryingDomain]
    REWARD = (
        ("correctness", 0.0, 0.60, "the answer's result matches the reference"),
        ("efficiency", 0.0, 0.20, "solved, with few steps beyond the honest path"),
        ("grounding", 0.0, 0.20,
         "share of the tables the answer reads that were inspected first (described or queried)"),
        ("penalty", -0.20, 0.0, "the answer reads a stale table or a decoy column"),
    )

    # ---- the domain, indexed once per class -----------------------------------------------------------
    @per_domain
    def question_reads(cls) -> dict[str, dict[str, list[str]]]:
        """What each question's reference query reads (public: it follows from the documented schema)."""
        return {q.id: question_reads(cls.domain, q) for q in cls.domain.questions}

    # ---- episode generation ---------------------------------------------------------------------------
    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        d = self.domain
        picked = None
        for _ in range(3):
            rows = generate_rows(d, rng, null_rate=tier.noise * NULL_SHARE)
            picked = self._pick_question(rows, rng)
            if picked is not None:
                break
        if picked is None:  # the domain checks make this unreachable in practice: take any answerable draw
            picked = self._pick_question(rows, rng, strict=False)
        question, text, reference, gold, cells = picked
        read = self.question_reads()[question.id]
        case = self._drift(rows, question, text, reference, gold, cells, read, rng, tier)
        self._case = case
        self._verdict = Verdict()
        if getattr(self, "_sql", None) is not None:
            self._sql.conn.close()  # the previous episode's database
        self._sql = sandbox(live_db(case.tables))
        self._catalog: list[str] = []
        self._schema: list[str] = []
        self._result: list[str] = []
        self._last_sql = ""
        self._described: set[str] = set()
        self._inspected: set[str] = set()
        self._shown: set[str] = set()

    def _pick_question(self, rows: dict[str, list[tuple]], rng: random.Random, strict: bool = True):
        d = self.domain
        conn = canonical_db(d, rows)
        gold_sql = sandbox(conn, max_rows=MAX_RESULT_ROWS + 1)
        reverse = None
        try:
            for _ in range(QUESTION_TRIES):
                question = rng.choice(d.questions)
                values = draw_slots(d, question, rows, rng)
                reference = render_sql(d, question, values)
                try:
                    result = gold_sql.run(reference)
                except QueryRejected:
                    continue
                gold = norm_rows(result)
                if result.truncated or (strict and not informative(gold)):
                    continue
                if strict and (question.ordered or ORDER_SENSITIVE.search(question.sql)):
                    if reverse is None:
                        reverse = sandbox(canonical_db(d, rows, reverse=True), max_rows=MAX_RESULT_ROWS + 1)
                    if not same_result(norm_rows(reverse.run(reference)), gold, question.ordered):
                        continue  # ties decide the answer: ask something else
                cells = [cell for row in result.rows for cell in row]
                return question, fill(question.text, **values), reference, gold, cells
            return None
        finally:
            conn.close()
            if reverse is not None:
                reverse.conn.close()

    def _drift(self, rows, question, text, reference, gold, cells, read, rng, tier) -> Case:
        """Plan the drift, build the live database, and check that the oracle's query still gives the reference
        answer and that each hidden constraint and each trap on what the question reads matters (else plan
        again, keeping the plan where most of them do)."""
        d, best, best_bites = self.domain, None, float("-inf")
        for attempt in range(DRIFT_TRIES + 1):
            fallback = attempt == DRIFT_TRIES
            if fallback and best is not None:
                break
            placement = Placement() if fallback else plan_drift(d, read, tier, rng)
            tables = build_live(d, rows, placement, rng, self.perturb)
            sources, used = oracle_sources(d, read, placement)
            oracle_sql = adapter_sql(reference, sources)
            traps = [("stale", t, None) for t, (_, wears) in placement.stale.items() if wears and t in read] + [
                ("decoy", t, c) for (t, c), (_, wears) in placement.decoys.items() if wears and c in read.get(t, ())]
            conn = live_db(tables)
            live = sandbox(conn, max_rows=MAX_RESULT_ROWS + 1)
            try:
                correct = same_result(norm_rows(live.run(oracle_sql)), gold, question.ordered)
                bites = [self._bites(live, reference, read, placement, h, gold, question.ordered)
                         for h in (*placement.hidden, *traps)]
            except QueryRejected:
                correct, bites = False, []
            finally:
                conn.close()
            if not correct or sum(bites) - len(bites) <= best_bites:
                continue
            best_bites = sum(bites) - len(bites)
            needs_listing = any(t in read for t in placement.stale)
            oracle_tables = list(dict.fromkeys(used))
            best = Case(
                question=question, text=text, reference=reference, gold=gold, gold_cells=cells, read=read,
                placement=placement, tables=tables, oracle_sql=oracle_sql, oracle_tables=oracle_tables,
                needs_listing=needs_listing, min_steps=needs_listing + len(oracle_tables) + 1, fallback=fallback,
                distractor_tables={t.name for t in tables.values() if t.stale},
                decoy_columns={(t.name, c) for t in tables.values() for c in t.decoys},
            )
            if all(bites):
                break
        return best

    def _bites(self, live, reference, read, placement, hidden, gold, ordered) -> bool:
        """Whether leaving this hidden constraint uncorrected (or falling for this trap) changes the answer."""
        if hidden[0] == "split":
            return True  # the moved column is simply not where the documentation says
        sources, _ = oracle_sources(self.domain, read, placement, skip=hidden)
        try:
            naive = norm_rows(live.run(adapter_sql(reference, sources)))
        except QueryRejected:
            return True
        return not same_result(naive, gold, ordered)

    # ---- stepping -------------------------------------------------------------------------------------
    def apply(self, action: Any) -> Outcome:
        tool = action.tool
        if tool is None:
            return Outcome(f"Say which tool to use: one of {', '.join(TOOLS)}.", error="missing_tool")
        if tool == "list_tables":
            self._catalog = [self._catalog_line(t) for t in sorted(self._case.tables)]
            return Outcome(f"{len(self._catalog)} tables listed with their descriptions.")
        if tool == "describe_table":
            return self._describe(action.table)
        if tool == "run_query":
            return self._query(action.sql)
        return self._submit(action)

    def _table(self, name: str | None) -> LiveTable | None:
        if not name:
            return None
        name = name.strip().lower()
        return self._case.tables.get(name)

    def _catalog_line(self, name: str) -> str:
        t = self._case.tables[name]
        return f"{name} ({len(t.rows)} rows): {t.comment or '(no description)'}"

    def _describe(self, name: str | None) -> Outcome:
        if not name or not name.strip():
            return Outcome("describe_table needs a table.", error="missing_table")
        table = self._table(name)
        if table is None:
            return Outcome(f"No table {name.strip()[:60]!r} in the database; tables: "
                           f"{', '.join(sorted(self._case.tables))}.", error="unknown_table")
        if table.name in self._described:
            return Outcome(f"{table.name} is already described above.")
        self._described.add(table.name)
        self._inspected.add(table.name)
        lines = [f"TABLE {self._catalog_line(table.name)}"]
        for col in table.columns:
            ref = f" REFERENCES {col.references}" if col.references else ""
            lines.append(f"  - {col.name} {col.sql_type}{ref}: {col.comment or '(no description)'}")
        if table.sample:
            lines.append(f"  sample rows ({len(table.sample)} of {len(table.rows)}):")
            lines.append("    " + " | ".join(c.name for c in table.columns))
            for i in table.sample:
                shown = ["NULL" if v is None else str(v) for v in table.rows[i]]
                self._shown.update(shown)
                lines.append("    " + " | ".join(shown))
        self._schema.extend(lines)
        return Outcome(f"{table.name}: {len(table.columns)} columns, {len(table.rows)} rows.")

    def _query(self, sql: str) -> Outcome:
        if not sql or not sql.strip():
            return Outcome("run_query needs sql.", error="missing_sql")
        try:
            result, reads = self._sql.run_recorded(sql)
        except QueryRejected as exc:
            return Outcome(f"Query failed: {exc.message}", error=exc.code)
        self._last_sql = sql.strip()
        self._result = result.lines()
        self._shown.update(cell for row in result.rows for cell in row)
        self._inspected.update(t for t, _ in reads if t in self._case.tables)
        more = " (more not shown)" if result.truncated else ""
        return Outcome(f"Query returned {len(result.rows)} row(s){more}.")

    def _submit(self, action: Any) -> Outcome:
        case, verdict = self._case, Verdict()
        if action.sql and action.sql.strip():
            try:
                result, reads = self._sql.run_recorded(action.sql, max_rows=MAX_RESULT_ROWS + 1)
            except QueryRejected as exc:
                return Outcome(f"Your answer query failed: {exc.message}", error=exc.code)
            verdict.solved = not result.truncated and same_result(norm_rows(result), case.gold,
                                                                  case.question.ordered)
            tables = list(dict.fromkeys(t for t, _ in reads if t in case.tables))
            cells = [cell for row in result.rows for cell in row]
            trapped = any(t in case.distractor_tables for t in tables) or any(
                (t, c) in case.decoy_columns for t, c in reads)
        elif action.value is not None and action.value.strip():
            verdict.solved = same_value(action.value, case.gold)
            tables, cells, trapped = [], [action.value.strip()], False
        else:
            return Outcome("submit_answer needs sql (or a value).", error="missing_answer")
        verdict.correctness = 0.60 * verdict.solved
        steps, budget = self._state.step_count, self._state.step_budget
        slack, wasted = budget - case.min_steps, max(0, steps - case.min_steps)
        pace = 1.0 if wasted == 0 else (max(0.0, 1.0 - wasted / slack) if slack > 0 else 0.0)
        verdict.efficiency = 0.20 * verdict.solved * pace
        if tables:
            verdict.grounding = 0.20 * sum(t in self._inspected for t in tables) / len(tables)
        else:  # a constant: grounded when every value of it was shown by a query or a description
            verdict.grounding = 0.20 * (bool(cells) and all(c in self._shown for c in cells))
        verdict.penalty = -0.20 * trapped
        self._verdict = verdict
        return Outcome("Answer submitted: " + ("its result matches." if verdict.solved else
                                               "its result does not match the expected one."),
                       terminal=True, solved=verdict.solved)

    # ---- views ----------------------------------------------------------------------------------------
    def observe(self) -> dict[str, Any]:
        return {
            "question": self._case.text,
            "tables": sorted(self._case.tables),
            "catalog": list(self._catalog),
            "described": list(self._schema),
            "result": list(self._result),
            "last_sql": self._last_sql,
        }

    def oracle_view(self) -> Case:
        return self._case

    def secret_values(self) -> list[str]:
        """What gives the answer away before the agent has found it: the query that answers on the live schema,
        and the answer's computed figures (those the database does not store as such, and long enough not to
        turn up by chance). Stored values, such as the name a 'which customer' question asks for, are data the
        agent must be able to see."""
        case = self._case
        stored = {str(v) for table in case.tables.values() for row in table.rows for v in row}
        figures = [cell for cell in case.gold_cells
                   if cell not in stored and cell not in case.text and "." in cell and len(cell) >= 4]
        return [case.oracle_sql, *figures]
