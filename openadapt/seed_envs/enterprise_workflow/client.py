"""WebSocket client for the enterprise-workflow environment."""

from openadapt.kit.client import OpenAdaptClient

from .models import WorkflowAction, WorkflowObservation


class EnterpriseWorkflowEnv(OpenAdaptClient[WorkflowAction, WorkflowObservation]):
    """`with EnterpriseWorkflowEnv(base_url="http://localhost:8000").sync() as env: env.reset(seed=1, eci=3)`"""

    action_type = WorkflowAction
    observation_type = WorkflowObservation
