"""`generate`: task prompt -> designer -> stage -> validate in the sandbox -> repair from feedback -> publish.

On success the package moves atomically (one rename on the same filesystem) to `generated_envs/<name>/`. On
final failure, or when the run is interrupted (Ctrl-C, an endpoint that dies), nothing appears there: every
attempt is kept under `generated_envs/.failed/<name>-<time>-<hex>/` with FAILED.json saying why.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openadapt import __version__
from openadapt.designer import prompting
from openadapt.designer.base import Candidate, Designer
from openadapt.designer.custom import CustomDesigner
from openadapt.designer.deadline import NO_DEADLINE, Deadline
from openadapt.designer.example import ExampleDesigner, parse_example_ref
from openadapt.designer.family_design import FamilyDomainDesigner
from openadapt.designer.loop import Progress, run_design
from openadapt.designer.naming import NAME, PackageName, looks_english, name_package
from openadapt.designer.provenance import Provenance
from openadapt.designer.whole import WholeDomainDesigner
from openadapt.envpkg.render import content_digest, template_versions
from openadapt.errors import UsageError, settings_error
from openadapt.llm.chat import ChatBackend
from openadapt.llm.endpoint import LLMClient, LLMConfig, Usage
from openadapt.llm.local.backend import LocalSettings
from openadapt.sandbox import SandboxChoice

DesignMode = Literal["auto", "pieces", "whole"]
FAILED_DIR = ".failed"
STAGING_DIR = ".staging"
MAX_TASK_CHARS = 4000
NO_DESIGNER = ("no designer is available: the embedded model is not installed (run `bash scripts/setup.sh`, or "
               "`openadapt models pull qwen2.5-coder-1.5b`), and no OpenAI-compatible endpoint is configured "
               "(OPENADAPT_BASE_URL, OPENADAPT_MODEL); or publish a family's own example with --example "
               "FAMILY:EXAMPLE. openadapt does not rename another domain to fit a prompt")


class GenerateRequest(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    task: str = ""
    output_root: Path = Path("generated_envs")
    name: str | None = None
    max_attempts: int = Field(default=4, ge=1)
    force: bool = False
    sandbox: SandboxChoice = SandboxChoice.AUTO
    llm: LLMConfig | None = Field(default=None, description="an OpenAI-compatible endpoint (else the local model)")
    local: LocalSettings | None = Field(default=None, description="the embedded model's settings (None: defaults)")
    example: str | None = Field(default=None, description="FAMILY:EXAMPLE: publish that family example")
    custom: bool = Field(default=False, description="an endpoint LLM writes custom mechanics, skipping families")
    design_mode: DesignMode = Field(default="auto", description=(
        "how a family domain is written: 'pieces' (small constrained requests, for small models), 'whole' (the "
        "whole domain per request with every rule stated, for capable models), 'auto' (whole for an endpoint, "
        "pieces for the embedded model)"))
    switched_off: frozenset[str] = Field(default=frozenset(), description=(
        "the designer's switches turned off (`designer.switches`), for ablation measurements only"))
    time_limit_s: float | None = Field(default=None, gt=0, description="no model request or attempt starts after "
                                       "this many seconds (None: attempts alone bound the run)")

    @classmethod
    def from_options(cls, *, base_url: str | None = None, model: str | None = None, local_model: str | None = None,
                     threads: int | None = None, seed: int | None = None, temperature: float | None = None,
                     max_tokens: int | None = None, **fields) -> GenerateRequest:
        """A request from command-line options: an endpoint when one is configured (flags, else the environment),
        else the embedded model; `seed` and `temperature` go to whichever designs. UsageError when the flags ask
        for both."""
        sampling = {k: v for k, v in {"seed": seed, "temperature": temperature}.items() if v is not None}
        if fields.get("example") is not None:
            return cls(**fields)
        llm = LLMConfig.from_env(base_url=base_url, model=model, **sampling,
                                 **({"max_tokens": max_tokens} if max_tokens is not None else {}))
        if llm is None and max_tokens is not None:
            raise UsageError("--max-tokens bounds an endpoint's replies; the embedded model sizes each piece's own "
                             "(give --base-url, or drop --max-tokens)")
        if max_tokens is not None and max_tokens < (room := prompting.exemplar_tokens()):
            raise UsageError(f"--max-tokens {max_tokens} cannot hold a custom-mechanics package: the worked example's "
                             f"files alone are about {room:,} tokens")
        local_only = {k: v for k, v in {"model": local_model, "threads": threads}.items() if v is not None}
        if llm is not None and local_only:
            raise UsageError("--local-model and --threads set the embedded model, but an endpoint is configured "
                             f"({llm.base_url}): use one designer (unset OPENADAPT_BASE_URL to use the local model)")
        if llm is None and model is not None:
            raise UsageError("--model names an endpoint's model: give --base-url too (or OPENADAPT_BASE_URL), or "
                             "use --local-model for the embedded one")
        try:
            local = LocalSettings(**local_only, **sampling) if llm is None and (local_only or sampling) else None
            return cls(llm=llm, local=local, **fields)
        except ValidationError as exc:
            raise settings_error(exc, "designer settings") from None


class GenerateResult(BaseModel):
    ok: bool
    name: str
    path: Path | None = None
    failed_dir: Path | None = None
    reason: str | None = None
    provenance: Provenance


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def check_request(request: GenerateRequest) -> str:
    """The task text, or UsageError for a request that cannot start (nothing is written before this)."""
    task = request.task.strip()
    if request.example is not None:
        parse_example_ref(request.example)
    elif not task:
        raise UsageError("the task prompt is empty: describe the environment to generate")
    if len(task) > MAX_TASK_CHARS:
        raise UsageError(f"the task prompt has {len(task)} characters (at most {MAX_TASK_CHARS})")
    if request.name is not None and not NAME.fullmatch(request.name):
        raise UsageError(f"--name {request.name!r} must be a lowercase identifier (letters, digits, underscores)")
    if request.custom and request.llm is None:
        raise UsageError("--custom needs an OpenAI-compatible endpoint (--base-url, or OPENADAPT_BASE_URL): the "
                         "embedded model writes family domains only")
    if request.output_root.exists() and not request.output_root.is_dir():
        raise UsageError(f"--output {request.output_root} is a file: choose a directory for the packages")
    return task


def given_name(request: GenerateRequest) -> PackageName | None:
    """The package name the request fixes itself (--name, or the example's own); None when the task names it."""
    if request.name is not None:
        return PackageName(request.name, "--name")
    if request.example is not None:
        return PackageName(request.example.partition(":")[2], "example")
    return None


def check_destination(request: GenerateRequest, name: str) -> Path:
    """Where the package will be published; UsageError before any model loads when that place is taken."""
    dest = request.output_root / name
    if dest.exists() and not request.force:
        raise UsageError(f"{dest} already exists: pass --force to replace it, or --name to choose another "
                         "(nothing was changed)")
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{dest} exists and is not a package directory (nothing was changed)")
    return dest


class FamilyThenCustom:
    """A family domain first; where no family fits, an endpoint LLM writes custom mechanics instead."""

    def __init__(self, family: FamilyDomainDesigner | WholeDomainDesigner, custom: CustomDesigner):
        self.family, self.custom = family, custom
        self.active: Designer = family

    @property
    def info(self):
        return self.active.info

    @property
    def deterministic(self) -> bool:
        return self.active.deterministic

    def design(self) -> Candidate:
        candidate = self.family.design()
        if self.family.no_family:
            self.active = self.custom
            fallback = self.custom.design()
            fallback.notes = {**candidate.notes, **fallback.notes, "fallback": "custom mechanics"}
            return fallback
        return candidate

    def repair(self, previous: Candidate, feedback: str, attempt: int) -> Candidate:
        return self.active.repair(previous, feedback, attempt)


def chat_backend(request: GenerateRequest, progress: Progress | None = None) -> ChatBackend | None:
    """The model that designs this request: the endpoint, else the embedded model (loaded here); None for a
    family's example. UsageError when neither is available."""
    if request.example is not None:
        return None
    if request.llm is not None:
        return LLMClient(request.llm)
    from openadapt.llm.local import LocalLLM, ModelNotInstalledError, resolve_model

    settings = request.local or LocalSettings()
    try:
        resolve_model(settings.model)
    except ModelNotInstalledError:
        if settings.model is None:
            raise UsageError(NO_DESIGNER) from None
        raise
    return LocalLLM(settings, on_load=_load_progress(progress))


def choose_designer(request: GenerateRequest, task: str, backend: ChatBackend | None, name: str,
                    progress: Progress | None = None, deadline: Deadline = NO_DEADLINE) -> Designer:
    """The designer this request gets, writing with `backend`."""
    if request.example is not None:
        return ExampleDesigner(request.example, name)
    kind = "local" if request.llm is None else "openai-compatible"
    whole = request.design_mode == "whole" or (request.design_mode == "auto" and request.llm is not None)
    if whole:
        family = WholeDomainDesigner(backend, name, task, progress=progress, kind=kind, deadline=deadline,
                                     off=request.switched_off)
    else:
        family = FamilyDomainDesigner(backend, name, task, progress=progress, kind=kind, deadline=deadline,
                                      off=request.switched_off)
    if request.llm is None:
        return family
    custom = CustomDesigner(backend, name, task, prompting)
    return custom if request.custom else FamilyThenCustom(family, custom)


def _load_progress(progress: Progress | None):
    def on_load(event) -> None:
        if progress is not None:
            detail = event.model if event.phase == "loading" else f"{event.model} in {event.seconds:.1f} s"
            detail += f" ({event.note})" if event.note else ""
            progress(f"model {event.phase}", 0, detail)

    return on_load


def generate(request: GenerateRequest, progress: Progress | None = None, validator=None) -> GenerateResult:
    from openadapt.validator import Validator

    task = check_request(request)
    naming = given_name(request) or (name_package(task, None) if looks_english(task) else None)
    if naming is not None:  # known before any model loads: a taken place is refused at once
        check_destination(request, naming.name)
    deadline = Deadline(request.time_limit_s)
    backend = chat_backend(request, progress)
    if naming is None:  # a task in another language: named from the designer model's English translation
        naming = name_package(task, backend)
        if progress:
            how = f"from the translation {naming.english!r}" if naming.english else "transliterated"
            progress("naming", 0, f"{naming.name}, {how}")
        check_destination(request, naming.name)
    dest = request.output_root / naming.name
    name = naming.name
    designer = choose_designer(request, task, backend, name, progress, deadline)
    root = request.output_root
    provenance = Provenance(openadapt_version=__version__, name=name, name_source=naming.source,
                            task_english=naming.english, task=task, designer=designer.info,
                            template_versions=template_versions(), created_at=_now())
    run_dir = root / STAGING_DIR / f"{name}-{os.getpid()}-{time.time_ns()}"
    run_dir.mkdir(parents=True)
    own_validator = validator is None
    started = time.monotonic()
    try:
        validator = validator or Validator(request.sandbox)
        result = run_design(designer, validator, name=name, work=run_dir, max_attempts=request.max_attempts,
                            attempts=provenance.attempts, progress=progress, deadline=deadline)
        provenance.designer = designer.info  # now with what the designer decided (the family)
        if result.ok:
            _finalise(result.stage, result.report, provenance, started)
            if progress:
                progress("publishing", len(provenance.attempts), str(dest))
            publish(result.stage, dest, request.force)
            shutil.rmtree(run_dir, ignore_errors=True)  # earlier attempts live on in provenance.json
            return GenerateResult(ok=True, name=name, path=dest, provenance=provenance)
    except BaseException as exc:  # an endpoint error, Ctrl-C: keep what was made, then let it propagate
        provenance.designer = designer.info
        keep_failed(run_dir, root, name, provenance, f"stopped: {type(exc).__name__}: {exc}", started)
        raise
    finally:
        if own_validator and validator is not None:
            validator.close()
    failed = keep_failed(run_dir, root, name, provenance, result.reason or "failed", started)
    return GenerateResult(ok=False, name=name, failed_dir=failed, reason=result.reason, provenance=provenance)


def _finalise(stage: Path, report, provenance: Provenance, started: float) -> None:
    summary = report.summary()
    files = _files(stage)
    provenance.validation = summary
    provenance.validated_digest = content_digest(files)
    readme = stage / "README.md"
    text = readme.read_text(encoding="utf-8").rstrip()
    if provenance.task not in text:  # a README the designer wrote itself: the task as the user wrote it
        text += f"\n\n**Task:** {provenance.task}"
    readme.write_text(text + "\n\n" + validation_note(stage.name, summary), encoding="utf-8")
    provenance.usage = total_usage(provenance)
    provenance.content_digest = content_digest(_files(stage))
    provenance.duration_s = round(time.monotonic() - started, 3)
    provenance.write(stage)


def validation_note(name: str, summary: dict) -> str:
    counts = summary.get("counts", {})
    isolation = "isolated" if summary.get("isolated") else "NOT isolated"
    return (f"## Validation\n\nVerdict **{summary.get('verdict')}** in the `{summary.get('sandbox')}` sandbox "
            f"({isolation}): {counts.get('pass', 0)} checks passed, {counts.get('fail', 0)} failed, "
            f"{counts.get('skip', 0)} skipped. Re-run: `openadapt validate generated_envs/{name}`. Provenance: "
            "`provenance.json`.\n")


def _files(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.name != "provenance.json"}


def publish(stage: Path, dest: Path, force: bool) -> None:
    """Atomic: the package appears under its name in one rename, or not at all."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    old = None
    if dest.exists():
        if not force:
            raise UsageError(f"{dest} appeared while generating: not replaced (use --force)")
        old = dest.with_name(f".{dest.name}.replaced-{time.time_ns()}")
        os.replace(dest, old)
    os.replace(stage, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def total_usage(provenance: Provenance) -> Usage:
    total = Usage()
    for attempt in provenance.attempts:
        total.add(attempt.usage)
    return total


def keep_failed(run_dir: Path, root: Path, name: str, provenance: Provenance, reason: str, started: float) -> Path:
    """Move every attempt of a failed or interrupted run under `root/.failed/`, with FAILED.json."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    failed = root / FAILED_DIR / f"{name}-{stamp}-{secrets.token_hex(3)}"
    failed.parent.mkdir(parents=True, exist_ok=True)
    provenance.duration_s = round(time.monotonic() - started, 3)
    provenance.usage = total_usage(provenance)
    if run_dir.exists():
        os.replace(run_dir, failed)
    else:
        failed.mkdir()
    provenance.write(failed)
    (failed / "FAILED.json").write_text(json.dumps({"reason": reason}, indent=2) + "\n")
    return failed


def design_task(llm: LLMConfig | None):
    """What the curriculum calls to turn a task-prompt source into its first package (None: no designer)."""
    if llm is None:
        return None

    def design(task: str, root: Path, validator) -> Path:
        from openadapt.curriculum.state import CurriculumError

        result = generate(GenerateRequest(task=task, output_root=root, llm=llm), validator=validator)
        if not result.ok:
            raise CurriculumError(f"the designer could not produce a valid environment for the task: "
                                  f"{result.reason} (attempts kept in {result.failed_dir})")
        return result.path

    return design
