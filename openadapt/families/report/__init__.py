"""The report family: assemble a periodic report about one subject from a SQLite database - query the records,
fill the header, the summary metrics and the KPI rows, render the PDF, deliver it through a flaky mail API and
submit (daily customer reports, weekly warehouse reports, a clinic's daily census, monthly statements)."""

from openadapt.families import register_family
from openadapt.families.base import Family
from openadapt.families.report.domain import ReportDomain
from openadapt.families.report.engine import ReportEnvironment
from openadapt.families.report.mail import PERMANENT, TRANSIENT
from openadapt.families.report.models import COMMANDS, models
from openadapt.families.report.policies import ReportOracle, ShallowHeuristic
from openadapt.families.report.world import World


def prompt_context(domain: ReportDomain) -> dict:
    world = World(domain)
    return {"domain": domain, "commands": COMMANDS, "fields": list(domain.fields), "tables": world.schema.lines,
            "tasks": {name: task.summary for name, task in world.tasks.items()},
            "formats": world.formats.defaults, "transient_error": TRANSIENT, "permanent_error": PERMANENT,
            "max_kpi_rows": 3 * domain.kpi_rows}


FAMILY = register_family(Family(
    name="report",
    version=1,
    summary=("assemble a periodic report about one subject from a database: query the records, compute the "
             "metrics and KPIs, render the PDF and deliver it by mail"),
    fits=("daily, weekly or monthly reports, statements and census sheets built from records in a database "
          "(transactions, stock movements, encounters, shifts): the agent queries the data, aggregates the "
          "subject's counted records of the period into fields and KPI rows, renders a PDF and sends it to the "
          "right recipient through a mail API that can fail. Not for free-text summaries, for reconciling two "
          "sources against each other, or for answering one-off questions with SQL"),
    brief=("name the records this report is built from, the figures and KPIs it shows, and who reads it for"
           " what"),
    domain=ReportDomain,
    environment=ReportEnvironment,
    models=models,
    oracle=ReportOracle,
    heuristic=ShallowHeuristic,
    step_budget={1: 40, 2: 40, 3: 40, 4: 40, 5: 30},
    invalid_action_reward=0.0,
    malformed_reward=0.0,
    tier_changes={
        1: "clean data; the task's subject, date and type in the instructions; mail: 20% flaky network, 10% "
           "unroutable primary",
        2: "+ amounts stored as text (separators, symbol, unit), the counted status in mixed case and padding; "
           "report date or type withheld; mail 35% / 25%",
        3: "+ excluded-status records of the period, a look-alike subject with the same period's business, retired "
           "KPI definitions ahead of the live ones, a retired primary mailbox listed first, more tasks in the queue",
        4: "+ a hidden house style (1-2 rules: dates, amounts or names) that only check_report feedback reveals",
        5: "+ up to three house-style rules, more noise and distractors, mail 40% / 30%, and a budget of 30 steps",
    },
    prompt_context=prompt_context,
))
