"""`openadapt validate`: run a package in the sandbox against the quality bar."""

from __future__ import annotations

from typing import Annotated

import typer

from openadapt.cli.options import JsonOpt, PackageArg, SandboxOpt, TiersOpt
from openadapt.cli.render import grid, print_json, show
from openadapt.cli.shell import out

STATUS_STYLE = {"pass": "green", "fail": "red", "error": "red", "skip": "yellow"}


def validate(
    package: PackageArg,
    eci: TiersOpt = "all",
    sandbox: SandboxOpt = "auto",
    episodes: Annotated[int, typer.Option(min=2, help="episodes per tier for the oracle and reference policies")] = 20,
    timeout: Annotated[float, typer.Option(min=1, help="wall-clock limit for the whole validation, seconds")] = 120,
    as_json: JsonOpt = False,
    feedback: Annotated[bool, typer.Option("--feedback", help="also print the feedback the designer gets")] = False,
) -> None:
    """Run a package in a sandbox and check it against the OpenEnv quality bar: static checks, runtime, semantics,
    exploit probes, tier separation and `/ws` serving.

    Exit 0 pass, 1 fail, 2 not a package, 3 internal error (no sandbox, a validator failure)."""
    from openadapt.envpkg.loader import locate
    from openadapt.validator import Validator, Verdict

    root = locate(package)  # no such directory or seed: one line, before a sandbox starts
    with Validator(sandbox, episodes=episodes, timeout_s=timeout) as validator:
        report = validator.validate(root, eci)
    report.package = package
    if as_json:
        print_json(report)
    elif report.verdict == Verdict.UNUSABLE:
        raise typer.Exit(_unusable(report))
    else:
        _render(report, feedback)
    raise typer.Exit(report.exit_code)


def _unusable(report) -> int:
    """A directory that cannot be a package gets one line, like every other usage error."""
    from openadapt.cli.shell import err

    evidence = "; ".join(e for c in report.failing for e in c.evidence[:3]) or "not an environment package"
    err.print(f"[red]error:[/red] {report.package}: {evidence}", soft_wrap=True)
    return report.exit_code


def _render(report, feedback: bool) -> None:
    rows = [(c.check_id, f"[{STATUS_STYLE[c.status.value]}]{c.status.value}[/]",
             (c.evidence[0] if c.evidence else "")[:160], f"{c.duration_s:.2f}") for c in report.checks]
    show(grid(f"validate {report.package}", ("check", "status", "evidence", "s"), rows, right=("s",)))
    box = report.sandbox
    isolation = "isolated" if box.isolated else "[bold red]NOT ISOLATED[/]"
    out.print(f"sandbox: {box.backend} ({isolation}); verdict: [bold]{report.verdict.value}[/]; "
              f"{report.timings.get('total_s', 0):.2f} s")
    if feedback and report.failing:
        out.print(report.designer_feedback(), markup=False)
