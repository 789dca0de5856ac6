"""Runtime checks: the OpenEnv contract exercised by a dummy agent at every declared tier."""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import math

from openadapt.kit.models import EpisodeState
from openadapt.kit.policy import RandomPolicy, policy_rng
from openadapt.validator.checks.base import GUARD_STEPS, CheckFailed, Context, Episode, check, worker_check

DUMMY_STEPS = 10
VOLATILE_METADATA = ("solve_rate_signal", "solve_rate_window", "seed")  # history- or label-dependent
OBSERVATION_LIMIT = 1024 * 1024  # bytes of JSON: an observation is a prompt's worth of data, not a dataset
FINGERPRINT_SEEDS = (7000, 7001)
CONCURRENT_PAIRS = (((7000, 7001), "random"), ((7000, 7001), "oracle"))  # seeds other checks play alone anyway


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


def observation_size(obs, where: str) -> None:
    """Fail with the figure (and the field that holds it) when an observation is too large to be a prompt."""
    try:
        data = obs.model_dump(mode="json")
        size = len(json.dumps(data, default=str))
    except Exception:  # noqa: BLE001  (runtime.observation_schema reports what does not serialise)
        return
    if size > OBSERVATION_LIMIT:
        fields = sorted(((len(json.dumps(v, default=str)), k) for k, v in data.items()), reverse=True)
        biggest = f"; field {fields[0][1]!r} holds {fields[0][0]:,} bytes" if fields else ""
        raise CheckFailed(f"{where}: the observation is {size:,} bytes of JSON (limit {OBSERVATION_LIMIT:,}){biggest}",
                          measured={"observation_bytes": size, "limit": OBSERVATION_LIMIT},
                          remediation="keep observations prompt-sized: show a window or a summary of large data, "
                                      "never the whole of it")


@check("runtime.api_contract", depends_on=("static.imports",),
       remediation="subclass openadapt.kit.OpenAdaptEnvironment and keep its reset/step/state signatures")
def api_contract(ctx: Context):
    pkg, problems = ctx.pkg, []
    env = ctx.timed(pkg.make_env, bucket=ctx.reset_seconds, label="the environment's constructor")
    reset_params = inspect.signature(env.reset).parameters
    for name in ("seed", "episode_id", "eci"):
        if name not in reset_params and not any(p.kind == p.VAR_KEYWORD for p in reset_params.values()):
            problems.append(f"reset() does not accept {name}=")
    eci = ctx.tiers[0]
    obs = ctx.timed(env.reset, seed=1, eci=eci, episode_id="contract-check", bucket=ctx.reset_seconds)
    if not isinstance(obs, pkg.observation_cls):
        problems.append(f"reset() returned {type(obs).__name__}, not {pkg.observation_cls.__name__}")
    else:
        observation_size(obs, f"ECI {eci}: reset()")
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
    else:
        observation_size(obs, f"ECI {eci}: step()")
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
            except Exception as exc:
                raise CheckFailed(f"ECI {eci} step {i}: observation does not round-trip through JSON: "
                                  f"{type(exc).__name__}: {str(exc)[:200]}") from None
            if len(text) > OBSERVATION_LIMIT:
                observation_size(obs, f"ECI {eci} step {i}")
            try:
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
        obs = ctx.timed(env.reset, seed=3, eci=eci, bucket=ctx.reset_seconds)
        episode_id = env.state.episode_id
        if not episode_id or episode_id in ids:
            raise CheckFailed(f"ECI {eci}: reset gave episode id {episode_id!r} (empty or reused)")
        ids.add(episode_id)
        policy = _random(ctx)
        policy.begin(env, obs, policy_rng(3))
        for step in range(1, 4):
            if obs.done:
                break
            obs = ctx.timed(env.step, policy.act(obs), bucket=ctx.step_seconds)
            state = env.state
            if state.episode_id != episode_id or state.step_count != step:
                raise CheckFailed(f"ECI {eci} step {step}: state {state.model_dump()} (expected id "
                                  f"{episode_id}, step_count {step})")
    return {"episodes": len(ids)}


@check("runtime.episode_determinism", depends_on=("runtime.dummy_agent",),
       remediation="draw every random choice from the rng passed to generate() (seeded by reset(seed=...))")
def episode_determinism(ctx: Context):
    """The same seed and actions give the same episode, and the oracle (which reads the hidden state the
    observations may not show yet: a random guesser sees the same hints for many hidden targets) plays the same."""
    compared = 0
    for eci in ctx.tiers:
        pairs = [("random", [ctx.run_episode(_random(ctx), 4242, eci) for _ in range(2)])]
        with contextlib.suppress(Exception):  # the oracle's own failures are the semantic checks' to report
            played = ctx.episodes_for("oracle", eci, ctx.episodes, ctx.pkg.oracle_cls)[0]  # the semantic checks'
            pairs.append(("oracle", [played, ctx.run_episode(ctx.pkg.oracle_cls(), played.seed, eci)]))
        for name, (first, second) in pairs:
            compared += 1
            if _comparable(first) != _comparable(second):
                diverged = next((i for i, (a, b) in enumerate(zip(first.observations, second.observations,
                                                                  strict=False))
                                 if a.model_dump_json() != b.model_dump_json()),
                                min(len(first.observations), len(second.observations)))
                raise CheckFailed(f"ECI {eci}: the same seed and policy gave different episodes ({name}, "
                                  f"first difference at observation {diverged})")
    return {"tiers": ctx.tiers, "pairs_compared": compared}


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
        obs_a = ctx.timed(a.reset, seed=5, eci=eci, bucket=ctx.reset_seconds)
        ctx.timed(b.reset, seed=6, eci=eci, bucket=ctx.reset_seconds)
        if ctx.timed(a.reset, seed=5, eci=eci, bucket=ctx.reset_seconds).model_dump_json() != obs_a.model_dump_json():
            raise CheckFailed(f"ECI {eci}: resetting a second instance changed the first")
    return {"tiers": ctx.tiers}


def _interleaved(ctx: Context, seeds: tuple[int, ...], eci: int, make_policy) -> list[Episode]:
    """Episodes of `seeds` played side by side, one instance each, their resets and steps alternating (what two
    sessions of one server do)."""
    envs = [ctx.pkg.make_env() for _ in seeds]
    episodes = [Episode(seed, eci) for seed in seeds]
    policies = [make_policy() for _ in seeds]
    obs = [ctx.timed(env.reset, seed=seed, eci=eci, bucket=ctx.reset_seconds) for env, seed in zip(envs, seeds,
                                                                                                    strict=True)]
    for i, env in enumerate(envs):
        episodes[i].observations.append(obs[i])
        policies[i].begin(env, obs[i], policy_rng(seeds[i]))
    limit = ctx.section.step_budget[eci] + GUARD_STEPS
    while any(not o.done and len(ep.actions) < limit for o, ep in zip(obs, episodes, strict=True)):
        for i, env in enumerate(envs):
            if obs[i].done or len(episodes[i].actions) >= limit:
                continue
            action = policies[i].act(obs[i])
            obs[i] = ctx.timed(env.step, action, bucket=ctx.step_seconds)
            episodes[i].actions.append(action)
            episodes[i].observations.append(obs[i])
            episodes[i].rewards.append(float(obs[i].reward) if obs[i].reward is not None else math.nan)
    return episodes


@check("runtime.concurrent_sessions", depends_on=("runtime.episode_isolation",),
       remediation="keep all episode state on the instance (self), never on the class or in module globals: a "
                   "server runs several sessions side by side, one instance each")
def concurrent_sessions(ctx: Context):
    """Two sessions interleaved on two instances must each play exactly as they do alone."""
    for eci in ctx.tiers:
        for seeds, name in CONCURRENT_PAIRS:
            alone = _alone(ctx, name, seeds, eci)
            make = ctx.pkg.oracle_cls if name == "oracle" else (lambda: _random(ctx))
            together = _interleaved(ctx, seeds, eci, make)
            for seed, other, a, b in zip(seeds, seeds[::-1], alone, together, strict=True):
                if _comparable(a) != _comparable(b):
                    step = next((i for i, (x, y) in enumerate(zip(a.observations, b.observations, strict=False))
                                 if _row(x) != _row(y)), min(len(a.observations), len(b.observations)))
                    raise CheckFailed(
                        f"ECI {eci}: seed {seed} played ({name} policy) alongside seed {other} on a second instance "
                        f"differs from seed {seed} played alone (first at observation {step}): one session's reset or "
                        "step changed another's episode, so state is shared between instances (class attributes, "
                        "module globals)")
    return {"tiers": ctx.tiers, "pairs": len(CONCURRENT_PAIRS)}


def _alone(ctx: Context, name: str, seeds: tuple[int, ...], eci: int) -> list[Episode]:
    """The episodes of `seeds` played alone, each on a fresh instance: taken from what other checks play anyway
    (the bounded random episodes, the oracle's), played here only when those are not at hand."""
    limit = ctx.section.step_budget[eci] + GUARD_STEPS
    if name == "random":
        pool = ctx._cache.get(("bounded-random", eci, 5)) or []
        make = lambda: _random(ctx)  # noqa: E731
    else:
        pool = ctx._cache.get(("oracle", eci, ctx.episodes)) or []
        make = ctx.pkg.oracle_cls
    by_seed = {ep.seed: ep for ep in pool}
    return [by_seed.get(seed) or ctx.run_episode(make(), seed, eci, max_steps=limit) for seed in seeds]


def _row(obs) -> str:
    data = obs.model_dump(mode="json")
    data["metadata"] = {k: v for k, v in data.get("metadata", {}).items() if k not in VOLATILE_METADATA}
    return json.dumps(data, sort_keys=True, default=str)


def fingerprint(ctx: Context) -> dict[str, list[list[str]]]:
    """A few episodes (oracle and random, two seeds, every tier) as digests and text, one row per observation:
    the same call in an interpreter with another PYTHONHASHSEED must give the same rows."""
    out = {}
    for eci in ctx.tiers:
        for name in ("oracle", "random"):
            for seed, episode in zip(FINGERPRINT_SEEDS, _alone(ctx, name, FINGERPRINT_SEEDS, eci), strict=True):
                rows = []
                for obs, reward in zip(episode.observations, [None, *episode.rewards], strict=True):
                    text = _row(obs) + f" reward={reward!r}"
                    rows.append([hashlib.sha1(text.encode()).hexdigest()[:16], text[:1500]])
                out[f"ECI {eci} seed {seed} ({name})"] = rows
    return out


@check("runtime.hash_seed_determinism", depends_on=("runtime.episode_determinism",),
       remediation="never let string hashing decide an episode: no hash() of strings in seeds, no iteration over "
                   "sets of strings; sort, or draw from the rng passed to generate()")
def hash_seed_determinism(ctx: Context):
    # The worker compares these episodes with the same ones played by an interpreter with another hash seed.
    return {"_fingerprint": fingerprint(ctx)}


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


worker_check("runtime.sandbox_violations",
             remediation="an environment needs nothing outside its sandbox: no network, no processes, no native code "
                         "(ctypes), no files outside the package and its scratch directory. The sandbox refused these "
                         "attempts; under --trust they would run for real")
