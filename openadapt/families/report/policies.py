"""Reference policies of the report family: the privileged oracle and a shallow SQL heuristic (the baseline a
trained agent must beat). Both read the domain through the environment (its tables, columns, categories and the
KPI catalogue an agent finds in the database), never a catalogue of their own."""

from __future__ import annotations

import random
from collections.abc import Generator
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from openadapt.kit import Policy


class ReportOracle(Policy):
    """Reads the hidden report and writes it: every field and KPI row exactly (house style included), then for
    the full report finalises the PDF and delivers it the way an honest agent must - to the active primary
    contact, retrying a flaky network, and to the backup contact once the primary fails permanently."""

    name = "oracle"
    privileged = True

    def act(self, observation: Any) -> Any:
        ep, make = self.env.oracle_view(), self.env.action_type
        for name in ep.task.fields:
            if observation.draft.get(name) != ep.expected[name]:
                return make(command="set_field", field=name, value=ep.expected[name])
        if not ep.task.kpi_rows:
            return make(command="submit_report")
        want = [f"{i}. {row.label}: {row.value}" for i, row in enumerate(ep.rows, 1)]
        have = observation.kpi_rows
        if have != want:
            if len(have) >= len(want) or have != want[: len(have)]:
                return make(command="clear_kpi_rows")
            row = ep.rows[len(have)]
            return make(command="add_kpi_row", label=row.label, value=row.value)
        if observation.delivery_status == "delivered":
            return make(command="submit_report")
        if observation.pdf_status != "current":
            return make(command="finalize_pdf")
        rejected = any(f"to {ep.primary}:" in line and "550" in line for line in observation.outbox)
        return make(command="send_email", recipient=ep.backup if rejected else ep.primary)


def _number(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        return Decimal(0)


class ShallowHeuristic(Policy):
    """What a shallow agent does: one join for the header, a textbook GROUP BY for the metrics (exact status
    match, amounts taken as stored), the first KPI definitions by position, the first primary contact; default
    formats, never asks the grader, and on a failed send retries the same address up to three times."""

    name = "heuristic"

    def begin(self, env: Any, observation: Any, rng: random.Random) -> None:
        super().begin(env, observation, rng)
        d = self.domain = env.domain
        self.quantum = Decimal(1).scaleb(-d.record_table.measure.decimals)
        self.tasks = d.task_names
        self._plan = self._script(observation)
        self._started = False

    def act(self, observation: Any) -> Any:
        if not self._started:
            self._started = True
            return next(self._plan)
        try:
            return self._plan.send(observation)
        except StopIteration:
            return self.env.action_type(command="submit_report")

    @staticmethod
    def _rows(observation: Any) -> list[list[str]]:
        return [line.split(" | ") for line in observation.query_result[1:] if not line.startswith("... (")]

    def _amount(self, value: Decimal) -> str:
        return str(value.quantize(self.quantum, rounding=ROUND_HALF_UP))

    @staticmethod
    def _percent(value: Decimal) -> str:
        return f"{value.quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)}%"

    def _value(self, comp: Any, sums: dict[str, Decimal], counts: dict[str, int]) -> str:
        """A metric or KPI from the textbook sums, in the default format."""
        d = self.domain
        of = sum((sums.get(c, Decimal(0)) for c in d.categories_of(comp.of)), Decimal(0))
        n = sum(counts.get(c, 0) for c in d.categories_of(comp.of))
        against = sum((sums.get(c, Decimal(0)) for c in d.categories_of(comp.against)), Decimal(0))
        if comp.op == "count":
            return str(n)
        if comp.op == "percent":
            return self._percent(100 * of / against if against else Decimal(0))
        if comp.op == "difference":
            return self._amount(of - against)
        if comp.op == "average":
            return self._amount(of / n) if n else self._amount(Decimal(0))
        return self._amount(of)

    def _script(self, obs: Any) -> Generator[Any, Any, None]:
        d, make = self.domain, self.env.action_type
        s, r, h = d.subject_table, d.record_table, d.header
        sid = s.id_column
        obs = yield make(command="query", sql=(
            f"SELECT c.{s.name_column}, r.title, t.report_date, t.report_type, t.{sid} FROM report_tasks t "
            f"JOIN {s.table} c ON c.{sid} = t.{sid} JOIN report_types r ON r.code = t.report_type "
            f"WHERE t.task_id = '{obs.task_id}'"))
        name, title, day, report_type, subject = (self._rows(obs) or [["", "", "", "", ""]])[0][:5]
        values = {h.title_field: title, h.subject_field: name, h.date_field: day}
        sums: dict[str, Decimal] = {}
        counts: dict[str, int] = {}
        if obs.task != self.tasks.header:
            obs = yield make(command="query", sql=(
                f"SELECT {r.category_column}, SUM({r.measure.column}), COUNT(*) FROM {r.table} "
                f"WHERE {sid} = '{subject}' AND {r.date_column} = '{day}' AND {r.status_column} = "
                f"'{d.statuses.counted}' GROUP BY {r.category_column}"))
            sums = {row[0]: _number(row[1]) for row in self._rows(obs) if len(row) == 3}
            counts = {row[0]: int(_number(row[2])) for row in self._rows(obs) if len(row) == 3}
            values.update({m.field: self._value(m, sums, counts) for m in d.metrics})
        for field, value in values.items():
            obs = yield make(command="set_field", field=field, value=value or "unknown")
        if obs.task != self.tasks.full:
            return
        obs = yield make(command="query", sql=(
            f"SELECT label FROM report_kpis WHERE report_type = '{report_type}' ORDER BY position "
            f"LIMIT {d.kpi_rows}"))
        kpis = {k.label: self._value(k, sums, counts) for k in d.kpis}
        labels = [row[0] for row in self._rows(obs)]
        obs = yield make(command="query", sql=(
            f"SELECT email FROM {d.contacts_table} WHERE {sid} = '{subject}' AND role = 'primary' LIMIT 1"))
        primary = (self._rows(obs) or [[""]])[0][0]
        for label in labels:
            obs = yield make(command="add_kpi_row", label=label, value=kpis.get(label, self._amount(Decimal(0))))
        obs = yield make(command="finalize_pdf")
        for _ in range(3):
            obs = yield make(command="send_email", recipient=primary or "unknown")
            if obs.delivery_status == "delivered":
                break
