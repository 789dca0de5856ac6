"""WebSocket client for the daily-report environment."""

from openadapt.kit.client import OpenAdaptClient

from .models import ReportAction, ReportObservation


class DailyReportEnv(OpenAdaptClient[ReportAction, ReportObservation]):
    """`with DailyReportEnv(base_url="http://localhost:8000").sync() as env: env.reset(seed=1, eci=3)`

    The PDF an episode finalised is served at `GET {base_url}/report/{episode_id}.pdf` (`env.state().episode_id`).
    """

    action_type = ReportAction
    observation_type = ReportObservation
