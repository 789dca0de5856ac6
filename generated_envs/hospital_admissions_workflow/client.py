"""WebSocket client for the hospital_admissions_workflow environment."""

from openadapt.kit.client import OpenAdaptClient

from .models import HospitalAdmissionsWorkflowAction, HospitalAdmissionsWorkflowObservation


class HospitalAdmissionsWorkflowEnv(OpenAdaptClient[HospitalAdmissionsWorkflowAction, HospitalAdmissionsWorkflowObservation]):
    """`with HospitalAdmissionsWorkflowEnv(base_url="http://localhost:8000").sync() as env: env.reset(seed=1, eci=2)`"""

    action_type = HospitalAdmissionsWorkflowAction
    observation_type = HospitalAdmissionsWorkflowObservation
