"""Enterprise workflow: an openadapt seed environment (OpenEnv package)."""

from .client import EnterpriseWorkflowEnv
from .models import WorkflowAction, WorkflowObservation

__all__ = ["EnterpriseWorkflowEnv", "WorkflowAction", "WorkflowObservation"]
