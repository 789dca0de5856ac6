"""Enterprise workflow environment server components."""
