"""Server of the warehouse_dock environment."""
