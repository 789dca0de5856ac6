"""Daily report environment server components."""
