"""Static facts of the daily-report domain: the three tasks, the report's fields, the KPI catalogue, the
customers, and the database schema the agent queries."""

from __future__ import annotations

from dataclasses import dataclass

COMMANDS: tuple[str, ...] = ("query", "set_field", "add_kpi_row", "clear_kpi_rows", "check_report",
                             "finalize_pdf", "send_email", "submit_report")

HEADER_FIELDS: tuple[str, ...] = ("title", "customer_name", "report_date")
METRIC_FIELDS: tuple[str, ...] = ("total_disbursed", "total_repaid", "transaction_count")
FIELDS: tuple[str, ...] = HEADER_FIELDS + METRIC_FIELDS

# What kind of value each field holds (decides its format and which house-style rule can apply to it).
FIELD_KINDS: dict[str, str] = {
    "title": "text", "customer_name": "name", "report_date": "date",
    "total_disbursed": "amount", "total_repaid": "amount", "transaction_count": "count",
}
# How each field is labelled in the PDF.
PDF_LABELS: dict[str, str] = {
    "customer_name": "Customer", "report_date": "Report date",
    "total_disbursed": "Total disbursed", "total_repaid": "Total repaid", "transaction_count": "Transactions",
}


@dataclass(frozen=True)
class Task:
    name: str
    fields: tuple[str, ...]
    kpi_rows: bool  # the full report: KPI rows, PDF and delivery
    summary: str


TASKS: dict[str, Task] = {t.name: t for t in (
    Task("daily_header", HEADER_FIELDS, False,
         "fill the report header (title, customer_name, report_date), then submit_report"),
    Task("daily_summary", FIELDS, False,
         "fill the header and the three summary metrics (total_disbursed, total_repaid, transaction_count), "
         "then submit_report"),
    Task("daily_full", FIELDS, True,
         "fill the header and the summary metrics, add the report type's KPI rows in order, finalize_pdf, "
         "send_email the PDF to the customer's active primary contact, then submit_report"),
)}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)

REPORT_TYPES: dict[str, str] = {
    "loan_book": "Daily Loan Book Report",
    "collections": "Daily Collections Report",
    "treasury": "Daily Treasury Position Report",
    "card_settlement": "Daily Card Settlement Report",
}


@dataclass(frozen=True)
class Kpi:
    code: str
    label: str
    formula: str  # as written in the report_kpis table
    kind: str  # amount or percent


KPIS: dict[str, Kpi] = {k.code: k for k in (
    Kpi("net_cash_flow", "Net cash flow", "total_repaid - total_disbursed", "amount"),
    Kpi("repayment_ratio", "Repayment ratio", "100 * total_repaid / total_disbursed, one decimal, with %",
        "percent"),
    Kpi("fee_income", "Fee income", "sum of the settled fee amounts of the report date", "amount"),
    Kpi("average_transaction", "Average transaction",
        "(sum of the settled amounts of every kind) / transaction_count", "amount"),
)}

CUSTOMERS: tuple[str, ...] = (
    "Aldergrove Capital", "Brightwater Lending", "Cobalt Mutual", "Dunmore Credit Union", "Eastgate Finance",
    "Fairhaven Savings", "Granite Peak Loans", "Harbourline Bank", "Ironbridge Credit", "Juniper Trust",
    "Kestrel Microfinance", "Lakeside Building Society", "Meridian Auto Finance", "Northfield Farm Credit",
    "Oakridge Student Loans", "Pinecrest Mortgage", "Quayside Leasing", "Redfern Commercial", "Silverline Factoring",
    "Thornbury Asset Finance",
)
MAILBOXES: tuple[str, ...] = ("reports", "finance", "treasury", "ops", "cfo-office", "controller")

TRANSACTION_KINDS: tuple[str, ...] = ("disbursement", "repayment", "fee")

SCHEMA: tuple[str, ...] = (
    "CREATE TABLE customers (customer_id TEXT PRIMARY KEY, name TEXT, segment TEXT, region TEXT)",
    "CREATE TABLE contacts (customer_id TEXT, email TEXT, role TEXT, active INTEGER)",
    "CREATE TABLE report_types (code TEXT PRIMARY KEY, title TEXT)",
    "CREATE TABLE report_kpis (report_type TEXT, position INTEGER, label TEXT, formula TEXT, active INTEGER)",
    "CREATE TABLE report_tasks (task_id TEXT PRIMARY KEY, customer_id TEXT, report_date TEXT, report_type TEXT, "
    "status TEXT)",
    "CREATE TABLE transactions (txn_id TEXT, customer_id TEXT, txn_date TEXT, kind TEXT, amount REAL, status TEXT)",
)
# The schema as the agent sees it: one line per table.
TABLES: tuple[str, ...] = tuple(
    line.removeprefix("CREATE TABLE ").replace(" TEXT", "").replace(" INTEGER", "").replace(" REAL", "")
    .replace(" PRIMARY KEY", "") for line in SCHEMA
)
SEGMENTS: tuple[str, ...] = ("retail", "sme", "corporate", "microfinance")
REGIONS: tuple[str, ...] = ("north", "south", "east", "west", "central")
