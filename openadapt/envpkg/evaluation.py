"""Run reference policies on a package and report the honest numbers: binary solve rate (with a Wilson
interval) apart from the shaped reward, per tier, on held-out seeds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable

from pydantic import BaseModel, Field

from openadapt.envpkg.loader import LoadedPackage
from openadapt.envpkg.policies import unknown_policy
from openadapt.errors import UsageError
from openadapt.kit.policy import Policy, RandomPolicy, policy_rng

# Seeds at or above this are never used for training (openadapt.training draws below it).
EVAL_SEED_START = 1_000_000
# The curriculum's checks draw fresh validation seeds from here up: never training's, never the held-out set's, so
# the held-out rate reported at an escalation is not the rate that was selected for.
CHECK_SEED_START = 2_000_000


class EpisodeResult(BaseModel):
    seed: int
    eci: int
    solved: bool
    episode_return: float
    final_reward: float
    steps: int
    components: dict[str, float]


class TierResult(BaseModel):
    eci: int
    episodes: int
    solve_rate: float
    solve_rate_ci95: tuple[float, float]
    mean_return: float
    return_ci95: tuple[float, float]
    mean_steps: float
    mean_components: dict[str, float]


class EvalReport(BaseModel):
    package: str
    policy: str
    seed_start: int
    episodes_per_tier: int
    tiers: list[TierResult] = Field(default_factory=list)

    def tier(self, eci: int) -> TierResult:
        return next(t for t in self.tiers if t.eci == eci)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4))


def make_policy(pkg: LoadedPackage, name: str) -> Policy:
    if name == "oracle":
        return pkg.oracle_cls()
    if name == "heuristic":
        if pkg.heuristic_cls is None:
            raise UsageError(f"{pkg.ref.label} ships no heuristic policy")
        return pkg.heuristic_cls()
    if name == "random":
        return RandomPolicy(pkg.action_cls)
    raise unknown_policy(name)


def run_episode(env, policy: Policy, seed: int, eci: int,
                on_step: Callable[[object, object], None] | None = None) -> EpisodeResult:
    """One episode of `policy` on an in-process env; `on_step(action, observation)` sees every step."""
    obs = env.reset(seed=seed, eci=eci)
    policy.begin(env, obs, policy_rng(seed))
    total = 0.0
    while not obs.done:
        action = policy.act(obs)
        obs = env.step(action)
        total += obs.reward or 0.0
        if on_step is not None:
            on_step(action, obs)
    meta = obs.metadata
    return EpisodeResult(seed=seed, eci=eci, solved=bool(meta["solved"]), episode_return=round(total, 6),
                         final_reward=obs.reward or 0.0, steps=meta["step"], components=meta["reward_components"])


def openenv_lines(task: str, env: str, model: str, steps: list[tuple[str, float, bool, str | None]],
                  success: bool) -> list[str]:
    """One episode in the `[START]`/`[STEP]`/`[END]` line format that OpenEnv hackathon graders read. `steps`
    are (action text, reward, done, error) per step; actions are put on one line."""
    lines = [f"[START] task={task} env={env} model={model}"]
    for n, (action, reward, done, error) in enumerate(steps, start=1):
        lines.append(f"[STEP] step={n} action={' '.join(action.split()) or chr(34) * 2} reward={reward:.2f} "
                     f"done={str(done).lower()} error={' '.join(str(error).split()) if error else 'null'}")
    rewards = ",".join(f"{r:.2f}" for _, r, _, _ in steps)
    lines.append(f"[END] success={str(success).lower()} steps={len(steps)} rewards={rewards}")
    return lines


def summarise(eci: int, results: list[EpisodeResult]) -> TierResult:
    n = len(results)
    returns = [r.episode_return for r in results]
    mean = statistics.fmean(returns)
    half = 1.96 * statistics.stdev(returns) / math.sqrt(n) if n > 1 else 0.0
    names = results[0].components.keys()
    return TierResult(
        eci=eci, episodes=n,
        solve_rate=round(sum(r.solved for r in results) / n, 4),
        solve_rate_ci95=wilson_interval(sum(r.solved for r in results), n),
        mean_return=round(mean, 4), return_ci95=(round(mean - half, 4), round(mean + half, 4)),
        mean_steps=round(statistics.fmean(r.steps for r in results), 3),
        mean_components={k: round(statistics.fmean(r.components[k] for r in results), 4) for k in names},
    )


def evaluate(pkg: LoadedPackage, policy: str, tiers: Iterable[int], episodes: int,
             seed_start: int = EVAL_SEED_START,
             progress: Callable[[int], None] | None = None,
             log: Callable[[str], None] | None = None) -> EvalReport:
    """Evaluate a reference policy for `episodes` held-out seeds per tier (the same seeds at every tier).
    `log` receives every episode as `openenv_lines`."""
    tiers = list(tiers)
    bad = [t for t in tiers if t not in pkg.section.eci_tiers]
    if bad:
        raise UsageError(f"tier {bad[0]} is not supported by {pkg.ref.label} (tiers {pkg.section.eci_tiers})")
    if episodes < 1:
        raise UsageError("--episodes must be at least 1")
    env = pkg.make_env()
    agent = make_policy(pkg, policy)
    report = EvalReport(package=pkg.ref.label, policy=policy, seed_start=seed_start, episodes_per_tier=episodes)
    for eci in tiers:
        results = []
        for seed in range(seed_start, seed_start + episodes):
            steps: list[tuple[str, float, bool, str | None]] = []

            def record(action, obs, steps=steps) -> None:
                text = action.model_dump_json(exclude={"metadata"}, exclude_defaults=True)
                steps.append((text, obs.reward or 0.0, bool(obs.done), getattr(obs, "error", None)))

            result = run_episode(env, agent, seed, eci, on_step=record if log is not None else None)
            results.append(result)
            if log is not None:
                for line in openenv_lines(f"{pkg.ref.name}-eci{eci}-seed{seed}", pkg.ref.name, policy, steps,
                                          result.solved):
                    log(line)
            if progress is not None:
                progress(1)
        report.tiers.append(summarise(eci, results))
    return report
