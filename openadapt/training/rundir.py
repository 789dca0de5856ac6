"""The run directory: what a run writes, and the lock that keeps two runs out of one directory.

    RUN_DIR/
      config.json          the TrainConfig (resolved)
      metrics.jsonl        one row per optimizer step
      summary.json         TrainSummary: before/after held-out evaluation, timing, how it stopped
      init/                tiny: the tokenizer and the model after the format warm-up (what GRPO starts from)
      checkpoints/         Hugging Face Trainer checkpoints (checkpoint-STEP/): weights, optimizer, scheduler,
                           RNG and trainer state, so `--resume` continues the global step count
      final/               the model (or LoRA adapter) and tokenizer at the end of the run
      .lock                held (flock) while a run uses the directory
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

from openadapt.errors import UsageError
from openadapt.runfiles import read_jsonl, write_atomic
from openadapt.runlock import DirectoryInUse, DirectoryLock
from openadapt.training.config import TrainConfig
from openadapt.training.errors import TrainingError

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
RUNS_ROOT = Path("runs")


def default_run_dir(label: str, root: Path = RUNS_ROOT) -> Path:
    """Where a run goes without `--output`: `runs/LABEL-YYYYmmdd-HHMMSS` (local time), for every command alike."""
    return root / f"{label}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_run_dir(path: Path, *, resume: bool = False) -> Path:
    """`path` when it can hold a run; UsageError (one line, nothing written) when it is a file, lies under a
    file, or (`resume`) holds no run to continue."""
    path = Path(path)
    for ancestor in (path, *path.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                what = "is a file" if ancestor == path else f"lies under {ancestor}, which is a file"
                raise UsageError(f"--output {path} {what}: choose a directory")
            break
    if resume and not (path / "config.json").is_file():
        raise UsageError(f"--resume: {path} holds no run to continue (no config.json)")
    return path


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _inside(name: str) -> property:
    """One entry of the layout above, read as a property of the run: `run.config_path` is
    `run.path / "config.json"`."""
    return property(lambda run: run.path / name, doc=f"RUN_DIR/{name}")


class RunDir:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._lock: DirectoryLock | None = None

    # ---- paths (the layout above) ---------------------------------------------------------------------
    config_path = _inside("config.json")
    metrics_path = _inside("metrics.jsonl")
    summary_path = _inside("summary.json")
    checkpoints = _inside("checkpoints")
    init_dir = _inside("init")
    final_dir = _inside("final")

    # ---- lock -------------------------------------------------------------------------------------------
    def lock(self) -> None:
        """Take the directory for this process, or raise TrainingError naming the process that holds it."""
        lock = DirectoryLock(self.path, "run")
        try:
            lock.acquire()
        except DirectoryInUse as exc:
            raise TrainingError(str(exc)) from None
        self._lock = lock

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def in_use(self) -> bool:
        """Whether a live process (this one included) holds the directory's lock right now."""
        import fcntl

        lock = self.path / ".lock"
        if not lock.exists():
            return False
        with open(lock) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
        return False

    def status(self) -> str | None:
        """How the run stands: "running" (a process holds it), "killed" (its summary still says running but no
        process holds it: it died without finishing; its last checkpoint is `latest_checkpoint()`), else the
        summary's `stopped` (completed, interrupted, stopped_early); None before any summary."""
        summary = self.summary()
        if summary is None:
            return "running" if self.in_use() else None
        if summary.get("stopped") == "running":
            return "running" if self.in_use() else "killed"
        return summary.get("stopped")

    # ---- config -----------------------------------------------------------------------------------------
    def stored_config(self) -> TrainConfig | None:
        if not self.config_path.exists():
            return None
        try:
            return TrainConfig.model_validate_json(self.config_path.read_text())
        except ValueError as exc:
            raise TrainingError(f"{self.config_path} is not a valid run config: {exc}") from None

    def prepare(self, config: TrainConfig, resume: bool) -> None:
        """Check that `config` may use this directory, then record it. A new run refuses a directory that already
        holds a run; a resumed run refuses one whose config is for another package or model."""
        stored = self.stored_config()
        if resume:
            if stored is None or self.latest_checkpoint() is None:
                raise TrainingError(f"nothing to resume in {self.path}: it holds no checkpoint yet (a run stopped "
                                    "before its first step starts again with the same command, without --resume)")
            if stored.package != config.package:
                raise TrainingError(f"{self.path} holds a run on {stored.package}, not {config.package}; resume it "
                                    f"with that package or start a new run with another --output")
            if stored.model != config.model:
                raise TrainingError(f"{self.path} holds a run of model {stored.model!r}, not {config.model!r}")
        elif self.holds_run():
            raise TrainingError(f"{self.path} already holds a run; pass --resume to continue it, or choose "
                                "another --output")
        else:  # a directory whose earlier start never trained a step: start it afresh
            for stale in (self.metrics_path, self.summary_path):
                stale.unlink(missing_ok=True)
            if self.init_dir.is_dir():
                shutil.rmtree(self.init_dir)
        write_json_atomic(self.config_path, config.model_dump(mode="json"))

    def record_config(self, config: TrainConfig) -> None:
        """Rewrite config.json with `config` (settings resolved once the model was built)."""
        write_json_atomic(self.config_path, config.model_dump(mode="json"))

    def holds_run(self) -> bool:
        """True once a run has trained at least one step here (a metrics row or a checkpoint)."""
        return self.latest_checkpoint() is not None or bool(self.metrics())

    # ---- checkpoints ------------------------------------------------------------------------------------
    def checkpoint_steps(self) -> list[int]:
        if not self.checkpoints.is_dir():
            return []
        steps = []
        for child in self.checkpoints.iterdir():
            match = CHECKPOINT.match(child.name)
            if match and (child / "trainer_state.json").exists():  # complete checkpoints only
                steps.append(int(match.group(1)))
        return sorted(steps)

    def latest_checkpoint(self) -> Path | None:
        steps = self.checkpoint_steps()
        return self.checkpoints / f"checkpoint-{steps[-1]}" if steps else None

    # ---- metrics ----------------------------------------------------------------------------------------
    def append_metrics(self, row: dict[str, Any]) -> None:
        with self.metrics_path.open("a") as handle:
            handle.write(json.dumps(row, sort_keys=True) + "\n")

    def metrics(self) -> list[dict[str, Any]]:
        return read_jsonl(self.metrics_path)

    def truncate_metrics(self, after_step: int) -> None:
        """Drop rows past `after_step` (steps trained after the last checkpoint, which a resume redoes)."""
        rows = [r for r in self.metrics() if r.get("step", 0) <= after_step]
        write_atomic(self.metrics_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))

    def summary(self) -> dict[str, Any] | None:
        return json.loads(self.summary_path.read_text()) if self.summary_path.exists() else None

    def write_summary(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.summary_path, data)
