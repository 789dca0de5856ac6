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
from openadapt.errors import OpenAdaptError

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
    for key, value in (
        ("task", s.task), ("environment", s.environment), ("action", s.action), ("observation", s.observation),
        ("ECI tiers", ", ".join(map(str, s.eci_tiers))),
        ("step budget", ", ".join(f"ECI {t}: {b}" for t, b in sorted(s.step_budget.items()))),
        ("reward range", f"{s.reward_range[0]} .. {s.reward_range[1]}"),
        ("oracle", s.policies.oracle), ("heuristic", s.policies.heuristic or "-"),
        ("malformed completion", f"reward {s.text_protocol.malformed_reward}, consumes a step"),
        ("trusted", "yes (openadapt seed)" if ref.trusted else "no (runs only in the sandbox or with --trust)"),
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
    policy: Annotated[str, typer.Option(help="oracle, heuristic or random")] = "oracle",
    eci: Annotated[str, typer.Option(help="tier 1-5, a list like 1,3,5, or all")] = "all",
    episodes: Annotated[int, typer.Option(min=1, help="held-out seeds per tier")] = 100,
    seed_start: Annotated[int | None, typer.Option(help="first seed (default: the held-out range)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    trust: TrustOpt = False,
) -> None:
    """Solve rate (binary `solved`) and mean reward per tier for a reference policy."""
    from rich.progress import Progress

    from openadapt.envpkg.loader import load
    from openadapt.evaluation import EVAL_SEED_START, evaluate

    tiers = _tiers(eci)
    pkg = load(package, trust=trust)
    start = EVAL_SEED_START if seed_start is None else seed_start
    with Progress(console=err, transient=True, disable=as_json or not err.is_terminal) as bar:
        task = bar.add_task(f"{policy} on {pkg.ref.label}", total=episodes * len(tiers))
        report = evaluate(pkg, policy, tiers, episodes, start, progress=lambda n: bar.advance(task, n))
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        return
    table = Table(title=f"{policy} on {pkg.ref.label}: {episodes} held-out seeds per tier from {start}")
    for column in ("ECI", "solve rate", "95% CI", "mean reward", "95% CI", "steps"):
        table.add_column(column, justify="right")
    for t in report.tiers:
        table.add_row(str(t.eci), f"{t.solve_rate:.3f}", f"{t.solve_rate_ci95[0]:.2f}-{t.solve_rate_ci95[1]:.2f}",
                      f"{t.mean_return:.3f}", f"{t.return_ci95[0]:.2f}-{t.return_ci95[1]:.2f}", f"{t.mean_steps:.1f}")
    out.print(table)
    out.print("solve rate = share of episodes whose final metadata says solved=true; reward is the shaped "
              "episode return, reported separately.", style="dim")


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
    task: Annotated[str, typer.Argument(help="what the environment should train, in words")],
    output: Annotated[Path, typer.Option(help="where packages go")] = Path("generated_envs"),
    name: Annotated[str | None, typer.Option(help="package name (default: from the task's words)")] = None,
    max_attempts: Annotated[int, typer.Option(min=1, help="design/validate/repair rounds")] = 4,
    force: Annotated[bool, typer.Option("--force", help="replace an existing package of that name")] = False,
    sandbox: Annotated[str, typer.Option(help="validator sandbox: auto, docker, bwrap, process")] = "auto",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (env OPENADAPT_BASE_URL)")] = None,
    model: Annotated[str | None, typer.Option(help="model name (env OPENADAPT_MODEL)")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="use the offline blueprint designer even when an "
                                          "endpoint is configured")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Design an environment package for TASK, validate it in the sandbox, repair it from the validator's
    feedback, and publish it under generated_envs/ (exit 0 published, 1 not validated, 2 bad input,
    4 LLM endpoint error). The API key comes from OPENADAPT_API_KEY or OPENAI_API_KEY only."""
    from openadapt.designer.generate import GenerateRequest
    from openadapt.designer.generate import generate as run_generate
    from openadapt.designer.llm import LLMConfig

    if sandbox not in ("auto", "docker", "bwrap", "process"):
        raise typer.BadParameter(f"{sandbox!r}: choose auto, docker, bwrap or process", param_hint="--sandbox")
    llm = None if offline else LLMConfig.from_env(base_url=base_url, model=model)
    request = GenerateRequest(task=task, output_root=output, name=name, max_attempts=max_attempts, force=force,
                              sandbox=sandbox, llm=llm)
    if llm is None and not as_json:
        err.print("[yellow]offline designer[/yellow]: no LLM endpoint configured (set OPENADAPT_BASE_URL, "
                  "OPENADAPT_MODEL and OPENADAPT_API_KEY to use one); composing from a blueprint")
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
            ("designer", f"offline, blueprint {designer.blueprint} ({designer.family})" if designer.backend == "offline"
             else f"{designer.backend}: {designer.model} at {designer.base_url}"),
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
    from openadapt.designer.catalog import load_provenance

    provenance, files = load_provenance(root, name)
    if as_json:
        sys.stdout.write(json.dumps(provenance.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
        return
    d = provenance.designer
    out.print(f"[bold]{provenance.name}[/bold]  (openadapt {provenance.openadapt_version})", highlight=False)
    out.print(f"task: {provenance.task}", highlight=False)
    out.print("designer: " + (f"offline, blueprint {d.blueprint} ({d.family})" if d.backend == "offline"
                              else f"{d.backend} {d.model} at {d.base_url}"), highlight=False)
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
    from openadapt.play import PlaySession

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


if __name__ == "__main__":  # pragma: no cover
    app()
