"""weekly_warehouse_report environment server components."""
