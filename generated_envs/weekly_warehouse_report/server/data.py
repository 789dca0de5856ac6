"""One episode's world: the customers, their transactions, the report queue and the contacts, generated from the
seeded rng and the tier's profile, loaded into a fresh in-memory SQLite database; and the report it implies.

What each tier adds (cumulative):
- ECI 2 (noise, drop): amounts stored as text with separators or currency marks, status values in mixed case
  and padding, and the task's report date and type withheld from the instructions (query report_tasks).
- ECI 3 (distractors): reversed and pending transactions on the report date, a look-alike customer with the
  same date's business, retired KPI definitions ahead of the live ones, a retired primary mailbox, and more
  tasks in the queue.
- ECI 4 (hidden constraints): the customer has a house style for dates, amounts or names that the instructions
  do not mention; only grader feedback (check_report) reveals it.
- ECI 5 (depth): up to three house-style rules, more noise and distractors, more delivery failures.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from dataclasses import dataclass, field
from decimal import Decimal

from openadapt.kit import Perturber, TierProfile

try:
    from .catalogue import (
        CUSTOMERS,
        KPIS,
        MAILBOXES,
        REGIONS,
        REPORT_TYPES,
        SCHEMA,
        SEGMENTS,
        TASK_NAMES,
        TASKS,
        Task,
    )
    from .formats import (
        STYLE_VARIANTS,
        HouseStyle,
        cents_to_decimal,
        format_amount,
        format_date,
        format_name,
        format_percent,
        round_cents,
    )
except ImportError:  # standalone `uvicorn server.app:app`
    from server.catalogue import (
        CUSTOMERS,
        KPIS,
        MAILBOXES,
        REGIONS,
        REPORT_TYPES,
        SCHEMA,
        SEGMENTS,
        TASK_NAMES,
        TASKS,
        Task,
    )
    from server.formats import (
        STYLE_VARIANTS,
        HouseStyle,
        cents_to_decimal,
        format_amount,
        format_date,
        format_name,
        format_percent,
        round_cents,
    )

FIRST_DATE = dt.date(2026, 1, 5)
AMOUNT_CENTS = {"disbursement": (500_000, 25_000_000), "repayment": (20_000, 5_000_000), "fee": (1_000, 50_000)}
TEXT_AMOUNTS = ("{:,.2f}", "${:.2f}", "{:.2f} USD")  # how ECI 2+ noise writes a stored amount
STATUS_VARIANTS = ("Settled", "SETTLED", " settled")
DISTRACTOR_STATUSES = ("reversed", "pending")


@dataclass(frozen=True)
class ExpectedRow:
    label: str
    value: str
    kind: str  # amount or percent


@dataclass
class Episode:
    """The privileged truth of one episode (what the oracle reads; never served)."""

    task: Task
    task_id: str
    customer_id: str
    customer_name: str
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
class _Txn:
    customer_id: str
    date: dt.date
    kind: str
    cents: int
    status: str = "settled"


def _slug(name: str) -> str:
    return name.lower().replace(" ", "-")


def generate(rng: random.Random, tier: TierProfile, perturb: Perturber, task_name: str | None = None) -> Episode:
    drawn = rng.choice(TASK_NAMES)  # drawn even when forced, so a forced task leaves the data unchanged
    task = TASKS[task_name or drawn]
    names = rng.sample(CUSTOMERS, 8)
    ids = [f"C-{n}" for n in rng.sample(range(100, 1000), len(names) + 1)]
    customer_id, customer_name = ids[0], names[0]
    customers = [(cid, name, rng.choice(SEGMENTS), rng.choice(REGIONS)) for cid, name in zip(ids, names,
                                                                                             strict=False)]
    report_date = FIRST_DATE + dt.timedelta(days=rng.randint(0, 320))
    report_type = rng.choice(sorted(REPORT_TYPES))

    kpi_rows, kpi_codes = _kpi_definitions(rng, tier, report_type)
    contacts, primary, backup, retired = _contacts(rng, tier, customers)

    txns = _transactions(rng, customer_id, [c[0] for c in customers[1:]], report_date)
    if tier.distractors:
        twin_id, twin_name = ids[-1], f"{customer_name} Holdings"
        customers.append((twin_id, twin_name, customers[0][2], customers[0][3]))
        contacts.append((twin_id, f"reports@{_slug(twin_name)}.example", "primary", 1))
        for _ in range(tier.distractors):
            kind = rng.choice(("disbursement", "repayment"))
            txns.append(_Txn(twin_id, report_date, kind, rng.randint(*AMOUNT_CENTS[kind])))
            kind = rng.choice(("disbursement", "repayment", "fee"))
            txns.append(_Txn(customer_id, report_date, kind, rng.randint(*AMOUNT_CENTS[kind]),
                             rng.choice(DISTRACTOR_STATUSES)))
    rng.shuffle(txns)

    style = _house_style(rng, tier)
    expected, rows = _expected_report(txns, customer_id, customer_name, report_date, report_type, kpi_codes, style)
    flaps = rng.randint(1, 2) if rng.random() < 0.2 + 0.5 * tier.noise else 0
    primary_unroutable = rng.random() < 0.1 + 0.5 * tier.drop
    task_id = f"T-{rng.randint(1000, 9999)}"
    queue_rows, queue = _queue(rng, tier, task_id, customer_id, report_date, report_type, ids[1:len(names)])
    return Episode(
        task=task, task_id=task_id, customer_id=customer_id, customer_name=customer_name,
        report_date=report_date, report_type=report_type, style=style, expected=expected, rows=rows,
        primary=primary, backup=backup, designated=backup if primary_unroutable else primary,
        known_addresses=frozenset(c[1] for c in contacts),
        unroutable=frozenset(retired | ({primary} if primary_unroutable else set())),
        flaps=flaps,
        shown_date=perturb.missing(report_date.isoformat()), shown_type=perturb.missing(report_type),
        queue=queue,
        tables={
            "customers": customers,
            "contacts": contacts,
            "report_types": sorted(REPORT_TYPES.items()),
            "report_kpis": kpi_rows,
            "report_tasks": queue_rows,
            "transactions": _stored_transactions(rng, perturb, txns),
        },
    )


def _kpi_definitions(rng: random.Random, tier: TierProfile, target_type: str) -> tuple[list[tuple], list[str]]:
    """Two live KPI rows per report type at increasing positions; from ECI 3, retired rows sit ahead of them."""
    rows, target_codes = [], []
    for code in sorted(REPORT_TYPES):
        chosen = rng.sample(sorted(KPIS), 2)
        positions = sorted(rng.sample(range(2, 8), 2))
        rows += [(code, pos, KPIS[k].label, KPIS[k].formula, 1) for pos, k in zip(positions, chosen, strict=True)]
        if code == target_type:
            target_codes = chosen
            if tier.distractors:
                free = [p for p in range(1, 9) if p not in positions]
                retired = [k for k in sorted(KPIS) if k not in chosen]
                rows += [(code, pos, KPIS[k].label, KPIS[k].formula, 0)
                         for pos, k in zip(free, rng.sample(retired, len(retired)), strict=False)]
    rng.shuffle(rows)
    return rows, target_codes


def _contacts(rng: random.Random, tier: TierProfile,
              customers: list[tuple]) -> tuple[list[tuple], str, str, set[str]]:
    contacts: list[tuple] = []
    retired: set[str] = set()
    primary = backup = ""
    for index, (cid, name, _, _) in enumerate(customers):
        first, second, third = rng.sample(MAILBOXES, 3)
        domain = f"{_slug(name)}.example"
        if index == 0:
            primary, backup = f"{first}@{domain}", f"{second}@{domain}"
            if tier.distractors:  # a retired primary mailbox, listed before the live one
                retired.add(f"{third}@{domain}")
                contacts.append((cid, f"{third}@{domain}", "primary", 0))
        contacts.append((cid, f"{first}@{domain}", "primary", 1))
        contacts.append((cid, f"{second}@{domain}", "backup", 1))
    return contacts, primary, backup, retired


def _transactions(rng: random.Random, customer_id: str, others: list[str], day: dt.date) -> list[_Txn]:
    txns = []
    for kind, (low, high) in ((("disbursement", (2, 5)), ("repayment", (2, 5)), ("fee", (1, 3)))):
        txns += [_Txn(customer_id, day, kind, rng.randint(*AMOUNT_CENTS[kind])) for _ in range(rng.randint(low, high))]
    previous = day - dt.timedelta(days=1)
    for _ in range(rng.randint(2, 4)):  # yesterday's business of the same customer
        kind = rng.choice(("disbursement", "repayment", "fee"))
        txns.append(_Txn(customer_id, previous, kind, rng.randint(*AMOUNT_CENTS[kind])))
    for other in rng.sample(others, 4):
        for _ in range(rng.randint(2, 5)):
            kind = rng.choice(("disbursement", "repayment", "fee"))
            txns.append(_Txn(other, rng.choice((day, previous)), kind, rng.randint(*AMOUNT_CENTS[kind])))
    return txns


def _stored_transactions(rng: random.Random, perturb: Perturber, txns: list[_Txn]) -> list[tuple]:
    """The rows as stored: from ECI 2, some amounts become text and some statuses lose their canonical case."""
    start = rng.randint(10_000, 80_000)
    stored = []
    for n, t in enumerate(txns):
        amount: float | str = float(cents_to_decimal(t.cents))
        if perturb.chance(perturb.tier.noise):
            amount = rng.choice(TEXT_AMOUNTS).format(cents_to_decimal(t.cents))
        status = t.status
        if status == "settled" and perturb.chance(perturb.tier.noise):
            status = rng.choice(STATUS_VARIANTS)
        stored.append((f"TX-{start + n}", t.customer_id, t.date.isoformat(), t.kind, amount, status))
    return stored


def _house_style(rng: random.Random, tier: TierProfile) -> HouseStyle:
    if not tier.hidden_constraints:
        return HouseStyle()
    kinds = rng.sample(sorted(STYLE_VARIANTS), rng.randint(1, min(len(STYLE_VARIANTS), 1 + tier.depth)))
    return HouseStyle(**{kind: rng.choice(sorted(STYLE_VARIANTS[kind])) for kind in kinds})


def _expected_report(txns: list[_Txn], customer_id: str, customer_name: str, day: dt.date, report_type: str,
                     kpi_codes: list[str], style: HouseStyle) -> tuple[dict[str, str], list[ExpectedRow]]:
    counted = [t for t in txns if t.customer_id == customer_id and t.date == day and t.status == "settled"]
    sums = {kind: sum(t.cents for t in counted if t.kind == kind) for kind in ("disbursement", "repayment", "fee")}
    count = len(counted)
    expected = {
        "title": REPORT_TYPES[report_type],
        "customer_name": format_name(customer_name, style),
        "report_date": format_date(day, style),
        "total_disbursed": format_amount(sums["disbursement"], style),
        "total_repaid": format_amount(sums["repayment"], style),
        "transaction_count": str(count),
    }
    values = {
        "net_cash_flow": sums["repayment"] - sums["disbursement"],
        "repayment_ratio": Decimal(100 * sums["repayment"]) / Decimal(sums["disbursement"]),
        "fee_income": sums["fee"],
        "average_transaction": round_cents(cents_to_decimal(sum(sums.values())) / count),
    }
    rows = []
    for code in kpi_codes:
        kpi = KPIS[code]
        value = format_percent(values[code]) if kpi.kind == "percent" else format_amount(values[code], style)
        rows.append(ExpectedRow(kpi.label, value, kpi.kind))
    return expected, rows


def _queue(rng: random.Random, tier: TierProfile, task_id: str, customer_id: str, day: dt.date,
           report_type: str, others: list[str]) -> tuple[list[tuple], list[str]]:
    """The report_tasks rows and the queue as the agent sees it (id, customer, status)."""
    rows = [(task_id, customer_id, day.isoformat(), report_type, "in_progress")]
    used = {task_id}
    for other in rng.sample(others, 3):
        rows.append((_task_id(rng, used), other, day.isoformat(), rng.choice(sorted(REPORT_TYPES)), "pending"))
    for _ in range(tier.distractors):  # the same customer's other reports: other days, other types
        other_day = day + dt.timedelta(days=rng.choice((-2, -1, 1)))
        rows.append((_task_id(rng, used), customer_id, other_day.isoformat(), rng.choice(sorted(REPORT_TYPES)),
                     rng.choice(("pending", "done"))))
    rng.shuffle(rows)
    queue = [f"{tid} | customer {cid} | {status}" + (" (your task)" if tid == task_id else "")
             for tid, cid, _, _, status in rows]
    return rows, queue


def _task_id(rng: random.Random, used: set[str]) -> str:
    while True:
        tid = f"T-{rng.randint(1000, 9999)}"
        if tid not in used:
            used.add(tid)
            return tid


def load_database(tables: dict[str, list[tuple]]) -> sqlite3.Connection:
    """A fresh in-memory database holding the episode's tables (the caller wraps it read-only)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    for ddl in SCHEMA:
        conn.execute(ddl)
    for table, rows in tables.items():
        if rows:
            conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    conn.commit()
    return conn
