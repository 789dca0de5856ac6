"""Sandbox backends behind one interface: docker, bwrap, process (explicit opt-in, not isolated)."""
