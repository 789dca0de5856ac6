"""Action and observation of the querying family."""

from __future__ import annotations

from pydantic import Field

from openadapt.families.querying.domain import QueryingDomain
from openadapt.families.querying.engine import TOOLS
from openadapt.kit.models import AgentObservation, ToolAction, with_choices


class QueryAction(ToolAction):
    """Explore the database (each action costs a step) or submit the final answer (ends the episode)."""

    table: str | None = Field(default=None, max_length=4000, description="describe_table: the table to describe")
    sql: str = Field(default="", max_length=8000, description=(
        "run_query: one read-only SELECT; submit_answer: the query whose result answers the question"))
    value: str | None = Field(default=None, max_length=4000, description=(
        "submit_answer without sql: the answer as a single value"))


class QueryObservation(AgentObservation):
    """The question and what the agent has learnt of the database so far."""

    question: str = Field(default="", description="the business question to answer")
    tables: list[str] = Field(default_factory=list, description="the tables of the live database")
    catalog: list[str] = Field(default_factory=list, description="list_tables: each table, its rows and comment")
    described: list[str] = Field(default_factory=list, description="describe_table: columns, comments, sample rows")
    result: list[str] = Field(default_factory=list, description="run_query: the last query's result (first rows)")
    last_sql: str = Field(default="", description="run_query: the last query run")


def models(domain: QueryingDomain) -> tuple[type[QueryAction], type[QueryObservation]]:
    return with_choices(QueryAction, "QueryAction", {"tool": list(TOOLS)}), QueryObservation
