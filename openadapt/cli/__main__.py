"""`python -m openadapt.cli`."""

from openadapt.cli import app

app()
