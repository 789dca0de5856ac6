"""Incident triage: an openadapt seed environment (OpenEnv package)."""

from .client import IncidentTriageEnv
from .models import TriageAction, TriageObservation

__all__ = ["IncidentTriageEnv", "TriageAction", "TriageObservation"]
