"""Action and observation of the daily-report environment."""

from typing import Literal

from pydantic import Field

from openadapt.kit import AgentAction, AgentObservation

try:
    from .server.catalogue import COMMANDS, FIELDS
except ImportError:  # loaded as a top-level module by `uvicorn server.app:app`
    from server.catalogue import COMMANDS, FIELDS

Command = Literal[COMMANDS]  # type: ignore[valid-type]
FieldName = Literal[FIELDS]  # type: ignore[valid-type]


class WeeklyWarehouseReportAction(AgentAction):
    """One command per step; only the fields its command uses are read. Text is length-checked by the environment
    (a refused command, not a schema error), so an over-long value costs a step instead of breaking the parse."""

    command: Command | None = Field(default=None, description="what to do")
    sql: str | None = Field(default=None, description="query: one read-only SELECT statement (SQLite dialect)")
    field: FieldName | None = Field(default=None, description="set_field: which report field")
    value: str | None = Field(default=None, description="set_field / add_kpi_row: the value text")
    label: str | None = Field(default=None, description="add_kpi_row: the KPI label")
    recipient: str | None = Field(default=None, description="send_email: the address to send to")


class WeeklyWarehouseReportObservation(AgentObservation):
    """The work desk: the task, the queue, the last query's result, the draft and the delivery log."""

    task: str = Field(default="", description="daily_header, daily_summary or daily_full")
    task_id: str = Field(default="", description="the report_tasks row being worked")
    instructions: str = Field(default="", description="what to produce, for which customer and date, and formats")
    queue: list[str] = Field(default_factory=list, description="the report queue: task, customer, status")
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
