"""Train an agent to run a hospital admissions desk where record fields get renamed and staff go off shift. (Work an enterprise queue (tasks with SLAs, an inbox, a team, policies) within an L1/L2 authority scope, through silent schema drift and chaos events.)"""

from .client import HospitalAdmissionsWorkflowEnv
from .models import HospitalAdmissionsWorkflowAction, HospitalAdmissionsWorkflowObservation

__all__ = ["HospitalAdmissionsWorkflowEnv", "HospitalAdmissionsWorkflowAction", "HospitalAdmissionsWorkflowObservation"]
