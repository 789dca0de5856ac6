"""The querying family: answer business questions with SQL against a live SQLite database whose schema has
drifted from its documentation; answers are checked by executing them (text-to-SQL on sales, clinic,
logistics, finance or any relational database whose schema keeps changing)."""

from openadapt.families import register_family
from openadapt.families.base import Family
from openadapt.families.querying.domain import QueryingDomain
from openadapt.families.querying.engine import TOOLS, QueryingEnvironment
from openadapt.families.querying.models import models
from openadapt.families.querying.policies import DocumentedSchemaHeuristic, QueryingOracle


def dictionary(domain: QueryingDomain) -> list[str]:
    """The documented schema, as the system prompt shows it."""
    lines = []
    for table in domain.tables:
        lines.append(f"{table.name}: {table.comment}")
        for col in table.columns:
            extra = ", primary key" if col.kind == "key" else f", references {col.ref}" if col.kind == "ref" else ""
            lines.append(f"  - {col.name} ({col.type}{extra}): {col.comment}")
    return lines


def prompt_context(domain: QueryingDomain) -> dict:
    return {"domain": domain, "tools": TOOLS, "dictionary": dictionary(domain),
            "example_table": domain.tables[0].name}


FAMILY = register_family(Family(
    name="querying",
    version=1,
    summary="answer questions with SQL on a live database whose schema has drifted from its documentation",
    fits=("text-to-SQL and analytics questions over a relational database (sales, clinic appointments, "
          "logistics, finance, inventory) where the agent explores tables, writes queries and is judged by "
          "executing its answer; especially where the schema changes (renames, migrations, soft deletes, unit "
          "changes, legacy copies). Not for free-text search, spreadsheets without a schema, or writing data"),
    brief=("name the tables and their key columns, and the questions the people who ask usually put to this"
           " data"),
    domain=QueryingDomain,
    environment=QueryingEnvironment,
    models=models,
    oracle=QueryingOracle,
    heuristic=DocumentedSchemaHeuristic,
    step_budget={1: 10, 2: 10, 3: 10, 4: 10, 5: 6},
    tier_changes={
        1: "the live schema is the documented one; full comments and foreign keys",
        2: "+ tables and columns renamed (30%), comments, rename notes and foreign keys withheld or cut short, "
           "optional values NULL",
        3: "+ 3 distractors: stale copies of tables and decoy columns (a legacy price in cents), half of those on "
           "what the question reads wearing the documented name while the live one is renamed",
        4: "+ a hidden constraint on what the question reads, documented only in the live table: soft-deleted "
           "rows to exclude, a column re-stored in another unit, or columns moved to a side table",
        5: "+ 40% renames and withheld comments, 5 distractors (most wearing documented names), two hidden "
           "constraints, and a budget of 6 steps",
    },
    prompt_context=prompt_context,
))
