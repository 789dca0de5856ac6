"""hospital_admissions_workflow environment server components."""
