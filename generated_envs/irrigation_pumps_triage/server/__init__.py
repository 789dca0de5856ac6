"""irrigation_pumps_triage environment server components."""
