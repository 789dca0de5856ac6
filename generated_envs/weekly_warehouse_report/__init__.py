"""Train an agent to assemble the weekly warehouse inventory report from a database and e-mail it as a PDF. (Work a daily report task from a SQLite-backed queue - query the data, fill the header, summary metrics and KPI rows, generate the PDF, deliver it through a flaky e-mail API, and submit.)"""

from .client import WeeklyWarehouseReportEnv
from .models import WeeklyWarehouseReportAction, WeeklyWarehouseReportObservation

__all__ = ["WeeklyWarehouseReportEnv", "WeeklyWarehouseReportAction", "WeeklyWarehouseReportObservation"]
