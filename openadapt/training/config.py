"""What a training run is asked to do: `TrainConfig`, written to `RUN_DIR/config.json`."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openadapt.training.tiny import TinySize

TINY = "tiny"


class WandbMode(StrEnum):
    ONLINE = "online"
    OFFLINE = "offline"
    DISABLED = "disabled"


def default_wandb_mode() -> WandbMode:
    """Online only when a W&B key is configured; otherwise disabled (a run never waits on the network)."""
    return WandbMode.ONLINE if os.environ.get("WANDB_API_KEY") else WandbMode.DISABLED


class LoraSettings(BaseModel):
    """LoRA adapter for a real (hub or local) model; ignored for `tiny`, which trains all its weights."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    target_modules: list[str] | Literal["all-linear"] = "all-linear"


class TrainConfig(BaseModel):
    """One GRPO run. Fields left at `None` are resolved from the model kind when the config is built (the
    resolved values are what `config.json` records).

    The reward GRPO sees is the environment's own: `reward="return"` (default) is the episode return, the sum of
    every per-step reward of the episode (malformed or rejected actions cost reward, and the terminal step
    carries the score); `reward="final"` is the terminal step's reward alone."""

    model_config = ConfigDict(extra="forbid")

    package: str = Field(description="environment package directory, or seed:NAME")
    model: str = Field(default=TINY, description="'tiny', a hub id, or a local model directory")
    eci: list[int] = Field(default_factory=lambda: [1], description="tiers of the default fixed-tier plan")
    steps: int = Field(default=200, ge=1, description="optimizer steps (the run's global step count)")
    lr: float | None = Field(default=None, gt=0, description="learning rate (tiny 1e-3, LoRA 2e-5)")
    num_generations: int = Field(default=8, ge=2, description="completions per prompt group (GRPO's G)")
    prompts_per_step: int = Field(default=4, ge=1, description="episode groups per optimizer step")
    max_completion_length: int = Field(default=96, ge=8, description="tokens per generated turn")
    max_turns: int = Field(default=4, ge=1, description="model turns per training episode (the environment's "
                           "own step budget also ends it); held-out evaluation uses the environment's budget")
    temperature: float = Field(default=1.0, gt=0)
    beta: float = Field(default=0.0, ge=0, description="KL coefficient against the initial model (0: no KL)")
    reward: Literal["return", "final"] = "return"
    seed: int = Field(default=0, ge=0, description="draws training seeds, tiers and the model init")
    output: Path = Field(description="the run directory")
    resume: bool = False
    wandb: WandbMode = Field(default_factory=default_wandb_mode)
    wandb_project: str = "openadapt"
    warmup_steps: int | None = Field(default=None, ge=0, description="format warm-up steps on random "
                                     "schema-valid actions before GRPO (tiny 400, real models 0)")
    warmup_lr: float = Field(default=3e-3, gt=0)
    warmup_prompt_lm: bool | None = Field(default=None, description="the warm-up also does next-token prediction "
                                          "on the prompts' own text, no answers and no reward (tiny: yes)")
    save_steps: int = Field(default=50, ge=1, description="checkpoint every N steps (and at the end)")
    save_total_limit: int = Field(default=3, ge=1)
    eval_episodes: int = Field(default=100, ge=0, description="held-out seeds per tier for the before/after "
                               "evaluation in summary.json (0: skip)")
    system_prompt: bool | None = Field(default=None, description="put the package's system prompt in the "
                                       "conversation (tiny: no, it cannot read instructions; real models: yes)")
    vocab_seeds: int = Field(default=200, ge=1, description="tiny: training seeds played at random to collect "
                             "the vocabulary")
    vocab_min_count: int = Field(default=10, ge=1, description="tiny: an observation word needs this many "
                                 "occurrences in the sample to get a token (the rest, mostly one-off numbers, read "
                                 "as <unk>); every word of the system prompt and of the action schema has one")
    tiny_size: TinySize = Field(default_factory=TinySize)
    lora: LoraSettings | None = Field(default_factory=LoraSettings, description="None: full fine-tuning")
    gradient_checkpointing: bool | None = None
    use_vllm: bool = Field(default=False, description="generate rollouts with TRL's vLLM engine (GPU only, vLLM "
                           "installed; TRL's vllm_* settings, temperature and max_completion_length apply)")
    trust: bool = Field(default=False, description="run an untrusted package in this process, not the sandbox")
    validate_package: bool = Field(default=True, description="validate a package that is not an openadapt seed "
                                   "(in the sandbox) before training on it; the curriculum, which certifies its "
                                   "versions itself, turns this off")
    sandbox: str = "auto"

    @field_validator("eci")
    @classmethod
    def _tiers(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("at least one ECI tier is needed")
        bad = [t for t in value if t not in range(1, 6)]
        if bad:
            raise ValueError(f"tier {bad[0]} is outside 1-5")
        return sorted(set(value))

    @model_validator(mode="after")
    def _resolve(self) -> TrainConfig:
        tiny = self.is_tiny
        if self.lr is None:
            self.lr = 1e-3 if tiny else 2e-5
        if self.warmup_steps is None:
            self.warmup_steps = 400 if tiny else 0
        if self.warmup_prompt_lm is None:
            self.warmup_prompt_lm = tiny
        if self.system_prompt is None:
            self.system_prompt = not tiny
        if self.gradient_checkpointing is None:
            self.gradient_checkpointing = not tiny
        return self

    @property
    def is_tiny(self) -> bool:
        return self.model == TINY

    @property
    def batch_size(self) -> int:
        """Completions per optimizer step."""
        return self.prompts_per_step * self.num_generations
