"""Server of the diagnose_failing_irrigation environment."""
