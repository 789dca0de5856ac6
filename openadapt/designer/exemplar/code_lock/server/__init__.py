"""Server of the code_lock environment."""
