"""What a run says while it runs: plain progress lines, and silence from third-party libraries.

- `StepProgress`: a `MetricsWriter` listener (`solver.metrics.listeners.append(StepProgress(...))`) that writes
  one plain line per optimizer step, for logs, pipes and CI where a progress bar shows nothing:
  `step 12/300  reward +0.412  solved 0.38  turns 1.9  0.84 s/step  ETA 4m02s`. The ETA is the median of the last
  20 steps' time times the steps left.
- `WarmupProgress`: the same for the tiny model's format warm-up (`Solver.create(warmup_progress=...)`), every
  `every` steps and at the end.
- `quiet_third_party()`: transformers/TRL/datasets/huggingface_hub progress bars and their known harmless
  warnings off (what is left on stderr is openadapt's own output and real errors). `Solver.create` calls it.
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
import warnings
from collections.abc import Callable
from typing import Any

Write = Callable[[str], None]


def stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


class StepProgress:
    """One line per step: reward, sampled solve rate, turns, seconds per step and the ETA to `total_steps`."""

    def __init__(self, total_steps: int, write: Write = stderr_line, every: int = 1):
        self.total = total_steps
        self.write = write
        self.every = max(1, every)
        self.times: list[float] = []

    def line(self, row: dict[str, Any]) -> str:
        seconds = float(row.get("seconds_per_step") or 0.0)
        self.times = [*self.times[-19:], seconds]
        left = max(0, self.total - int(row["step"]))
        eta = duration(statistics.median(self.times) * left) if left else "done"
        return (f"step {row['step']}/{self.total}  reward {row['reward_mean']:+.3f}  solved {row['solve_rate']:.2f}  "
                f"turns {row.get('turns_mean', 1.0):.1f}  {seconds:.2f} s/step  ETA {eta}")

    def __call__(self, row: dict[str, Any]) -> None:
        text = self.line(row)
        if row["step"] % self.every == 0 or row["step"] >= self.total:
            self.write(text)


class WarmupProgress:
    """`format warm-up 100/400  loss 2.31` every `every` steps and at the last one."""

    def __init__(self, total_steps: int, write: Write = stderr_line, every: int = 50, label: str = "format warm-up"):
        self.total = total_steps
        self.write = write
        self.every = max(1, every)
        self.label = label

    def __call__(self, step: int, loss: float) -> None:
        if step % self.every == 0 or step >= self.total:
            self.write(f"{self.label} {step}/{self.total}  loss {loss:.3f}")


NOISY_LOGGERS = ("transformers", "trl", "datasets", "accelerate", "peft", "huggingface_hub", "torch.distributed")
HARMLESS = (
    r".*rollout_func.*experimental.*",
    r".*You are using .* experimental.*",
    r".*`torch_dtype` is deprecated.*",
    r".*None of the inputs have requires_grad.*",
    r".*generation flags are not valid.*",
    r".*The attention mask .* not set.*",
    r".*use_cache=True.* is incompatible with gradient checkpointing.*",
    r".*Setting `pad_token_id` to `eos_token_id`.*",
    r".*padding_side.*",
    r".*max_length.*max_new_tokens.*",
    r".*TypedStorage is deprecated.*",
)


def quiet_third_party() -> None:
    """Progress bars of the libraries below openadapt off, their loggers at ERROR, known harmless warnings
    filtered. Idempotent; environment variables already set by the user win."""
    for name, value in (("TRL_EXPERIMENTAL_SILENCE", "1"), ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
                        ("TRANSFORMERS_VERBOSITY", "error"), ("DATASETS_VERBOSITY", "error"),
                        ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(name, value)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for pattern in HARMLESS:
        warnings.filterwarnings("ignore", message=pattern)
    for module in (r"transformers\..*", r"trl\..*", r"peft\..*", r"accelerate\..*"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=module)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=module)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - the train extra is installed
        pass
    try:
        import datasets

        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
    except ImportError:  # pragma: no cover
        pass
    try:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    except ImportError:  # pragma: no cover
        pass
