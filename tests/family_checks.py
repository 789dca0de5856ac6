"""What the family tests share: a package written from a domain's data, episodes of every reference policy with
their rewards in range, the metadata contract of final observations, rejected actions, and the declared rules a
domain breaks."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from openadapt.envpkg.evaluation import make_policy, run_episode
from openadapt.envpkg.loader import LoadedPackage, load, resolve
from openadapt.envpkg.render import family_package, write_files
from openadapt.families.domain import DomainError
from openadapt.families.yamlio import dump_domain

Hook = Callable[[Any, Any], None]  # (env, observation)


def package(family, root: Path, name: str, data: dict, task: str = "{title}.", readme: str = "# {name}\n",
            **render: Any) -> LoadedPackage:
    """`data` parsed as a domain of `family`, written as the package root/name (its task and README from the
    templates, filled with the domain's title and summary and the name) and loaded."""
    domain = family.parse_domain(data)
    section = family.section(task=task.format(title=domain.title))
    text = readme.format(name=name, summary=domain.summary)
    write_files(family_package(name, section, dump_domain(domain), text, **render), root / name)
    return load(resolve(str(root / name)))


def act(env, **fields: Any):
    """One step with the action made of `fields`."""
    return env.step(env.action_type(**fields))


def trajectory(pkg, policy: str, seed: int, eci: int) -> list[tuple[dict, dict]]:
    """Every (action, observation) of one episode of a reference policy on a fresh environment, as dicts."""
    env, steps = pkg.make_env(), []
    run_episode(env, make_policy(pkg, policy), seed, eci, on_step=lambda a, o: steps.append((a.model_dump(),
                                                                                              o.model_dump())))
    return steps


def play(pkg, seeds: Iterable[int], policies: Iterable[str] = ("random", "heuristic", "oracle"),
         rng: Callable[[int], random.Random] = random.Random, tier: Callable[[int], int] = lambda s: s % 5 + 1,
         on_reset: Hook | None = None, on_step: Hook | None = None) -> list[tuple[str, int, Any]]:
    """Each reference policy on `pkg` for each seed (at ECI `tier(seed)`, the policy drawing from `rng(seed)`),
    asserting that every reward is finite and inside the package's reward range; `on_reset`/`on_step` see the
    environment and each observation. Returns (policy, seed, final observation) per episode."""
    low, high = pkg.section.reward_range
    env = pkg.make_env()
    finals = []
    policies = list(policies)
    for seed in seeds:
        for policy in policies:
            agent = make_policy(pkg, policy)
            obs = env.reset(seed=seed, eci=tier(seed))
            if on_reset is not None:
                on_reset(env, obs)
            agent.begin(env, obs, rng(seed))
            while not obs.done:
                obs = env.step(agent.act(obs))
                assert math.isfinite(obs.reward) and low <= obs.reward <= high, (policy, seed, obs.reward)
                if on_step is not None:
                    on_step(env, obs)
            finals.append((policy, seed, obs))
    return finals


def metadata_contract(pkg, components: set[str], seeds: Iterable[int], **options: Any) -> list[tuple[str, int, Any]]:
    """`play` (same options), checking that every observation carries its episode's tier and every final one the
    contract's metadata (solved, solve-rate signal, the family's reward components, termination, steps within
    the tier's budget). Returns the final observations."""
    def fresh(env, obs):
        assert obs.metadata["eci"] == env.state.eci and obs.metadata["step"] == 0

    def same_tier(env, obs):
        assert obs.metadata["eci"] == obs.eci == env.state.eci

    finals = play(pkg, seeds, ("oracle", "heuristic", "random"), on_reset=fresh, on_step=same_tier, **options)
    tier = options.get("tier", lambda s: s % 5 + 1)
    for policy, seed, final in finals:
        meta = final.metadata
        assert final.eci == meta["eci"] == tier(seed), (policy, seed)
        assert isinstance(meta["solved"], bool) and 0.0 <= meta["solve_rate_signal"] <= 1.0
        assert set(meta["reward_components"]) == components, (policy, seed)
        assert meta["termination"] in {"agent", "budget_exhausted"}
        assert meta["step"] <= pkg.section.step_budget[meta["eci"]], (policy, seed)
    return finals


def rejected(pkg, payload: dict, code: str, **reset: Any):
    """`payload` as the first action of an episode (seed 1 at ECI 1 unless `reset` says otherwise) is rejected
    with the error `code`: it says why, costs the invalid-action reward and the episode goes on. Returns the
    environment."""
    env = pkg.make_env()
    env.reset(**{"seed": 1, "eci": 1, **reset})
    obs = env.step(pkg.action_cls.model_validate(payload))
    assert obs.error == code and obs.feedback and not obs.done, (payload, obs.error, obs.feedback)
    assert obs.reward == pkg.section.invalid_action_reward
    return env


def broken_rules(family, data: dict) -> dict[str, set[str]]:
    """The declared rules (`Domain.RULES`) that `data` breaks, by path. Each such problem must open with its rule's
    sentence: the words the designer was told before it wrote the fields."""
    try:
        family.parse_domain(data)
    except DomainError as err:
        problems = err.problems
    else:
        raise AssertionError("the domain broke no rule: it parsed")
    rules: dict[str, set[str]] = {}
    for p in problems:
        if p.rule is not None:
            assert p.message.startswith(family.domain.rule(p.rule).says), (p.rule, p.message)
            rules.setdefault(p.path, set()).add(p.rule)
    return rules
