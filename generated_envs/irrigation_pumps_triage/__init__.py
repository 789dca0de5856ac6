"""Train an agent to diagnose failing irrigation pumps on a farm. (Diagnose a degraded production system - root-cause service, fault and mitigation - from alerts, logs, metrics and runbooks.)"""

from .client import IrrigationPumpsTriageEnv
from .models import IrrigationPumpsTriageAction, IrrigationPumpsTriageObservation

__all__ = ["IrrigationPumpsTriageEnv", "IrrigationPumpsTriageAction", "IrrigationPumpsTriageObservation"]
