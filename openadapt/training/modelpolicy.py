"""A trained model as a policy: greedy decoding on held-out seeds, through the text protocol.

`openadapt eval PACKAGE --policy model:RUN_DIR` and `Solver.evaluate` both land here. Episodes run until the
environment ends them (its own step budget), on seeds from `EVAL_SEED_START` up, which training never draws.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from openadapt.envpkg.evaluation import EVAL_SEED_START, EpisodeResult, EvalReport, openenv_lines, summarise
from openadapt.errors import UsageError
from openadapt.training.config import TrainConfig
from openadapt.training.pool import TextEnvPool
from openadapt.training.rollout import Context, EpisodeSpec, EpisodeTrace, eos_ids, model_generator, run_episodes
from openadapt.training.rundir import RunDir

MODEL_PREFIX = "model:"
# tokens per turn for a pretrained model evaluated zero-shot: a complete diagnosis (quoted evidence, reasoning)
# from Qwen2.5-Coder-0.5B is ~170 tokens, so 128 cut every final answer into a malformed one
PRETRAINED_TOKENS = 256


class ModelPolicy:
    """Greedy decoding with `model`; `system_prompt` says whether the conversation carries the package's system
    prompt and `context` what each turn sees (both as the run that trained the model did)."""

    def __init__(self, model: Any, tokenizer: Any, *, system_prompt: bool, max_new_tokens: int, name: str,
                 context: Context = "full", slots: bool = False):
        self.model = model
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.max_new_tokens = max_new_tokens
        self.name = name
        self.context = context  # what each turn is generated from, as in training (rollout.run_episodes)
        self.slots = slots  # the environments are seen through value slots, as in training (`training.slots`)

    @classmethod
    def from_run(cls, run_dir: Path | str) -> ModelPolicy:
        """The run's final model, else its latest checkpoint. A model preset or a `.gguf` file instead of a run
        directory (`model:qwen2.5-coder-0.5b`) is that pretrained model, zero-shot: its chat template, the
        package's system prompt, the whole conversation, `PRETRAINED_TOKENS` tokens per turn."""
        from openadapt.training.loading import load_saved
        from openadapt.training.pretrained import is_gguf_model, trainable_model_dir
        from openadapt.training.progress import quiet_third_party

        quiet_third_party()  # transformers' "Loading weights" bar would land between `eval`'s own lines

        if not Path(run_dir).is_dir() and is_gguf_model(str(run_dir)):
            loaded = load_saved(trainable_model_dir(str(run_dir)), "pretrained")
            if loaded.tokenizer.pad_token is None:
                loaded.tokenizer.pad_token = loaded.tokenizer.eos_token
            loaded.tokenizer.padding_side = "left"
            return cls(loaded.model, loaded.tokenizer, system_prompt=True, max_new_tokens=PRETRAINED_TOKENS,
                       name=f"{MODEL_PREFIX}{run_dir}", context="full")
        run = RunDir(run_dir)
        if not run.config_path.exists():
            raise UsageError(f"{run_dir}: not a training run directory (no config.json)")
        config = TrainConfig.model_validate_json(run.config_path.read_text())
        source = run.final_dir if (run.final_dir / "config.json").exists() or \
            (run.final_dir / "adapter_config.json").exists() else run.latest_checkpoint()
        if source is None:
            raise UsageError(f"{run_dir}: the run has no final model and no checkpoint yet")
        loaded = load_saved(source, "tiny" if config.is_tiny else "pretrained")
        return cls(loaded.model, loaded.tokenizer, system_prompt=bool(config.system_prompt),
                   max_new_tokens=config.max_completion_length, name=f"{MODEL_PREFIX}{run_dir}",
                   context=config.context, slots=config.value_slots)


def trace_result(trace: EpisodeTrace) -> EpisodeResult:
    return EpisodeResult(seed=trace.seed, eci=trace.eci, solved=trace.solved, episode_return=trace.episode_return,
                         final_reward=trace.final_reward, steps=len(trace.turns), components=trace.components)


def trace_lines(trace: EpisodeTrace, package: str, model: str) -> list[str]:
    """The episode in the OpenEnv hackathon `[START]`/`[STEP]`/`[END]` format."""
    steps = [(t.action, t.reward, t.done, t.error) for t in trace.turns]
    return openenv_lines(f"{package}-eci{trace.eci}-seed{trace.seed}", package, model, steps, trace.solved)


def evaluate_model(policy: ModelPolicy, pool: TextEnvPool, tiers: Iterable[int], episodes: int,
                   seed_start: int = EVAL_SEED_START, progress: Callable[[int], None] | None = None,
                   on_trace: Callable[[EpisodeTrace], None] | None = None) -> EvalReport:
    """Solve rate (Wilson CI) and mean return per tier over `episodes` held-out seeds per tier (the same seeds
    at every tier), greedy, batched over the pool's environments."""
    tiers = list(tiers)
    supported = pool.section.eci_tiers
    bad = [t for t in tiers if t not in supported]
    if bad:
        raise UsageError(f"tier {bad[0]} is not supported by {pool.label} (tiers {supported})")
    if episodes < 1:
        raise UsageError("--episodes must be at least 1")
    model = policy.model
    was_training = model.training
    model.eval()
    generate = model_generator(model, policy.tokenizer, max_new_tokens=policy.max_new_tokens, greedy=True)
    system = pool.envs[0].system_prompt() if policy.system_prompt else None
    report = EvalReport(package=pool.label, policy=policy.name, seed_start=seed_start, episodes_per_tier=episodes)
    try:
        for eci in tiers:
            specs = [EpisodeSpec(seed=s, eci=eci) for s in range(seed_start, seed_start + episodes)]
            traces: list[EpisodeTrace] = []
            width = len(pool.envs)
            for start in range(0, len(specs), width):
                chunk = run_episodes(pool.envs, specs[start:start + width], generate, policy.tokenizer,
                                     system_prompt=system, max_turns=None,
                                     stop_ids=eos_ids(policy.tokenizer, model), context=policy.context)
                traces += chunk
                for trace in chunk:
                    if on_trace is not None:
                        on_trace(trace)
                if progress is not None:
                    progress(len(chunk))
            results = [trace_result(t) for t in traces]
            names = sorted({k for r in results for k in r.components})
            for r in results:  # an episode the environment never ended (a broken package) scores 0 per component
                r.components = {k: r.components.get(k, 0.0) for k in names}
            report.tiers.append(summarise(eci, results))
    finally:
        if was_training:
            model.train()
    return report


def evaluate_run(run_dir: str, package: str, tiers: list[int], episodes: int, seed_start: int = EVAL_SEED_START,
                 trust: bool = False, progress: Callable[[int], None] | None = None,
                 on_trace: Callable[[EpisodeTrace], None] | None = None, batch: int = 32) -> EvalReport:
    """`openadapt eval PACKAGE --policy model:RUN_DIR`."""
    policy = ModelPolicy.from_run(run_dir)
    with TextEnvPool(package, min(batch, episodes), trust=trust, slots=policy.slots) as pool:
        return evaluate_model(policy, pool, tiers, episodes, seed_start, progress=progress, on_trace=on_trace)
