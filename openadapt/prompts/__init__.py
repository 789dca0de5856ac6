"""jinja2 templates openadapt renders: the designer's prompts and the boilerplate of generated packages."""
