"""Work a daily report task from a SQLite-backed queue - query the data, fill the header, summary
metrics and KPI rows, generate the PDF, deliver it through a flaky e-mail API, and submit."""

from .client import DailyReportEnv

__all__ = ["DailyReportEnv"]
