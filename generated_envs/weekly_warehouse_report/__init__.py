"""Weekly warehouse operations reports: A third-party logistics network runs fourteen distribution
centres across Europe."""

from .client import WeeklyWarehouseReportEnv

__all__ = ["WeeklyWarehouseReportEnv"]
