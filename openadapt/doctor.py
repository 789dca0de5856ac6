"""`openadapt doctor`: is this machine set up to generate, validate and train? Each check says what it found and,
when something is wrong, the command that fixes it.

Checks: Python, the sandbox backend `--sandbox auto` would use (a real bubblewrap start, not only the binary),
OpenEnv's import (in a child process, timed), the embedded designer model (present and its sha256 verified:
from the record of its last full hash, or re-hashed with `deep`), llama.cpp, an endpoint if one is configured,
the training extra, and free disk space. It sits in the top layer of the library, beside the designer, because it
looks at every layer below it; nothing here starts training or loads a model.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from openadapt import __version__
from openadapt.errors import OpenAdaptError

Status = Literal["ok", "warn", "fail"]
MIN_PYTHON = (3, 11)
LOW_DISK_BYTES = 2 * 10**9  # a model (1.1 GB) plus runs
NO_DISK_BYTES = 5 * 10**8
IMPORT_TIMEOUT_S = 120


class Finding(BaseModel):
    check: str
    status: Status
    detail: str
    fix: str = ""


Listener = Callable[[Finding], None]


def check_python() -> Finding:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] >= MIN_PYTHON:
        return Finding(check="python", status="ok", detail=f"Python {version} ({sys.executable}), openadapt "
                       f"{__version__}")
    return Finding(check="python", status="fail", detail=f"Python {version}",
                   fix="openadapt needs Python 3.11 or newer: `bash scripts/setup.sh` makes a .venv with it")


def check_sandbox() -> Finding:
    from openadapt.sandbox import SandboxUnavailable, bwrap, docker

    try:
        docker.connect()
        return Finding(check="sandbox", status="ok", detail="docker: an engine answers (auto uses it)")
    except SandboxUnavailable as no_docker:
        why_not_docker = str(no_docker)
    problem = bwrap.available() or _bwrap_starts()
    if problem is None:
        worker, seconds = _worker_in_bwrap()
        if worker is None or "openadapt" not in worker:
            return Finding(check="sandbox", status="fail", detail=f"bubblewrap starts, but the validator's worker "
                           f"does not run in it: {seconds}", fix="run `openadapt validate seed:incident_triage "
                           "--json` and read its validator.internal evidence; report it with `openadapt doctor "
                           "--json`")
        return Finding(check="sandbox", status="ok", detail=f"bubblewrap runs the validator's worker, which imports "
                       f"openadapt from {worker['openadapt']} ({seconds:.1f} s; auto uses it: no Docker engine "
                       "answers)")
    return Finding(check="sandbox", status="fail", detail=f"no sandbox: {problem}; docker: {why_not_docker}",
                   fix="install bubblewrap (`sudo apt-get install bubblewrap util-linux`, or run `bash "
                       "scripts/setup.sh` as root) or start Docker; `--sandbox process` runs WITHOUT isolation")


def _worker_in_bwrap() -> tuple[dict | None, float | str]:
    """The sandboxed worker's ping reply and its start time, or None and why it did not answer: the check that
    openadapt's own code is visible in the sandbox from wherever this checkout lives."""
    from openadapt.sandbox.base import WorkerDied
    from openadapt.validator import Validator

    started = time.monotonic()
    try:
        with Validator("bwrap") as validator:
            hello = validator.worker_hello()
    except (WorkerDied, OSError) as exc:
        return None, str(exc)[:300]
    return hello, time.monotonic() - started


def _bwrap_starts() -> str | None:
    command = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net",
               "--unshare-pid", "--die-with-parent", "true"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not start ({type(exc).__name__})"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return f"bwrap is installed but cannot make a sandbox here ({last[:160]})"
    return None


def check_openenv() -> Finding:
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", "import openenv.core.env_server.http_server"],
                              capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Finding(check="openenv", status="fail", detail=f"importing OpenEnv took over {IMPORT_TIMEOUT_S} s",
                       fix="check the machine's load and the installation (`bash scripts/setup.sh`)")
    seconds = time.monotonic() - started
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return Finding(check="openenv", status="fail", detail=f"OpenEnv does not import: {last[:200]}",
                       fix="pip install 'openenv>=0.10,<0.11' (or `bash scripts/setup.sh`)")
    return Finding(check="openenv", status="ok", detail=f"openenv {_version('openenv')} imports in {seconds:.1f} s "
                   "(every command that runs an environment pays this once)")


def check_local_model(deep: bool = False) -> Finding:
    from openadapt.llm.local import CATALOGUE, DEFAULT_MODEL, resolve_model, status
    from openadapt.llm.local.errors import fix_command
    from openadapt.llm.local.store import ENV_LOCAL_MODEL

    spec = os.environ.get(ENV_LOCAL_MODEL) or DEFAULT_MODEL
    endpoint = bool(os.environ.get("OPENADAPT_BASE_URL") or os.environ.get("OPENAI_BASE_URL"))
    missing_status: Status = "warn" if endpoint else "fail"
    if spec not in CATALOGUE:
        try:
            model = resolve_model(spec)
        except OpenAdaptError as exc:
            return Finding(check="designer model", status=missing_status, detail=str(exc),
                           fix=f"point {ENV_LOCAL_MODEL} at a .gguf file, or unset it to use {DEFAULT_MODEL}")
        return Finding(check="designer model", status="ok", detail=f"{model.path} ({model.size / 1e9:.2f} GB, "
                       f"sha256 {model.sha256[:12]}...)")
    found = status(spec, deep=deep)
    if found.state == "installed":
        how = "re-hashed now" if deep else "at its last full hash (`--deep` re-hashes it)"
        return Finding(check="designer model", status="ok", detail=f"{spec}: {found.size / 1e9:.2f} GB, sha256 "
                       f"verified {how}; {found.path}")
    why = "not installed" if found.state == "missing" else f"corrupt ({found.detail})"
    also = "; an endpoint is configured, so `generate` can design without it" if endpoint else ""
    return Finding(check="designer model", status=missing_status, detail=f"{spec} is {why}{also}",
                   fix=f"`{fix_command(spec)}` (about 1.1 GB from PyPI), or `bash scripts/setup.sh`")


def check_llama_cpp() -> Finding:
    if importlib.util.find_spec("llama_cpp") is None:
        return Finding(check="llama.cpp", status="warn", detail="llama-cpp-python is not installed: the embedded "
                       "designer cannot run (an endpoint or --example still work)",
                       fix="pip install 'openadapt-rl[local]' (builds from source where no wheel fits, ~4 min)")
    import llama_cpp

    from openadapt.llm.local.backend import AMX_NOTE, amx_build

    version = f"llama-cpp-python {_version('llama-cpp-python')}"
    if amx_build(llama_cpp):
        return Finding(check="llama.cpp", status="warn", detail=f"{version}: {AMX_NOTE.split('; `')[0]}",
                       fix="`bash scripts/setup.sh` (rebuilds llama-cpp-python without AMX, ~4 min)")
    return Finding(check="llama.cpp", status="ok", detail=version)


def check_endpoint() -> Finding:
    base_url = os.environ.get("OPENADAPT_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        return Finding(check="endpoint", status="ok", detail="none configured: `generate` uses the embedded model")
    model = os.environ.get("OPENADAPT_MODEL")
    if not model:
        return Finding(check="endpoint", status="fail", detail=f"{base_url} is configured but no model",
                       fix="set OPENADAPT_MODEL (or pass --model to generate)")
    return Finding(check="endpoint", status="ok", detail=f"{base_url}, model {model} (not contacted)")


def check_training() -> Finding:
    missing = [name for name in ("torch", "transformers", "trl", "peft") if importlib.util.find_spec(name) is None]
    if missing:
        return Finding(check="training", status="warn", detail=f"not installed: {', '.join(missing)} (train, "
                       "curriculum and eval --policy model: need them)",
                       fix="pip install 'openadapt-rl[train]' (CPU: install torch==2.13.0 from the CPU index first)")
    return Finding(check="training", status="ok", detail=f"torch {_version('torch')}, trl {_version('trl')}, "
                   f"transformers {_version('transformers')}")


def check_disk() -> Finding:
    from openadapt.llm.local import models_dir

    places = {"models": models_dir(), "working directory": Path.cwd()}
    free = {label: shutil.disk_usage(_existing(path)).free for label, path in places.items()}
    detail = ", ".join(f"{label} {free[label] / 1e9:.1f} GB free ({places[label]})" for label in places)
    lowest = min(free.values())
    if lowest < NO_DISK_BYTES:
        status: Status = "fail"
    elif lowest < LOW_DISK_BYTES:
        status = "warn"
    else:
        return Finding(check="disk", status="ok", detail=detail)
    return Finding(check="disk", status=status, detail=detail,
                   fix="free space; a model needs 1.1 GB and a training run up to a few hundred MB (set "
                       "OPENADAPT_MODELS_DIR to put models elsewhere)")


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def diagnose(*, deep: bool = False, listener: Listener | None = None) -> list[Finding]:
    """Run every check in order; `listener` hears each finding as it is made."""
    checks: list[Callable[[], Finding]] = [check_python, check_sandbox, check_openenv,
                                           lambda: check_local_model(deep), check_llama_cpp, check_endpoint,
                                           check_training, check_disk]
    findings = []
    for check in checks:
        finding = check()
        findings.append(finding)
        if listener is not None:
            listener(finding)
    return findings
