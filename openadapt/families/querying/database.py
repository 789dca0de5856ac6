"""The querying family's database machinery: data from the domain's generators, reference answers, schema drift,
the live (drifted) database, query adapters, and result comparison by execution.

Nothing here knows what the tables mean: every name, value, rule and text comes from the domain.

- `generate_rows`: canonical rows for every table, parents first, drawn from one `random.Random`.
- `question_reads`: which tables and columns a reference query reads (SQLite's authorizer reports them).
- `plan_drift` / `build_live`: where each documented table and column lives in the episode's live database
  (renamed, re-scaled, moved to a side table, soft-deleted rows added), the distractors planted beside them,
  and what the data dictionary still says about them.
- `adapter_sql`: a reference query rewritten for the live database with one CTE per documented table it reads
  (CTEs shadow tables of the same name), how the oracle answers and how the heuristic tries to.
- `same_result`: Spider/BIRD-style execution match: the same multiset of rows (the same sequence when the
  question asks for an order), columns in any order, numbers to 4 decimals.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from openadapt.families.domain import DomainProblem, fill
from openadapt.families.querying.domain import (
    MAX_QUESTION_TABLES,
    MAX_RESULT_COLUMNS,
    MAX_RESULT_ROWS,
    Column,
    QueryingDomain,
    Question,
    Slot,
    Table,
    drift_options,
)
from openadapt.kit.sqlsandbox import QueryRejected, QueryResult, ReadOnlySQL

SQL_TYPES = {"integer": "INTEGER", "real": "REAL", "text": "TEXT", "date": "DATE"}
MAX_SQL_CHARS = 6000
MAX_VM_STEPS = 500_000
RENAMED = "(renamed from {old})"
DELETED_SHARE = 0.3  # soft-deleted copies added, as a share of a table's rows
STALE_MISSING = 0.25  # rows a stale copy lacks
STALE_CHANGED = 0.4  # rows (or values) a stale copy or a stale decoy holds out of date
# Share of the distractors on what the question reads that wear the documented name, per distractor of the tier
# (3 distractors: half of them; 5: most of them).
TRAP_SHARE_PER_DISTRACTOR = 1 / 6
_NUM = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_STAR = re.compile(r"select\s+(distinct\s+)?\*|\b\w+\.\*|,\s*\*\s*(,|from\b)", re.IGNORECASE)
_COUNT_STAR = re.compile(r"count\s*\(\s*\*\s*\)", re.IGNORECASE)
ORDER_SENSITIVE = re.compile(r"\blimit\b|group_concat|string_agg|\boffset\b", re.IGNORECASE)


class RecordingSQL(ReadOnlySQL):
    """`ReadOnlySQL` that also records which (table, column) pairs each query reads: SQLite's authorizer reports
    every column a statement reads, through CTEs and subqueries down to the stored tables (an empty column for
    `COUNT(*)`)."""

    def __init__(self, conn: sqlite3.Connection, **limits: Any):
        self.reads: list[tuple[str, str]] = []
        super().__init__(conn, **limits)

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, db: str | None,
                   source: str | None) -> int:
        if action == sqlite3.SQLITE_READ and arg1 is not None:
            self.reads.append((arg1, arg2 or ""))
        return super()._authorize(action, arg1, arg2, db, source)

    def run_recorded(self, sql: str, max_rows: int | None = None) -> tuple[QueryResult, list[tuple[str, str]]]:
        self.reads = []
        saved = self.max_rows
        if max_rows is not None:
            self.max_rows = max_rows
        try:
            result = self.run(sql)
        finally:
            self.max_rows = saved
        return result, list(dict.fromkeys(self.reads))


def sandbox(conn: sqlite3.Connection, max_rows: int = 20) -> RecordingSQL:
    return RecordingSQL(conn, max_rows=max_rows, max_value_chars=80, max_sql_chars=MAX_SQL_CHARS,
                        max_vm_steps=MAX_VM_STEPS)


# ---- canonical data ------------------------------------------------------------------------------------------
def table_order(domain: QueryingDomain) -> list[Table]:
    """Tables parents first (a table after every table its ref columns point to), else in declaration order."""
    done: list[str] = []
    pending = list(domain.tables)
    while pending:
        for table in pending:
            if all(c.ref in done for c in table.columns if c.kind == "ref"):
                done.append(table.name)
                pending.remove(table)
                break
        else:  # a cycle (the domain checks refuse it): keep declaration order
            done.extend(t.name for t in pending)
            break
    return [domain.table(name) for name in done]


def key_column(table: Table) -> Column:
    return next(c for c in table.columns if c.kind == "key")


@lru_cache(maxsize=256)
def _span(start: str, end: str) -> tuple[dt.date, int]:
    first = dt.date.fromisoformat(start)
    return first, (dt.date.fromisoformat(end) - first).days


def _number(col: Column, value: float) -> float | int:
    return int(round(value)) if col.type == "integer" else round(value, col.decimals)


def draw_value(col: Column, rng: random.Random) -> Any:
    """One fresh value of a non-key column's generator."""
    if col.kind == "choice":
        return rng.choices(col.choices, weights=col.weights)[0] if col.weights else rng.choice(col.choices)
    if col.kind == "number":
        if col.type == "integer":
            return rng.randint(math.ceil(col.low), math.floor(col.high))
        return round(rng.uniform(col.low, col.high), col.decimals)
    if col.kind == "date":
        first, days = _span(col.start, col.end)
        return (first + dt.timedelta(days=rng.randint(0, days))).isoformat()
    raise ValueError(f"column kind {col.kind!r} has no free draw")


def _column_values(col: Column, n: int, rng: random.Random, sizes: dict[str, int]) -> list[Any]:
    if col.kind == "key":
        return list(range(1, n + 1))
    if col.kind == "ref":
        return [rng.randint(1, sizes[col.ref]) for _ in range(n)]
    if col.kind == "code":
        return [fill(col.pattern, n=f"{i:04d}") for i in range(1, n + 1)]
    if col.kind == "choice" and col.unique:
        return rng.sample(col.choices, n)
    if col.kind == "choice" and col.weights:
        return rng.choices(col.choices, weights=col.weights, k=n)
    return [draw_value(col, rng) for _ in range(n)]


def generate_rows(domain: QueryingDomain, rng: random.Random, null_rate: float = 0.0) -> dict[str, list[tuple]]:
    """Canonical rows of every table (documented column order), parents first."""
    rows: dict[str, list[tuple]] = {}
    sizes: dict[str, int] = {}
    for table in table_order(domain):
        n = rng.randint(table.min_rows, table.max_rows)
        columns = [_column_values(col, n, rng, sizes) for col in table.columns]
        for col, values in zip(table.columns, columns, strict=True):
            if col.nullable and null_rate > 0:
                for i in range(n):
                    if rng.random() < null_rate:
                        values[i] = None
        rows[table.name] = [tuple(values[i] for values in columns) for i in range(n)]
        sizes[table.name] = n
    return rows


def create_db(tables: list[tuple[str, list[tuple[str, str]], list[tuple]]]) -> sqlite3.Connection:
    """An in-memory database holding `tables` ((name, [(column, SQL type)], rows)); names are identifiers
    checked by the domain schema."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    for name, columns, rows in tables:
        conn.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in columns)})")
        if rows:
            conn.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(columns))})", rows)
    conn.commit()
    return conn


def canonical_db(domain: QueryingDomain, rows: dict[str, list[tuple]], reverse: bool = False) -> sqlite3.Connection:
    return create_db([(t.name, [(c.name, SQL_TYPES[c.type]) for c in t.columns],
                       list(reversed(rows[t.name])) if reverse else rows[t.name]) for t in domain.tables])


# ---- questions -------------------------------------------------------------------------------------------------
def slot_column(domain: QueryingDomain, slot: Slot) -> tuple[Table, int] | None:
    if slot.column is None or slot.table is None:
        return None
    t = domain.table(slot.table)
    return t, [c.name for c in t.columns].index(slot.column)


def slot_is_numeric(domain: QueryingDomain, slot: Slot) -> bool:
    found = slot_column(domain, slot)
    if found is None:
        return all(_NUM.match(v) for v in slot.values)
    table, index = found
    return table.columns[index].type in ("integer", "real") and slot.part == "full"


def _shown(value: Any, part: str) -> str:
    text = str(value)
    return text[:4] if part == "year" else text[:7] if part == "month" else text


def draw_slots(domain: QueryingDomain, question: Question, rows: dict[str, list[tuple]],
               rng: random.Random) -> dict[str, str]:
    values = {}
    for slot in question.slots:
        found = slot_column(domain, slot)
        if found is None:
            values[slot.name] = rng.choice(slot.values)
            continue
        table, index = found
        present = [r[index] for r in rows[table.name] if r[index] is not None]
        values[slot.name] = _shown(rng.choice(present), slot.part) if present else "?"
    return values


def literal(value: str, numeric: bool) -> str:
    return value if numeric and _NUM.match(value) else "'" + value.replace("'", "''") + "'"


def render_sql(domain: QueryingDomain, question: Question, values: dict[str, str]) -> str:
    return fill(question.sql, **{s.name: literal(values[s.name], slot_is_numeric(domain, s))
                                 for s in question.slots})


def dummy_values(domain: QueryingDomain, question: Question) -> dict[str, str]:
    return {s.name: ("1" if slot_is_numeric(domain, s) else "x") for s in question.slots}


def question_reads(domain: QueryingDomain, question: Question) -> dict[str, list[str]]:
    """Documented tables the reference query reads, each with the columns it reads (documented order)."""
    conn = canonical_db(domain, {t.name: [] for t in domain.tables})
    reads = sandbox(conn).run_recorded(render_sql(domain, question, dummy_values(domain, question)))[1]
    conn.close()
    out: dict[str, list[str]] = {}
    for table in domain.tables:
        touched = [c for t, c in reads if t == table.name]
        if touched:
            out[table.name] = [c.name for c in table.columns if c.name in touched]
    return out


# ---- results ---------------------------------------------------------------------------------------------------
def norm_cell(text: str) -> Any:
    if text == "NULL":
        return None
    if _NUM.match(text):
        value = round(float(text), 4)
        return 0.0 if value == 0 else value
    return text


def norm_rows(result: QueryResult) -> list[tuple]:
    return [tuple(norm_cell(v) for v in row) for row in result.rows]


def _sort_key(value: Any) -> tuple:
    return (0, 0.0, "") if value is None else (1, value, "") if isinstance(value, float) else (2, 0.0, str(value))


def same_result(pred: list[tuple], gold: list[tuple], ordered: bool) -> bool:
    """Execution match: the same rows (as a multiset, or as a sequence when `ordered`), columns in any order."""
    if len(pred) != len(gold):
        return False
    if not gold:
        return True
    width = len(gold[0])
    if any(len(row) != width for row in pred):
        return False

    def column(rows: list[tuple], k: int) -> list:
        return sorted((row[k] for row in rows), key=_sort_key)

    gold_cols = [column(gold, k) for k in range(width)]
    pred_cols = [column(pred, k) for k in range(width)]
    options = [[k for k in range(width) if pred_cols[k] == gold_cols[j]] for j in range(width)]
    target = gold if ordered else Counter(gold)

    def search(j: int, used: list[int]) -> bool:
        if j == width:
            permuted = [tuple(row[k] for k in used) for row in pred]
            return (permuted if ordered else Counter(permuted)) == target
        return any(search(j + 1, [*used, k]) for k in options[j] if k not in used)

    return search(0, [])


def same_value(value: str, gold: list[tuple]) -> bool:
    """A plain value answer against a one-cell reference: numbers within rounding, text case-insensitively."""
    if len(gold) != 1 or len(gold[0]) != 1 or gold[0][0] is None:
        return False
    expected, given = gold[0][0], value.strip().rstrip("%").replace(",", "")
    if isinstance(expected, float):
        if not _NUM.match(given):
            return False
        return abs(float(given) - expected) <= max(0.005, 1e-6 * abs(expected))
    return given.lower() == str(expected).strip().lower()


def informative(gold: list[tuple]) -> bool:
    """A reference answer worth asking for: some rows, and not only zeros and NULLs."""
    return bool(gold) and any(cell not in (None, 0.0) for row in gold for cell in row)


# ---- schema drift ----------------------------------------------------------------------------------------------
@dataclass
class Placement:
    """Where each documented table and column lives in one episode's live database, and what was planted."""

    tables: dict[str, str] = field(default_factory=dict)  # documented table -> live name
    columns: dict[tuple[str, str], str] = field(default_factory=dict)  # (table, column) -> live name
    units: dict[tuple[str, str], int] = field(default_factory=dict)  # (table, column) -> factor
    soft: list[str] = field(default_factory=list)  # tables with soft-deleted rows
    split: str | None = None  # the table whose split columns moved to its side table
    stale: dict[str, tuple[str, bool]] = field(default_factory=dict)  # table -> (copy's name, wears the documented)
    decoys: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)  # -> (decoy's name, wears it)
    hidden: list[tuple[str, str, str | None]] = field(default_factory=list)  # (kind, table, column) planted

    def table(self, name: str) -> str:
        return self.tables.get(name, name)

    def column(self, table: str, name: str) -> str:
        return self.columns.get((table, name), name)


def _chance(rng: random.Random, p: float) -> bool:
    return p > 0.0 and rng.random() < p


def plan_drift(domain: QueryingDomain, read: dict[str, list[str]], tier: Any, rng: random.Random) -> Placement:
    """The episode's drift, from the tier's knobs: renames (noise), hidden constraints on what the question reads
    (hidden_constraints; `depth` of them), distractors (`distractors` of them, the ones on what the question reads
    first; a share of those wear the documented name while the live one is renamed)."""
    pl = Placement()
    for table in domain.tables:
        if table.renames and _chance(rng, tier.noise):
            pl.tables[table.name] = rng.choice(table.renames)
        for col in table.columns:
            if col.renames and _chance(rng, tier.noise):
                pl.columns[(table.name, col.name)] = rng.choice(col.renames)
    options = drift_options(domain, read)
    if tier.hidden_constraints and tier.depth > 0:
        hidden = list(options["hidden"])
        rng.shuffle(hidden)
        for kind, table, column in hidden:
            if len(pl.hidden) >= tier.depth or (kind == "split" and pl.split is not None):
                continue
            if kind == "soft_delete":
                pl.soft.append(table)
            elif kind == "split":
                pl.split = table
            else:
                unit = next(c for c in domain.table(table).columns if c.name == column).unit
                pl.units[(table, column)] = unit.factor
                pl.columns[(table, column)] = unit.name
            pl.hidden.append((kind, table, column))
    if tier.distractors > 0:
        used = list(options["distractors"])
        rng.shuffle(used)
        others = [("stale", t.name) for t in domain.tables if t.stale] + [
            ("decoy", t.name, c.name) for t in domain.tables for c in t.columns if c.decoy]
        others = [o for o in others if o not in used]
        rng.shuffle(others)
        trap_rate = min(1.0, tier.distractors * TRAP_SHARE_PER_DISTRACTOR)
        for item in [*used, *others][: tier.distractors]:
            trap = item in used and _chance(rng, trap_rate)
            if item[0] == "stale":
                table = domain.table(item[1])
                if trap and table.name not in pl.tables and table.renames:
                    pl.tables[table.name] = rng.choice(table.renames)
                trap = trap and table.name in pl.tables
                pl.stale[table.name] = (table.name if trap else rng.choice(table.stale.names), trap)
            else:
                _, table, column = item
                col = next(c for c in domain.table(table).columns if c.name == column)
                if trap and (table, column) not in pl.columns and col.renames:
                    pl.columns[(table, column)] = rng.choice(col.renames)
                trap = trap and (table, column) in pl.columns
                pl.decoys[(table, column)] = (column if trap else col.decoy.name, trap)
    return pl


@dataclass
class LiveColumn:
    name: str
    sql_type: str
    comment: str | None  # what the data dictionary says (None: withheld)
    references: str | None = None  # 'table(column)' when the foreign key is documented
    decoy: bool = False


@dataclass
class LiveTable:
    name: str
    comment: str | None
    columns: list[LiveColumn]
    rows: list[tuple]
    sample: list[int]  # indices of the rows a description shows
    stale: bool = False  # a distractor table
    decoys: list[str] = field(default_factory=list)  # names of its decoy columns


class Docs:
    """The data dictionary as this tier shows it: comments withheld (drop) or cut short (noise), except the
    protected notes a careful agent needs."""

    def __init__(self, perturb: Any):
        self.p = perturb

    def text(self, *parts: tuple[str | None, bool]) -> str | None:
        """Join (text, protected) parts; unprotected ones may be withheld or truncated."""
        kept = []
        for text, protected in parts:
            if not text:
                continue
            if not protected:
                if self.p.chance(self.p.tier.drop):
                    continue
                text = self.p.truncate(text, keep_words=3)
            kept.append(text)
        return " ".join(kept) or None


def _scaled(col: Column, value: Any, factor: float) -> Any:
    if value is None:
        return None
    if col.type == "integer" and float(factor).is_integer():
        return int(value * factor)
    return round(value * factor, max(col.decimals, 2))


def _stale_value(col: Column, value: Any, rng: random.Random, always: bool = False) -> Any:
    """A value as an unmaintained copy might hold it: out of date in a share of rows."""
    if value is None or (not always and rng.random() >= STALE_CHANGED):
        return value
    if col.kind == "number":
        return _number(col, value * rng.uniform(0.6, 1.4))
    if col.kind in ("choice", "date"):
        return draw_value(col, rng)
    return value


def build_live(domain: QueryingDomain, rows: dict[str, list[tuple]], pl: Placement, rng: random.Random,
               perturb: Any) -> dict[str, LiveTable]:
    """The live tables of one episode (documented data moved, renamed, re-scaled and padded as `pl` says)."""
    docs, live = Docs(perturb), {}
    for table in table_order(domain):
        t = table.name
        flag = table.soft_delete if t in pl.soft else None
        data, deleted = _with_deleted(table, rows, flag, rng)
        split = table.split if pl.split == t else None
        moved = set(split.columns) if split else set()
        main: list[tuple[LiveColumn, list]] = []  # (column, its values row by row)
        side: list[tuple[LiveColumn, list]] = []
        for j, col in enumerate(table.columns):
            target = side if col.name in moved else main
            values = [row[j] for row in data]
            target.append(_live_column(domain, table, col, values, pl, docs, perturb))
            if (t, col.name) in pl.decoys:
                target.append(_decoy_column(table, col, values, pl, rng))
        if flag is not None:
            main.append((LiveColumn(flag.column, "DATE" if flag.style == "timestamp" else "INTEGER", None),
                         [row[-1] for row in data]))
        name = pl.table(t)
        comment = docs.text(
            (table.comment, False), (RENAMED.format(old=t) if name != t else None, False),
            (fill(flag.note, table=name, column=flag.column) if flag else None, True),
            (fill(split.note, side=split.table, key=split.key, table=name) if split else None, True))
        live[name] = _live_table(name, comment, main, rng, deleted)
        if split is not None:
            key = key_column(table)
            link = LiveColumn(split.key, "INTEGER", None, f"{name}({pl.column(t, key.name)})")
            keys = [row[table.columns.index(key)] for row in data]
            live[split.table] = _live_table(split.table, docs.text((split.comment, False)), [(link, keys), *side],
                                            rng, deleted)
        if t in pl.stale:
            stale = _stale_copy(table, rows[t], rng)
            sname = pl.stale[t][0]
            columns = [LiveColumn(c.name, SQL_TYPES[c.type], None) for c in table.columns]
            live[sname] = LiveTable(sname, fill(table.stale.note, live=name, table=t), columns, stale,
                                    _sample(rng, len(stale), []), stale=True)
    return live


def _with_deleted(table: Table, rows: dict[str, list[tuple]], flag: Any, rng: random.Random
                  ) -> tuple[list[list], list[int]]:
    """The table's rows, plus soft-deleted copies of some of them (figures changed, often a burst on one
    parent row) with the marker column appended; and the indices of the deleted rows."""
    data = [list(r) for r in rows[table.name]]
    n = len(data)
    if flag is None:
        return data, []
    dates = next(c for c in table.columns if c.kind == "date") if flag.style == "timestamp" else None
    bursts = {j: rng.randint(1, len(rows[col.ref])) if rng.random() < 0.5 else None
              for j, col in enumerate(table.columns) if col.kind == "ref"}
    for k, i in enumerate(sorted(rng.sample(range(n), max(2, round(n * DELETED_SHARE))))):
        copy = list(data[i])
        for j, col in enumerate(table.columns):
            if col.kind == "key":
                copy[j] = n + k + 1
            elif col.kind == "number" and copy[j] is not None:
                copy[j] = _number(col, copy[j] * rng.uniform(1.2, 2.0))
            elif col.kind == "date" and rng.random() < 0.5:
                copy[j] = draw_value(col, rng)
            elif col.kind == "ref" and (bursts[j] is not None or rng.random() < 0.5):
                copy[j] = bursts[j] or rng.randint(1, len(rows[col.ref]))
        copy.append(draw_value(dates, rng) if dates else 1)
        data.append(copy)
    for row in data[:n]:
        row.append(None if dates else 0)
    return data, list(range(n, len(data)))


def _live_column(domain: QueryingDomain, table: Table, col: Column, values: list, pl: Placement, docs: Docs,
                 perturb: Any) -> tuple[LiveColumn, list]:
    name = pl.column(table.name, col.name)
    marker = RENAMED.format(old=col.name) if name != col.name else None
    unit = pl.units.get((table.name, col.name))
    ref = None
    if col.kind == "ref" and not perturb.chance(perturb.tier.drop):
        parent = domain.table(col.ref)
        ref = f"{pl.table(parent.name)}({pl.column(parent.name, key_column(parent).name)})"
    if unit:
        stored = [None if v is None else int(round(v * unit)) for v in values]
        return LiveColumn(name, "INTEGER", docs.text((col.unit.note, True), (marker, False)), ref), stored
    sql_type = SQL_TYPES[col.type] + (" PRIMARY KEY" if col.kind == "key" else "")
    return LiveColumn(name, sql_type, docs.text((col.comment, False), (marker, False)), ref), values


def _decoy_column(table: Table, col: Column, values: list, pl: Placement, rng: random.Random
                  ) -> tuple[LiveColumn, list]:
    """The decoy beside a live column: its values scaled (another unit, VAT), or a stale copy of them."""
    name = pl.decoys[(table.name, col.name)][0]
    factor = col.decoy.factor
    numeric = col.type in ("integer", "real")
    sql_type = SQL_TYPES[col.type] if not numeric or float(factor).is_integer() else "REAL"
    if numeric and factor != 1.0:
        shown = [_scaled(col, v, factor) for v in values]
    else:
        shown = [_stale_value(col, v, rng) for v in values]
    note = fill(col.decoy.note, live=pl.column(table.name, col.name))
    return LiveColumn(name, sql_type, note, decoy=True), shown


def _live_table(name: str, comment: str | None, columns: list[tuple[LiveColumn, list]], rng: random.Random,
                deleted: list[int]) -> LiveTable:
    rows = list(zip(*(values for _, values in columns), strict=True))
    return LiveTable(name, comment, [c for c, _ in columns], rows, _sample(rng, len(rows), deleted),
                     decoys=[c.name for c, _ in columns if c.decoy])


def _stale_copy(table: Table, rows: list[tuple], rng: random.Random) -> list[tuple]:
    """A frozen copy: some rows missing, and one out-of-date value in a share of the others."""
    kept = [list(r) for r in rows if rng.random() >= STALE_MISSING]
    free = [j for j, col in enumerate(table.columns) if col.kind in ("choice", "number", "date")]
    for row in kept:
        if free and rng.random() < STALE_CHANGED:
            j = rng.choice(free)
            row[j] = _stale_value(table.columns[j], row[j], rng, always=True)
    return [tuple(r) for r in kept]


def _sample(rng: random.Random, n: int, deleted: list[int], size: int = 3) -> list[int]:
    """Rows a description shows: a few live ones, and one soft-deleted row where there are any (the data
    shows the rule even where its comment is missing)."""
    live = [i for i in range(n) if i not in set(deleted)]
    picked = rng.sample(live, min(size - bool(deleted), len(live)))
    if deleted:
        picked.append(rng.choice(deleted))
    return sorted(picked)


def live_db(tables: dict[str, LiveTable]) -> sqlite3.Connection:
    return create_db([(t.name, [(c.name, c.sql_type) for c in t.columns], t.rows)
                      for t in sorted(tables.values(), key=lambda t: t.name)])


# ---- adapters --------------------------------------------------------------------------------------------------
def adapter_sql(reference: str, sources: dict[str, str]) -> str:
    """`reference` with each documented table in `sources` replaced by a CTE of the same name (a CTE shadows a
    stored table): `sources` maps the documented name to the CTE's SELECT."""
    if not sources:
        return reference
    ctes = ", ".join(f"{name} AS ({body})" for name, body in sources.items())
    head = re.match(r"\s*with\s+", reference, re.IGNORECASE)
    if head:
        return f"WITH {ctes}, {reference[head.end():]}"
    return f"WITH {ctes} {reference}"


def oracle_sources(domain: QueryingDomain, read: dict[str, list[str]], pl: Placement,
                   skip: tuple[str, str, str | None] | None = None) -> tuple[dict[str, str], list[str]]:
    """The CTEs that rebuild each documented table the question reads from the live database, and the live
    tables they read. `skip` leaves one hidden constraint uncorrected (to check that it matters)."""
    sources, used = {}, []
    for t, cols in read.items():
        table = domain.table(t)
        key = key_column(table).name
        need = [key, *(c for c in cols if c != key)]
        name = pl.table(t)
        split = table.split if pl.split == t else None
        moved = set(split.columns) if split else set()
        if skip == ("stale", t, None):
            continue  # read the stale copy that wears the documented name
        exprs, identity = [], name == t and split is None
        for c in need:
            live = c if skip == ("decoy", t, c) else pl.column(t, c)
            expr = f"{'s' if c in moved else 'm'}.{live}"
            factor = pl.units.get((t, c))
            if factor and skip not in (("unit", t, c), ("decoy", t, c)):
                expr = f"{expr} / {factor}.0"
            identity = identity and live == c and not factor
            exprs.append(f"{expr} AS {c}")
        frm = f"main.{name} AS m"
        used.append(name)
        if split is not None:
            frm += f" JOIN main.{split.table} AS s ON s.{split.key} = m.{pl.column(t, key)}"
            used.append(split.table)
        where = ""
        if t in pl.soft and skip != ("soft_delete", t, None):
            flag = table.soft_delete
            where = f" WHERE m.{flag.column} {'IS NULL' if flag.style == 'timestamp' else '= 0'}"
            identity = False
        if not identity:
            sources[t] = f"SELECT {', '.join(exprs)} FROM {frm}{where}"
    return sources, used


# ---- domain validation -----------------------------------------------------------------------------------------
SAMPLE_SEEDS = 4
SAMPLE_DRAWS = 4


def sql_problems(domain: QueryingDomain) -> tuple[list[DomainProblem], dict[str, dict[str, list[str]]]]:
    """Run every reference query on sample data (a few seeds' worth, shared by all questions)."""
    samples = []
    for seed in range(SAMPLE_SEEDS):
        rng = random.Random(seed)
        rows = generate_rows(domain, rng)
        samples.append((rows, sandbox(canonical_db(domain, rows), max_rows=MAX_RESULT_ROWS + 1), rng))
    reverse: dict[int, RecordingSQL] = {}
    problems, reads = [], {}
    try:
        for i, question in enumerate(domain.questions):
            found, reads[question.id] = question_problems(domain, question, f"domain.questions[{i}]", samples,
                                                          reverse)
            problems += found
        if not problems:
            problems += drift_problems(domain, reads, samples)
    finally:
        for _, sql, _ in samples:
            sql.conn.close()
        for sql in reverse.values():
            sql.conn.close()
    return problems, reads


def question_problems(domain: QueryingDomain, question: Question, at: str, samples: list,
                      reverse: dict[int, RecordingSQL]) -> tuple[list[DomainProblem], dict[str, list[str]]]:
    """A reference query must execute, read 1-3 documented tables, and return a small result that is informative
    for some slot values and does not depend on row order."""
    sql_at = f"{at}.sql"
    if _STAR.search(_COUNT_STAR.sub("count(1)", question.sql)):
        return [DomainProblem(path=sql_at, message="selects '*': name the columns (drift adds columns)")], {}
    if question.ordered and not re.search(r"\border\s+by\b", question.sql, re.IGNORECASE):
        return [DomainProblem(path=sql_at, message="an ordered question needs an ORDER BY")], {}
    try:
        read = question_reads(domain, question)
    except QueryRejected as exc:
        return [DomainProblem(path=sql_at, message=f"does not run on the documented schema: {exc.message}")], {}
    if not read:
        return [DomainProblem(path=sql_at, message="reads no table of the domain")], {}
    if len(read) > MAX_QUESTION_TABLES:
        return [DomainProblem(path=sql_at, message=(
            f"reads {len(read)} tables ({', '.join(read)}); at most {MAX_QUESTION_TABLES}, so that describing "
            "them fits the smallest step budget"))], read
    good = robust = 0
    sensitive = question.ordered or bool(ORDER_SENSITIVE.search(question.sql))
    for k, (rows, gold_sql, rng) in enumerate(samples):
        if sensitive and k not in reverse:
            reverse[k] = sandbox(canonical_db(domain, rows, reverse=True), max_rows=MAX_RESULT_ROWS + 1)
        for _ in range(SAMPLE_DRAWS):
            sql = render_sql(domain, question, draw_slots(domain, question, rows, rng))
            try:
                result = gold_sql.run(sql)
            except QueryRejected as exc:
                return [DomainProblem(path=sql_at, message=f"fails on sample data: {exc.message}")], read
            if result.truncated or len(result.rows) > MAX_RESULT_ROWS:
                return [DomainProblem(path=sql_at, message=(
                    f"returns more than {MAX_RESULT_ROWS} rows: ask for a short answer"))], read
            if len(result.columns) > MAX_RESULT_COLUMNS:
                return [DomainProblem(path=sql_at, message=(
                    f"returns {len(result.columns)} columns; at most {MAX_RESULT_COLUMNS}"))], read
            gold = norm_rows(result)
            if informative(gold):
                good += 1
                if not sensitive or same_result(norm_rows(reverse[k].run(sql)), gold, question.ordered):
                    robust += 1
    if not good:
        return [DomainProblem(path=sql_at, message=(
            "its result is empty, zero or NULL for every sampled slot value: draw slots from columns whose values "
            "make the question have an answer"))], read
    if not robust:
        return [DomainProblem(path=sql_at, message=(
            "its result depends on row order (ties in ORDER BY ... LIMIT, or GROUP_CONCAT): add a tie-breaker "
            "column to the ORDER BY"))], read
    return [], read


def drift_problems(domain: QueryingDomain, reads: dict[str, dict[str, list[str]]], samples: list
                   ) -> list[DomainProblem]:
    """Rehearse the hardest tier's drift on every question: the reference query, rewritten for the drifted
    schema, must still give the reference answer (it fails when the query leans on something the rewrite
    cannot carry over, such as `rowid` or a CTE named like a table)."""
    from openadapt.kit.eci import DEFAULT_PROFILES, Perturber

    tier = DEFAULT_PROFILES[max(DEFAULT_PROFILES)]
    problems = []
    for i, question in enumerate(domain.questions):
        read = reads[question.id]
        for k, (rows, gold_sql, _) in enumerate(samples[:2]):
            rng = random.Random(7919 * (k + 1) + i)
            sql = render_sql(domain, question, draw_slots(domain, question, rows, rng))
            gold = norm_rows(gold_sql.run(sql))
            placement = plan_drift(domain, read, tier, rng)
            conn = live_db(build_live(domain, rows, placement, rng, Perturber(rng, tier)))
            sources, _ = oracle_sources(domain, read, placement)
            try:
                result = sandbox(conn, max_rows=MAX_RESULT_ROWS + 1).run(adapter_sql(sql, sources))
                why = None if same_result(norm_rows(result), gold, question.ordered) else "gives another result"
            except QueryRejected as exc:
                why = f"fails ({exc.message})"
            finally:
                conn.close()
            if why:
                problems.append(DomainProblem(path=f"domain.questions[{i}].sql", message=(
                    f"rewritten for a drifted schema (one CTE per documented table it reads) it {why}: use only "
                    "the documented tables and columns, no rowid, and no CTE named like a table")))
                break
    return problems
