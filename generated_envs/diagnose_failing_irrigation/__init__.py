"""Train an agent to diagnose failing irrigation pumps on a farm"""

from .client import DiagnoseFailingIrrigationEnv

__all__ = ["DiagnoseFailingIrrigationEnv"]
