"""What a curriculum run is asked to do (`CurriculumConfig`, written to `RUN_DIR/curriculum.json`), where its run
directory goes, and how a resumed run's configuration is merged. Cheap to import (no torch, no OpenEnv), so every
problem with the flags is one clear line before anything heavy loads or anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from openadapt.curriculum.rule import RuleConfig
from openadapt.curriculum.state import CurriculumError
from openadapt.errors import UsageError, first_problem, settings_error
from openadapt.kit.eci import Tier
from openadapt.runlock import DirectoryLock
from openadapt.training.config import SolverSettings, TrainConfig
from openadapt.training.rundir import check_run_dir, default_run_dir

CONFIG_FILE = "curriculum.json"
EVENTS_FILE = "events.jsonl"
TIERS_FILE = "tiers.jsonl"
TRAIN_DIR = "train"
ENVS_DIR = "envs"
UNLIMITED_STEPS = 1_000_000
RUN_LABEL = "curriculum"


class CurriculumConfig(SolverSettings):
    """One curriculum run: the solver's settings (`openadapt.training.config.SolverSettings`: the same names,
    bounds and defaults as `openadapt train`, resolved per model kind) plus the curriculum's own. The LLM endpoint
    (if any) is configured at run time and never stored: its key must not reach the run directory."""

    source: str = Field(description="a task prompt, a package directory, or seed:NAME")
    output: Path
    rule: RuleConfig = Field(default_factory=RuleConfig)
    start_tier: Tier = 1
    hours: float | None = Field(default=None, gt=0, description="stop after this much training wall time")
    max_steps: int | None = Field(default=None, ge=1, description="stop at this global optimizer step")
    eval_episodes: int = Field(default=100, ge=0, description="held-out seeds per tier evaluation (0: none)")
    escalation_attempts: int = Field(default=2, ge=1, description="designer+validator rounds per escalation "
                                     "before the run stops as blocked")
    designer_attempts: int = Field(default=3, ge=1, description="LLM repair attempts within one round")
    wandb_project: str = "openadapt-curriculum"
    # A model that never solves an episode gives GRPO nothing to learn from: a curriculum starts from the
    # package's heuristic wherever it can (SolverSettings.warm_start).
    warm_start: Literal["heuristic", "auto", "off"] | None = "auto"

    @model_validator(mode="before")
    @classmethod
    def _flatten_legacy_solver(cls, data: Any) -> Any:
        """curriculum.json files written before the shared settings kept further solver settings in `solver`."""
        if isinstance(data, dict) and isinstance(data.get("solver"), dict):
            data = dict(data)
            extra = data.pop("solver")
            data.update({k: v for k, v in extra.items() if data.get(k) is None})
        return data

    @model_validator(mode="after")
    def _solver_settings_are_valid(self) -> CurriculumConfig:
        """The solver settings are TrainConfig's: check them now, not hours into the run."""
        try:
            self.train_config(self.source, self.start_tier, resume=False)
        except ValidationError as exc:
            raise ValueError(first_problem(exc)) from None
        return self

    def train_config(self, package: str, tier: int, resume: bool) -> TrainConfig:
        """The solver's run: these solver settings on `package` at `tier`. Every version the curriculum trains
        on was certified by its validator already; held-out evaluations are the curriculum's own."""
        return TrainConfig(**self.settings(), package=package, eci=[tier], steps=self.max_steps or UNLIMITED_STEPS,
                           output=self.output / TRAIN_DIR, resume=resume, eval_episodes=0, validate_package=False)

    @classmethod
    def build(cls, **settings: Any) -> CurriculumConfig:
        """A config from settings a user gave (flags), the run directory defaulting to runs/curriculum-TIMESTAMP;
        a validation error is one `UsageError` line."""
        if settings.get("output") is None:
            settings["output"] = default_run_dir(RUN_LABEL)
        check_run_dir(Path(settings["output"]))
        try:
            return cls(**settings)
        except ValidationError as exc:
            raise settings_error(exc, "curriculum settings") from None


def read_config(path: Path) -> CurriculumConfig:
    try:
        return CurriculumConfig.model_validate_json(path.read_text())
    except ValueError as exc:
        raise CurriculumError(f"{path} is not a valid curriculum config: {exc}") from None


def stored_config(run_dir: Path) -> CurriculumConfig:
    """The configuration a run directory was started with (for --resume)."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise CurriculumError(f"{run_dir} is not a curriculum run directory (no {CONFIG_FILE})")
    return read_config(path)


def resume_config(run_dir: Path, *, source: str | None = None, output: Path | None = None,
                  hours: float | None = None, max_steps: int | None = None) -> CurriculumConfig:
    """The configuration a resumed run continues with: the one it started with; only its stopping limits (`hours`,
    `max_steps`) may be given anew. A different source or output is refused with one line."""
    if output is not None and Path(output) != Path(run_dir):
        raise UsageError("--resume names the run directory; drop --output")
    DirectoryLock(Path(run_dir), "curriculum run").check_free()  # a run still starting has no config yet
    if not (Path(run_dir) / CONFIG_FILE).is_file():
        raise UsageError(f"--resume {run_dir}: not a curriculum run directory (no {CONFIG_FILE})")
    config = stored_config(run_dir)
    if source is not None and source != config.source:
        raise UsageError(f"{run_dir} holds a curriculum on {config.source!r}, not {source!r}")
    limits = {k: v for k, v in {"hours": hours, "max_steps": max_steps}.items() if v is not None}
    try:
        # The run is where it is now: a run directory copied or moved elsewhere (to try other settings on a copy)
        # continues there, not in the directory its config was first written for, which it would overwrite.
        return CurriculumConfig.model_validate({**config.model_dump(), **limits, "output": Path(run_dir)})
    except ValidationError as exc:
        raise settings_error(exc, "curriculum settings") from None
