"""Server of the enterprise_workflow environment."""
