"""Reference policies: the privileged oracle and a shallow SQL heuristic (the baseline to beat)."""

from __future__ import annotations

import random
import re
from collections.abc import Generator
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from openadapt.kit import Policy

try:
    from .models import WeeklyWarehouseReportAction, WeeklyWarehouseReportObservation
except ImportError:
    from models import WeeklyWarehouseReportAction, WeeklyWarehouseReportObservation


class ReportOracle(Policy):
    """Reads the hidden report and writes it: every field and KPI row exactly (house style included), then for
    the full report finalises the PDF and delivers it the way an honest agent must - to the active primary
    contact, retrying a flaky network, and to the backup contact once the primary fails permanently."""

    name = "oracle"
    privileged = True

    def act(self, observation: WeeklyWarehouseReportObservation) -> WeeklyWarehouseReportAction:
        ep = self.env.oracle_view()
        for name in ep.task.fields:
            if observation.draft.get(name) != ep.expected[name]:
                return WeeklyWarehouseReportAction(command="set_field", field=name, value=ep.expected[name])
        if not ep.task.kpi_rows:
            return WeeklyWarehouseReportAction(command="submit_report")
        want = [f"{i}. {row.label}: {row.value}" for i, row in enumerate(ep.rows, 1)]
        have = observation.kpi_rows
        if have != want:
            if len(have) >= len(want) or have != want[: len(have)]:
                return WeeklyWarehouseReportAction(command="clear_kpi_rows")
            row = ep.rows[len(have)]
            return WeeklyWarehouseReportAction(command="add_kpi_row", label=row.label, value=row.value)
        if observation.delivery_status == "delivered":
            return WeeklyWarehouseReportAction(command="submit_report")
        if observation.pdf_status != "current":
            return WeeklyWarehouseReportAction(command="finalize_pdf")
        rejected = any(f"to {ep.primary}:" in line and "550" in line for line in observation.outbox)
        return WeeklyWarehouseReportAction(command="send_email", recipient=ep.backup if rejected else ep.primary)


_CUSTOMER = re.compile(r"for customer (\S+),")
_CENT = Decimal("0.01")


def _number(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        return Decimal(0)


def _amount(value: Decimal) -> str:
    return str(value.quantize(_CENT, rounding=ROUND_HALF_UP))


def _percent(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)}%"


class ShallowHeuristic(Policy):
    """What a shallow agent does: one join for the header, a textbook GROUP BY for the metrics (exact status
    match, amounts taken as stored), the first two KPI definitions by position, the first primary contact;
    default formats, never asks the grader, and on a failed send retries the same address up to three times."""

    name = "heuristic"

    def begin(self, env: Any, observation: WeeklyWarehouseReportObservation, rng: random.Random) -> None:
        super().begin(env, observation, rng)
        self._plan = self._script(observation)
        self._started = False

    def act(self, observation: WeeklyWarehouseReportObservation) -> WeeklyWarehouseReportAction:
        if not self._started:
            self._started = True
            return next(self._plan)
        try:
            return self._plan.send(observation)
        except StopIteration:
            return WeeklyWarehouseReportAction(command="submit_report")

    @staticmethod
    def _rows(observation: WeeklyWarehouseReportObservation) -> list[list[str]]:
        return [line.split(" | ") for line in observation.query_result[1:] if not line.startswith("... (")]

    def _script(self, obs: WeeklyWarehouseReportObservation) -> Generator[WeeklyWarehouseReportAction, WeeklyWarehouseReportObservation, None]:
        found = _CUSTOMER.search(obs.instructions)
        customer = found.group(1) if found else ""
        obs = yield WeeklyWarehouseReportAction(command="query", sql=(
            "SELECT c.name, r.title, t.report_date, t.report_type FROM report_tasks t "
            "JOIN customers c ON c.customer_id = t.customer_id JOIN report_types r ON r.code = t.report_type "
            f"WHERE t.task_id = '{obs.task_id}'"))
        name, title, day, report_type = (self._rows(obs) or [["", "", "", ""]])[0][:4]
        values = {"title": title, "customer_name": name, "report_date": day}
        if obs.task != "daily_header":
            obs = yield WeeklyWarehouseReportAction(command="query", sql=(
                "SELECT kind, SUM(amount), COUNT(*) FROM transactions "
                f"WHERE customer_id = '{customer}' AND txn_date = '{day}' AND status = 'settled' GROUP BY kind"))
            sums = {row[0]: _number(row[1]) for row in self._rows(obs) if len(row) == 3}
            count = sum(int(_number(row[2])) for row in self._rows(obs) if len(row) == 3)
            disbursed, repaid, fees = (sums.get(k, Decimal(0)) for k in ("disbursement", "repayment", "fee"))
            values.update(total_disbursed=_amount(disbursed), total_repaid=_amount(repaid),
                          transaction_count=str(count))
        for name_, value in values.items():
            obs = yield WeeklyWarehouseReportAction(command="set_field", field=name_, value=value or "unknown")
        if obs.task != "daily_full":
            return
        obs = yield WeeklyWarehouseReportAction(command="query", sql=(
            f"SELECT label FROM report_kpis WHERE report_type = '{report_type}' ORDER BY position LIMIT 2"))
        kpis = {"Net cash flow": _amount(repaid - disbursed),
                "Repayment ratio": _percent(100 * repaid / disbursed if disbursed else Decimal(0)),
                "Fee income": _amount(fees),
                "Average transaction": _amount((disbursed + repaid + fees) / count) if count else "0.00"}
        labels = [row[0] for row in self._rows(obs)]
        obs = yield WeeklyWarehouseReportAction(command="query", sql=(
            f"SELECT email FROM contacts WHERE customer_id = '{customer}' AND role = 'primary' LIMIT 1"))
        primary = (self._rows(obs) or [[""]])[0][0]
        for label in labels:
            obs = yield WeeklyWarehouseReportAction(command="add_kpi_row", label=label, value=kpis.get(label, "0.00"))
        obs = yield WeeklyWarehouseReportAction(command="finalize_pdf")
        for _ in range(3):
            obs = yield WeeklyWarehouseReportAction(command="send_email", recipient=primary or "unknown")
            if obs.delivery_status == "delivered":
                break
