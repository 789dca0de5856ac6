"""The report domain: a periodic report about one subject (a customer, a warehouse, a ward) for one period,
assembled from a SQLite database of records, rendered as a PDF and delivered by mail.

Each episode draws a cast of subjects, one report task from a queue, the subject's records of the reported period
(and of other periods and subjects around them), the report type's KPI definitions, the contacts and the mail
failures. The report has three parts the engine grades: a header (the report type's title, the subject's name,
the report date), summary metrics (aggregates of the subject's counted records of the period) and KPI rows
(the report type's active KPI definitions, computed from the same records). Everything the agent meets - the
tables and columns, the categories and amounts of records, the metrics, the KPIs, the names and the mailboxes -
comes from this schema.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import unicodedata
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from openadapt.families.domain import (
    IDENT,
    Code,
    Domain,
    DomainPart,
    DomainProblem,
    Placeholders,
    Reference,
    Rule,
    duplicate_values,
    duplicates,
    fill,
    names_differ,
    too_few,
    unknown_refs,
)

# Bounds the schema states (and a grammar enforces) rather than a check finding them after the writing: a
# small model writes a category's per_period as [1, 1000] and its amount as [-1000, 10000].
PeriodCount = Annotated[int, Field(ge=1, le=12)]
PositiveAmount = Annotated[float, Field(gt=0)]
SUBJECTS_PER_EPISODE = 8  # the cast of one episode: the reported subject and seven others
KPI_SLOTS_PER_ROW = 3  # KPI definitions sit at positions 1 .. 3 x kpi_rows + 2 of their report type
# Tables and columns the engine itself defines (the report machinery every world shares).
FIXED_TABLES = ("report_types", "report_kpis", "report_tasks")
FIXED_COLUMNS = {"contacts": ("email", "role", "active"),
                 "report_tasks": ("task_id", "report_date", "report_type", "status")}
# Words SQLite reserves: a table or column called `order` or `group` breaks every query an agent writes.
_SQL_WORDS = """
abort action add after all alter always analyze and as asc attach autoincrement before begin between by cascade
case cast check collate column commit conflict constraint create cross current current_date current_time
current_timestamp database default deferrable deferred delete desc detach distinct do drop each else end escape
except exclude exclusive exists explain fail filter first following for foreign from full generated glob group
groups having if ignore immediate in index indexed initially inner insert instead intersect into is isnull join
key last left like limit match materialized natural no not nothing notnull null nulls of offset on or order others
outer over partition plan pragma preceding primary query raise range recursive references regexp reindex release
rename replace restrict returning right rollback row rows savepoint select set table temp temporary then ties to
transaction trigger unbounded union unique update using vacuum values view virtual when where window with without
"""
SQL_KEYWORDS = frozenset(_SQL_WORDS.split())

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)]
Word = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)]
Op = Literal["sum", "count", "difference", "percent", "average"]
SUBJECT_KEY = "(subject id)"  # the record table's column naming a subject: the subject table's key
_ONE_OPERAND = frozenset({"sum", "count", "average"})  # the ops that read no `against`
OP_KINDS = {"sum": "amount", "difference": "amount", "average": "amount", "count": "count", "percent": "percent"}


def _op() -> Any:
    return Field(description=(
        "How the value is computed from the subject's counted records of the period: 'sum' adds the amounts of "
        "the categories in `of`; 'count' counts the records of those categories; 'difference' is the sum of `of` "
        "minus the sum of `against`; 'percent' is 100 x the sum of `of` / the sum of `against` (one decimal and "
        "a % sign); 'average' is the sum of `of` divided by the number of those records."))


def _of() -> Any:
    return Field(default_factory=list, max_length=8, description=(
        "Category names (from `categories`) the value reads; an empty list means every category. E.g. "
        "['repayment']."))


def _against() -> Any:
    return Field(default_factory=list, max_length=8, description=(
        "Only for 'difference' and 'percent': the categories of the second operand (what is subtracted, or the "
        "denominator), e.g. ['disbursement']. Leave empty for the other operations."))


class Computation:
    """How a value is computed from the reported subject's counted records of the reported period (the `op`,
    `of` and `against` fields of a metric or a KPI)."""

    @property
    def kind(self) -> str:
        """amount, count or percent: decides how the value is formatted."""
        return OP_KINDS[self.op]  # type: ignore[attr-defined]


class Metric(DomainPart, Computation):
    field: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "Identifier of the report field the agent sets for this metric, e.g. 'total_disbursed', "
        "'pallets_received'."))
    label: str = Field(min_length=2, max_length=40, description=(
        "How the metric is labelled in the PDF, e.g. 'Total disbursed', 'Pallets received'."))
    description: str = Field(min_length=5, max_length=160, description=(
        "What the metric computes, as a phrase that follows the field name in the agent's instructions, e.g. "
        "'sums the disbursements', 'counts the posted movements of every kind'. It must agree with `op`/`of`."))
    op: Op = _op()
    of: list[Word] = _of()
    against: list[Word] = _against()


class Kpi(DomainPart, Computation):
    code: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "Identifier of the KPI, e.g. 'net_cash_flow', 'dock_to_stock_ratio'."))
    label: str = Field(min_length=2, max_length=40, description=(
        "The KPI's label as listed in the KPI table and printed in the report, e.g. 'Net cash flow'. The agent "
        "must copy it exactly."))
    formula: str = Field(min_length=5, max_length=160, description=(
        "The formula as the KPI table writes it for the agent, in terms of the metrics or categories, e.g. "
        "'total_repaid - total_disbursed' or 'sum of the posted return amounts of the week'. It must agree with "
        "`op`/`of`/`against`: it is the only place the agent learns how to compute the KPI."))
    op: Op = _op()
    of: list[Word] = _of()
    against: list[Word] = _against()


class Category(DomainPart):
    name: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "A kind of record, as stored in the category column, e.g. 'disbursement', 'inbound_receipt', "
        "'admission'."))
    amount: tuple[PositiveAmount, PositiveAmount] = Field(description=(
        "[low, high]: the range of one record's amount in the measure's unit, e.g. [5000.00, 250000.00] for "
        "loan disbursements in dollars, or [1, 40] for pallets. Positive, with no more decimals than the "
        "measure has."))
    per_period: tuple[PeriodCount, PeriodCount] = Field(description=(
        "[low, high]: how many such records the reported subject has in the reported period, e.g. [2, 5]; low "
        "at least 1 (every category has business in the period), high at most 12."))


class Measure(DomainPart):
    column: str = Field(default="amount", min_length=2, max_length=30, pattern=IDENT, description=(
        "Column of the records table holding each record's amount, e.g. 'amount', 'pallets', 'charge'."))
    decimals: int = Field(default=2, ge=0, le=3, description=(
        "Decimals of an amount: 2 for money, 0 for whole units such as pallets or patients."))
    unit: str = Field(min_length=1, max_length=12, pattern=r"^[A-Za-z][A-Za-z.]*$", description=(
        "The unit code written next to an amount, e.g. 'USD', 'EUR', 'pallets', 'kg'."))
    symbol: str = Field(default="", max_length=3, description=(
        "A symbol messy exports put before an amount, e.g. '$' or '£'; empty for units without one."))
    placement: Literal["prefix", "suffix"] = Field(default="prefix", description=(
        "Where the unit code goes when a house style writes it: 'prefix' (USD 12345.60) or 'suffix' "
        "(1234 pallets)."))
    unit_word: str = Field(default="unit", min_length=3, max_length=30, description=(
        "What the unit code is called in a formatting hint, e.g. 'currency code', 'unit'."))


class Attribute(DomainPart):
    column: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "A descriptive column, e.g. 'segment', 'region', 'shift'."))
    values: list[Word] = Field(min_length=2, max_length=12, description=(
        "Values the column takes (one is drawn per row), e.g. ['retail', 'sme', 'corporate']."))


class SubjectTable(DomainPart):
    table: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "Table of the subjects a report is about, e.g. 'customers', 'warehouses', 'wards'."))
    id_column: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "Its key column, which every other table uses to name a subject, e.g. 'customer_id', 'site_id'."))
    name_column: str = Field(default="name", min_length=2, max_length=30, pattern=IDENT,
                             description="Column holding the subject's name, e.g. 'name'.")
    id_prefix: str = Field(max_length=5, pattern=r"^[A-Z]{1,4}-$", description=(
        "Prefix of subject ids (a three-digit number follows), e.g. 'C-' gives 'C-482'."))
    attributes: list[Attribute] = Field(default_factory=list, max_length=3, description=(
        "Descriptive columns of a subject (colour for the agent, never needed for the report), e.g. "
        "segment and region."))


class RecordTable(DomainPart):
    table: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "Table of the records the report aggregates, e.g. 'transactions', 'movements', 'encounters'."))
    id_column: str = Field(min_length=2, max_length=30, pattern=IDENT, description="Its key, e.g. 'txn_id'.")
    id_prefix: str = Field(max_length=5, pattern=r"^[A-Z]{1,4}-$", description=(
        "Prefix of record ids (a five-digit number follows), e.g. 'TX-'."))
    date_column: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "Column of the date a record belongs to (the period's date for a periodic report), e.g. 'txn_date', "
        "'week_start'."))
    category_column: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "Column holding the record's category, e.g. 'kind', 'movement_type'."))
    status_column: str = Field(default="status", min_length=2, max_length=30, pattern=IDENT, description=(
        "Column holding the record's status, e.g. 'status'."))
    measure: Measure = Field(description="The amount each record carries.")
    columns: list[Attribute] = Field(default_factory=list, max_length=3, description=(
        "Extra descriptive columns of a record (one value drawn per record), e.g. a 'dock' or 'channel' "
        "column. Never needed for the report."))


class Statuses(DomainPart):
    counted: str = Field(min_length=2, max_length=20, pattern=IDENT, description=(
        "The status of a record that counts in the report, e.g. 'settled', 'posted', 'billed'."))
    excluded: list[Word] = Field(min_length=1, max_length=4, description=(
        "Statuses of records that must not be counted (they appear as distractors on harder tiers), e.g. "
        "['reversed', 'pending']."))


class ReportType(DomainPart):
    code: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "Identifier of a kind of report, e.g. 'loan_book', 'inbound_flow'."))
    title: str = Field(min_length=5, max_length=80, description=(
        "The report's title, printed at the top of the PDF, e.g. 'Daily Loan Book Report'."))


class Header(DomainPart):
    title_field: str = Field(default="title", min_length=2, max_length=40, pattern=IDENT, description=(
        "Report field holding the report type's title, e.g. 'title'."))
    subject_field: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "Report field holding the subject's name, e.g. 'customer_name', 'warehouse_name'."))
    subject_label: str = Field(min_length=2, max_length=40, description=(
        "The PDF label of the subject's name, e.g. 'Customer', 'Warehouse'."))
    date_field: str = Field(default="report_date", min_length=2, max_length=40, pattern=IDENT, description=(
        "Report field holding the report date, e.g. 'report_date', 'week_start'."))
    date_label: str = Field(default="Report date", min_length=2, max_length=40, description=(
        "The PDF label of the report date, e.g. 'Report date', 'Week starting'."))


class TaskNames(DomainPart):
    """The names of the three tasks (easy, medium, hard) in this world's words; their content is fixed."""

    header: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "Easy task: fill the header only, e.g. 'daily_header'."))
    summary: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "Medium task: header and summary metrics, e.g. 'daily_summary'."))
    full: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "Hard task: header, metrics, KPI rows, the PDF and its delivery, e.g. 'daily_full'."))


class ReportDomain(Domain):
    # the metrics named first, then each written under its name: written one after another, a small model
    # gives several metrics the field 'total_sales' (and repeats it through repairs)
    KEYS = {"categories": "name", "report_types": "code", "metrics": "field", "kpis": "code"}
    RULES = (
        Rule("spare_kpis", ("kpis", "kpi_rows"),
             "The KPI catalogue holds at least kpi_rows + 2 KPIs.",
             "Each report type shows kpi_rows of them, and ECI 3+ lists spare definitions as retired rows ahead of "
             "the live ones."),
        Rule("amount_metric", ("metrics",),
             "At least one metric is an amount (op 'sum', 'difference' or 'average').",
             "ECI 4's hidden house style for amounts then changes something in the summary task."),
        Rule("amount_decimals", ("categories", "record_table"),
             "A category's amount bounds have at most record_table.measure.decimals decimals and stay below 10^12 "
             "minor units: the engine holds amounts as whole minor units (cents for 2 decimals)."),
    )
    # The printed names and labels hold no placeholder, but the look-alike's name holds the real one's.
    PLACEHOLDERS = (
        Placeholders("lookalike_name", ("name",), ("name",)),
        *(Placeholders(at) for at in (
            "subject_names[]", "report_types[].title", "metrics[].label", "kpis[].label", "header.subject_label",
            "header.date_label", "metrics_heading", "kpis_heading", "record_table.measure.unit",
            "metrics[].description", "kpis[].formula")),
    )
    REFERENCES = {"metrics.of": Reference("categories.name"), "metrics.against": Reference("categories.name"),
                  "kpis.of": Reference("categories.name"), "kpis.against": Reference("categories.name")}
    agent_role: str = Field(min_length=5, max_length=100, description=(
        "Who the agent is, e.g. 'a back-office reporting agent at a lender', 'the regional operations analyst "
        "of a logistics company'."))
    subject_noun: str = Field(min_length=3, max_length=30, pattern=r"^[a-z][a-z ]*$", description=(
        "What one subject is called, singular and lowercase, e.g. 'customer', 'warehouse', 'ward'."))
    records_noun: str = Field(min_length=3, max_length=30, pattern=r"^[a-z][a-z ]*$", description=(
        "What the records are called, plural and lowercase, e.g. 'transactions', 'stock movements'."))
    first_date: dt.date = Field(description=(
        "The first date a report can cover (YYYY-MM-DD), e.g. 2026-01-05; for weekly reports a Monday."))
    period_days: int = Field(default=1, ge=1, le=31, description=(
        "Length of one reporting period in days: 1 for daily reports, 7 for weekly ones. Report dates are "
        "first_date plus whole periods, and records carry the date of their period."))
    periods: int = Field(ge=1, le=2000, description=(
        "How many periods after first_date a report can cover (the report date is drawn from them), e.g. 320."))
    task_names: TaskNames = Field(description=(
        "What the three tasks (easy header, medium summary, hard full report) are called in this world."))
    header: Header = Field(description="The three header fields of every report and their PDF labels.")
    subject_table: SubjectTable = Field(description=(
        "The table of the subjects reports are about, and how its ids and columns are named."))
    subject_names: list[Name] = Field(min_length=1, max_length=60, description=(
        "Names of the subjects, realistic for this world, e.g. 'Aldergrove Capital', 'Rotterdam North DC'. At "
        "least 10, unique, in Latin-1 characters (they are printed in a PDF)."))
    lookalike_name: str = Field(min_length=8, max_length=80, description=(
        "How a look-alike of a subject is named (a distractor with its own business on harder tiers); must "
        "contain {name}, e.g. '{name} Holdings', '{name} Overflow Yard'."))
    subject_name_example: str = Field(min_length=3, max_length=40, description=(
        "A made-up subject name used in a formatting hint (shown in upper case), e.g. 'Acme Lending'."))
    contacts_table: str = Field(default="contacts", min_length=2, max_length=30, pattern=IDENT, description=(
        "Table of the subjects' report recipients (columns: the subject id, email, role primary/backup, "
        "active), e.g. 'contacts'."))
    mailboxes: list[Word] = Field(min_length=1, max_length=12, description=(
        "Local parts of the recipients' mail addresses (three are drawn per subject: primary, backup and a "
        "retired one), e.g. ['reports', 'finance', 'treasury', 'ops']. The first one also serves look-alikes."))
    report_types: list[ReportType] = Field(min_length=1, max_length=10, description=(
        "The kinds of report the queue holds, at least 3."))
    categories: list[Category] = Field(min_length=1, max_length=6, description=(
        "The categories of records, each with its amount range and how many the subject has in a period."))
    record_table: RecordTable = Field(description=(
        "The table of the records reports aggregate, its columns and the measure its amounts are in."))
    statuses: Statuses = Field(description="Which record status counts in a report and which do not.")
    metrics: list[Metric] = Field(min_length=1, max_length=4, description=(
        "The summary metrics of the report (fields the agent sets), e.g. total disbursed, total repaid and a "
        "count of transactions. At least one must be an amount (sum, difference or average)."))
    kpi_rows: int = Field(default=2, ge=1, le=3, description=(
        "How many KPI rows each report type has (active definitions at increasing positions)."))
    kpis: list[Kpi] = Field(min_length=1, max_length=10, description=(
        "The KPI catalogue report types draw their rows from; at least kpi_rows + 2 (the spare ones become "
        "retired definitions on harder tiers)."))
    metrics_heading: str = Field(default="Summary metrics", min_length=3, max_length=40,
                                 description="PDF heading above the summary metrics.")
    kpis_heading: str = Field(default="Key performance indicators", min_length=3, max_length=40,
                              description="PDF heading above the KPI rows.")

    # ---- facts the engine uses ---------------------------------------------------------------------------
    @property
    def header_fields(self) -> tuple[str, str, str]:
        h = self.header
        return (h.title_field, h.subject_field, h.date_field)

    @property
    def metric_fields(self) -> tuple[str, ...]:
        return tuple(m.field for m in self.metrics)

    @property
    def fields(self) -> tuple[str, ...]:
        return self.header_fields + self.metric_fields

    @property
    def category_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.categories)

    def categories_of(self, names: list[str]) -> tuple[str, ...]:
        """The categories a computation reads (an empty list: all of them), in domain order."""
        return tuple(c for c in self.category_names if not names or c in names)

    @property
    def lookalike_categories(self) -> tuple[str, ...]:
        """Categories a look-alike subject does business in: those the summary metrics add up (or all)."""
        summed = [c for m in self.metrics if m.op == "sum" for c in self.categories_of(m.of)]
        return tuple(c for c in self.category_names if c in summed) or self.category_names

    def minor_units(self, value: float) -> int:
        return int((Decimal(str(value)) * (10 ** self.record_table.measure.decimals)).to_integral_value())

    @classmethod
    def tidy(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A metric's or KPI's `against` is emptied where its op takes no second operand (only 'difference' and
        'percent' read it): a small model gives 'sum' metrics and KPIs one, and repairs do not remove it. The op
        stays what the draft says; `against` was never read."""
        data = dict(data)
        for name in ("metrics", "kpis"):
            if isinstance(data.get(name), list):
                data[name] = [{**c, "against": []} if isinstance(c, dict) and c.get("op") in _ONE_OPERAND
                              and c.get("against") else c for c in data[name]]
        return data

    # ---- semantic checks ---------------------------------------------------------------------------------
    def family_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        p += self._variety_problems()
        p += self._subject_problems()
        p += self._name_problems()
        p += self._table_problems()
        p += self._computation_problems()
        p += self._text_rules()
        return p

    def _variety_problems(self) -> list[DomainProblem]:
        p = too_few(self.subject_names, 10, "domain.subject_names",
                    f"(each episode casts {SUBJECTS_PER_EPISODE} of them; more than that keeps episodes varied)")
        p += too_few(self.report_types, 3, "domain.report_types",
                     "so that the title cannot be guessed and the queue holds other reports")
        p += too_few(self.categories, 2, "domain.categories", "so that metrics must filter by category")
        p += too_few(self.mailboxes, 3, "domain.mailboxes",
                     "(each subject gets a primary, a backup and, on ECI 3+, a retired primary mailbox)")
        if len(self.kpis) < self.kpi_rows + 2:
            p.append(self.rule("spare_kpis").broken("domain.kpis", f"{len(self.kpis)} KPIs, kpi_rows {self.kpi_rows}",
                                                     minimum=self.kpi_rows + 2))
        if not any(m.kind == "amount" for m in self.metrics):
            ops = sorted({m.op for m in self.metrics})
            p.append(self.rule("amount_metric").broken("domain.metrics", f"only ops {ops}"))
        for i, cat in enumerate(self.categories):
            at = f"domain.categories[{i}]"
            low, high = cat.per_period
            if not 1 <= low <= high <= 12:
                p.append(DomainProblem(path=f"{at}.per_period", message=(
                    f"[{low}, {high}] must satisfy 1 <= low <= high <= 12 (every category has business in the "
                    "period, so ratios and averages are defined)")))
            lo, hi = cat.amount
            if not (math.isfinite(lo) and math.isfinite(hi)):
                p.append(DomainProblem(path=f"{at}.amount", message=f"[{lo}, {hi}] must be finite numbers"))
                continue
            if not 0 < lo < hi:
                p.append(DomainProblem(path=f"{at}.amount", message=f"[{lo}, {hi}] must satisfy 0 < low < high"))
            decimals = self.record_table.measure.decimals
            scale = 10 ** decimals
            for j, bound in enumerate(cat.amount):
                if abs(bound * scale - round(bound * scale)) > 1e-6 or bound * scale > 1e12:
                    p.append(self.rule("amount_decimals").broken(f"{at}.amount[{j}]",
                                                                 f"{bound} with a measure of {decimals} decimal(s)"))
        return p

    def _subject_problems(self) -> list[DomainProblem]:
        """The subject is what one report is about (a store, a customer), never the report or its kinds: a
        small model makes 'daily sales report' its subject noun, its report types and a category, and lists
        the report's readers ('Store Managers', 'Sales Team') as the subjects."""
        p: list[DomainProblem] = []
        about = "one subject"
        if _REPORT_WORD.search(self.subject_noun):
            p.append(DomainProblem(path="domain.subject_noun", message=(
                f"{self.subject_noun!r} is the report itself: the subject is what one report is about, e.g. "
                "'store' for a report per store, 'customer' for a statement per customer")))
        else:
            about = f"one {self.subject_noun}"
        titles = {t.title.casefold() for t in self.report_types} | {t.code for t in self.report_types}
        for i, name in enumerate(self.subject_names):
            if _REPORT_WORD.search(name) or name.casefold() in titles:
                p.append(DomainProblem(path=f"domain.subject_names[{i}]", message=(
                    f"{name!r} names a report, not a subject: each name is {about} a report is about")))
        for i, cat in enumerate(self.categories):
            if _REPORT_WORD.search(cat.name.replace("_", " ")) or cat.name in titles:
                p.append(DomainProblem(path=f"domain.categories[{i}].name", message=(
                    f"{cat.name!r} names a report: a category is a kind of {self.records_noun} the report counts")))
        return p

    def _name_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        p += duplicate_values(self.subject_names, "domain.subject_names")
        slugs: dict[str, int] = {}
        for i, name in enumerate(self.subject_names):
            slug = slugify(name)
            if slug in slugs and self.subject_names[slugs[slug]].lower() != name.lower():
                p.append(DomainProblem(path=f"domain.subject_names[{i}]", message=(
                    f"{name!r} gives the same mail domain ({slug}.example) as domain.subject_names[{slugs[slug]}]")))
            slugs.setdefault(slug, i)
        folded = {n.casefold() for n in self.subject_names}
        for i, name in enumerate(self.subject_names):
            twin = fill_name(self.lookalike_name, name)
            if twin.casefold() in folded:
                p.append(DomainProblem(path=f"domain.subject_names[{i}]", message=(
                    f"its look-alike {twin!r} (domain.lookalike_name) is itself a subject: names must stay "
                    "unambiguous")))
        p += duplicates(self.report_types, "code", "domain.report_types")
        p += duplicates(self.report_types, "title", "domain.report_types")
        p += duplicates(self.categories, "name", "domain.categories")
        p += duplicates(self.metrics, "field", "domain.metrics")
        p += duplicates(self.metrics, "label", "domain.metrics")
        p += duplicates(self.kpis, "code", "domain.kpis")
        p += duplicates(self.kpis, "label", "domain.kpis")
        p += duplicate_values(self.mailboxes, "domain.mailboxes")
        for i, box in enumerate(self.mailboxes):
            if not re.match(r"^[a-z][a-z0-9.-]*$", box):
                p.append(DomainProblem(path=f"domain.mailboxes[{i}]", message=(
                    f"{box!r} must be the local part of a mail address: lowercase letters, digits, '.', '-'")))
        statuses = [self.statuses.counted, *self.statuses.excluded]
        for j, status in enumerate(self.statuses.excluded):
            if not re.match(IDENT, status):
                p.append(DomainProblem(path=f"domain.statuses.excluded[{j}]",
                                       message=f"{status!r} must be a lowercase identifier"))
        p += names_differ(statuses, "domain.statuses", "statuses")
        p += names_differ(self.task_names.model_dump(), "domain.task_names", "task names")
        fields = list(self.fields)
        for i, name in enumerate(fields):
            if name in fields[:i]:
                where = (f"domain.header.{('title_field', 'subject_field', 'date_field')[i]}" if i < 3
                         else f"domain.metrics[{i - 3}].field")
                p.append(DomainProblem(path=where, message=f"report field {name!r} is used twice"))
        labels = [self.header.subject_label, self.header.date_label, *(m.label for m in self.metrics)]
        if len({x.casefold() for x in labels}) != len(labels):
            p.append(DomainProblem(path="domain.header", message=f"PDF labels must differ: {labels}"))
        return p

    def _table_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        s, r = self.subject_table, self.record_table
        named = {
            "domain.subject_table.table": s.table, "domain.record_table.table": r.table,
            "domain.contacts_table": self.contacts_table,
        }
        for path, table in named.items():
            if table in FIXED_TABLES:
                p.append(DomainProblem(path=path, message=f"{table!r} is one of the engine's own tables "
                                       f"({', '.join(FIXED_TABLES)})"))
        if len(set(named.values())) != len(named):
            p.append(DomainProblem(path="domain.record_table.table", message=(
                f"table names must differ: {sorted(named.values())}")))
        columns = {
            "domain.subject_table": [("id_column", s.id_column), ("name_column", s.name_column),
                                     *((f"attributes[{i}].column", a.column) for i, a in enumerate(s.attributes))],
            "domain.record_table": [("id_column", r.id_column), ("date_column", r.date_column),
                                    ("category_column", r.category_column), ("status_column", r.status_column),
                                    ("measure.column", r.measure.column),
                                    *((f"columns[{i}].column", a.column) for i, a in enumerate(r.columns))],
        }
        columns["domain.record_table"].insert(1, (SUBJECT_KEY, s.id_column))
        for table_path, cols in columns.items():
            seen: dict[str, str] = {}
            for field, col in cols:
                if col in seen and SUBJECT_KEY in (field, seen[col]):
                    # said at the record's own column, which a repair can rename: said at '(subject id)', a
                    # record table is rewritten whole and keeps its key ('sale_id')
                    own = seen[col] if field == SUBJECT_KEY else field
                    p.append(DomainProblem(path=f"{table_path}.{own}", code=Code.NAME_CLASH, value=col, message=(
                        f"column {col!r} is the subjects' key (`subject_table.id_column`), which this table holds "
                        "as a column of its own too: name this column differently")))
                elif col in seen:
                    p.append(DomainProblem(path=f"{table_path}.{field}", code=Code.NAME_CLASH, value=col, message=(
                        f"column {col!r} is already {seen[col]}: columns of a table must differ")))
                seen.setdefault(col, field)
        for table, fixed in FIXED_COLUMNS.items():
            if s.id_column in fixed:
                p.append(DomainProblem(path="domain.subject_table.id_column", message=(
                    f"{s.id_column!r} clashes with the {table} table's own columns {fixed}")))
        for path, word in [*named.items(), *((f"{t}.{f}", c) for t, cols in columns.items() for f, c in cols
                                             if f != SUBJECT_KEY)]:
            if word in SQL_KEYWORDS:
                p.append(DomainProblem(path=path, message=f"{word!r} is an SQL keyword: every query naming it "
                                       "would fail; pick another name (e.g. a plural or a suffix)"))
        for i, attr in enumerate([*s.attributes, *r.columns]):
            where = (f"domain.subject_table.attributes[{i}]" if i < len(s.attributes)
                     else f"domain.record_table.columns[{i - len(s.attributes)}]")
            p += duplicate_values(attr.values, f"{where}.values")
        return p

    def _computation_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        known = self.category_names
        items = [(f"domain.metrics[{i}]", m) for i, m in enumerate(self.metrics)]
        items += [(f"domain.kpis[{i}]", k) for i, k in enumerate(self.kpis)]
        for at, comp in items:
            p += unknown_refs(comp.of, known, f"{at}.of", "category")
            p += unknown_refs(comp.against, known, f"{at}.against", "category")
            if comp.op in ("difference", "percent"):
                if not comp.against:
                    p.append(DomainProblem(path=f"{at}.against", message=(
                        f"'{comp.op}' needs the categories of its second operand")))
                elif set(self.categories_of(comp.of)) == set(self.categories_of(comp.against)):
                    p.append(DomainProblem(path=f"{at}.against", message=(
                        "reads the same categories as `of`: the value would always be "
                        + ("0" if comp.op == "difference" else "100.0%"))))
            elif comp.against:
                p.append(DomainProblem(path=f"{at}.against", message=f"'{comp.op}' takes no second operand"))
        return p

    def _text_rules(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        printed = [(f"domain.subject_names[{i}]", n) for i, n in enumerate(self.subject_names)]
        printed += [(f"domain.report_types[{i}].title", t.title) for i, t in enumerate(self.report_types)]
        printed += [(f"domain.metrics[{i}].label", m.label) for i, m in enumerate(self.metrics)]
        printed += [(f"domain.kpis[{i}].label", k.label) for i, k in enumerate(self.kpis)]
        printed += [("domain.header.subject_label", self.header.subject_label),
                    ("domain.header.date_label", self.header.date_label),
                    ("domain.lookalike_name", self.lookalike_name), ("domain.metrics_heading", self.metrics_heading),
                    ("domain.kpis_heading", self.kpis_heading),
                    ("domain.record_table.measure.unit", self.record_table.measure.unit)]
        for path, text in printed:
            try:
                text.encode("latin-1")
            except UnicodeEncodeError:
                p.append(DomainProblem(path=path, message=(
                    f"{text!r} has characters outside Latin-1: the PDF's fonts cannot print them")))
            if "  " in text or any(ord(ch) < 32 for ch in text) or "|" in text:
                p.append(DomainProblem(path=path, message=(
                    "no double spaces, control characters or '|' (query results separate columns with ' | ')")))
            if re.match(r"^\d+\. ", text):
                p.append(DomainProblem(path=path, message="must not start like a numbered KPI row ('1. ')"))
        return p


_REPORT_WORD = re.compile(r"\breports?\b", re.IGNORECASE)


def slugify(name: str) -> str:
    """A subject's mail domain label: 'Aldergrove Capital' -> 'aldergrove-capital', 'Liège Sud' -> 'liege-sud'."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")


def fill_name(template: str, name: str) -> str:
    return fill(template, name=name)
