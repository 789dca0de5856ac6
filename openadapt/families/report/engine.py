"""The report engine: work one task of a SQLite-backed report queue - query the data, fill the report, and for
the full report generate the PDF, deliver it through a flaky mail API and submit.

Each episode draws one of three tasks (header, summary, full report; their names are the domain's) from the
seed, unless `reset` names one (`task=`), and builds its world at the tier's difficulty (`world.py`). Per-step
rewards are progress credit for fields and KPI rows (their best state so far: nothing can be earned twice) and the
kit's repeat-streak penalty; the terminal reward is the task's grader score plus a delivery-misconduct penalty.
Nothing here knows what the subjects, records, metrics or KPIs are: the domain says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from openadapt.families.engine import FamilyEnvironment, per_domain
from openadapt.families.report import downloads
from openadapt.families.report.domain import ReportDomain
from openadapt.families.report.grading import Grade, Grader, PdfState, credit, penalty
from openadapt.families.report.mail import MailApi, normalise
from openadapt.families.report.models import COMMANDS
from openadapt.families.report.pdf import Layout, extract_lines, render
from openadapt.families.report.world import Episode, World
from openadapt.kit import (
    Outcome,
    ProgressLedger,
    QueryRejected,
    ReadOnlySQL,
    RepeatStreak,
    ShapedEnvironment,
    TierProfile,
    action_key,
)

PROGRESS_POOL = 0.2  # what per-step progress credit can add up to in one episode
EXHAUSTED_SHARE = 0.5  # an unsubmitted draft at the end of the budget earns this share of its grade
MAX_QUERY_ROWS = 20
MAX_TEXT_CHARS = 200  # value, label, recipient (the SQL sandbox bounds the sql itself)
SOLVED_EPSILON = 1e-9


@dataclass
class Verdict:
    """How the episode ended; the rubric's components read from it."""

    score: float  # the task grader's score of the final draft
    submitted: bool
    grade: float  # the reward's grade component
    penalty: float
    solved: bool


class Desk:
    """Everything the engine derives from one domain, built once per bound class."""

    def __init__(self, domain: ReportDomain):
        self.world = World(domain)
        self.layout = Layout(domain)
        self.grader = Grader(domain, self.world.formats, self.layout)
        self.max_kpi_rows = 3 * domain.kpi_rows


def instructions(domain: ReportDomain, formats: Any, ep: Episode) -> str:
    """What the agent is asked to produce, in the domain's words; the formats and rules are the engine's."""
    d, h, noun = domain, domain.header, domain.subject_noun
    text = (f"Task {ep.task.name} ({ep.task_id}) for {noun} {ep.subject_id}, report date {ep.shown_date}, "
            f"report type {ep.shown_type}: {ep.task.summary}. Where a detail says n/a, look it up in report_tasks. "
            f"{h.title_field} is the report type's title in report_types; {h.subject_field} the {noun}'s name in "
            f"{d.subject_table.table}. Formats: dates YYYY-MM-DD")
    if ep.task.kind == "header":
        return text + "."
    text += (f"; {formats.amount_rule} ({formats.example}); counts as whole numbers. The summary metrics count only "
             f"this {noun}'s {d.statuses.counted} {d.records_noun} dated the report date: "
             + ", ".join(f"{m.field} {m.description}" for m in d.metrics) + ".")
    if ep.task.kpi_rows:
        text += (" KPI rows: the report type's active report_kpis rows ordered by position, each with its label "
                 "exactly as listed and the value of its formula (amounts as above; percentages with one decimal "
                 f"and a % sign, e.g. 87.5%). Deliver the finalised PDF to the {noun}'s active primary contact; if "
                 f"that address is permanently unroutable, send it to the {noun}'s active backup contact.")
    return text


class ReportEnvironment(FamilyEnvironment, ShapedEnvironment):
    domain: ClassVar[ReportDomain]
    REWARD = (
        ("grade", 0.0, 1.0, "the task's grader score at submit_report (half of it when the budget runs out)"),
        ("penalty", -0.5, 0.0, "-0.1 per retry of a permanently failed address, invented or misdirected recipient"),
    )

    def __init__(self) -> None:
        self._conn = None
        self._forced_task: str | None = None
        self._verdict: Verdict | None = None
        self._repeats = RepeatStreak()
        super().__init__()

    # ---- the domain, prepared once per class ----------------------------------------------------------
    @per_domain
    def desk(cls) -> Desk:
        return Desk(cls.domain)

    # ---- reward ---------------------------------------------------------------------------------------
    def verdict(self) -> Verdict:
        """The verdict of submit_report, or (when the budget ends the episode) of the draft as it stands."""
        return self._verdict if self._verdict is not None else self._conclude(submitted=False)

    # ---- episode generation ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None, episode_id: str | None = None, eci: int = 1, task: str | None = None,
              **kwargs: Any):
        """`task` (optional) picks one of the three tasks by name; by default the seed draws it."""
        names = self.desk().world.task_names
        if task is not None and task not in names:
            raise ValueError(f"task={task!r} is not one of {', '.join(names)}")
        self._forced_task = task
        return super().reset(seed=seed, episode_id=episode_id, eci=eci, **kwargs)

    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        desk = self.desk()
        ep = self._episode = desk.world.generate(rng, tier, self.perturb, self._forced_task)
        self.close()
        self._conn = desk.world.schema.load(ep.tables)
        self._sql = ReadOnlySQL(self._conn, max_rows=MAX_QUERY_ROWS)
        self._draft: dict[str, str] = {}
        self._rows: list[tuple[str, str]] = []
        self._pdf = PdfState()
        self._mail = MailApi(ep.known_addresses, ep.unroutable, ep.flaps)
        self._unknown_recipients = 0
        row_items = [f"kpi row {i + 1}" for i in range(len(ep.rows))] if ep.task.kpi_rows else []
        self._progress = ProgressLedger(PROGRESS_POOL, [*ep.task.fields, *row_items])
        self._last_query, self._query_result = "", []
        self._grade_lines: list[str] = []
        self._graded_score: float | None = None
        self._verdict = None
        self._instructions = instructions(self.domain, desk.world.formats, ep)
        self._repeats.reset()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ---- stepping -------------------------------------------------------------------------------------
    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any):
        # Every live step counts towards a repeat streak, malformed completions included.
        if self._state.episode_id is not None and self._final is None:
            cost = self._repeats.observe(action_key(action))
            if cost:
                self.shape(cost, "repeat_streak")
        return super().step(action, timeout_s, **kwargs)

    def apply(self, action: Any) -> Outcome:
        if action.command is None:
            return Outcome(f"Say which command to run: one of {', '.join(COMMANDS)}.", error="missing_command")
        too_long = [name for name in ("value", "label", "recipient")
                    if len(getattr(action, name) or "") > MAX_TEXT_CHARS]
        if too_long:
            return Outcome(f"{too_long[0]} is longer than {MAX_TEXT_CHARS} characters.", error="value_too_long")
        return getattr(self, f"_do_{action.command}")(action)

    def _do_query(self, action: Any) -> Outcome:
        if not (action.sql or "").strip():
            return Outcome("query needs sql: one read-only SELECT statement.", error="missing_sql")
        try:
            result = self._sql.run(action.sql)
        except QueryRejected as exc:
            return Outcome(f"Query refused: {exc.message}", error=exc.code)
        self._last_query, self._query_result = action.sql.strip(), result.lines()
        return Outcome(f"The query returned {len(result.rows)} row(s).")

    def _editable(self, action: Any, needs_rows: bool = False) -> Outcome | None:
        """The refusal for an edit the task or the phase does not allow, or None."""
        if needs_rows and not self._episode.task.kpi_rows:
            return Outcome(f"{action.command} is not part of task {self._episode.task.name}.", error="not_in_task")
        if self._mail.delivered:
            return Outcome("The report has been delivered; the draft is locked.", error="wrong_phase")
        return None

    def _do_set_field(self, action: Any) -> Outcome:
        task = self._episode.task
        if action.field is None:
            return Outcome(f"set_field needs field: one of {', '.join(task.fields)}.", error="missing_field")
        if not (action.value or "").strip():
            return Outcome("set_field needs a non-empty value.", error="missing_value")
        if action.field not in task.fields:
            return Outcome(f"{action.field} is not part of task {task.name}.", error="not_in_task")
        if refusal := self._editable(action):
            return refusal
        value = action.value.strip()
        self._draft[action.field] = value
        self._touch()
        status, _ = self.desk().grader.field_status(self._episode, action.field, value)
        self.shape(self._progress.update(action.field, credit(status)), "progress")
        return Outcome(f"{action.field} set to {value!r}.")

    def _do_add_kpi_row(self, action: Any) -> Outcome:
        if refusal := self._editable(action, needs_rows=True):
            return refusal
        if not (action.label or "").strip() or not (action.value or "").strip():
            return Outcome("add_kpi_row needs a label and a value.", error="missing_value")
        cap = self.desk().max_kpi_rows
        if len(self._rows) >= cap:
            return Outcome(f"A report holds at most {cap} KPI rows; clear_kpi_rows to start over.",
                           error="too_many_rows")
        row = (action.label.strip(), action.value.strip())
        self._rows.append(row)
        self._touch()
        index = len(self._rows) - 1
        if index < len(self._episode.rows):
            status, _ = self.desk().grader.row_status(self._episode, index, row)
            self.shape(self._progress.update(f"kpi row {index + 1}", credit(status)), "progress")
        return Outcome(f"KPI row {index + 1} added: {row[0]}: {row[1]}.")

    def _do_clear_kpi_rows(self, action: Any) -> Outcome:
        if refusal := self._editable(action, needs_rows=True):
            return refusal
        if self._rows:
            self._rows.clear()
            self._touch()
        return Outcome("KPI rows cleared.")

    def _touch(self) -> None:
        self._pdf.current = False  # a PDF generated before this edit no longer shows the draft

    def _do_check_report(self, action: Any) -> Outcome:
        result = self._grade()
        self._grade_lines, self._graded_score = result.lines, result.score
        return Outcome(f"Grader feedback on the draft: score {result.score:.3f} (see grade_report).")

    def _do_finalize_pdf(self, action: Any) -> Outcome:
        if refusal := self._editable(action, needs_rows=True):
            return refusal
        missing = [f for f in self.domain.fields if f not in self._draft]
        if missing or not self._rows:
            what = ", ".join(missing + ([] if self._rows else ["KPI rows"]))
            return Outcome(f"The draft is incomplete ({what}); fill it before finalize_pdf.", error="draft_incomplete")
        layout = self.desk().layout
        data = render(layout.lines(self._draft, self._rows), layout.headings)
        self._pdf = PdfState(version=self._pdf.version + 1, lines=extract_lines(data), current=True)
        downloads.REGISTRY.put(self._state.episode_id, data)
        # The feedback names the route, not the id: observations stay a function of (seed, eci, actions).
        return Outcome(f"PDF v{self._pdf.version} generated ({len(data)} bytes); the server serves it at "
                       "GET /report/<episode_id>.pdf.")

    def _do_send_email(self, action: Any) -> Outcome:
        task = self._episode.task
        if not task.kpi_rows:
            return Outcome(f"send_email is not part of task {task.name}.", error="not_in_task")
        if not (action.recipient or "").strip():
            return Outcome("send_email needs a recipient address.", error="missing_recipient")
        if self._pdf.version == 0:
            return Outcome("There is no PDF to attach: finalize_pdf first.", error="wrong_phase")
        if not self._pdf.current:
            return Outcome("The PDF is stale (the draft changed since): finalize_pdf again.", error="pdf_stale")
        if not self._mail.is_known(action.recipient):
            self._unknown_recipients += 1
            return Outcome(f"{action.recipient!r} is not an address in the {self.domain.contacts_table} table.",
                           error="unknown_recipient")
        if normalise(action.recipient) in self._mail.delivered:
            return Outcome(f"{action.recipient} already received the report.", error="already_delivered")
        attempt = self._mail.send(action.recipient, self._pdf.version)
        return Outcome(attempt.line())

    def _do_submit_report(self, action: Any) -> Outcome:
        verdict = self._conclude(submitted=True)
        return Outcome(f"Report submitted: score {verdict.score:.3f}" + (", solved." if verdict.solved else "."),
                       terminal=True, solved=verdict.solved)

    # ---- grading --------------------------------------------------------------------------------------
    def _grade(self) -> Grade:
        return self.desk().grader.grade(self._episode, self._draft, self._rows, self._pdf, self._mail)

    def _conclude(self, submitted: bool) -> Verdict:
        result = self._grade()
        pen = penalty(self._episode, self._mail, self._unknown_recipients)
        self._verdict = Verdict(
            score=result.score, submitted=submitted,
            grade=result.score if submitted else EXHAUSTED_SHARE * result.score,
            penalty=pen, solved=submitted and result.score >= 1.0 - SOLVED_EPSILON and pen == 0.0,
        )
        ending = "submitted" if submitted else "not submitted before the budget ran out: half credit"
        self._grade_lines = [*result.lines, f"final: {ending}; penalty {pen:+.2f}"]
        self._graded_score = result.score
        return self._verdict

    # ---- views ----------------------------------------------------------------------------------------
    def observe(self) -> dict[str, Any]:
        ep = self._episode
        return {
            "task": ep.task.name,
            "task_id": ep.task_id,
            "instructions": self._instructions,
            "queue": ep.queue,
            "tables": list(self.desk().world.schema.lines),
            "last_query": self._last_query,
            "query_result": self._query_result,
            "draft": self._draft,
            "kpi_rows": [f"{i}. {label}: {value}" for i, (label, value) in enumerate(self._rows, 1)],
            "pdf_status": "none" if not self._pdf.version else "current" if self._pdf.current else "stale",
            "outbox": [a.line() for a in self._mail.attempts],
            "delivery_status": self._mail.status,
            "grade_report": self._grade_lines,
            "graded_score": self._graded_score,
        }

    def oracle_view(self) -> Episode:
        return self._episode

    def secret_values(self) -> list[str]:
        """The hidden house style's rules (ECI 4+): no observation may state them before check_report does.
        The report's values themselves are the agent's to find in the database and to write into its draft,
        which echoes them; `answer_values()` lists them, and none of them is visible at reset."""
        ep, formats = self._episode, self.desk().world.formats
        return [formats.rule(kind, ep.style) for kind in ep.style.custom_kinds]

    def answer_values(self) -> list[str]:
        """What the report must say that the first observation must not give away: the values of the header,
        metrics and KPI rows (dates and counts aside: short numbers turn up by chance), and the recipient."""
        ep, kinds = self._episode, self.desk().grader.kinds
        values = [ep.expected[f] for f in ep.task.fields if kinds[f] not in ("date", "count")]
        if ep.task.kpi_rows:
            values += [r.value for r in ep.rows] + [ep.designated]
        return [v for v in values if len(v) >= 5]

    @classmethod
    def http_routes(cls) -> Any:
        return downloads.router()
