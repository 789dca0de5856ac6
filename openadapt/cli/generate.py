"""`openadapt generate`: a task prompt in, a validated environment package out."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from openadapt.cli.options import JsonOpt, SandboxOpt
from openadapt.cli.render import Progress, kv_table, print_json, show, validation_text

TaskArg = Annotated[str, typer.Argument(metavar="TASK", show_default=False,
                                        help="what the environment should train, in any language (at most 4,000 "
                                             "characters)")]
OutputOpt = Annotated[Path, typer.Option(metavar="DIR", help="where packages go")]
NameOpt = Annotated[str | None, typer.Option(metavar="NAME", help="package name (default: the task's words; a "
                                             "task in another language, its English translation's)")]
AttemptsOpt = Annotated[int, typer.Option(min=1, help="design/validate/repair rounds")]
TimeLimitOpt = Annotated[float | None, typer.Option(metavar="MINUTES", min=0.1, help="stop designing after this "
                                                   "long: no model request or attempt starts later; what was "
                                                   "written by then is validated or kept with the failed run")]
ForceOpt = Annotated[bool, typer.Option("--force", help="replace an existing package of that name")]
LocalModelOpt = Annotated[str | None, typer.Option(metavar="PATH.gguf|ID", envvar="OPENADAPT_LOCAL_MODEL",
                                                   help="the embedded model: a catalogue id (`openadapt models "
                                                        "list`) or a .gguf file")]
ThreadsOpt = Annotated[int | None, typer.Option(min=1, help="llama.cpp threads (env OPENADAPT_THREADS, else the "
                                                              "idle cores)")]
SeedOpt = Annotated[int | None, typer.Option(min=0, help="sampling seed of the designer model")]
TemperatureOpt = Annotated[float | None, typer.Option(min=0.0, help="sampling temperature (0: greedy)")]
BaseUrlOpt = Annotated[str | None, typer.Option(metavar="URL", help="an OpenAI-compatible endpoint instead of the "
                                                "embedded model (env OPENADAPT_BASE_URL)")]
EndpointModelOpt = Annotated[str | None, typer.Option(metavar="MODEL",
                                                      help="the endpoint's model (env OPENADAPT_MODEL)")]
CustomOpt = Annotated[bool, typer.Option("--custom", help="with an endpoint: write custom mechanics code instead of "
                                         "a family domain")]
MaxTokensOpt = Annotated[int | None, typer.Option(metavar="N", min=1, help="with an endpoint: the most tokens one "
                                                 "reply may hold (default 8192; a custom-mechanics package needs "
                                                 "room for all its files)")]


class DesignMode(StrEnum):
    auto = "auto"
    pieces = "pieces"
    whole = "whole"


DesignModeOpt = Annotated[DesignMode, typer.Option(
    "--design-mode", help="how the domain is written: whole (the whole domain per request, every rule stated: "
                          "capable models), pieces (small constrained requests: small models); auto is whole for an "
                          "endpoint, pieces for the embedded model")]
ExampleOpt = Annotated[str | None, typer.Option(metavar="FAMILY:EXAMPLE", help="publish a family's own example "
                                                "domain, labelled as such (`openadapt families` lists them)")]


def generate(
    ctx: typer.Context, task: TaskArg = "", output: OutputOpt = Path("generated_envs"), name: NameOpt = None,
    max_attempts: AttemptsOpt = 4, time_limit: TimeLimitOpt = None, force: ForceOpt = False,
    sandbox: SandboxOpt = "auto",
    local_model: LocalModelOpt = None, threads: ThreadsOpt = None, seed: SeedOpt = None,
    temperature: TemperatureOpt = None, base_url: BaseUrlOpt = None, model: EndpointModelOpt = None,
    custom: CustomOpt = False, design_mode: DesignModeOpt = DesignMode.auto, max_tokens: MaxTokensOpt = None,
    example: ExampleOpt = None, as_json: JsonOpt = False,
) -> None:
    """Design an environment package for TASK, validate it in the sandbox, repair it from the validator's feedback,
    and publish it under generated_envs/.

    The designer is the embedded model (llama.cpp, `openadapt models`) unless an OpenAI-compatible endpoint is
    configured (--base-url or OPENADAPT_BASE_URL; the API key is read from OPENADAPT_API_KEY or OPENAI_API_KEY
    only). A task in another language is named from the designer model's English translation of it; the designer
    reads the task as written. Progress goes to stderr, with --json too. Exit 0 published, 1 not validated, 2 bad
    input, 4 LLM endpoint error."""
    from openadapt.designer.generate import GenerateRequest
    from openadapt.designer.generate import generate as run_generate

    options = {k: v for k, v in ctx.params.items() if k not in ("as_json", "output", "time_limit")}
    options["design_mode"] = design_mode.value
    request = GenerateRequest.from_options(output_root=output, time_limit_s=None if time_limit is None else
                                           time_limit * 60, **options)
    with Progress() as progress:  # on stderr: stdout stays the one result, JSON or table
        result = run_generate(request, progress=_reporter(progress, max_attempts))
    if as_json:
        print_json(result)
    else:
        show(_result_table(result))
    raise typer.Exit(0 if result.ok else 1)


def _reporter(progress: Progress, max_attempts: int):
    def report(phase: str, attempt: int, detail: str) -> None:
        if phase == "validating":
            detail = "in the sandbox"
        text = f"{phase}: {detail}" if attempt == 0 else f"attempt {attempt}/{max_attempts}: {phase} ({detail})"
        progress.update(text)
        progress.line(text)

    return report


def _result_table(result):
    from openadapt.designer.catalog import describe_designer

    p = result.provenance
    attempts = "; ".join(f"{a.attempt}: {a.verdict or 'unusable'}" + (
        f" ({', '.join(a.failing_checks[:4])})" if a.failing_checks else "") for a in p.attempts)
    rows = [("result", "[green]published[/]" if result.ok else "[red]not validated[/]"),
            ("path", str(result.path or result.failed_dir)), ("designer", describe_designer(p.designer)),
            ("attempts", attempts or "-"),
            ("tokens", f"{p.usage.prompt_tokens:,} in, {p.usage.completion_tokens:,} out"),
            ("duration", f"{p.duration_s:.1f} s")]
    rows.append(("validation", validation_text(p.validation)) if result.ok else ("why", result.reason or "-"))
    if not result.ok:
        rows.append(("next", "\n".join(next_steps(result))))
    return kv_table(f"generate: {result.name}", rows)


def next_steps(result) -> list[str]:
    """What a user can do after a failed design: read the last draft or package, then give the design a better
    model or more tries. The embedded 1.5B model publishes most diagnosis tasks and few of the other families'
    (README, "The numbers"), so a larger model is the advice that most often helps."""
    steps = []
    attempts = sorted(result.failed_dir.glob("attempt-*"), key=lambda d: int(d.name.split("-")[1])) \
        if result.failed_dir else []
    if attempts:
        last = attempts[-1]
        if (last / "draft.yaml").is_file():
            steps.append(f"read {last / 'draft.yaml'}: the problems left are at its top")
        elif (last / "validation.json").is_file():
            steps.append(f"read {last / 'validation.json'}: the checks the last package failed")
    designer = result.provenance.designer
    if "no family fits" in (result.reason or ""):
        return [*steps, "where no family fits, an OpenAI-compatible endpoint writes the mechanics too: --base-url URL "
                "--model NAME (`openadapt families` lists what each family models)"]
    if designer.backend == "local":
        steps.append("give the design a larger model: --local-model PATH.gguf (a bigger instruct GGUF), or an "
                     "OpenAI-compatible endpoint: --base-url URL --model NAME")
    elif designer.backend == "openai-compatible":
        steps.append("try a more capable --model on the endpoint")
    if "time limit" in (result.reason or ""):
        steps.append("or allow more time: --time-limit MINUTES")
    else:
        steps.append(f"or more tries: --max-attempts {len(result.provenance.attempts) + 2}")
    return steps
