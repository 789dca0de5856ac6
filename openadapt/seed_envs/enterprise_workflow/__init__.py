"""Work an enterprise queue (tasks with SLAs, an inbox, a team, policies) within an L1/L2 authority
scope, through silent schema drift and chaos events."""

from .client import EnterpriseWorkflowEnv

__all__ = ["EnterpriseWorkflowEnv"]
