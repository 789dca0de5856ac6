"""Month-end bank reconciliation: Greenleaf Catering Ltd runs its operating account at Harbour Bank
plc."""

from .client import BankReconciliationEnv

__all__ = ["BankReconciliationEnv"]
