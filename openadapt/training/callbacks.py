"""TrainerCallbacks the solver installs: the metrics writer, the Ctrl-C stop, and the save on an early stop."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from transformers import TrainerCallback

from openadapt.training.grpo import EnvironmentRollout
from openadapt.training.rundir import RunDir

# TRL log keys copied into metrics.jsonl under our names
TRL_KEYS = {"loss": "loss", "grad_norm": "grad_norm", "learning_rate": "lr", "entropy": "entropy",
            "frac_reward_zero_std": "frac_reward_zero_std", "completions/mean_length": "completion_tokens_mean",
            "reward": "trl_reward", "imitation/nll": "imitation_nll"}


class MetricsWriter(TrainerCallback):
    """Writes one `metrics.jsonl` row per optimizer step: the step's rollouts (reward mean/std over the batch's
    episodes, sampled solve rate, reward components, tier mix, turns), TRL's training figures (loss, grad norm,
    entropy, KL when beta > 0), and speed (seconds per step, tokens per second)."""

    def __init__(self, run: RunDir, rollout: EnvironmentRollout, beta: float,
                 listeners: list[Callable[[dict[str, Any]], None]] | None = None):
        self.run = run
        self.rollout = rollout
        self.beta = beta
        self.listeners = listeners if listeners is not None else []
        self.last_row: dict[str, Any] | None = None
        self._started = 0.0
        self._seconds = 0.0
        self._written = 0

    def on_step_begin(self, args, state, control, **kwargs):
        self._started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self._seconds = time.perf_counter() - self._started

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "train_runtime" in logs or state.global_step <= self._written:
            return
        stats = self.rollout.stats
        if stats is None or stats.global_step != state.global_step:
            return
        seconds = self._seconds or float("nan")
        row: dict[str, Any] = {
            "step": state.global_step, "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "package": stats.package, "episodes": stats.episodes,
            "reward_mean": stats.reward_mean, "reward_std": stats.reward_std, "solve_rate": stats.solve_rate,
            "finished_rate": stats.finished_rate, "turns_mean": stats.turns_mean, "explored": stats.explored,
            "value_continuations": stats.value_continuations, "imitated": stats.imitated,
            "imitation_pool": stats.imitation_pool,
            "components": stats.components, "tier_mix": stats.tier_mix,
            "seconds_per_step": round(seconds, 4), "rollout_s": stats.rollout_s,
            "tokens_per_s": round((stats.prompt_tokens + stats.completion_tokens) / seconds, 1),
            "generated_tokens_per_s": round(stats.generated_tokens / stats.rollout_s, 1) if stats.rollout_s else 0.0,
        }
        for key, name in TRL_KEYS.items():
            if key in logs:
                row[name] = logs[key]
        if self.beta > 0 and "kl" in logs:
            row["kl"] = logs["kl"]
        self.run.append_metrics(row)
        self._written = state.global_step
        self.last_row = row
        for listener in self.listeners:
            listener(row)


class SummaryOnSave(TrainerCallback):
    """After every checkpoint, summary.json records how far the run got (`write(step)`, set by the solver), so a
    run killed between checkpoints still says which steps exist."""

    def __init__(self) -> None:
        self.write: Callable[[int], None] | None = None

    def on_save(self, args, state, control, **kwargs):
        if self.write is not None:
            self.write(state.global_step)
        return control


class SaveOnStop(TrainerCallback):
    """Installed last: when anything (Ctrl-C, a curriculum callback) stops training before `max_steps`, the
    step that just finished is checkpointed, so `--resume` continues from it."""

    def __init__(self) -> None:
        self.stop_requested = False

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop_requested:
            control.should_training_stop = True
        if control.should_training_stop:
            control.should_save = True
        return control


@contextmanager
def graceful_interrupt(stopper: SaveOnStop, notify: Callable[[str], None] | None = None) -> Iterator[None]:
    """First Ctrl-C: finish the current step, checkpoint it, stop. Second Ctrl-C: abort at once (the last
    complete checkpoint stays; checkpoints are only listed once their trainer_state.json is written)."""
    notify = notify or (lambda msg: print(msg, file=sys.stderr, flush=True))

    def handler(signum: int, frame: Any) -> None:
        if stopper.stop_requested:
            raise KeyboardInterrupt
        stopper.stop_requested = True
        notify("interrupt: finishing this step, saving a checkpoint and stopping (Ctrl-C again to abort)")

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
