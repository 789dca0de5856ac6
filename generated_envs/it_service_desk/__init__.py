"""Harborview University IT service desk: Harborview University's IT service desk triages the tickets
of staff, students, research groups and software vendors, and routes each to the resolver group that
owns it."""

from .client import ItServiceDeskEnv

__all__ = ["ItServiceDeskEnv"]
