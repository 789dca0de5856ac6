"""`openadapt eval`: solve rate and reward per tier, on held-out seeds, for a reference policy or a trained run."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from openadapt.cli.options import JsonOpt, PackageArg, PolicyOpt, TiersOpt, TrustOpt
from openadapt.cli.render import grid, print_json
from openadapt.cli.shell import err, out


class LogFormat(StrEnum):
    TABLE = "table"
    OPENENV = "openenv"


def evaluate(
    package: PackageArg,
    policy: PolicyOpt = "oracle",
    eci: TiersOpt = "all",
    episodes: Annotated[int, typer.Option(min=1, help="held-out seeds per tier")] = 100,
    seed_start: Annotated[int | None, typer.Option(min=0, help="first seed (default: 1,000,000, the held-out "
                                                   "range training never draws from)")] = None,
    as_json: JsonOpt = False,
    log_format: Annotated[LogFormat, typer.Option(help="table, or openenv: [START]/[STEP]/[END] lines per episode "
                                                  "on stdout (the table goes to stderr)")] = LogFormat.TABLE,
    trust: TrustOpt = False,
) -> None:
    """Solve rate (the binary `solved` outcome, with a Wilson 95% interval) and mean episode reward per tier, for a
    reference policy or a trained model, on held-out seeds."""
    from rich.progress import Progress

    from openadapt.envpkg.loader import resolve

    ref = resolve(package)  # an unknown seed or a missing manifest: one line, before OpenEnv loads
    openenv = log_format == LogFormat.OPENENV
    with Progress(console=err, transient=True, disable=openenv or not err.is_terminal) as bar:
        task = bar.add_task(f"{policy} on {ref.label}", total=episodes * len(eci))
        report = _run(ref, policy, eci, episodes, seed_start, trust, lambda n: bar.advance(task, n), openenv)
    if as_json:
        print_json(report)
        return
    console = err if openenv else out
    rows = [(str(t.eci), f"{t.solve_rate:.3f}", f"{t.solve_rate_ci95[0]:.2f}-{t.solve_rate_ci95[1]:.2f}",
             f"{t.mean_return:.3f}", f"{t.return_ci95[0]:.2f}-{t.return_ci95[1]:.2f}", f"{t.mean_steps:.1f}")
            for t in report.tiers]
    columns = ("ECI", "solve rate", "95% CI", "mean reward", "95% CI ", "steps")
    console.print(grid(f"{report.policy} on {report.package}: {episodes} held-out seeds per tier from "
                       f"{report.seed_start:,}", columns, rows, right=columns))
    console.print("solve rate = share of episodes whose final metadata says solved=true; reward is the shaped "
                  "episode return, reported separately.", style="dim")


def _run(ref, policy: str, tiers: list[int], episodes: int, seed_start: int | None, trust: bool, advance,
         openenv: bool):
    """A reference policy in this process, or a trained run's model (`model:RUN_DIR`)."""
    from openadapt.envpkg.evaluation import EVAL_SEED_START
    from openadapt.envpkg.policies import MODEL_PREFIX

    start = EVAL_SEED_START if seed_start is None else seed_start
    if policy.startswith(MODEL_PREFIX):
        from openadapt.training.modelpolicy import evaluate_run, trace_lines

        run_dir = policy[len(MODEL_PREFIX):]
        on_trace = (lambda trace: _log(trace_lines(trace, ref.name, run_dir))) if openenv else None
        return evaluate_run(run_dir, ref.label, tiers, episodes, start,
                            trust=trust, progress=advance, on_trace=on_trace)
    from openadapt.envpkg.evaluation import evaluate
    from openadapt.envpkg.loader import load

    return evaluate(load(ref, trust=trust), policy, tiers, episodes, start, progress=advance,
                    log=(lambda line: _log([line])) if openenv else None)


def _log(lines: list[str]) -> None:
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
