"""Action and observation of the report family; the report fields an action may name come from the domain."""

from __future__ import annotations

from pydantic import Field

from openadapt.families.report.domain import ReportDomain
from openadapt.kit.models import AgentAction, AgentObservation, with_choices

COMMANDS: tuple[str, ...] = ("query", "set_field", "add_kpi_row", "clear_kpi_rows", "check_report",
                             "finalize_pdf", "send_email", "submit_report")


class ReportAction(AgentAction):
    """One command per step; only the fields its command uses are read. Text is length-checked by the environment
    (a refused command, not a schema error), so an over-long value costs a step instead of breaking the parse."""

    command: str | None = Field(default=None, description="what to do")
    sql: str | None = Field(default=None, description="query: one read-only SELECT statement (SQLite dialect)")
    field: str | None = Field(default=None, description="set_field: which report field")
    value: str | None = Field(default=None, description="set_field / add_kpi_row: the value text")
    label: str | None = Field(default=None, description="add_kpi_row: the KPI label")
    recipient: str | None = Field(default=None, description="send_email: the address to send to")


class ReportObservation(AgentObservation):
    """The work desk: the task, the queue, the last query's result, the draft and the delivery log."""

    task: str = Field(default="", description="which of the three tasks (header, summary, full report)")
    task_id: str = Field(default="", description="the report_tasks row being worked")
    instructions: str = Field(default="", description="what to produce, for which subject and date, and formats")
    queue: list[str] = Field(default_factory=list, description="the report queue: task, subject, status")
    tables: list[str] = Field(default_factory=list, description="the database schema, one table per line")
    last_query: str = Field(default="", description="the last SQL that ran")
    query_result: list[str] = Field(default_factory=list, description="its result: header line, then rows")
    draft: dict[str, str] = Field(default_factory=dict, description="report fields set so far")
    kpi_rows: list[str] = Field(default_factory=list, description="KPI rows added so far, in order")
    pdf_status: str = Field(default="none", description="none, current, or stale (the draft changed since)")
    outbox: list[str] = Field(default_factory=list, description="every send_email attempt and its result")
    delivery_status: str = Field(default="not_sent", description="not_sent, failed_transient, "
                                 "failed_permanent or delivered")
    grade_report: list[str] = Field(default_factory=list, description="grader feedback from check_report, and "
                                    "the final grade")
    graded_score: float | None = Field(default=None, description="grader score of that feedback, 0..1")


def models(domain: ReportDomain) -> tuple[type[ReportAction], type[ReportObservation]]:
    action = with_choices(ReportAction, "ReportAction", {"command": list(COMMANDS), "field": list(domain.fields)})
    action.__doc__ = ReportAction.__doc__  # with_choices' subclass has none: keep the agent's description
    return action, ReportObservation
