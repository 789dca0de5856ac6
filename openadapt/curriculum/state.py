"""What a curriculum run knows about itself, written so that a kill -9 at any instant leaves a usable run.

    RUN_DIR/
      curriculum.json   the CurriculumConfig (what was asked; checked on --resume)
      state.json        the CurriculumState as of the last completed checkpoint (written atomically)
      events.jsonl      what happened, one JSON object per line (escalations, validations, rejections...)
      envs/             every environment version trained on: vN-eciK/ with the package (or its seed record),
                        validation.json and provenance.json; rejected/ keeps refused escalations with reports
      train/            the solver's run directory (config, metrics.jsonl, checkpoints/, final/)
      .lock             held while a process runs the curriculum

The state is also copied into every solver checkpoint (checkpoints/checkpoint-N/curriculum_state.json), after
the checkpoint's own files: a checkpoint without that file is incomplete and is discarded on resume, so the
weights, the optimizer and the curriculum state a resume starts from always belong to the same step.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from openadapt.errors import OpenAdaptError
from openadapt.runfiles import read_jsonl, write_atomic

STATE_FILE = "state.json"
CHECKPOINT_STATE = "curriculum_state.json"
STATE_FORMAT = 1

Status = Literal["running", "mastered", "time_limit", "max_steps", "blocked", "interrupted", "failed"]


class CurriculumError(OpenAdaptError):
    """The curriculum cannot start or go on (run directory in use or foreign, corrupted state...)."""


def now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


class EnvVersion(BaseModel):
    """One environment version the run trained on."""

    version: int
    eci: int = Field(description="the tier this version was certified for")
    ref: str = Field(description="what the solver loads: seed:NAME, or the package directory")
    folder: str = Field(description="its evidence folder, relative to the run directory")
    digest: str
    step: int = Field(description="global step at which training on it began")
    created_at: str


class TierEvaluation(BaseModel):
    """Held-out evaluation of the current weights at one tier (binary solve rate apart from reward)."""

    eci: int
    step: int
    episodes: int
    solve_rate: float
    solve_rate_ci95: tuple[float, float]
    mean_return: float
    when: str = Field(description="'escalation' (the tier just mastered), 'final', or 'collapse'")


class TierCheck(BaseModel):
    """A greedy check of the current weights on fresh validation seeds, asked for by a windowed pass."""

    eci: int
    step: int
    episodes: int
    seed_start: int
    solve_rate: float
    solve_rate_ci95: tuple[float, float]
    windowed_solve_rate: float
    passed: bool


class CurriculumState(BaseModel):
    format: int = STATE_FORMAT
    run_id: str
    source: str
    tier: int = 1
    escalated_from: int | None = None
    global_step: int = 0
    episodes: int = 0
    train_seconds: float = Field(default=0.0, description="training wall time summed over every resume")
    windows: dict[int, list[bool]] = Field(default_factory=dict)
    versions: list[EnvVersion] = Field(default_factory=list)
    evaluations: list[TierEvaluation] = Field(default_factory=list)
    checks: list[TierCheck] = Field(default_factory=list)
    rejected_escalations: int = 0
    status: Status = "running"
    reason: str = ""
    started_at: str = Field(default_factory=now)
    updated_at: str = Field(default_factory=now)

    @property
    def current_version(self) -> EnvVersion:
        return self.versions[-1]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"

    def save(self, folder: Path, name: str = STATE_FILE) -> None:
        self.updated_at = now()
        write_atomic(folder / name, self.to_json())

    @classmethod
    def load(cls, path: Path) -> CurriculumState:
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CurriculumError(f"{path} is missing: this is not a curriculum run directory, or its first "
                                  "checkpoint was never written") from None
        try:
            state = cls.model_validate_json(raw)
        except ValidationError as exc:
            raise CurriculumError(f"{path} is corrupted ({exc.error_count()} problem(s), first: "
                                  f"{exc.errors()[0]['msg']}); the checkpoints beside it keep their own copies "
                                  "(checkpoint-N/curriculum_state.json)") from None
        if state.format != STATE_FORMAT:
            raise CurriculumError(f"{path} has state format {state.format}; this openadapt reads {STATE_FORMAT}")
        return state


class EventLog:
    """events.jsonl: append-only, one line per event, flushed and fsynced so the night's story survives."""

    def __init__(self, path: Path):
        self.path = path

    def append(self, kind: str, step: int, **fields: Any) -> dict[str, Any]:
        event = {"at": now(), "event": kind, "step": step, **fields}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(event, sort_keys=True, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return event

    def read(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path)
