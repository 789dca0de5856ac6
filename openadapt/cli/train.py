"""`openadapt train`: GRPO on one package, evaluated on held-out seeds before and after."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from openadapt.cli.options import (
    ModelOpt,
    OutputOpt,
    PackageArg,
    SandboxOpt,
    ScaleRewardsOpt,
    SettingsOpt,
    TiersOpt,
    TrustOpt,
    WandbOpt,
)
from openadapt.cli.render import grid, show
from openadapt.cli.shell import INTERRUPTED, err, out
from openadapt.errors import UsageError

StepsOpt = Annotated[int | None, typer.Option(min=1, help="optimizer steps, the run's global step count "
                                              "(default 200)")]
LrOpt = Annotated[float | None, typer.Option(help="learning rate (default: tiny 1e-3, "
                                             "LoRA 2e-5)")]
GenerationsOpt = Annotated[int | None, typer.Option(min=2, help="completions per episode group, GRPO's G "
                                                    "(default: tiny 4, real models 8)")]
PromptsOpt = Annotated[int | None, typer.Option(min=1, help="episode groups per optimizer step (default: tiny 8, "
                                                "real models 4)")]
TurnsOpt = Annotated[int | None, typer.Option(min=1, help="model turns per training episode (default: tiny grows "
                                              "them with the tier, real models play the environment's budget)")]
WarmupOpt = Annotated[int | None, typer.Option(min=0, help="tiny: format warm-up steps on random valid actions "
                                               "(default 400, fewer for a short run)")]
WarmStartOpt = Annotated[str | None, typer.Option(
    "--warm-start", metavar="heuristic|auto|off", help="before GRPO, imitate solved episodes of the package's "
    "non-privileged policy (the heuristic; never the oracle) at the run's tiers (a real model: SFT of its LoRA "
    "adapter; it needs context: last in --settings); auto: tiny, where it has one that solves some (default off)")]
DemonstrationsOpt = Annotated[Path | None, typer.Option(
    metavar="FILE", help="imitate these solved episodes before GRPO instead (JSONL: eci, solved, turns of "
    "prompt and completion)")]
EvalOpt = Annotated[int | None, typer.Option(min=0, help="held-out seeds per tier for the before/after evaluation "
                                             "(default 100; 0 skips it)")]
SeedOpt = Annotated[int | None, typer.Option(min=0, help="run seed: training seeds, tiers, model init (default 0)")]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="continue the run in --output from its latest checkpoint, "
                                         "with its recorded settings (flags given again change them)")]
SkipOpt = Annotated[bool, typer.Option("--skip-validation", help="do not validate a non-seed package in the "
                                       "sandbox before training")]


def train(
    ctx: typer.Context, package: PackageArg, model: ModelOpt = None, eci: TiersOpt = None, steps: StepsOpt = None,
    lr: LrOpt = None, num_generations: GenerationsOpt = None, prompts_per_step: PromptsOpt = None,
    max_turns: TurnsOpt = None, scale_rewards: ScaleRewardsOpt = None, output: OutputOpt = None,
    resume: ResumeOpt = False, wandb: WandbOpt = None,
    warmup_steps: WarmupOpt = None, warm_start: WarmStartOpt = None, demonstrations: DemonstrationsOpt = None,
    eval_episodes: EvalOpt = None, seed: SeedOpt = None,
    skip_validation: SkipOpt = False, sandbox: SandboxOpt = None, trust: TrustOpt = False,
    settings: SettingsOpt = None,
) -> None:
    """Train a model on a package with GRPO (TRL) through its text protocol, and evaluate it on held-out seeds
    before and after.

    The CPU path is `--model tiny` (built offline over the package's own vocabulary); a hub id or a local model
    trains a LoRA adapter (GPU advised). Costs: tiny runs about 0.5-1 s per step on 2 CPU cores with one turn,
    several seconds with more turns. Ctrl-C stops after the current step with a checkpoint (exit 130); --resume
    continues it with the run's recorded settings. Defaults (default ...) depend on the model kind and are
    recorded in RUN_DIR/config.json."""
    from openadapt.training.config import TrainConfig

    if resume and output is None:
        raise UsageError("--resume needs the run directory: pass --output RUN_DIR")
    given = {k: v for k, v in ctx.params.items() if v is not None and v is not False
             and k not in ("skip_validation", "settings")}
    if resume and settings:
        raise UsageError("--resume keeps the run's recorded settings: leave out --settings")
    config = TrainConfig.build(**(settings or {}) | given, **({"validate_package": False} if skip_validation else {}))
    err.print(f"run directory: {config.output}")
    summary = _run(config)
    _render(summary, config)
    if summary.stopped == "interrupted":
        out.print(f"interrupted at step {summary.global_step}: continue with `openadapt train {config.package} "
                  f"--output {config.output} --resume`")
        raise typer.Exit(INTERRUPTED)


def _run(config):
    """The solver, with a progress bar on a terminal and one plain line per step elsewhere."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from openadapt.training.progress import StepProgress, WarmupProgress
    from openadapt.training.solver import Solver

    live = err.is_terminal
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeElapsedColumn())
    with Progress(*columns, console=err, disable=not live) as bar:
        warm = bar.add_task("format warm-up", total=config.warmup_steps or 1, visible=bool(config.warmup_steps))
        plain_warmup = WarmupProgress(config.warmup_steps or 1, write=err.print)
        start = bar.add_task("warm start", total=config.warm_start_steps, visible=False)
        plain_start = WarmupProgress(config.warm_start_steps, write=err.print, label="warm start")

        def started(n: int, loss: float) -> None:
            bar.update(warm, visible=False)
            bar.update(start, visible=True, completed=n, description=f"warm start (loss {loss:.2f})")

        solver = Solver.create(config, warmup_progress=lambda n, loss: bar.update(
            warm, completed=n, description=f"format warm-up (loss {loss:.2f})") if live else plain_warmup(n, loss),
            warm_start_progress=started if live else plain_start)
        bar.update(warm, visible=False)
        bar.update(start, visible=False)
        with solver:
            task = bar.add_task("GRPO", total=config.steps, completed=solver.trainer.state.global_step)
            plain = StepProgress(config.steps, write=err.print)
            solver.metrics.listeners.append(lambda row: bar.update(task, completed=row["step"], description=(
                f"GRPO reward {row['reward_mean']:+.3f} solved {row['solve_rate']:.2f}")) if live else plain(row))
            return solver.train()


def _render(summary, config) -> None:
    rows = [(which, str(t.eci), f"{t.solve_rate:.3f}", f"{t.solve_rate_ci95[0]:.2f}-{t.solve_rate_ci95[1]:.2f}",
             f"{t.mean_return:.3f}") for which, report in (("before", summary.before), ("after", summary.after))
            for t in (report.tiers if report else [])]
    columns = ("held-out", "ECI", "solve rate", "95% CI", "mean reward")
    show(grid(f"{config.package}: {summary.global_step} steps ({summary.stopped}), {summary.train_seconds:.0f} s",
              columns, rows, right=columns[1:]))
    if summary.warm_start is not None:
        w = summary.warm_start
        tiers = ", ".join(f"ECI {t}: {n}" for t, n in w.source.per_tier.items())
        out.print(f"warm start: {w.source.solved} solved {w.source.policy} episodes ({tiers}; {w.turns} turns), "
                  f"{w.steps} steps, loss {w.first_loss:.2f} -> {w.final_loss:.2f}; 'before' is after it")
    for note in summary.notes:
        err.print(f"[yellow]note:[/yellow] {note}")
    out.print(f"run: {config.output} (metrics.jsonl, summary.json, final/); `openadapt report {config.output}` "
              "renders the curves")
