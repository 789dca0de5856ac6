"""Server of the weekly_warehouse_report environment."""
