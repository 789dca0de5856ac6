"""Server of the hospital_pharmacy environment."""
