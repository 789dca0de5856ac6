"""Runtime checks: the OpenEnv contract exercised by a dummy agent at every declared tier."""

from __future__ import annotations

import inspect
import json
import math

from openadapt.kit.models import EpisodeState
from openadapt.kit.policy import RandomPolicy, policy_rng
from openadapt.validator.checks.base import GUARD_STEPS, CheckFailed, Context, Episode, check

DUMMY_STEPS = 10
VOLATILE_METADATA = ("solve_rate_signal", "solve_rate_window", "seed")  # history- or label-dependent


def _random(ctx: Context) -> RandomPolicy:
    return RandomPolicy(ctx.pkg.action_cls)


def dummy_runs(ctx: Context) -> dict[int, Episode]:
    """Ten random valid actions per tier (cached: several checks read them)."""
    return ctx.cached("dummy", lambda: {
        eci: ctx.run_episode(_random(ctx), 100 + eci, eci, max_steps=DUMMY_STEPS) for eci in ctx.tiers
    })


def random_episodes(ctx: Context, eci: int, count: int = 5) -> list[Episode]:
    return ctx.episodes_for("random", eci, count, lambda: _random(ctx))


def bounded_random_episodes(ctx: Context, eci: int, count: int = 5) -> list[Episode]:
    """Random episodes cut off past the budget instead of failing: for checks that are not about ending."""
    limit = ctx.section.step_budget[eci] + GUARD_STEPS
    return ctx.cached(("bounded-random", eci, count), lambda: [
        ctx.run_episode(_random(ctx), 7000 + i, eci, max_steps=limit) for i in range(count)])


def _comparable(episode: Episode) -> str:
    """An episode's trace without the metadata that depends on the instance's past episodes."""
    rows = []
    for obs in episode.observations:
        data = obs.model_dump(mode="json")
        data["metadata"] = {k: v for k, v in data.get("metadata", {}).items() if k not in VOLATILE_METADATA}
        rows.append(data)
    return json.dumps([rows, episode.rewards], sort_keys=True, default=str)


@check("runtime.api_contract", depends_on=("static.imports",),
       remediation="subclass openadapt.kit.OpenAdaptEnvironment and keep its reset/step/state signatures")
def api_contract(ctx: Context):
    pkg, problems = ctx.pkg, []
    env = pkg.make_env()
    reset_params = inspect.signature(env.reset).parameters
    for name in ("seed", "episode_id", "eci"):
        if name not in reset_params and not any(p.kind == p.VAR_KEYWORD for p in reset_params.values()):
            problems.append(f"reset() does not accept {name}=")
    eci = ctx.tiers[0]
    obs = ctx.timed(env.reset, seed=1, eci=eci, episode_id="contract-check", bucket=ctx.reset_seconds)
    if not isinstance(obs, pkg.observation_cls):
        problems.append(f"reset() returned {type(obs).__name__}, not {pkg.observation_cls.__name__}")
    state = env.state
    if not isinstance(state, EpisodeState):
        problems.append(f"state is {type(state).__name__}, not openadapt.kit.EpisodeState")
    elif state.episode_id != "contract-check" or state.step_count != 0:
        problems.append(f"after reset(episode_id='contract-check') state is {state.model_dump()}")
    policy = _random(ctx)
    policy.begin(env, obs, policy_rng(0))
    obs = ctx.timed(env.step, policy.act(obs), bucket=ctx.step_seconds)
    if not isinstance(obs, pkg.observation_cls):
        problems.append(f"step() returned {type(obs).__name__}, not {pkg.observation_cls.__name__}")
    elif not isinstance(obs.reward, (int, float)) or isinstance(obs.reward, bool):
        problems.append(f"step() reward is {obs.reward!r}, not a number")
    if env.state.step_count != 1:
        problems.append(f"state.step_count is {env.state.step_count} after one step")
    if problems:
        raise CheckFailed(*problems)
    rubric = getattr(env, "rubric", None)
    return {
        "reset_params": sorted(reset_params),
        # What the package's README documents: the spaces and the reward, as the running code defines them.
        "action_fields": _fields(pkg.action_cls, {"metadata"}),
        "observation_fields": _fields(pkg.observation_cls, {"metadata", "reward", "done"}),
        "reward_components": rubric.describe() if hasattr(rubric, "describe") else [],
    }


def _fields(model: type, skip: set[str]) -> dict[str, str]:
    return {name: (info.description or "") for name, info in model.model_fields.items() if name not in skip}


@check("runtime.dummy_agent", depends_on=("runtime.api_contract",),
       remediation="a random schema-valid action must never crash step(); reject bad input with Outcome(error=...)")
def dummy_agent(ctx: Context):
    runs = dummy_runs(ctx)
    return {f"eci_{eci}_steps": len(ep.actions) for eci, ep in runs.items()}


@check("runtime.observation_schema", depends_on=("runtime.dummy_agent",),
       remediation="observations must be instances of the declared class and JSON-serialisable")
def observation_schema(ctx: Context):
    cls, count = ctx.pkg.observation_cls, 0
    for eci, ep in dummy_runs(ctx).items():
        for i, obs in enumerate(ep.observations):
            count += 1
            if not isinstance(obs, cls):
                raise CheckFailed(f"ECI {eci} step {i}: observation is {type(obs).__name__}, not {cls.__name__}")
            try:
                text = obs.model_dump_json()
                json.dumps(obs.metadata)
                again = cls.model_validate_json(text)
            except Exception as exc:
                raise CheckFailed(f"ECI {eci} step {i}: observation does not round-trip through JSON: "
                                  f"{type(exc).__name__}: {str(exc)[:200]}") from None
            if again.model_dump() != obs.model_dump():
                raise CheckFailed(f"ECI {eci} step {i}: observation changes when parsed back from JSON")
    return {"observations": count}


@check("runtime.episode_termination", depends_on=("runtime.dummy_agent",),
       remediation="end every episode within the tier's step_budget and answer steps after the end harmlessly")
def episode_termination(ctx: Context):
    measured = {}
    for eci in ctx.tiers:
        episodes = random_episodes(ctx, eci)
        budget = ctx.section.step_budget[eci]
        longest = max(len(ep.actions) for ep in episodes)
        if longest > budget:
            raise CheckFailed(f"ECI {eci}: an episode ran {longest} steps, budget {budget}")
        env = ctx.pkg.make_env()
        ep = ctx.run_episode(_random(ctx), episodes[0].seed, eci, env=env)
        steps = env.state.step_count
        after = ctx.timed(env.step, ep.actions[-1], bucket=ctx.step_seconds)
        if not after.done or (after.reward or 0.0) != 0.0 or env.state.step_count != steps:
            raise CheckFailed(f"ECI {eci}: a step after done returned done={after.done}, reward={after.reward}, "
                              f"step_count {steps} -> {env.state.step_count}")
        measured[f"eci_{eci}_longest"] = longest
    return measured


@check("runtime.reward_bounds", depends_on=("runtime.dummy_agent",),
       remediation="keep every per-step reward finite and inside openadapt.reward_range")
def reward_bounds(ctx: Context):
    low, high = ctx.reward_range
    seen = []
    for eci in ctx.tiers:
        for ep in [dummy_runs(ctx)[eci], *bounded_random_episodes(ctx, eci)]:
            for step, reward in enumerate(ep.rewards, 1):
                if not math.isfinite(reward) or not low <= reward <= high:
                    raise CheckFailed(f"ECI {eci} seed {ep.seed} step {step}: reward {reward!r} outside "
                                      f"[{low}, {high}] or not finite", measured={"reward": str(reward)})
                seen.append(reward)
    return {"min": min(seen), "max": max(seen), "rewards": len(seen)}


@check("runtime.state_contract", depends_on=("runtime.dummy_agent",),
       remediation="state must keep the episode id through an episode and count steps; a reset starts a new id")
def state_contract(ctx: Context):
    env = ctx.pkg.make_env()
    ids = set()
    for eci in ctx.tiers:
        obs = env.reset(seed=3, eci=eci)
        episode_id = env.state.episode_id
        if not episode_id or episode_id in ids:
            raise CheckFailed(f"ECI {eci}: reset gave episode id {episode_id!r} (empty or reused)")
        ids.add(episode_id)
        policy = _random(ctx)
        policy.begin(env, obs, policy_rng(3))
        for step in range(1, 4):
            if obs.done:
                break
            obs = env.step(policy.act(obs))
            state = env.state
            if state.episode_id != episode_id or state.step_count != step:
                raise CheckFailed(f"ECI {eci} step {step}: state {state.model_dump()} (expected id "
                                  f"{episode_id}, step_count {step})")
    return {"episodes": len(ids)}


@check("runtime.episode_determinism", depends_on=("runtime.dummy_agent",),
       remediation="draw every random choice from the rng passed to generate() (seeded by reset(seed=...))")
def episode_determinism(ctx: Context):
    for eci in ctx.tiers:
        first = ctx.run_episode(_random(ctx), 4242, eci)
        second = ctx.run_episode(_random(ctx), 4242, eci)
        if _comparable(first) != _comparable(second):
            diverged = next(i for i, (a, b) in enumerate(zip(first.observations, second.observations, strict=False))
                            if a.model_dump_json() != b.model_dump_json())
            raise CheckFailed(f"ECI {eci}: the same seed and actions gave different episodes (first difference "
                              f"at step {diverged})")
    return {"tiers": ctx.tiers}


@check("runtime.seed_variation", depends_on=("runtime.episode_termination",),
       remediation="make the seed change the episode (the task, its data, its answer)")
def seed_variation(ctx: Context):
    """The same agent (same actions, same policy randomness) meets a different episode under each seed."""
    measured = {}
    for eci in ctx.tiers:
        traces = {_comparable(ctx.run_episode(_random(ctx), s, eci, policy_seed=0)) for s in range(8)}
        measured[f"eci_{eci}_distinct_of_8"] = len(traces)
        if len(traces) < 4:
            raise CheckFailed(f"ECI {eci}: 8 seeds gave only {len(traces)} distinct episodes to the same agent",
                              measured=measured)
    return measured


@check("runtime.episode_isolation", depends_on=("runtime.dummy_agent",),
       remediation="reset() must clear all per-episode state; nothing may leak between episodes or instances")
def episode_isolation(ctx: Context):
    for eci in ctx.tiers:
        reused = ctx.pkg.make_env()
        ctx.run_episode(_random(ctx), 11, eci, env=reused)
        after = ctx.run_episode(_random(ctx), 12, eci, env=reused)
        fresh = ctx.run_episode(_random(ctx), 12, eci, env=ctx.pkg.make_env())
        if _comparable(after) != _comparable(fresh):
            raise CheckFailed(f"ECI {eci}: seed 12 played after seed 11 on the same instance differs from seed 12 "
                              "on a fresh instance")
        a, b = ctx.pkg.make_env(), ctx.pkg.make_env()
        obs_a, obs_b = a.reset(seed=5, eci=eci), b.reset(seed=6, eci=eci)
        if a.reset(seed=5, eci=eci).model_dump_json() != obs_a.model_dump_json():
            raise CheckFailed(f"ECI {eci}: resetting a second instance changed the first")
        del obs_b
    return {"tiers": ctx.tiers}


@check("runtime.metadata_contract", depends_on=("runtime.episode_termination",),
       remediation="let the kit build observations: final metadata needs solved, eci, solve_rate_signal, "
                   "reward_components")
def metadata_contract(ctx: Context):
    problems = []
    for eci in ctx.tiers:
        for ep in random_episodes(ctx, eci):
            for obs in ep.observations:
                if obs.metadata.get("eci") != eci:
                    problems.append(f"ECI {eci}: metadata eci is {obs.metadata.get('eci')!r}")
                    break
            meta = ep.final.metadata
            if not isinstance(meta.get("solved"), bool):
                problems.append(f"ECI {eci}: final metadata solved is {meta.get('solved')!r}, not a bool")
            signal = meta.get("solve_rate_signal")
            if not isinstance(signal, (int, float)) or not 0.0 <= signal <= 1.0:
                problems.append(f"ECI {eci}: solve_rate_signal is {signal!r}")
            parts = meta.get("reward_components")
            if not isinstance(parts, dict) or not parts or not all(
                    isinstance(v, (int, float)) and math.isfinite(v) for v in parts.values()):
                problems.append(f"ECI {eci}: reward_components is {parts!r}")
            if problems:
                raise CheckFailed(*problems[:5])
    return {"fields": ["solved", "eci", "solve_rate_signal", "reward_components"]}
