"""Vendor security questionnaire review: A procurement team sends its security questionnaire to every
vendor that will handle customer data."""

from .client import SecurityQuestionnaireEnv

__all__ = ["SecurityQuestionnaireEnv"]
