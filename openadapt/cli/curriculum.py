"""`openadapt curriculum`: train and raise the ECI tier as the solver masters it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from openadapt.cli.options import (
    ModelOpt,
    OutputOpt,
    ReferenceOpt,
    SandboxOpt,
    ScaleRewardsOpt,
    SettingsOpt,
    WandbOpt,
    tier_value,
)
from openadapt.cli.render import Progress, kv_table, show
from openadapt.cli.shell import INTERRUPTED, err
from openadapt.errors import UsageError

SourceArg = Annotated[str | None, typer.Argument(metavar="SOURCE", show_default=False, help="a task prompt, a "
                                                 "package directory, or seed:NAME (omit with --resume)")]
HoursOpt = Annotated[float | None, typer.Option(min=0.001, help="stop after this much run time")]
MaxStepsOpt = Annotated[int | None, typer.Option(min=1, help="stop at this global optimizer step")]
WindowOpt = Annotated[int, typer.Option(min=1, help="episodes per tier in the windowed solve rate")]
MinEpisodesOpt = Annotated[int | None, typer.Option(min=1, help="episodes before a tier may escalate (default: "
                                                    "the window)")]
ThresholdOpt = Annotated[float, typer.Option(min=0.0, max=1.0, help="escalate at this windowed solve rate")]
ReplayOpt = Annotated[float, typer.Option(min=0.0, max=0.99, help="share of episodes on earlier tiers")]
CheckOpt = Annotated[int, typer.Option(min=0, help="greedy episodes on fresh validation seeds that must reach "
                                       "--threshold before a tier escalates (0: the windowed rate decides)")]
CheckFloorOpt = Annotated[float | None, typer.Option(min=0.0, max=1.0, help="with --check-episodes, the windowed "
                                                     "rate that calls for a check (default: --threshold)")]
CheckFloorFromOpt = Annotated[int, typer.Option(metavar="TIER", min=1, max=5, help="the first tier --check-floor "
                                                "applies to; below it a check confirms a pass of --threshold")]
CheckEveryOpt = Annotated[int, typer.Option(min=1, help="with --check-episodes, steps between two checks")]
StepBackOpt = Annotated[bool, typer.Option("--step-back", help="return to a tier whose replayed solve rate "
                                           "collapsed (default: report the collapse only)")]
StartOpt = Annotated[int, typer.Option(metavar="TIER", callback=tier_value, help="ECI tier to start from, 1-5")]
CountOpt = Annotated[int | None, typer.Option(min=0, help="held-out seeds per tier evaluation (default 100)")]
GenerationsOpt = Annotated[int | None, typer.Option(min=2, help="GRPO completions per episode group (default: "
                                                    "tiny 4, real models 8)")]
PromptsOpt = Annotated[int | None, typer.Option(min=1, help="episode groups per optimizer step (default: tiny 8, "
                                                "real models 4)")]
LrOpt = Annotated[float | None, typer.Option(help="learning rate (default per model kind)")]
WarmupOpt = Annotated[int | None, typer.Option(min=0, help="tiny: format warm-up steps (default per run length)")]
WarmStartOpt = Annotated[bool | None, typer.Option(
    "--warm-start/--no-warm-start", help="tiny: before GRPO, imitate solved episodes of the package's "
    "non-privileged policy at the starting tier (default: where the package ships one that solves some)")]
SaveOpt = Annotated[int | None, typer.Option(min=1, help="checkpoint every N steps (default 10)")]
ResumeOpt = Annotated[Path | None, typer.Option(metavar="RUN_DIR", help="continue the run in this directory "
                                                "(its recorded settings; --hours and --max-steps may be given)")]
UrlOpt = Annotated[str | None, typer.Option(metavar="URL", help="designer endpoint (env OPENADAPT_BASE_URL)")]
DesignerModelOpt = Annotated[str | None, typer.Option(metavar="MODEL", help="designer model (env OPENADAPT_MODEL)")]
RoundsOpt = Annotated[int, typer.Option(min=1, help="designer+validator rounds per escalation before the run "
                                        "stops as blocked")]
AttemptsOpt = Annotated[int, typer.Option(min=1, help="LLM repair attempts within a round")]
RULE = ("window", "min_episodes", "threshold", "replay_share", "step_back", "check_episodes", "check_floor",
        "check_floor_from", "check_every")
NOT_SETTINGS = ("resume", "designer_base_url", "designer_model", "start_eci", "settings", *RULE)


def curriculum(
    ctx: typer.Context, source: SourceArg = None, model: ModelOpt = None, hours: HoursOpt = None,
    max_steps: MaxStepsOpt = None, window: WindowOpt = 64, min_episodes: MinEpisodesOpt = None,
    threshold: ThresholdOpt = 0.90, replay_share: ReplayOpt = 0.1, step_back: StepBackOpt = False,
    check_episodes: CheckOpt = 0, check_floor: CheckFloorOpt = None,
    check_floor_from: CheckFloorFromOpt = 1, check_every: CheckEveryOpt = 50,
    start_eci: StartOpt = 1, eval_episodes: CountOpt = None, num_generations: GenerationsOpt = None,
    prompts_per_step: PromptsOpt = None, lr: LrOpt = None, scale_rewards: ScaleRewardsOpt = None,
    reference: ReferenceOpt = None, warmup_steps: WarmupOpt = None, warm_start: WarmStartOpt = None,
    save_steps: SaveOpt = None, output: OutputOpt = None, resume: ResumeOpt = None, wandb: WandbOpt = None,
    sandbox: SandboxOpt = None, designer_base_url: UrlOpt = None, designer_model: DesignerModelOpt = None,
    escalation_attempts: RoundsOpt = 2, designer_attempts: AttemptsOpt = 3, settings: SettingsOpt = None,
) -> None:
    """Train on SOURCE and raise its ECI tier each time the windowed solve rate reaches --threshold, with the
    designer making the harder tier and the validator certifying it.

    Every state write is atomic: a run killed at any point (kill -9 included) continues with --resume RUN_DIR.
    It runs until ECI 5 is mastered unless --hours or --max-steps bound it: hours on a CPU. Exit 0 when it
    stopped by mastery, steps or hours; 1 blocked or failed; 130 interrupted."""
    from openadapt.llm.endpoint import LLMConfig

    config = _config(ctx.params)  # every problem with the flags: one line, before torch and OpenEnv load
    llm = LLMConfig.from_env(base_url=designer_base_url, model=designer_model)
    from openadapt.curriculum.controller import Curriculum
    from openadapt.designer.escalate import DesignerEscalator
    from openadapt.designer.generate import design_task

    if config.hours is None and config.max_steps is None:
        err.print("[yellow]no --hours or --max-steps[/yellow]: the run stops only when ECI 5 is mastered (Ctrl-C "
                  "stops it cleanly; --resume continues)")
    err.print(f"run directory: {config.output}")
    with Progress() as progress:
        summary = Curriculum(config, resume=resume is not None, escalator=DesignerEscalator(llm),
                             design=design_task(llm), listener=_listener(progress)).run()
    show(_summary_table(summary))
    raise typer.Exit(0 if summary.status in ("mastered", "max_steps", "time_limit") else
                     INTERRUPTED if summary.status == "interrupted" else 1)


def _config(params: dict[str, Any]):
    from openadapt.curriculum.config import CurriculumConfig, resume_config

    if params["resume"] is not None:
        if params["settings"]:
            raise UsageError("--resume keeps the run's recorded settings: leave out --settings")
        return resume_config(params["resume"], source=params["source"], output=params["output"],
                             hours=params["hours"], max_steps=params["max_steps"])
    if params["source"] is None:
        raise UsageError("give a SOURCE: a task prompt, a package directory or seed:NAME (or --resume RUN_DIR)")
    rule = {k: params[k] for k in RULE} | {"min_episodes": params["min_episodes"] or params["window"]}
    given = {k: v for k, v in params.items() if k not in NOT_SETTINGS and v is not None}
    if "warm_start" in given:
        given["warm_start"] = "heuristic" if given["warm_start"] else "off"
    return CurriculumConfig.build(**(params["settings"] or {}) | given, rule=rule, start_tier=params["start_eci"])


def _listener(progress: Progress):
    from openadapt.curriculum.report import describe_event

    def listen(event: dict[str, Any]) -> None:
        if event["event"] != "progress":
            progress.line(f"step {event['step']}: {describe_event(event)}")
            return
        tier = event["tier"]
        rate = event["windowed"].get(tier)
        progress.update(f"ECI {tier} | step {event['step']} | windowed solve rate "
                        f"{'-' if rate is None else f'{rate:.2f}'} ({event['counts'].get(tier, 0)} episodes) "
                        f"| {event['train_seconds'] / 60:.1f} min")

    return listen


def _summary_table(summary):
    rows = [("run directory", str(summary.run_dir)), ("why it stopped", summary.reason),
            ("tier", f"ECI {summary.tier}"),
            ("steps", f"{summary.global_step} ({summary.episodes} episodes, {summary.train_seconds / 60:.1f} min)"),
            ("escalations", ", ".join(f"ECI {e['tier']} -> {e['target']} at step {e['step']}"
                                      for e in summary.escalations) or "none")]
    rows += [(f"held-out ECI {e.eci} ({e.when})", f"solve rate {e.solve_rate:.3f} [{e.solve_rate_ci95[0]:.2f}, "
              f"{e.solve_rate_ci95[1]:.2f}] on {e.episodes} seeds, reward {e.mean_return:.3f} (step {e.step})")
             for e in summary.evaluations]
    return kv_table(f"curriculum: {summary.status}", rows)
