"""The training layer's error (cheap to import: run-directory checks raise it before torch or OpenEnv load)."""

from __future__ import annotations

from openadapt.errors import OpenAdaptError


class TrainingError(OpenAdaptError):
    """Training cannot start or go on (bad model, failed validation, out of memory...)."""
