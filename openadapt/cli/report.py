"""`openadapt report`: a run's curves and tables as report.md and report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from openadapt.cli.shell import out
from openadapt.errors import UsageError


def report(run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", show_default=False,
                                                   help="a training or curriculum run directory")]) -> None:
    """Render a run's report.md and report.html, with PNG plots, into its directory.

    A training run: reward and solve-rate curves and the held-out evaluation before and after. A curriculum run:
    the solve rate per tier, the ECI timeline, the reward components and the held-out evaluations. A run that is
    still going or was killed is reported as far as it got, and says so."""
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory")
    from openadapt.curriculum.report import render_any_report

    path = render_any_report(run_dir)
    out.print(f"{path}\n{path.with_suffix('.html')}")
