"""WebSocket client for the weekly_warehouse_report environment."""

from openadapt.kit.client import OpenAdaptClient

from .models import WeeklyWarehouseReportAction, WeeklyWarehouseReportObservation


class WeeklyWarehouseReportEnv(OpenAdaptClient[WeeklyWarehouseReportAction, WeeklyWarehouseReportObservation]):
    """`with WeeklyWarehouseReportEnv(base_url="http://localhost:8000").sync() as env: env.reset(seed=1, eci=2)`"""

    action_type = WeeklyWarehouseReportAction
    observation_type = WeeklyWarehouseReportObservation
