"""The `openadapt` command: parses arguments, calls the library, renders results."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from openadapt import __version__
from openadapt.errors import OpenAdaptError, UsageError

app = typer.Typer(
    name="openadapt", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="Generate, validate and train on OpenEnv environments, with an ECI curriculum.",
)
out = Console()
err = Console(stderr=True)

PackageArg = Annotated[str, typer.Argument(help="environment package directory, or seed:NAME")]
TrustOpt = Annotated[bool, typer.Option("--trust", help="run a non-seed package's code in this process "
                                        "(it is untrusted: only for packages you have reviewed)")]


def _reports_errors(fn):
    """Turn library errors into one line on stderr and the error's exit code (2 for usage errors)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except OpenAdaptError as exc:
            err.print(f"[red]error:[/red] {exc}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def _tiers(value: str) -> list[int]:
    if value == "all":
        return [1, 2, 3, 4, 5]
    try:
        tiers = sorted({int(part) for part in value.split(",")})
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a tier: use 1-5, a list like 1,3,5, or 'all'") from None
    if any(t not in range(1, 6) for t in tiers):
        raise typer.BadParameter(f"{value!r}: tiers run from 1 to 5")
    return tiers


def _tier(value: int) -> int:
    if value not in range(1, 6):
        raise typer.BadParameter(f"{value} is outside 1-5")
    return value


@app.callback(invoke_without_command=True)
def main(version: Annotated[bool, typer.Option("--version", help="print the version and exit")] = False) -> None:
    if version:
        out.print(f"openadapt {__version__}")
        raise typer.Exit()


@app.command()
@_reports_errors
def info(package: PackageArg) -> None:
    """Show what a package's manifest declares."""
    from openadapt.envpkg.loader import resolve

    ref = resolve(package)
    s = ref.manifest.openadapt
    table = Table(title=f"{ref.label}", show_header=False)
    if s.mechanics is None:
        mechanics = [("family", s.family), ("domain", s.domain)]
        trusted = "yes (data only: openadapt's own engine runs its domain)"
    else:
        m = s.mechanics
        mechanics = [("environment", m.environment), ("action", m.action), ("observation", m.observation),
                     ("oracle", m.policies.oracle), ("heuristic", m.policies.heuristic or "-")]
        trusted = "yes (openadapt seed)" if ref.seed else "no: its own code runs only in the sandbox or with --trust"
    for key, value in (
        ("task", s.task), ("format", f"v{s.format_version}"), *mechanics,
        ("ECI tiers", ", ".join(map(str, s.eci_tiers))),
        ("step budget", ", ".join(f"ECI {t}: {b}" for t, b in sorted(s.step_budget.items()))),
        ("reward range", f"{s.reward_range[0]} .. {s.reward_range[1]}"),
        ("malformed completion", f"reward {s.malformed_reward}, consumes a step"),
        ("trusted", trusted),
    ):
        table.add_row(key, str(value))
    out.print(table)


@app.command()
@_reports_errors
def serve(
    package: PackageArg,
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    max_sessions: Annotated[int, typer.Option(min=1, help="concurrent WebSocket sessions")] = 16,
    trust: TrustOpt = False,
) -> None:
    """Serve a package over OpenEnv's HTTP/WebSocket API (one environment per /ws session)."""
    import uvicorn

    from openadapt.envpkg.loader import resolve
    from openadapt.envpkg.serving import create_package_app

    ref = resolve(package)
    application = create_package_app(ref.root, max_sessions=max_sessions, trust=trust or ref.trusted)
    err.print(f"serving {ref.label} on http://{host}:{port} (WebSocket /ws, up to {max_sessions} sessions; "
              "reset with {\"seed\": N, \"eci\": K})")
    uvicorn.run(application, host=host, port=port, log_level="warning")


@app.command(name="eval")
@_reports_errors
def eval_(
    package: PackageArg,
    policy: Annotated[str, typer.Option(help="oracle, heuristic, random, or model:RUN_DIR (a trained run)")] = "oracle",
    eci: Annotated[str, typer.Option(help="tier 1-5, a list like 1,3,5, or all")] = "all",
    episodes: Annotated[int, typer.Option(min=1, help="held-out seeds per tier")] = 100,
    seed_start: Annotated[int | None, typer.Option(help="first seed (default: the held-out range)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    log_format: Annotated[str, typer.Option(help="table, or openenv: [START]/[STEP]/[END] lines per episode on "
                                            "stdout (the table goes to stderr)")] = "table",
    trust: TrustOpt = False,
) -> None:
    """Solve rate (binary `solved`) and mean reward per tier for a reference policy or a trained model."""
    from rich.progress import Progress

    from openadapt.envpkg.evaluation import EVAL_SEED_START, evaluate

    if log_format not in ("table", "openenv"):
        raise typer.BadParameter(f"{log_format!r}: choose table or openenv", param_hint="--log-format")
    tiers = _tiers(eci)
    start = EVAL_SEED_START if seed_start is None else seed_start
    openenv = log_format == "openenv"

    def log(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    with Progress(console=err, transient=True, disable=as_json or openenv or not err.is_terminal) as bar:
        task = bar.add_task(f"{policy} on {package}", total=episodes * len(tiers))
        advance = lambda n: bar.advance(task, n)  # noqa: E731
        if policy.startswith("model:"):
            from openadapt.envpkg.loader import resolve
            from openadapt.training.modelpolicy import MODEL_PREFIX, evaluate_run, trace_lines

            run_dir = policy[len(MODEL_PREFIX):]
            name = resolve(package).name

            def log_trace(trace) -> None:
                for line in trace_lines(trace, name, run_dir):
                    log(line)

            report = evaluate_run(run_dir, package, tiers, episodes, start, trust=trust, progress=advance,
                                  on_trace=log_trace if openenv else None)
        else:
            from openadapt.envpkg.loader import load

            pkg = load(package, trust=trust)
            report = evaluate(pkg, policy, tiers, episodes, start, progress=advance, log=log if openenv else None)
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        return
    table = Table(title=f"{report.policy} on {report.package}: {episodes} held-out seeds per tier from {start}")
    for column in ("ECI", "solve rate", "95% CI", "mean reward", "95% CI", "steps"):
        table.add_column(column, justify="right")
    for t in report.tiers:
        table.add_row(str(t.eci), f"{t.solve_rate:.3f}", f"{t.solve_rate_ci95[0]:.2f}-{t.solve_rate_ci95[1]:.2f}",
                      f"{t.mean_return:.3f}", f"{t.return_ci95[0]:.2f}-{t.return_ci95[1]:.2f}", f"{t.mean_steps:.1f}")
    console = err if openenv else out
    console.print(table)
    console.print("solve rate = share of episodes whose final metadata says solved=true; reward is the shaped "
                  "episode return, reported separately.", style="dim")


@app.command()
@_reports_errors
def train(
    package: PackageArg,
    model: Annotated[str, typer.Option(help="tiny (built offline from the package's vocabulary), a hub id, or a "
                                       "local model directory (LoRA by default)")] = "tiny",
    eci: Annotated[str, typer.Option(help="training tier(s): 1-5 or a list like 1,2")] = "1",
    steps: Annotated[int, typer.Option(min=1, help="optimizer steps (global step count)")] = 200,
    lr: Annotated[float | None, typer.Option(help="learning rate (default: tiny 1e-3, LoRA 2e-5)")] = None,
    num_generations: Annotated[int, typer.Option(min=2, help="completions per episode group (GRPO's G)")] = 8,
    prompts_per_step: Annotated[int, typer.Option(min=1, help="episode groups per step")] = 4,
    max_turns: Annotated[int, typer.Option(min=1, help="model turns per training episode")] = 4,
    output: Annotated[Path | None, typer.Option(help="run directory (default runs/NAME-TIMESTAMP)")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="continue the run in --output from its latest "
                                         "checkpoint")] = False,
    wandb: Annotated[str | None, typer.Option(help="online, offline or disabled (default: online when "
                                              "WANDB_API_KEY is set, else disabled)")] = None,
    warmup_steps: Annotated[int | None, typer.Option(min=0, help="format warm-up steps on random actions "
                                                     "(default: tiny 400, real models 0)")] = None,
    eval_episodes: Annotated[int, typer.Option(min=0, help="held-out seeds per tier for the before/after "
                                               "evaluation (0: skip)")] = 100,
    seed: Annotated[int, typer.Option(min=0, help="run seed: training seeds, tiers, model init")] = 0,
    skip_validation: Annotated[bool, typer.Option("--skip-validation", help="do not validate a non-seed package "
                                                  "in the sandbox before training")] = False,
    trust: TrustOpt = False,
) -> None:
    """Train a model on a package with GRPO (TRL), through its text protocol, and evaluate it on held-out seeds
    before and after. Ctrl-C stops after the current step with a checkpoint; --resume continues it."""
    import time

    from pydantic import ValidationError
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from openadapt.envpkg.loader import resolve
    from openadapt.training.config import TrainConfig, WandbMode
    from openadapt.training.solver import Solver

    if output is None:
        if resume:
            raise typer.BadParameter("--resume needs the run directory", param_hint="--output")
        output = Path("runs") / f"{resolve(package).name}-{time.strftime('%Y%m%d-%H%M%S')}"
    options = dict(package=package, model=model, eci=_tiers(eci), steps=steps, lr=lr,
                   num_generations=num_generations, prompts_per_step=prompts_per_step, max_turns=max_turns,
                   output=output, resume=resume, warmup_steps=warmup_steps, eval_episodes=eval_episodes, seed=seed,
                   trust=trust, validate_package=not skip_validation)
    if wandb is not None:
        if wandb not in {m.value for m in WandbMode}:
            raise typer.BadParameter(f"{wandb!r}: choose online, offline or disabled", param_hint="--wandb")
        options["wandb"] = WandbMode(wandb)
    try:
        config = TrainConfig(**{k: v for k, v in options.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    err.print(f"run directory: {config.output}", highlight=False)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeElapsedColumn())
    with Progress(*columns, console=err, disable=not err.is_terminal) as bar:
        warm = bar.add_task("format warm-up", total=config.warmup_steps or 1, visible=bool(config.warmup_steps))
        solver = Solver.create(config, warmup_progress=lambda n, loss: bar.update(
            warm, completed=n, description=f"format warm-up (loss {loss:.2f})"))
        bar.update(warm, visible=False)
        with solver:
            task = bar.add_task("GRPO", total=config.steps, completed=solver.trainer.state.global_step)

            def progress(row: dict) -> None:
                bar.update(task, completed=row["step"], description=(
                    f"GRPO reward {row['reward_mean']:+.3f} solve {row['solve_rate']:.2f} "
                    f"{row['seconds_per_step']:.2f} s/step"))
                if not err.is_terminal and row["step"] % 10 == 0:
                    err.print(f"step {row['step']}: reward {row['reward_mean']:+.3f} sampled solve rate "
                              f"{row['solve_rate']:.3f} ({row['seconds_per_step']:.2f} s/step)", highlight=False)

            solver.metrics.listeners.append(progress)
            summary = solver.train()
    table = Table(title=f"{config.package}: {summary.global_step} steps ({summary.stopped}), "
                        f"{summary.train_seconds:.0f} s")
    for column in ("held-out", "ECI", "solve rate", "95% CI", "mean reward"):
        table.add_column(column, justify="right")
    for which, report in (("before", summary.before), ("after", summary.after)):
        for t in report.tiers if report else []:
            table.add_row(which, str(t.eci), f"{t.solve_rate:.3f}",
                          f"{t.solve_rate_ci95[0]:.2f}-{t.solve_rate_ci95[1]:.2f}", f"{t.mean_return:.3f}")
    out.print(table)
    for note in summary.notes:
        err.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    out.print(f"run: {config.output} (metrics.jsonl, summary.json, final/); `openadapt report {config.output}` "
              "renders the curves", highlight=False)
    if summary.stopped == "interrupted":
        out.print(f"interrupted at step {summary.global_step}: continue with `openadapt train {package} --output "
                  f"{config.output} --resume --steps {config.steps}`", highlight=False)


@app.command()
@_reports_errors
def report(run_dir: Annotated[Path, typer.Argument(help="a training or curriculum run directory")]) -> None:
    """Render a run's report.md/report.html with PNG plots into the run directory: reward and solve-rate curves
    for a training run; solve rate per tier, the ECI timeline, reward components and held-out evaluations per
    tier for a curriculum run."""
    from openadapt.curriculum.report import is_curriculum_run, render_curriculum_report
    from openadapt.training.report import render_report

    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory")
    path = render_curriculum_report(run_dir) if is_curriculum_run(run_dir) else render_report(run_dir)
    out.print(f"{path}\n{path.with_suffix('.html')}", highlight=False)


@app.command()
@_reports_errors
def validate(
    package: PackageArg,
    eci: Annotated[str, typer.Option(help="tiers to check: 1-5, a list like 1,3,5, or all")] = "all",
    sandbox: Annotated[str, typer.Option(help="auto (docker, else bwrap), docker, bwrap, or process "
                                         "(NOT isolated: explicit opt-in)")] = "auto",
    episodes: Annotated[int, typer.Option(min=2, help="episodes per tier for oracle and reference policies")] = 20,
    timeout: Annotated[float, typer.Option(min=1, help="wall-clock limit for the whole validation, seconds")] = 120,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    feedback: Annotated[bool, typer.Option("--feedback", help="print the designer feedback text")] = False,
) -> None:
    """Run a package in a sandbox and check it against the OpenEnv quality bar (exit 0 pass, 1 fail,
    2 not a package, 3 internal error)."""
    from openadapt.envpkg.loader import SEED_PREFIX, resolve
    from openadapt.validator import SandboxUnavailable, Validator

    if sandbox not in ("auto", "docker", "bwrap", "process"):
        raise typer.BadParameter(f"{sandbox!r}: choose auto, docker, bwrap or process", param_hint="--sandbox")
    tiers = _tiers(eci)
    path = str(resolve(package).root) if package.startswith(SEED_PREFIX) else package
    try:
        with Validator(sandbox, episodes=episodes, timeout_s=timeout) as validator:
            report = validator.validate(path, tiers)
    except SandboxUnavailable as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(3) from None
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        raise typer.Exit(report.exit_code)
    table = Table(title=f"validate {package}")
    for column in ("check", "status", "evidence", "s"):
        table.add_column(column, overflow="fold")
    colours = {"pass": "green", "fail": "red", "error": "red", "skip": "yellow"}
    for c in report.checks:
        table.add_row(c.check_id, f"[{colours[c.status.value]}]{c.status.value}[/]",
                      (c.evidence[0] if c.evidence else "")[:160], f"{c.duration_s:.2f}")
    out.print(table)
    box = report.sandbox
    isolation = "isolated" if box.isolated else "[bold red]NOT ISOLATED[/]"
    out.print(f"sandbox: {box.backend} ({isolation}); verdict: [bold]{report.verdict.value}[/]; "
              f"{report.timings.get('total_s', 0):.2f} s")
    if feedback and report.failing:
        out.print(report.designer_feedback(), markup=False, highlight=False)
    raise typer.Exit(report.exit_code)


@app.command()
@_reports_errors
def generate(
    task: Annotated[str, typer.Argument(help="what the environment should train, in words")] = "",
    output: Annotated[Path, typer.Option(help="where packages go")] = Path("generated_envs"),
    name: Annotated[str | None, typer.Option(help="package name (default: from the task's words)")] = None,
    max_attempts: Annotated[int, typer.Option(min=1, help="design/validate/repair rounds")] = 4,
    force: Annotated[bool, typer.Option("--force", help="replace an existing package of that name")] = False,
    sandbox: Annotated[str, typer.Option(help="validator sandbox: auto, docker, bwrap, process")] = "auto",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (env OPENADAPT_BASE_URL)")] = None,
    model: Annotated[str | None, typer.Option(help="model name (env OPENADAPT_MODEL)")] = None,
    example: Annotated[str | None, typer.Option(help="publish a family's own example domain, labelled as such "
                                                "(FAMILY:EXAMPLE, e.g. diagnosis:incident_triage)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Design an environment package for TASK, validate it in the sandbox, repair it from the validator's
    feedback, and publish it under generated_envs/ (exit 0 published, 1 not validated, 2 bad input,
    4 LLM endpoint error). The API key comes from OPENADAPT_API_KEY or OPENAI_API_KEY only."""
    from openadapt.designer.catalog import describe_designer
    from openadapt.designer.generate import GenerateRequest
    from openadapt.designer.generate import generate as run_generate
    from openadapt.designer.llm import LLMConfig
    from openadapt.sandbox import SandboxChoice

    llm = None if example else LLMConfig.from_env(base_url=base_url, model=model)
    request = GenerateRequest(task=task, output_root=output, name=name, max_attempts=max_attempts, force=force,
                              sandbox=SandboxChoice.parse(sandbox), llm=llm, example=example)
    with err.status("starting", spinner="dots") as status:
        def progress(phase: str, attempt: int, detail: str) -> None:
            status.update(f"attempt {attempt}/{max_attempts}: {phase} ({detail})")
            if not as_json:
                err.print(f"attempt {attempt}: {phase}", highlight=False)

        result = run_generate(request, progress=progress)
    p = result.provenance
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        raise typer.Exit(0 if result.ok else 1)
    designer = p.designer
    table = Table(title=f"generate: {result.name}", show_header=False)
    rows = [("result", "[green]published[/]" if result.ok else "[red]not validated[/]"),
            ("path", str(result.path or result.failed_dir)),
            ("designer", describe_designer(designer)),
            ("attempts", ", ".join(f"{a.attempt}: {a.verdict or 'unusable'}" + (
                f" ({', '.join(a.failing_checks[:4])})" if a.failing_checks else "") for a in p.attempts)),
            ("tokens", f"{p.usage.prompt_tokens} in, {p.usage.completion_tokens} out"),
            ("duration", f"{p.duration_s:.1f} s")]
    if result.ok:
        rows.append(("validation", f"{p.validation.get('counts')} in {p.validation.get('sandbox')}"))
    else:
        rows.append(("why", result.reason or ""))
    for key, value in rows:
        table.add_row(key, value)
    out.print(table)
    raise typer.Exit(0 if result.ok else 1)


@app.command(name="list")
@_reports_errors
def list_(
    root: Annotated[Path, typer.Option(help="folder of generated packages")] = Path("generated_envs"),
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """Generated packages and their provenance, sorted by name."""
    from openadapt.designer.catalog import list_packages

    entries = list_packages(root)
    if as_json:
        sys.stdout.write(json.dumps([e.model_dump(mode="json") for e in entries], indent=2, sort_keys=True) + "\n")
        return
    table = Table(title=f"{root} ({len(entries)} packages)")
    for column in ("name", "designer", "attempts", "verdict", "digest", "task"):
        table.add_column(column, overflow="fold")
    for e in entries:
        table.add_row(e.name, e.designer, str(e.attempts), e.verdict, e.digest[:12], e.task[:60])
    out.print(table)


@app.command()
@_reports_errors
def show(
    name: Annotated[str, typer.Argument(help="package name under the root")],
    root: Annotated[Path, typer.Option(help="folder of generated packages")] = Path("generated_envs"),
    as_json: Annotated[bool, typer.Option("--json", help="print the provenance as JSON")] = False,
) -> None:
    """A generated package's provenance: task, designer, attempts and what they failed, validation, digest."""
    from openadapt.designer.catalog import describe_designer, load_provenance

    provenance, files = load_provenance(root, name)
    if as_json:
        sys.stdout.write(json.dumps(provenance.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
        return
    d = provenance.designer
    out.print(f"[bold]{provenance.name}[/bold]  (openadapt {provenance.openadapt_version})", highlight=False)
    out.print(f"task: {provenance.task}", highlight=False)
    out.print("designer: " + describe_designer(d), highlight=False)
    table = Table(title="attempts")
    for column in ("#", "verdict", "failing checks", "tokens in/out", "design s", "validate s"):
        table.add_column(column, overflow="fold")
    for a in provenance.attempts:
        table.add_row(str(a.attempt), a.verdict or "unusable", ", ".join(a.failing_checks or a.parse_problems[:2]),
                      f"{a.usage.prompt_tokens}/{a.usage.completion_tokens}", f"{a.design_s:.2f}",
                      f"{a.validation_s:.2f}")
    out.print(table)
    out.print(f"validation: {provenance.validation}", highlight=False)
    out.print(f"content digest: {provenance.content_digest}", highlight=False)
    out.print("files: " + ", ".join(files), highlight=False)


@app.command()
@_reports_errors
def play(
    package: PackageArg,
    eci: Annotated[int, typer.Option(callback=_tier, help="tier 1-5")] = 1,
    seed: Annotated[int | None, typer.Option(help="episode seed (random if omitted)")] = None,
    trust: TrustOpt = False,
) -> None:
    """Play one episode by hand: you see the prompt an LLM sees and type its reply (a JSON action)."""
    from openadapt.envpkg.loader import load
    from openadapt.envpkg.play import PlaySession

    session = PlaySession(load(package, trust=trust), eci, seed)
    out.rule("system prompt")
    out.print(session.system_prompt, markup=False, highlight=False)
    while not session.done:
        out.rule(f"step {session.observation.metadata.get('step', 0)}")
        out.print(session.prompt(), markup=False, highlight=False)
        try:
            reply = input("your reply> ").strip()
        except EOFError:
            err.print("input closed; episode abandoned")
            raise typer.Exit(1) from None
        if reply in {"quit", "exit", ":q"}:
            raise typer.Exit(0)
        if not reply:
            continue
        obs, parse_error = session.submit(reply)
        if parse_error:
            out.print(f"[yellow]not an action[/yellow]: {parse_error}", highlight=False)
        out.print(f"reward {obs.reward:+.3f}" + (f"  error: {obs.error}" if obs.error else ""), highlight=False)
    meta = session.observation.metadata
    out.rule("episode over")
    out.print(session.prompt(), markup=False, highlight=False)
    out.print(json.dumps({"solved": meta["solved"], "episode_return": round(session.total, 4),
                          "reward_components": meta["reward_components"]}, indent=2), highlight=False)


@app.command()
@_reports_errors
def curriculum(
    source: Annotated[str | None, typer.Argument(help="a task prompt, a package directory, or seed:NAME "
                                                 "(omit with --resume)")] = None,
    model: Annotated[str, typer.Option(help="solver: 'tiny', a hub id or a local model directory")] = "tiny",
    hours: Annotated[float | None, typer.Option(min=0.001, help="stop after this much run time")] = None,
    max_steps: Annotated[int | None, typer.Option(min=1, help="stop at this global optimizer step")] = None,
    window: Annotated[int, typer.Option(min=1, help="episodes per tier in the windowed solve rate")] = 64,
    min_episodes: Annotated[int | None, typer.Option(min=1, help="episodes before a tier may escalate "
                                                     "(default: the window)")] = None,
    threshold: Annotated[float, typer.Option(min=0.0, max=1.0, help="escalate at this windowed solve rate")] = 0.90,
    replay_share: Annotated[float, typer.Option(min=0.0, max=0.99, help="share of episodes on earlier tiers")] = 0.1,
    step_back: Annotated[bool, typer.Option("--step-back", help="return to a tier whose replayed solve rate "
                                            "collapsed")] = False,
    start_eci: Annotated[int, typer.Option(callback=_tier, help="tier to start from")] = 1,
    eval_episodes: Annotated[int, typer.Option(min=0, help="held-out seeds per tier evaluation")] = 100,
    num_generations: Annotated[int, typer.Option(min=2, help="GRPO completions per episode group")] = 8,
    prompts_per_step: Annotated[int, typer.Option(min=1, help="episode groups per optimizer step")] = 4,
    lr: Annotated[float | None, typer.Option(help="learning rate (default per model kind)")] = None,
    warmup_steps: Annotated[int | None, typer.Option(min=0, help="tiny: format warm-up steps on random valid "
                                                     "actions (default 200)")] = None,
    save_steps: Annotated[int, typer.Option(min=1, help="checkpoint every N steps")] = 10,
    output: Annotated[Path | None, typer.Option(help="run directory (default runs/curriculum-TIMESTAMP)")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue the run in this directory")] = None,
    wandb: Annotated[str | None, typer.Option(help="online, offline or disabled (default: online only with "
                                              "WANDB_API_KEY)")] = None,
    sandbox: Annotated[str, typer.Option(help="validator sandbox: auto, docker, bwrap, process")] = "auto",
    designer_base_url: Annotated[str | None, typer.Option(help="designer endpoint (env OPENADAPT_BASE_URL)")] = None,
    designer_model: Annotated[str | None, typer.Option(help="designer model (env OPENADAPT_MODEL)")] = None,
    escalation_attempts: Annotated[int, typer.Option(min=1, help="designer+validator rounds per escalation "
                                                     "before the run stops as blocked")] = 2,
    designer_attempts: Annotated[int, typer.Option(min=1, help="LLM repair attempts within a round")] = 3,
) -> None:
    """Train on SOURCE and raise its ECI tier each time the windowed solve rate reaches --threshold, with the
    designer making the harder tier and the validator certifying it. Survives kill -9: continue with --resume."""
    import datetime as dt

    from openadapt.curriculum.controller import Curriculum, CurriculumConfig, stored_config
    from openadapt.curriculum.rule import RuleConfig
    from openadapt.designer.escalate import DesignerEscalator
    from openadapt.designer.generate import design_task
    from openadapt.designer.llm import LLMConfig

    llm = LLMConfig.from_env(base_url=designer_base_url, model=designer_model)
    if resume is not None:
        if output is not None and output != resume:
            raise UsageError("--resume names the run directory; drop --output")
        config = stored_config(resume)
        if source is not None and source != config.source:
            raise UsageError(f"{resume} holds a curriculum on {config.source!r}, not {source!r}")
        updates = {k: v for k, v in {"hours": hours, "max_steps": max_steps}.items() if v is not None}
        config = config.model_copy(update=updates)
    else:
        if source is None:
            raise UsageError("give a task prompt, a package directory or seed:NAME (or --resume RUN_DIR)")
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
        rule = RuleConfig(threshold=threshold, window=window, min_episodes=min_episodes or window,
                          replay_share=replay_share, step_back=step_back)
        fields = {"wandb": wandb} if wandb else {}
        config = CurriculumConfig(source=source, output=output or Path("runs") / f"curriculum-{stamp}", model=model,
                                  rule=rule, start_tier=start_eci, hours=hours, max_steps=max_steps,
                                  eval_episodes=eval_episodes, num_generations=num_generations,
                                  prompts_per_step=prompts_per_step, lr=lr, warmup_steps=warmup_steps,
                                  save_steps=save_steps, sandbox=sandbox, escalation_attempts=escalation_attempts,
                                  designer_attempts=designer_attempts, **fields)
    if config.hours is None and config.max_steps is None:
        err.print("[yellow]no --hours or --max-steps[/yellow]: the run stops only when ECI 5 is mastered (Ctrl-C "
                  "stops it cleanly; --resume continues)")
    err.print(f"run directory: {config.output}", highlight=False)
    with err.status("starting", spinner="dots") as status:
        def listen(event: dict) -> None:
            kind = event["event"]
            if kind == "progress":
                tier = event["tier"]
                rate = event["windowed"].get(tier)
                status.update(f"ECI {tier} | step {event['step']} | windowed solve rate "
                              f"{'-' if rate is None else f'{rate:.2f}'} ({event['counts'].get(tier, 0)} episodes) "
                              f"| {event['train_seconds'] / 60:.1f} min")
                return
            detail = {k: v for k, v in event.items() if k not in ("at", "event", "step", "summary", "rule")}
            err.print(f"[bold]{kind}[/bold] step {event['step']} {json.dumps(detail, sort_keys=True)}",
                      highlight=False)

        summary = Curriculum(config, resume=resume is not None, escalator=DesignerEscalator(llm),
                             design=design_task(llm), listener=listen).run()
    table = Table(title=f"curriculum: {summary.status}", show_header=False)
    table.add_row("run directory", str(summary.run_dir))
    table.add_row("why it stopped", summary.reason)
    table.add_row("tier", f"ECI {summary.tier}")
    table.add_row("steps", f"{summary.global_step} ({summary.episodes} episodes, {summary.train_seconds / 60:.1f} min)")
    table.add_row("escalations", ", ".join(f"ECI {e['tier']}->{e['target']} at step {e['step']}"
                                          for e in summary.escalations) or "none")
    for e in summary.evaluations:
        table.add_row(f"held-out ECI {e.eci} ({e.when})", f"solve rate {e.solve_rate:.3f} "
                      f"[{e.solve_rate_ci95[0]:.2f}, {e.solve_rate_ci95[1]:.2f}] on {e.episodes} seeds, "
                      f"reward {e.mean_return:.3f} (step {e.step})")
    out.print(table)
    raise typer.Exit(0 if summary.status in ("mastered", "max_steps", "time_limit") else 1)


if __name__ == "__main__":  # pragma: no cover
    app()
