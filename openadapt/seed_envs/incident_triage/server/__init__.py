"""Server of the incident_triage environment."""
