"""Server of the freight_rate environment."""
