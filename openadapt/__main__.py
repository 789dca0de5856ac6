from openadapt.cli import app

app()
