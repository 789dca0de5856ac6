"""Open a lock by finding its hidden code number from higher/lower hints, in as few steps as possible."""

from .client import CodeLockEnv

__all__ = ["CodeLockEnv"]
