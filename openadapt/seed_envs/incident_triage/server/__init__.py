"""Incident triage environment server components."""
