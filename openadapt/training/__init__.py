"""GRPO solver: trains an LLM agent on a package through its text protocol with TRL, and evaluates it on
held-out seeds (`openadapt.envpkg.evaluation.EVAL_SEED_START` and above are never used for training).

Modules: `config` (SolverSettings, shared with the curriculum; TrainConfig; resumed_config), `solver` (Solver,
TrainSummary: the API the curriculum builds on), `episodes` (training seeds, TierPlan, EpisodeOutcome), `grpo`
(TRL's rollout_func and the reward function), `rollout` (batched multi-turn episodes: env-token masks for
`context="full"`, one row per turn for `context="last"`), `turns` (TurnGRPOTrainer: GRPO over turns),
`loading` (tiny / LoRA / unsloth models), `pretrained` (GGUF presets made trainable), `tiny`, `warmup`, `chat`,
`envinfo`, `modelpolicy` (greedy held-out evaluation, `--policy model:RUN_DIR`), `rundir`, `callbacks`,
`progress` (plain progress lines, quiet third-party output), `errors`, `report`. See docs/training.md. Names are
imported lazily, so `import openadapt.training` does not load torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "TrainConfig": "config", "SolverSettings": "config", "WandbMode": "config", "StepProgress": "progress",
    "Solver": "solver", "TrainSummary": "solver",
    "TierPlan": "episodes", "FixedTierPlan": "episodes", "EpisodeOutcome": "episodes", "training_seed": "episodes",
    "TrainingError": "envinfo", "ModelPolicy": "modelpolicy", "render_report": "report",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"openadapt.training.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'openadapt.training' has no attribute {name!r}")
