"""WebSocket client for the irrigation_pumps_triage environment."""

from openadapt.kit.client import OpenAdaptClient

from .models import IrrigationPumpsTriageAction, IrrigationPumpsTriageObservation


class IrrigationPumpsTriageEnv(OpenAdaptClient[IrrigationPumpsTriageAction, IrrigationPumpsTriageObservation]):
    """`with IrrigationPumpsTriageEnv(base_url="http://localhost:8000").sync() as env: env.reset(seed=1, eci=2)`"""

    action_type = IrrigationPumpsTriageAction
    observation_type = IrrigationPumpsTriageObservation
