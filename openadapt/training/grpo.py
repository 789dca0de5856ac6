"""The bridge to TRL's GRPOTrainer: a multi-turn `rollout_func` over a pool of text environments, and the reward
function that hands each completion its own episode's environment reward.

TRL calls `rollout_func(prompts, trainer)` once per optimizer step with one prompt per completion:
`prompts_per_step` groups of `num_generations` consecutive entries (the dataset prompts are placeholders; the
episode of a group is chosen here). Group `k` of step `s` is episode group `s * prompts_per_step + k` of the
run: its environment seed comes from `training_seed` (always below the held-out range) and its tier from the
`TierPlan`; all completions of a group play that same seed and tier, which is what GRPO's group baseline needs.
Completion `i` of the returned batch is episode `i`, and every per-episode extra key (`episode_return`,
`final_reward`, `solved`, `components`, `eci`, `env_seed`, `turns`) is a list in that same order, which TRL
passes to the reward function as keyword arguments. With `context="last"` the batch also carries `turn_rows`
(episode index, the turn's context ids, its generated ids) for `turns.TurnGRPOTrainer`.
"""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from openadapt.envpkg.textenv import TextEnv
from openadapt.training.config import TrainConfig
from openadapt.training.credit import row_values, turn_values
from openadapt.training.envinfo import TrainingError
from openadapt.training.episodes import EpisodeOutcome, TierPlan, tier_rng, training_seed
from openadapt.training.imitation import SolvedEpisodes
from openadapt.training.rollout import (
    EpisodeSpec,
    EpisodeTrace,
    Generator,
    Opening,
    eos_ids,
    model_generator,
    run_episodes,
)


class StepStats(BaseModel):
    """What one step's rollouts looked like (merged into that step's metrics row)."""

    global_step: int
    package: str
    episodes: int
    reward_mean: float
    reward_std: float
    solve_rate: float
    finished_rate: float
    turns_mean: float
    components: dict[str, float] = Field(default_factory=dict)
    tier_mix: dict[str, int] = Field(default_factory=dict)
    prompt_tokens: int
    completion_tokens: int
    generated_tokens: int
    rollout_s: float
    explored: int = 0  # episodes with a turn opened by an exploration draw (`explore`)
    value_continuations: int = 0  # episodes played to value the turns' states (`credit="turn"`)
    imitated: int = 0  # solved episodes whose turns the self-imitation term trained on (`imitate`)
    imitation_pool: int = 0  # solved episodes held for it


def episode_reward(trace: EpisodeTrace, kind: str) -> float:
    return trace.episode_return if kind == "return" else trace.final_reward


def summarise_step(traces: Sequence[EpisodeTrace], kind: str, global_step: int, package: str,
                   seconds: float) -> StepStats:
    rewards = [episode_reward(t, kind) for t in traces]
    names = sorted({k for t in traces for k in t.components})
    finished = [t for t in traces if t.finished]
    return StepStats(
        global_step=global_step, package=package, episodes=len(traces),
        reward_mean=round(statistics.fmean(rewards), 6),
        reward_std=round(statistics.pstdev(rewards), 6) if len(rewards) > 1 else 0.0,
        solve_rate=round(sum(t.solved for t in traces) / len(traces), 6),
        finished_rate=round(len(finished) / len(traces), 6),
        turns_mean=round(statistics.fmean(len(t.turns) for t in traces), 4),
        components={n: round(statistics.fmean(t.components.get(n, 0.0) for t in finished), 6)
                    for n in names} if finished else {},
        tier_mix={str(k): v for k, v in sorted(Counter(t.eci for t in traces).items())},
        prompt_tokens=sum(len(t.prompt_ids) for t in traces),
        completion_tokens=sum(len(t.completion_ids) for t in traces),
        generated_tokens=sum(t.generated_tokens for t in traces),
        rollout_s=round(seconds, 4),
    )


class EnvironmentRollout:
    """TRL's `rollout_func`. Holds the current environments (swappable between steps), the tier plan and the
    episode hook; everything else comes from the trainer at call time."""

    def __init__(self, config: TrainConfig, tokenizer: Any, tier_plan: TierPlan,
                 on_episode: Callable[[EpisodeOutcome], None] | None = None):
        self.config = config
        self.tokenizer = tokenizer
        self.tier_plan = tier_plan
        self.on_episode = on_episode
        self.envs: list[TextEnv] = []
        self.package = ""
        self.tiers: list[int] = []
        self.budget: dict[int, int] = {}
        self.system_prompt: str | None = None
        self.generator_factory: Callable[[Any], Generator] | None = None  # tests script completions here
        self.stats: StepStats | None = None
        self.last_traces: list[EpisodeTrace] = []
        self.openings: dict[int, list[dict[str, str]]] = {}  # `explore`, per tier: the choice values drawn from
        self.fills: dict[int, dict[str, list[str]]] = {}  # `explore_fields`, per tier: field -> its values
        self.solved = SolvedEpisodes(config.imitate_buffer) if config.imitates else None

    def attach(self, envs: list[TextEnv], package: str, tiers: list[int], system_prompt: str | None,
               budget: dict[int, int] | None = None) -> None:
        """The environments to play from the next step on; `budget` is the package's step budget per tier."""
        self.envs, self.package, self.tiers, self.system_prompt = envs, package, list(tiers), system_prompt
        self.budget = dict(budget or {})
        self.openings = {tier: choice_openings(system_prompt or "", package, self.config.explore_choices_at(tier),
                                               self.config.explore_targets)
                         for tier in self.tiers} if self.config.explore > 0 else {}
        self.fills = {tier: field_values(system_prompt or "", package, self.config.explore_fields_at(tier))
                      for tier in self.tiers} if self.config.explore > 0 else {}

    def explore(self, specs: list[EpisodeSpec], step: int) -> list[EpisodeSpec]:
        """`config.explore`: each episode whose turn limit leaves room for a turn after its tier's `explore_turn`
        opens that turn, with that chance, with a choice drawn uniformly from its tier's, and `explore_targets` with
        values drawn from that turn's observation (seeded by the run, the step and the episode, so a resume draws
        the same)."""
        if not self.openings:
            return specs
        drawn = []
        for i, spec in enumerate(specs):
            key = f"{self.config.seed}:{step}:{i}"
            rng = random.Random(f"openadapt-explore:{key}")
            turn = self.config.explore_turn_at(spec.eci)
            if (spec.max_turns is None or spec.max_turns > turn) and rng.random() < self.config.explore:
                opening = Opening(fields=rng.choice(self.openings[spec.eci]), turn=turn,
                                  draw_from=self.config.explore_targets or {}, seed=key)
                if self.fills[spec.eci] and rng.random() < self.config.explore_field_chance:
                    opening.fills = self.fills[spec.eci]
                spec = spec.model_copy(update={"opening": opening})
            drawn.append(spec)
        return drawn

    def specs(self, global_step: int, groups: int) -> tuple[list[int], list[EpisodeSpec]]:
        indices, specs = [], []
        for k in range(groups):
            index = global_step * self.config.prompts_per_step + k
            tier = int(self.tier_plan.next_tier(tier_rng(self.config.seed, index)))
            if tier not in self.tiers:
                raise TrainingError(f"the tier plan chose ECI {tier}, which {self.package} does not support "
                                    f"(tiers {self.tiers})")
            # A curriculum's turn budget follows its current tier: a replayed earlier tier gets as many turns
            # (its own step budget still ends it). The policy cannot tell which tier it plays, so one budget for
            # every episode of a step is the one consistent choice.
            turns = self.config.turns_at(max(tier, getattr(self.tier_plan, "turn_tier", None) or tier),
                                         self.budget.get(tier))
            indices.append(index)
            specs.append(EpisodeSpec(seed=training_seed(self.config.seed, index), eci=tier, max_turns=turns))
        return indices, specs

    def _generator(self, trainer: Any) -> Generator:
        if self.generator_factory is not None:
            return self.generator_factory(trainer)
        if getattr(trainer, "use_vllm", False):  # TRL's vLLM engine (weights synced by TRL before each rollout)
            def vllm_generate(contexts: list[list[int]]) -> list[list[int]]:
                _, completion_ids, _, _ = trainer.vllm_generation.generate(contexts, None, 1)
                return [list(ids) for ids in completion_ids]

            return vllm_generate
        model = trainer.accelerator.unwrap_model(trainer.model)
        return model_generator(model, self.tokenizer, max_new_tokens=self.config.max_completion_length,
                               greedy=False, temperature=self.config.temperature)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        g = self.config.num_generations
        if len(prompts) % g:
            raise TrainingError(f"TRL passed {len(prompts)} prompts, not a multiple of num_generations={g}")
        step = trainer.state.global_step
        indices, group_specs = self.specs(step, len(prompts) // g)
        specs = self.explore([spec for spec in group_specs for _ in range(g)], step)
        model = trainer.accelerator.unwrap_model(trainer.model)
        was_training = model.training
        started = time.perf_counter()
        model.eval()  # generation: KV cache on even with gradient checkpointing
        try:
            generate = self._generator(trainer)
            traces = run_episodes(self.envs, specs, generate, self.tokenizer,
                                  system_prompt=self.system_prompt if self.config.system_prompt else None,
                                  stop_ids=eos_ids(self.tokenizer, model), context=self.config.context)
            values, continuations = self._turn_values(traces, specs, generate, model)
        finally:
            if was_training:
                model.train()
        seconds = time.perf_counter() - started
        self.last_traces = traces
        self.stats = summarise_step(traces, self.config.reward, step + 1, self.package, seconds)
        self.stats.explored = sum(bool(spec.opening) for spec in specs)
        self.stats.value_continuations = continuations
        if self.on_episode is not None:
            for i, trace in enumerate(traces):
                self.on_episode(EpisodeOutcome(
                    global_step=step + 1, group=indices[i // g], package=self.package, seed=trace.seed,
                    eci=trace.eci, solved=trace.solved, episode_return=trace.episode_return,
                    final_reward=trace.final_reward, components=trace.components,
                    solve_rate_signal=trace.solve_rate_signal, turns=len(trace.turns), finished=trace.finished,
                    explored=bool(specs[i].opening)))
        batch: dict[str, Any] = {}
        if self.config.context == "last":
            # (episode, prompt, completion, leading tokens trained only on a positive advantage)
            # (..., value before the turn, value after it): `credit="turn"`, else None (the episode's advantage)
            positive_only = self.config.explore_credit == "positive"
            batch["turn_rows"] = []
            for i, trace in enumerate(traces):
                turn_values = row_values(values[i], quantize(episode_reward(trace, self.config.reward))) \
                    if values else [(None, None)] * len(trace.rows)
                for k in self._trained_turns(trace, step, i):
                    row = trace.rows[k]
                    batch["turn_rows"].append((i, row.prompt_ids, row.completion_ids,
                                               row.drawn if positive_only else [], *turn_values[k]))
            batch["completion_texts"] = ["\n".join(turn.action for turn in t.turns) for t in traces]
            batch["step_tier"] = max(t.eci for t in traces)
            batch["kl_weight"] = self.config.beta_at(batch["step_tier"])
            if self.solved is not None:
                batch["imitation_weight"] = self.config.imitate_at(batch["step_tier"])
                batch["imitation_rows"] = self._imitation_rows(traces, step, batch["imitation_weight"] > 0)
        return batch | {
            "prompt_ids": [t.prompt_ids for t in traces],
            "completion_ids": [t.completion_ids for t in traces],
            "logprobs": None,  # TRL recomputes them with the training model (no importance correction needed)
            "env_mask": [t.env_mask for t in traces],
            "episode_return": [t.episode_return for t in traces],
            "final_reward": [t.final_reward for t in traces],
            "solved": [t.solved for t in traces],
            "components": [t.components for t in traces],
            "eci": [t.eci for t in traces],
            "env_seed": [t.seed for t in traces],
            "turns": [len(t.turns) for t in traces],
        }

    def _imitation_rows(self, traces: list[EpisodeTrace], step: int,
                        draw: bool) -> list[tuple[list[int], list[int]]]:
        """`imitate`: keep this step's solved episodes, then (`draw`: the step's weight is not 0) draw the turns the
        self-imitation term trains on (seeded by the run and the step)."""
        assert self.solved is not None and self.stats is not None
        self.solved.add(traces)
        self.stats.imitation_pool = len(self.solved)
        if not draw:
            self.stats.imitated = 0
            return []
        rng = random.Random(f"openadapt-imitate:{self.config.seed}:{step}")
        rows = self.solved.sample(self.config.imitate_batch, rng, focus=self.config.imitate_focus)
        self.stats.imitated = min(self.config.imitate_batch, len(self.solved)) if rows else 0
        return rows

    def _trained_turns(self, trace: EpisodeTrace, step: int, index: int) -> list[int]:
        """The turns of an episode the loss trains on: all, or `train_turns` of them drawn uniformly (seeded by
        the step and the episode, so a resumed run draws the same)."""
        limit = self.config.train_turns
        if limit is None or len(trace.rows) <= limit:
            return list(range(len(trace.rows)))
        return sorted(random.Random(f"openadapt-turns:{self.config.seed}:{step}:{index}").sample(
            range(len(trace.rows)), limit))

    def _turn_values(self, traces: list[EpisodeTrace], specs: list[EpisodeSpec], generate: Generator,
                     model: Any) -> tuple[list[list[float]], int]:
        """`credit="turn"`: the value of the state after each turn but an episode's last (`credit.turn_values`,
        quantized like the rewards), and how many continuations that took; else nothing."""
        if self.config.credit != "turn":
            return [], 0
        plain = [spec.model_copy(update={"opening": None}) for spec in specs]
        values, played = turn_values(
            traces, plain, self.envs, generate, self.tokenizer,
            lambda t: episode_reward(t, self.config.reward), samples=self.config.value_samples,
            system_prompt=self.system_prompt if self.config.system_prompt else None,
            stop_ids=eos_ids(self.tokenizer, model))
        return [[quantize(v) for v in episode] for episode in values], played


def choice_openings(system_prompt: str, package: str, only: list[str] | None = None,
                    targets: dict[str, str] | None = None) -> list[dict[str, str]]:
    """One opening per value of the action's first enum field, from the schema the system prompt shows:
    `{"tool": "inspect_logs"}` ... (a family's tools); `only` keeps those values alone. `targets` (action field ->
    observation list) must name fields of the action other than that one."""
    from openadapt.training.envinfo import schema_from_prompt

    schema = schema_from_prompt(system_prompt) or {}
    properties = schema.get("properties", {})
    for name, prop in properties.items():
        values = prop.get("enum") or next((o["enum"] for o in prop.get("anyOf", []) if "enum" in o), None)
        if values:
            unknown = sorted(set(only or ()) - set(values))
            if unknown:
                raise TrainingError(f"{package}: explore_choices {', '.join(unknown)} not among the action's "
                                    f"`{name}` values ({', '.join(values)})")
            strange = sorted(set(targets or ()) - (set(properties) - {name}))
            if strange:
                raise TrainingError(f"{package}: explore_targets {', '.join(strange)} not among the action's other "
                                    f"fields ({', '.join(f for f in properties if f != name)})")
            return [{name: v} for v in values if only is None or v in only]
    raise TrainingError(f"{package}: explore needs an action with a choice field (an enum, such as a tool), and "
                        "its schema has none")


def field_values(system_prompt: str, package: str, fields: list[str]) -> dict[str, list[str]]:
    """`explore_fields`: each field's enum values, from the schema the system prompt shows."""
    from openadapt.training.envinfo import schema_from_prompt

    properties = (schema_from_prompt(system_prompt) or {}).get("properties", {})
    values = {}
    for name in fields:
        prop = properties.get(name, {})
        values[name] = prop.get("enum") or next((o["enum"] for o in prop.get("anyOf", []) if "enum" in o), None)
        if not values[name]:
            enums = [n for n, p in properties.items() if p.get("enum") or any("enum" in o for o in p.get("anyOf", []))]
            raise TrainingError(f"{package}: explore_fields {name} is not an enum field of the action (its enum "
                                f"fields: {', '.join(enums) or 'none'})")
    return values


REWARD_QUANTUM = 2.0 ** -12


def quantize(value: float) -> float:
    """`value` rounded to a multiple of 2^-12 (at most 1.2e-4 away). Such numbers add up exactly in float32, so a
    group whose episodes all scored the same gets exactly zero advantage. Unrounded, TRL's group mean of eight
    -0.1s differs from -0.1 in the last float32 bit, its division by (std + 1e-4) turns that into advantages of
    ~7e-5 all of one sign, and Adam, which is scale-invariant, turns those into full-size updates that sharpen
    every sampled completion: measured here as an entropy collapse within 20 steps of all-equal rewards."""
    return round(value / REWARD_QUANTUM) * REWARD_QUANTUM


def environment_reward_function(kind: str) -> Callable[..., list[float]]:
    """The GRPO reward: completion `i` gets the reward of episode `i` (its return, or its final reward), as
    computed by the environment (rounded by `quantize`). Also logs the sampled solve rate and the reward
    components as TRL metrics."""

    def reward(prompts: list[Any], completions: list[Any], episode_return: list[float], final_reward: list[float],
               solved: list[bool], components: list[dict[str, float]], log_metric: Any = None,
               **_: Any) -> list[float]:
        values = episode_return if kind == "return" else final_reward
        if log_metric is not None:
            log_metric("env/solve_rate", sum(bool(s) for s in solved) / len(solved))
            for name in sorted({k for c in components for k in c}):
                present = [c[name] for c in components if name in c]
                log_metric(f"env/{name}", statistics.fmean(present))
        return [quantize(float(v)) for v in values]

    reward.__name__ = "env_return" if kind == "return" else "env_final_reward"
    return reward
