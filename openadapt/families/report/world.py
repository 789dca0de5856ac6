"""One episode's world: the subjects, their records, the report queue, the KPI definitions and the contacts,
generated from the seeded rng and the tier's profile, loaded into a fresh in-memory SQLite database; and the
report it implies. Every name, table, column, category and range comes from the domain.

What each tier adds (cumulative, from the `TierProfile` knobs):
- noise/drop (ECI 2): amounts stored as text with separators, a symbol or the unit, the counted status in
  mixed case and padding, and the task's report date and type withheld from the instructions.
- distractors (ECI 3): excluded-status records of the subject in the period, a look-alike subject with the
  same period's business, retired KPI definitions ahead of the live ones, a retired primary mailbox, and more
  tasks in the queue.
- hidden constraints (ECI 4): the subject has a house style for dates, amounts or names that the instructions
  do not mention; only grader feedback (check_report) reveals it.
- depth (ECI 5): up to three house-style rules; more noise and distractors, more delivery failures.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from dataclasses import dataclass, field
from decimal import Decimal

from openadapt.families.report.domain import (
    KPI_SLOTS_PER_ROW,
    SUBJECTS_PER_EPISODE,
    Computation,
    ReportDomain,
    fill_name,
    slugify,
)
from openadapt.families.report.formats import STYLE_KINDS, Formats, HouseStyle
from openadapt.kit import Perturber, TierProfile

TASK_KINDS = ("header", "summary", "full")
FLAKY_BASE, FLAKY_PER_NOISE = 0.2, 0.5  # chance of a flaky network at the first sends
UNROUTABLE_BASE, UNROUTABLE_PER_DROP = 0.1, 0.5  # chance that the primary mailbox never accepts mail
MISSING = "n/a"


@dataclass(frozen=True)
class Task:
    kind: str  # header, summary or full
    name: str  # in the domain's words
    fields: tuple[str, ...]
    summary: str

    @property
    def kpi_rows(self) -> bool:
        """The full report: KPI rows, PDF and delivery."""
        return self.kind == "full"


@dataclass(frozen=True)
class ExpectedRow:
    label: str
    value: str
    kind: str  # amount, count or percent


@dataclass
class Episode:
    """The privileged truth of one episode (what the oracle reads; never served)."""

    task: Task
    task_id: str
    subject_id: str
    subject_name: str
    report_date: dt.date
    report_type: str
    style: HouseStyle
    expected: dict[str, str]  # field -> the exact string the grader wants (house style applied)
    rows: list[ExpectedRow]
    primary: str
    backup: str
    designated: str  # who must receive the PDF: the primary, or the backup when the primary is unroutable
    known_addresses: frozenset[str]
    unroutable: frozenset[str]
    flaps: int  # sends that fail with a transient network error before the network comes back
    shown_date: str  # what the instructions say (withheld as "n/a" at ECI 2+ now and then)
    shown_type: str
    queue: list[str]
    tables: dict[str, list[tuple]] = field(repr=False, default_factory=dict)


@dataclass
class _Record:
    subject_id: str
    date: dt.date
    category: str
    minor: int
    status: str


def number_word(n: int) -> str:
    return ("zero", "one", "two", "three", "four", "five", "six")[n] if 0 <= n <= 6 else str(n)


def tasks(domain: ReportDomain) -> dict[str, Task]:
    """The three tasks, easy to hard, under the domain's names; what each asks is the engine's."""
    d, names = domain, domain.task_names
    header, metrics = ", ".join(d.header_fields), ", ".join(d.metric_fields)
    n = number_word(len(d.metrics))
    return {t.name: t for t in (
        Task("header", names.header, d.header_fields,
             f"fill the report header ({header}), then submit_report"),
        Task("summary", names.summary, d.fields,
             f"fill the header and the {n} summary metric{'s' if len(d.metrics) > 1 else ''} ({metrics}), then "
             "submit_report"),
        Task("full", names.full, d.fields,
             "fill the header and the summary metrics, add the report type's KPI rows in order, finalize_pdf, "
             f"send_email the PDF to the {d.subject_noun}'s active primary contact, then submit_report"),
    )}


class Schema:
    """The database of a domain: its tables as DDL, and as the agent sees them (one line per table)."""

    def __init__(self, domain: ReportDomain):
        s, r = domain.subject_table, domain.record_table
        sid = s.id_column
        extra = "".join(f", {a.column} TEXT" for a in r.columns)
        amount_type = "REAL" if r.measure.decimals else "INTEGER"
        self.ddl = (
            f"CREATE TABLE {s.table} ({sid} TEXT PRIMARY KEY, {s.name_column} TEXT"
            + "".join(f", {a.column} TEXT" for a in s.attributes) + ")",
            f"CREATE TABLE {domain.contacts_table} ({sid} TEXT, email TEXT, role TEXT, active INTEGER)",
            "CREATE TABLE report_types (code TEXT PRIMARY KEY, title TEXT)",
            "CREATE TABLE report_kpis (report_type TEXT, position INTEGER, label TEXT, formula TEXT, active INTEGER)",
            f"CREATE TABLE report_tasks (task_id TEXT PRIMARY KEY, {sid} TEXT, report_date TEXT, report_type TEXT, "
            "status TEXT)",
            f"CREATE TABLE {r.table} ({r.id_column} TEXT, {sid} TEXT, {r.date_column} TEXT, {r.category_column} TEXT, "
            f"{r.measure.column} {amount_type}, {r.status_column} TEXT{extra})",
        )
        self.names = (s.table, domain.contacts_table, "report_types", "report_kpis", "report_tasks", r.table)
        self.lines = tuple(
            line.removeprefix("CREATE TABLE ").replace(" TEXT", "").replace(" INTEGER", "").replace(" REAL", "")
            .replace(" PRIMARY KEY", "") for line in self.ddl)

    def load(self, tables: dict[str, list[tuple]]) -> sqlite3.Connection:
        """A fresh in-memory database holding the episode's tables (the caller wraps it read-only)."""
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        for ddl in self.ddl:
            conn.execute(ddl)
        for table, rows in tables.items():
            if rows:
                conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
        conn.commit()
        return conn


class World:
    """Draws episodes of one domain (the domain indexed once)."""

    def __init__(self, domain: ReportDomain):
        self.d = domain
        self.formats = Formats(domain)
        self.tasks = tasks(domain)
        self.task_names = tuple(self.tasks)
        self.types = {t.code: t.title for t in domain.report_types}
        self.type_codes = sorted(self.types)
        self.kpis = {k.code: k for k in domain.kpis}
        self.kpi_codes = sorted(self.kpis)
        self.minor = {c.name: (domain.minor_units(c.amount[0]), domain.minor_units(c.amount[1]))
                      for c in domain.categories}
        self.schema = Schema(domain)

    def generate(self, rng: random.Random, tier: TierProfile, perturb: Perturber,
                 task_name: str | None = None) -> Episode:
        d = self.d
        drawn = rng.choice(self.task_names)  # drawn even when forced, so a forced task leaves the data unchanged
        task = self.tasks[task_name or drawn]
        names = rng.sample(d.subject_names, SUBJECTS_PER_EPISODE)
        ids = [f"{d.subject_table.id_prefix}{n}" for n in rng.sample(range(100, 1000), len(names) + 1)]
        subject_id, subject_name = ids[0], names[0]
        subjects = [(sid, name, *(rng.choice(a.values) for a in d.subject_table.attributes))
                    for sid, name in zip(ids, names, strict=False)]
        report_date = d.first_date + dt.timedelta(days=d.period_days * rng.randint(0, d.periods))
        report_type = rng.choice(self.type_codes)

        kpi_rows, kpi_codes = self._kpi_definitions(rng, tier, report_type)
        contacts, primary, backup, retired = self._contacts(rng, tier, subjects)

        records = self._records(rng, subject_id, [s[0] for s in subjects[1:]], report_date)
        if tier.distractors:
            twin_id, twin_name = ids[-1], fill_name(d.lookalike_name, subject_name)
            subjects.append((twin_id, twin_name, *subjects[0][2:]))
            contacts.append((twin_id, f"{d.mailboxes[0]}@{slugify(twin_name)}.example", "primary", 1))
            for _ in range(tier.distractors):
                kind = rng.choice(d.lookalike_categories)
                records.append(self._record(rng, twin_id, report_date, kind))
                kind = rng.choice(d.category_names)
                record = self._record(rng, subject_id, report_date, kind)
                record.status = rng.choice(d.statuses.excluded)  # drawn after the amount
                records.append(record)
        rng.shuffle(records)

        style = self._house_style(rng, tier)
        expected, rows = self._expected(records, subject_id, subject_name, report_date, report_type, kpi_codes,
                                        style)
        flaps = rng.randint(1, 2) if rng.random() < FLAKY_BASE + FLAKY_PER_NOISE * tier.noise else 0
        primary_unroutable = rng.random() < UNROUTABLE_BASE + UNROUTABLE_PER_DROP * tier.drop
        task_id = f"T-{rng.randint(1000, 9999)}"
        queue_rows, queue = self._queue(rng, tier, task_id, subject_id, report_date, report_type,
                                        ids[1:len(names)])
        return Episode(
            task=task, task_id=task_id, subject_id=subject_id, subject_name=subject_name,
            report_date=report_date, report_type=report_type, style=style, expected=expected, rows=rows,
            primary=primary, backup=backup, designated=backup if primary_unroutable else primary,
            known_addresses=frozenset(c[1] for c in contacts),
            unroutable=frozenset(retired | ({primary} if primary_unroutable else set())),
            flaps=flaps,
            shown_date=perturb.missing(report_date.isoformat(), MISSING),
            shown_type=perturb.missing(report_type, MISSING),
            queue=queue,
            tables={
                self.schema.names[0]: subjects,
                self.schema.names[1]: contacts,
                "report_types": sorted(self.types.items()),
                "report_kpis": kpi_rows,
                "report_tasks": queue_rows,
                self.schema.names[5]: self._stored(rng, perturb, records),
            },
        )

    # ---- the pieces ---------------------------------------------------------------------------------
    def _kpi_definitions(self, rng: random.Random, tier: TierProfile, target: str) -> tuple[list[tuple], list[str]]:
        """`kpi_rows` live rows per report type at increasing positions; from ECI 3, retired rows (the spare
        definitions) sit at the free positions, some ahead of the live ones."""
        k = self.d.kpi_rows
        slots = KPI_SLOTS_PER_ROW * k
        rows, target_codes = [], []
        for code in self.type_codes:
            chosen = rng.sample(self.kpi_codes, k)
            positions = sorted(rng.sample(range(2, 2 + slots), k))
            rows += [(code, pos, self.kpis[c].label, self.kpis[c].formula, 1)
                     for pos, c in zip(positions, chosen, strict=True)]
            if code == target:
                target_codes = chosen
                if tier.distractors:
                    free = [p for p in range(1, slots + 3) if p not in positions]
                    retired = [c for c in self.kpi_codes if c not in chosen]
                    rows += [(code, pos, self.kpis[c].label, self.kpis[c].formula, 0)
                             for pos, c in zip(free, rng.sample(retired, len(retired)), strict=False)]
        rng.shuffle(rows)
        return rows, target_codes

    def _contacts(self, rng: random.Random, tier: TierProfile,
                  subjects: list[tuple]) -> tuple[list[tuple], str, str, set[str]]:
        contacts: list[tuple] = []
        retired: set[str] = set()
        primary = backup = ""
        for index, (sid, name, *_) in enumerate(subjects):
            first, second, third = rng.sample(self.d.mailboxes, 3)
            domain = f"{slugify(name)}.example"
            if index == 0:
                primary, backup = f"{first}@{domain}", f"{second}@{domain}"
                if tier.distractors:  # a retired primary mailbox, listed before the live one
                    retired.add(f"{third}@{domain}")
                    contacts.append((sid, f"{third}@{domain}", "primary", 0))
            contacts.append((sid, f"{first}@{domain}", "primary", 1))
            contacts.append((sid, f"{second}@{domain}", "backup", 1))
        return contacts, primary, backup, retired

    def _record(self, rng: random.Random, subject_id: str, day: dt.date, category: str) -> _Record:
        return _Record(subject_id, day, category, rng.randint(*self.minor[category]), self.d.statuses.counted)

    def _records(self, rng: random.Random, subject_id: str, others: list[str], day: dt.date) -> list[_Record]:
        d = self.d
        records = []
        for cat in d.categories:
            low, high = cat.per_period
            records += [self._record(rng, subject_id, day, cat.name) for _ in range(rng.randint(low, high))]
        previous = day - dt.timedelta(days=d.period_days)
        for _ in range(rng.randint(2, 4)):  # the previous period's business of the same subject
            records.append(self._record(rng, subject_id, previous, rng.choice(d.category_names)))
        for other in rng.sample(others, 4):
            for _ in range(rng.randint(2, 5)):
                kind = rng.choice(d.category_names)
                when = rng.choice((day, previous))
                records.append(self._record(rng, other, when, kind))
        return records

    def _stored(self, rng: random.Random, perturb: Perturber, records: list[_Record]) -> list[tuple]:
        """The rows as stored: from ECI 2, some amounts become text and some statuses lose their canonical case."""
        r, f = self.d.record_table, self.formats
        counted = self.d.statuses.counted
        status_variants = (counted.capitalize(), counted.upper(), f" {counted}")
        messy = f.messy()
        start = rng.randint(10_000, 80_000)
        stored = []
        for n, rec in enumerate(records):
            value = f.to_decimal(rec.minor)
            amount: float | int | str = float(value) if f.decimals else rec.minor
            if perturb.chance(perturb.tier.noise):
                amount = rng.choice(messy).format(value)
            status = rec.status
            if status == counted and perturb.chance(perturb.tier.noise):
                status = rng.choice(status_variants)
            extra = tuple(rng.choice(c.values) for c in r.columns)
            stored.append((f"{r.id_prefix}{start + n}", rec.subject_id, rec.date.isoformat(), rec.category, amount,
                           status, *extra))
        return stored

    def _house_style(self, rng: random.Random, tier: TierProfile) -> HouseStyle:
        if not tier.hidden_constraints:
            return HouseStyle()
        kinds = rng.sample(sorted(STYLE_KINDS), rng.randint(1, min(len(STYLE_KINDS), 1 + tier.depth)))
        return HouseStyle(**{kind: rng.choice(sorted(STYLE_KINDS[kind])) for kind in kinds})

    def value(self, comp: Computation, sums: dict[str, int], counts: dict[str, int],
              style: HouseStyle) -> str:
        """The report's text for a metric or KPI, from the counted records' sums and counts per category."""
        f, d = self.formats, self.d
        of = sum(sums[c] for c in d.categories_of(comp.of))
        if comp.op == "count":
            return str(sum(counts[c] for c in d.categories_of(comp.of)))
        if comp.op == "percent":
            against = sum(sums[c] for c in d.categories_of(comp.against))
            return f.percent(Decimal(100 * of) / Decimal(against))
        if comp.op == "difference":
            return f.amount(of - sum(sums[c] for c in d.categories_of(comp.against)), style)
        if comp.op == "average":
            n = sum(counts[c] for c in d.categories_of(comp.of))
            return f.amount(f.round_minor(f.to_decimal(of) / n), style)
        return f.amount(of, style)

    def _expected(self, records: list[_Record], subject_id: str, subject_name: str, day: dt.date,
                  report_type: str, kpi_codes: list[str], style: HouseStyle) -> tuple[dict[str, str],
                                                                                       list[ExpectedRow]]:
        d, f = self.d, self.formats
        counted = [r for r in records
                   if r.subject_id == subject_id and r.date == day and r.status == d.statuses.counted]
        sums = {c: sum(r.minor for r in counted if r.category == c) for c in d.category_names}
        counts = {c: sum(1 for r in counted if r.category == c) for c in d.category_names}
        h = d.header
        expected = {
            h.title_field: self.types[report_type],
            h.subject_field: f.name(subject_name, style),
            h.date_field: f.date(day, style),
        }
        for metric in d.metrics:
            expected[metric.field] = self.value(metric, sums, counts, style)
        rows = [ExpectedRow(self.kpis[code].label, self.value(self.kpis[code], sums, counts, style),
                            self.kpis[code].kind) for code in kpi_codes]
        return expected, rows

    def _queue(self, rng: random.Random, tier: TierProfile, task_id: str, subject_id: str, day: dt.date,
               report_type: str, others: list[str]) -> tuple[list[tuple], list[str]]:
        """The report_tasks rows and the queue as the agent sees it (id, subject, status)."""
        rows = [(task_id, subject_id, day.isoformat(), report_type, "in_progress")]
        used = {task_id}
        period = self.d.period_days
        for other in rng.sample(others, 3):
            rows.append((_task_id(rng, used), other, day.isoformat(), rng.choice(self.type_codes), "pending"))
        for _ in range(tier.distractors):  # the same subject's other reports: other periods, other types
            other_day = day + dt.timedelta(days=period * rng.choice((-2, -1, 1)))
            rows.append((_task_id(rng, used), subject_id, other_day.isoformat(), rng.choice(self.type_codes),
                         rng.choice(("pending", "done"))))
        rng.shuffle(rows)
        noun = self.d.subject_noun
        queue = [f"{tid} | {noun} {sid} | {status}" + (" (your task)" if tid == task_id else "")
                 for tid, sid, _, _, status in rows]
        return rows, queue


def _task_id(rng: random.Random, used: set[str]) -> str:
    while True:
        tid = f"T-{rng.randint(1000, 9999)}"
        if tid not in used:
            used.add(tid)
            return tid
