"""Server of the daily_report environment."""
