"""Server of the clinic_appointments environment."""
