"""Diagnose a degraded production system - root-cause service, fault and mitigation - from alerts,
logs, metrics and runbooks."""

from .client import IncidentTriageEnv

__all__ = ["IncidentTriageEnv"]
