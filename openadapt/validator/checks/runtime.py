"""Runtime checks: the OpenEnv contract exercised by a dummy agent at every declared tier."""

from __future__ import annotations

import hashlib
import json
import math

from openadapt.validator.checks.base import GUARD_STEPS, CheckFailed, Context, Episode, after_check, check
from openadapt.validator.checks.policies import SchemaPolicy

DUMMY_STEPS = 10
VOLATILE_METADATA = ("solve_rate_signal", "solve_rate_window", "seed")  # history- or label-dependent
FINGERPRINT_SEEDS = (7000, 7001)
CONCURRENT_PAIRS = (((7000, 7001), "random"), ((7000, 7001), "oracle"))  # seeds other checks play alone anyway
HASH_CHECK = "runtime.hash_seed_determinism"
EPISODE_STATE_FIELDS = ("episode_id", "step_count")


def random_policy(ctx: Context) -> SchemaPolicy:
    return SchemaPolicy(ctx.action_schema)


def dummy_runs(ctx: Context) -> dict[int, Episode]:
    """Ten random valid actions per tier (cached: several checks read them)."""
    return ctx.cached("dummy", lambda: {
        eci: ctx.run_episode(random_policy(ctx), 100 + eci, eci, max_steps=DUMMY_STEPS) for eci in ctx.tiers
    })


def random_episodes(ctx: Context, eci: int, count: int = 5) -> list[Episode]:
    return ctx.episodes_for("random", eci, count, lambda: random_policy(ctx))


def bounded_random_episodes(ctx: Context, eci: int, count: int = 5) -> list[Episode]:
    """Random episodes cut off past the budget instead of failing: for checks that are not about ending."""
    limit = ctx.section.step_budget[eci] + GUARD_STEPS
    return ctx.cached(("bounded-random", eci, count), lambda: [
        ctx.run_episode(random_policy(ctx), 7000 + i, eci, max_steps=limit) for i in range(count)])


def row(obs) -> str:
    """An observation without the metadata that depends on the instance's past episodes."""
    data = dict(obs.data)
    data["metadata"] = {k: v for k, v in obs.metadata.items() if k not in VOLATILE_METADATA}
    return json.dumps(data, sort_keys=True, default=str)


def comparable(episode: Episode) -> str:
    return json.dumps([[row(o) for o in episode.observations], episode.rewards], sort_keys=True, default=str)


@check("runtime.api_contract", depends_on=("static.imports",),
       remediation="subclass openadapt.kit.OpenAdaptEnvironment and keep its reset/step/state signatures")
def api_contract(ctx: Context):
    facts, problems = ctx.facts, []
    env = ctx.make_env()
    for name in ("seed", "episode_id", "eci"):
        if name not in facts["reset_params"] and not facts["reset_any_keyword"]:
            problems.append(f"reset() does not accept {name}=")
    eci = ctx.tiers[0]
    obs = env.reset(seed=1, eci=eci, episode_id="contract-check")
    if not obs.type_ok:
        problems.append(f"reset() returned {obs.type}, not the manifest's observation class")
    state = env.state
    if not state["is_episode_state"]:
        problems.append(f"state is {state['type']}, not openadapt.kit.EpisodeState")
    elif state["state"].get("episode_id") != "contract-check" or state["state"].get("step_count") != 0:
        problems.append(f"after reset(episode_id='contract-check') state is {state['state']}")
    policy = random_policy(ctx)
    policy.begin(env, obs, 0)
    obs, _ = ctx.act_and_step(env, policy, obs)
    if not obs.type_ok:
        problems.append(f"step() returned {obs.type}, not the manifest's observation class")
    elif obs.reward is None:
        problems.append(f"step() reward is {obs.data.get('reward')!r}, not a number")
    if env.state["state"].get("step_count") != 1:
        problems.append(f"state.step_count is {env.state['state'].get('step_count')} after one step")
    if problems:
        raise CheckFailed(*problems)
    return {
        "reset_params": facts["reset_params"],
        # What the package's README documents: the spaces and the reward, as the running code defines them.
        "action_fields": facts["action_fields"], "observation_fields": facts["observation_fields"],
        "reward_components": env.rubric,
    }


@check("runtime.dummy_agent", depends_on=("runtime.api_contract",),
       remediation="a random schema-valid action must never crash step(); reject bad input with Outcome(error=...)")
def dummy_agent(ctx: Context):
    runs = dummy_runs(ctx)
    return {f"eci_{eci}_steps": len(ep.actions) for eci, ep in runs.items()}


@check("runtime.observation_schema", depends_on=("runtime.dummy_agent",),
       remediation="observations must be instances of the declared class and JSON-serialisable")
def observation_schema(ctx: Context):
    count = 0
    for eci, ep in dummy_runs(ctx).items():
        for i, obs in enumerate(ep.observations):
            count += 1
            if not obs.type_ok:
                raise CheckFailed(f"ECI {eci} step {i}: observation is {obs.type}, not the manifest's class")
            again = ctx.call("roundtrip", label="parsing an observation back", bucket=ctx.step_seconds,
                             obs=obs.data)["again"]
            if json.dumps(again, sort_keys=True) != json.dumps(obs.data, sort_keys=True):
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
        env = ctx.make_env()
        ep = ctx.run_episode(random_policy(ctx), episodes[0].seed, eci, env=env)
        steps = env.state["state"].get("step_count")
        after, _ = env.step(ep.actions[-1])
        now = env.state["state"].get("step_count")
        if not after.done or (after.reward or 0.0) != 0.0 or now != steps:
            raise CheckFailed(f"ECI {eci}: a step after done returned done={after.done}, reward={after.reward}, "
                              f"step_count {steps} -> {now}")
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
    env = ctx.make_env()
    ids = set()
    for eci in ctx.tiers:
        obs = env.reset(seed=3, eci=eci)
        episode_id = env.state["state"].get("episode_id")
        if not episode_id or episode_id in ids:
            raise CheckFailed(f"ECI {eci}: reset gave episode id {episode_id!r} (empty or reused)")
        ids.add(episode_id)
        policy = random_policy(ctx)
        policy.begin(env, obs, 3)
        for step in range(1, 4):
            if obs.done:
                break
            obs, _ = ctx.act_and_step(env, policy, obs)
            state = env.state["state"]
            if state.get("episode_id") != episode_id or state.get("step_count") != step:
                raise CheckFailed(f"ECI {eci} step {step}: state {state} (expected id {episode_id}, step_count "
                                  f"{step})")
    return {"episodes": len(ids)}


@check("runtime.episode_determinism", depends_on=("runtime.dummy_agent",),
       remediation="draw every random choice from the rng passed to generate() (seeded by reset(seed=...))")
def episode_determinism(ctx: Context):
    """The same seed and actions give the same episode, and the oracle (which reads the hidden state the
    observations may not show yet: a random guesser sees the same hints for many hidden targets) plays the same."""
    compared = 0
    for eci in ctx.tiers:
        pairs = [("random", [ctx.run_episode(random_policy(ctx), 4242, eci) for _ in range(2)])]
        try:
            played = ctx.episodes_for("oracle", eci, ctx.episodes, ctx.oracle)[0]  # the semantic checks' too
        except CheckFailed:
            played = None  # the oracle's own failures are the semantic checks' to report
        if played is not None:
            pairs.append(("oracle", [played, ctx.run_episode(ctx.oracle(), played.seed, eci)]))
        for name, (first, second) in pairs:
            compared += 1
            if comparable(first) != comparable(second):
                diverged = next((i for i, (a, b) in enumerate(zip(first.observations, second.observations,
                                                                  strict=False)) if row(a) != row(b)),
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
        traces = {comparable(ctx.run_episode(random_policy(ctx), s, eci, policy_seed=0)) for s in range(8)}
        measured[f"eci_{eci}_distinct_of_8"] = len(traces)
        if len(traces) < 4:
            raise CheckFailed(f"ECI {eci}: 8 seeds gave only {len(traces)} distinct episodes to the same agent",
                              measured=measured)
    return measured


@check("runtime.episode_isolation", depends_on=("runtime.dummy_agent",),
       remediation="reset() must clear all per-episode state; nothing may leak between episodes or instances")
def episode_isolation(ctx: Context):
    for eci in ctx.tiers:
        reused = ctx.make_env()
        ctx.run_episode(random_policy(ctx), 11, eci, env=reused)
        after = ctx.run_episode(random_policy(ctx), 12, eci, env=reused)
        fresh = ctx.run_episode(random_policy(ctx), 12, eci, env=ctx.make_env())
        if comparable(after) != comparable(fresh):
            raise CheckFailed(f"ECI {eci}: seed 12 played after seed 11 on the same instance differs from seed 12 "
                              "on a fresh instance")
        a, b = ctx.make_env(), ctx.make_env()
        first = a.reset(seed=5, eci=eci)
        b.reset(seed=6, eci=eci)
        if a.reset(seed=5, eci=eci).model_dump_json() != first.model_dump_json():
            raise CheckFailed(f"ECI {eci}: resetting a second instance changed the first")
    return {"tiers": ctx.tiers}


def interleaved(ctx: Context, seeds: tuple[int, ...], eci: int, make_policy) -> list[Episode]:
    """Episodes of `seeds` played side by side, one instance each, their resets and steps alternating (what two
    sessions of one server do)."""
    envs = [ctx.make_env() for _ in seeds]
    episodes = [Episode(seed, eci) for seed in seeds]
    policies = [make_policy() for _ in seeds]
    obs = [env.reset(seed=seed, eci=eci) for env, seed in zip(envs, seeds, strict=True)]
    for i, env in enumerate(envs):
        episodes[i].observations.append(obs[i])
        policies[i].begin(env, obs[i], seeds[i])
    limit = ctx.section.step_budget[eci] + GUARD_STEPS
    while any(not o.done and len(ep.actions) < limit for o, ep in zip(obs, episodes, strict=True)):
        for i, env in enumerate(envs):
            if obs[i].done or len(episodes[i].actions) >= limit:
                continue
            obs[i], action = ctx.act_and_step(env, policies[i], obs[i])
            episodes[i].actions.append(action)
            episodes[i].observations.append(obs[i])
            episodes[i].rewards.append(obs[i].reward if obs[i].reward is not None else math.nan)
    return episodes


@check("runtime.concurrent_sessions", depends_on=("runtime.episode_isolation",),
       remediation="keep all episode state on the instance (self), never on the class or in module globals: a "
                   "server runs several sessions side by side, one instance each")
def concurrent_sessions(ctx: Context):
    """Two sessions interleaved on two instances must each play exactly as they do alone."""
    for eci in ctx.tiers:
        for seeds, name in CONCURRENT_PAIRS:
            alone = played_alone(ctx, name, seeds, eci)
            make = ctx.oracle if name == "oracle" else (lambda: random_policy(ctx))
            together = interleaved(ctx, seeds, eci, make)
            for seed, other, a, b in zip(seeds, seeds[::-1], alone, together, strict=True):
                if comparable(a) != comparable(b):
                    step = next((i for i, (x, y) in enumerate(zip(a.observations, b.observations, strict=False))
                                 if row(x) != row(y)), min(len(a.observations), len(b.observations)))
                    raise CheckFailed(
                        f"ECI {eci}: seed {seed} played ({name} policy) alongside seed {other} on a second instance "
                        f"differs from seed {seed} played alone (first at observation {step}): one session's reset or "
                        "step changed another's episode, so state is shared between instances (class attributes, "
                        "module globals)")
    return {"tiers": ctx.tiers, "pairs": len(CONCURRENT_PAIRS)}


def played_alone(ctx: Context, name: str, seeds: tuple[int, ...], eci: int) -> list[Episode]:
    """The episodes of `seeds` played alone, each on a fresh instance: taken from what other checks play anyway
    (the bounded random episodes, the oracle's), played here only when those are not at hand."""
    limit = ctx.section.step_budget[eci] + GUARD_STEPS
    if name == "random":
        pool = ctx._cache.get(("bounded-random", eci, 5)) or []
        make = lambda: random_policy(ctx)  # noqa: E731
    else:
        pool = ctx._cache.get(("oracle", eci, ctx.episodes)) or []
        make = ctx.oracle
    by_seed = {ep.seed: ep for ep in pool}
    return [by_seed.get(seed) or ctx.run_episode(make(), seed, eci, max_steps=limit) for seed in seeds]


def fingerprint(ctx: Context) -> dict[str, list[list[str]]]:
    """A few episodes (oracle and random, two seeds, every tier) as digests and text, one row per observation:
    the same episodes played in an interpreter with another PYTHONHASHSEED must give the same rows."""
    out = {}
    for eci in ctx.tiers:
        for name in ("oracle", "random"):
            for seed, episode in zip(FINGERPRINT_SEEDS, played_alone(ctx, name, FINGERPRINT_SEEDS, eci), strict=True):
                rows = []
                for obs, reward in zip(episode.observations, [None, *episode.rewards], strict=True):
                    text = row(obs) + f" reward={reward!r}"
                    rows.append([hashlib.sha1(text.encode()).hexdigest()[:16], text[:1500]])
                out[f"ECI {eci} seed {seed} ({name})"] = rows
    return out


@check(HASH_CHECK, depends_on=("runtime.episode_determinism",),
       remediation="never let string hashing decide an episode: no hash() of strings in seeds, no iteration over "
                   "sets of strings; sort, or draw from the rng passed to generate()")
def hash_seed_determinism(ctx: Context):
    """The fingerprint episodes here and in the twin (a second player, in an interpreter with another
    PYTHONHASHSEED), compared row by row. A twin that dies, hangs or fails where the first player did not fails
    the check with what happened: the comparison is never skipped."""
    from openadapt.validator.checks.base import PackageError, PlayerGone, StepTimeout

    mine = fingerprint(ctx)
    seeds = (f"PYTHONHASHSEED={ctx.hash_seeds[0]} (the validator's) and PYTHONHASHSEED={ctx.hash_seeds[1]} (a second "
             "interpreter)")
    try:
        twin = ctx.twin()
        theirs = fingerprint(twin)
    except (StepTimeout, PlayerGone, PackageError, CheckFailed) as exc:
        raise CheckFailed(f"under PYTHONHASHSEED={ctx.hash_seeds[1]} (a second interpreter) the package failed "
                          f"where it ran under the validator's: {str(exc)[:300]}") from exc
    problems = []
    for key, rows in mine.items():
        other = theirs.get(key, [])
        for step, (a, b) in enumerate(zip(rows, other, strict=False)):
            if a[0] != b[0]:
                problems.append(f"{key}: {seeds} gave different episodes, first at observation {step}: "
                                f"{difference(a[1], b[1])}")
                break
        else:
            if len(rows) != len(other):
                problems.append(f"{key}: {seeds} gave episodes of {len(rows) - 1} and {len(other) - 1} steps")
    if problems:
        raise CheckFailed(*problems[:6], measured={"episodes": len(mine), "differing": len(problems)})
    return {"episodes": len(mine), "hash_seeds": list(ctx.hash_seeds)}


def difference(a: str, b: str) -> str:
    start = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, start - 60)
    return f"...{a[lo:start + 60]!r}... versus ...{b[lo:start + 60]!r}..."


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
            if isinstance(signal, bool) or not isinstance(signal, int | float) or not 0.0 <= signal <= 1.0:
                problems.append(f"ECI {eci}: solve_rate_signal is {signal!r}")
            parts = meta.get("reward_components")
            if not isinstance(parts, dict) or not parts or not all(
                    isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                    for v in parts.values()):
                problems.append(f"ECI {eci}: reward_components is {parts!r}")
            if problems:
                raise CheckFailed(*problems[:5])
    return {"fields": ["solved", "eci", "solve_rate_signal", "reward_components"]}


after_check("runtime.sandbox_violations",
            remediation="an environment needs nothing outside its sandbox: no network, no processes, no native code "
                        "(ctypes), no files outside the package and its scratch directory. The sandbox refused these "
                        "attempts; under --trust they would run for real")
