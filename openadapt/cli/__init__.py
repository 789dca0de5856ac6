"""The `openadapt` command: a shell over the library. Each command parses its arguments, calls one library
function and renders the result; every error becomes a one-line message and an exit code in one place
(`openadapt.cli.shell`). Modules, one per command group:

    shell       the app, the error handler, help conventions, the consoles
    options     arguments shared by commands, checked while the command line is read
    render      tables and progress
    generate    generate                  validate   validate
    evaluate    eval                      train      train
    curriculum  curriculum                report     report
    serve       serve, play               packages   info, list, show, render, families
    models      models list|pull|verify   doctor     doctor

Help lists the commands in the order of the work: generate, validate, eval, train, curriculum, report; then the
packages; then the set-up. Importing this package loads typer and rich only: every command imports what it needs
when it runs.
"""

from __future__ import annotations

from typing import Annotated

import typer

from openadapt import __version__
from openadapt.cli import curriculum, doctor, evaluate, generate, models, packages, report, serve, train, validate
from openadapt.cli.shell import command, new_app, out

WORKFLOW, PACKAGES, SETUP = "Workflow", "Packages", "Set-up"

app = new_app("openadapt", "Generate, validate and train on OpenEnv environments for LLM agents, with an ECI "
                           "curriculum.")


@app.callback(invoke_without_command=True)
def main(version: Annotated[bool, typer.Option("--version", help="print the version and exit")] = False) -> None:
    if version:
        out.print(f"openadapt {__version__}")
        raise typer.Exit()


for fn, name in ((generate.generate, None), (validate.validate, None), (evaluate.evaluate, "eval"),
                 (train.train, None), (curriculum.curriculum, None), (report.report, None)):
    command(app, fn, name=name, panel=WORKFLOW)
for fn, name in ((serve.serve, None), (serve.play, None), (packages.info, None), (packages.list_, "list"),
                 (packages.show_, "show"), (packages.render, None), (packages.families, None)):
    command(app, fn, name=name, panel=PACKAGES)
command(models.app, models.list_models, name="list")
command(models.app, models.pull)
command(models.app, models.verify)
app.add_typer(models.app, name="models", rich_help_panel=SETUP)
command(app, doctor.doctor, panel=SETUP)

__all__ = ["app"]
