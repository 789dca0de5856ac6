"""Group practice appointment database: Praxis am Hafen is a group practice of general practitioners,
physiotherapists and specialists."""

from .client import ClinicAppointmentsEnv

__all__ = ["ClinicAppointmentsEnv"]
