"""Server of the security_questionnaire environment."""
