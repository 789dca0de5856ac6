"""Daily report: an openadapt seed environment (OpenEnv package)."""

from .client import DailyReportEnv
from .models import ReportAction, ReportObservation

__all__ = ["DailyReportEnv", "ReportAction", "ReportObservation"]
