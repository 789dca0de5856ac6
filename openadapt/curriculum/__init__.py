"""Curriculum controller: raises the ECI tier once the windowed solve rate passes the threshold (0.90)."""
