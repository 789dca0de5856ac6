"""`generate`: task prompt -> design -> stage -> validate in the sandbox -> repair from feedback -> publish.

On success the package moves atomically (one rename on the same filesystem) to `generated_envs/<name>/`. On
final failure nothing appears there: every attempt is kept under `generated_envs/.failed/<name>-<time>/`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from openadapt import __version__
from openadapt.designer import offline
from openadapt.designer.llm import LLMClient, LLMConfig
from openadapt.designer.package import (
    DesignError,
    PackageSpec,
    assemble,
    content_digest,
    template_versions,
    write_package,
)
from openadapt.designer.prompting import design_messages, repair_messages
from openadapt.designer.provenance import AttemptRecord, DesignerInfo, Provenance, render_readme
from openadapt.designer.reply import parse_reply
from openadapt.errors import UsageError
from openadapt.validator import Validator, Verdict

FAILED_DIR = ".failed"
STAGING_DIR = ".staging"
MAX_TASK_CHARS = 4000


class GenerateRequest(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    task: str
    output_root: Path = Path("generated_envs")
    name: str | None = None
    max_attempts: int = 4
    force: bool = False
    sandbox: str = "auto"
    llm: LLMConfig | None = None  # None: the offline designer


class GenerateResult(BaseModel):
    ok: bool
    name: str
    path: Path | None = None
    failed_dir: Path | None = None
    reason: str | None = None
    provenance: Provenance


Progress = Callable[[str, int, str], None]  # (phase, attempt, detail)


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def slug(task: str) -> str:
    words = offline.domain_words(task)
    return "_".join(words[:3]) + "_env"


def _check_request(request: GenerateRequest) -> str:
    task = request.task.strip()
    if not task:
        raise UsageError("the task prompt is empty: describe the environment to generate")
    if len(task) > MAX_TASK_CHARS:
        raise UsageError(f"the task prompt has {len(task)} characters (at most {MAX_TASK_CHARS})")
    if request.max_attempts < 1:
        raise UsageError("--max-attempts must be at least 1")
    if request.name is not None and not re.fullmatch(r"[a-z][a-z0-9_]*", request.name):
        raise UsageError(f"--name {request.name!r} must be a lowercase identifier (letters, digits, underscores)")
    return task


def generate(request: GenerateRequest, progress: Progress | None = None,
             validator: Validator | None = None) -> GenerateResult:
    task = _check_request(request)
    report = progress or (lambda phase, attempt, detail: None)
    root = request.output_root
    planned = time.monotonic()
    if request.llm is None:
        plan = offline.design(task)
        name = request.name or plan.name
        designer = DesignerInfo(backend="offline", blueprint=plan.blueprint.seed, family=plan.blueprint.family)
    else:
        plan = None
        name = request.name or slug(task)
        designer = DesignerInfo(backend="openai-compatible", model=request.llm.model, base_url=request.llm.base_url)
    dest = root / name
    if dest.exists() and not request.force:
        raise UsageError(f"{dest} already exists: pass --force to replace it (nothing was changed)")

    provenance = Provenance(openadapt_version=__version__, name=name, task=task, designer=designer,
                            template_versions=template_versions(), created_at=_now())
    run_dir = root / STAGING_DIR / f"{name}-{os.getpid()}-{time.time_ns()}"
    run_dir.mkdir(parents=True)
    client = LLMClient(request.llm) if request.llm is not None else None
    own_validator = validator is None
    started = time.monotonic()
    files: dict[str, str] = {}
    feedback: str | None = None
    try:
        validator = validator or Validator(request.sandbox)
        for attempt in range(1, request.max_attempts + 1):
            record = AttemptRecord(attempt=attempt)
            provenance.attempts.append(record)
            t0 = time.monotonic()
            report("designing" if attempt == 1 else "repairing", attempt, designer.backend)
            spec, domain, problems = _design(plan, client, name, task, files, feedback, attempt, record)
            record.design_s = round(time.monotonic() - t0 + (t0 - planned if attempt == 1 and plan else 0), 3)
            record.parse_problems = problems
            if spec is None:
                feedback = "The reply could not be used:\n" + "\n".join(f"- {p}" for p in problems)
                record.feedback_sent = feedback
                if plan is not None:
                    break
                continue
            try:
                files = assemble(name, spec, domain, tags=_tags(designer))
            except DesignError as exc:
                feedback = f"The design could not be assembled: {exc}"
                record.parse_problems.append(str(exc))
                record.feedback_sent = feedback
                if plan is not None:
                    break
                continue
            stage = run_dir / f"attempt-{attempt}" / name
            write_package(files, stage)
            report("validating", attempt, str(stage))
            t1 = time.monotonic()
            result = validator.validate(stage)
            record.note_validation(result, time.monotonic() - t1, stage.parent)
            if result.verdict == Verdict.PASS:
                provenance.validation = result.summary()
                provenance.validated_digest = content_digest(files)
                _finalise(stage, name, spec, domain.get("README.md", ""), designer, result, provenance, started)
                report("publishing", attempt, str(dest))
                _publish(stage, dest, request.force)
                shutil.rmtree(run_dir, ignore_errors=True)  # earlier attempts live on in provenance.json
                return GenerateResult(ok=True, name=name, path=dest, provenance=provenance)
            feedback = result.designer_feedback()
            record.feedback_sent = feedback if attempt < request.max_attempts and plan is None else None
            if plan is not None:  # the offline designer is deterministic: another attempt would be identical
                break
        reason = _failure_reason(provenance)
    except BaseException as exc:  # an endpoint error, Ctrl-C: keep what was made, then let it propagate
        _keep_failed(run_dir, root, name, provenance, f"stopped: {type(exc).__name__}: {exc}", started)
        raise
    finally:
        if own_validator and validator is not None:
            validator.close()
    failed = _keep_failed(run_dir, root, name, provenance, reason, started)
    return GenerateResult(ok=False, name=name, failed_dir=failed, reason=reason, provenance=provenance)


def _design(plan, client, name, task, files, feedback, attempt, record):
    """One design step: (spec, domain files, problems)."""
    if plan is not None:
        return plan.spec, plan.files, []
    messages = (design_messages(name, task) if attempt == 1
                else repair_messages(name, task, files, feedback or "", attempt - 1))
    completion = client.complete(messages)
    record.usage = completion.usage
    record.retries = completion.retries
    parsed = parse_reply(completion.text, completion.finish_reason)
    if not parsed.usable:
        return None, {}, parsed.problems
    return parsed.spec, parsed.files, parsed.problems


def _tags(designer: DesignerInfo) -> list[str]:
    return ["openadapt", "generated", designer.blueprint or "llm"]


def _finalise(stage: Path, name: str, spec: PackageSpec, description: str, designer: DesignerInfo, result,
              provenance: Provenance, started: float) -> None:
    contract = next((c.measured for c in result.checks if c.check_id == "runtime.api_contract"), {})
    readme = render_readme(name, spec, description or spec.task, designer, result.summary(), contract)
    (stage / "README.md").write_text(readme, encoding="utf-8")
    files = {str(p.relative_to(stage)): p.read_text(encoding="utf-8") for p in sorted(stage.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts}
    for attempt in provenance.attempts:
        provenance.usage.add(attempt.usage)
    provenance.content_digest = content_digest(files)
    provenance.duration_s = round(time.monotonic() - started, 3)
    provenance.write(stage)


def _publish(stage: Path, dest: Path, force: bool) -> None:
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


def _failure_reason(provenance: Provenance) -> str:
    last = provenance.attempts[-1] if provenance.attempts else None
    if last is None:
        return "no attempt was made"
    if last.failing_checks:
        return f"validation failed after {len(provenance.attempts)} attempt(s): {', '.join(last.failing_checks)}"
    return f"no usable design after {len(provenance.attempts)} attempt(s): {'; '.join(last.parse_problems)[:300]}"


def _keep_failed(run_dir: Path, root: Path, name: str, provenance: Provenance, reason: str,
                 started: float) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    failed = root / FAILED_DIR / f"{name}-{stamp}-{secrets.token_hex(3)}"
    failed.parent.mkdir(parents=True, exist_ok=True)
    provenance.duration_s = round(time.monotonic() - started, 3)
    os.replace(run_dir, failed)
    provenance.write(failed)
    (failed / "FAILED.json").write_text(json.dumps({"reason": reason}, indent=2) + "\n")
    return failed
