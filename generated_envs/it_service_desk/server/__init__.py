"""Server of the it_service_desk environment."""
