"""WebSocket client for the incident-triage environment."""

from openadapt.kit.client import OpenAdaptClient

from .models import TriageAction, TriageObservation


class IncidentTriageEnv(OpenAdaptClient[TriageAction, TriageObservation]):
    """`with IncidentTriageEnv(base_url="http://localhost:8000").sync() as env: env.reset(seed=1, eci=3)`"""

    action_type = TriageAction
    observation_type = TriageObservation
