"""`openadapt doctor`: what is set up on this machine, and what to do about what is not."""

from __future__ import annotations

from typing import Annotated

import typer

from openadapt.cli.options import JsonOpt
from openadapt.cli.render import grid, print_json, show
from openadapt.cli.shell import err

STYLE = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "fail": "[red]fail[/]"}


def doctor(deep: Annotated[bool, typer.Option("--deep", help="re-hash the designer model file (seconds per GB)")]
           = False, as_json: JsonOpt = False) -> None:
    """Check the set-up: Python, the sandbox backend, OpenEnv's import, the embedded designer model (present and
    verified), llama.cpp, an endpoint, the training extra and free disk space; say what to do for each failure.

    Exit 0 when nothing failed (warnings allowed), 1 otherwise."""
    from openadapt.doctor import diagnose

    with err.status("checking", spinner="dots") as status:
        findings = diagnose(deep=deep, listener=lambda f: status.update(f"checked {f.check}"))
    if as_json:
        print_json([f.model_dump() for f in findings])
    else:
        show(grid("openadapt doctor", ("check", "status", "found", "what to do"),
                  [(f.check, STYLE[f.status], f.detail, f.fix or "-") for f in findings]))
    raise typer.Exit(1 if any(f.status == "fail" for f in findings) else 0)
