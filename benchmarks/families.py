"""Per family (its first example domain): the in-process step time, the warm sandbox validation time, and the
oracle / heuristic / random solve rate per tier on held-out seeds, and the oracle's steps per episode.

    python benchmarks/families.py                 # every family, 200 episodes per tier and policy
    python benchmarks/families.py --episodes 50 --only diagnosis,querying

Targets (issue "Environment families"): step < 50 us median in-process; warm validation < 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from openadapt.envpkg.evaluation import EVAL_SEED_START, evaluate
from openadapt.envpkg.examples import write_example_package
from openadapt.envpkg.loader import load, resolve
from openadapt.families import all_families
from openadapt.kit import RandomPolicy
from openadapt.kit.policy import policy_rng


def step_us(pkg, seconds: float = 2.0) -> float:
    """Median microseconds of env.step under the random policy, over many episodes at every tier."""
    env, samples = pkg.make_env(), []
    policy = RandomPolicy(pkg.action_cls)
    deadline, seed = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        obs = env.reset(seed=seed, eci=seed % 5 + 1)
        policy.begin(env, obs, policy_rng(seed))
        while not obs.done:
            action = policy.act(obs)
            started = time.perf_counter()
            obs = env.step(action)
            samples.append(time.perf_counter() - started)
        seed += 1
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--only", default="")
    parser.add_argument("--validations", type=int, default=5, help="warm validations to time per family")
    args = parser.parse_args()
    from openadapt.validator import Validator

    families = [f for f in all_families() if not args.only or f.name in args.only.split(",")]
    with tempfile.TemporaryDirectory() as tmp, Validator() as validator:
        validator.warm_up()
        for family in families:
            example = next(iter(family.examples()))
            root = write_example_package(family.name, example, Path(tmp), f"bench_{family.name}")
            pkg = load(resolve(str(root)))
            micro = step_us(pkg)
            times = []
            for _ in range(args.validations):
                report = validator.validate(root)
                times.append(report.timings.get("total_s", 0.0))
            print(f"\n## {family.ref} ({example}): step {micro:.1f} us median in-process; validation warm "
                  f"{statistics.median(times):.2f} s median of {len(times)} ({report.verdict.value})")
            print(f"held-out seeds {EVAL_SEED_START}-{EVAL_SEED_START + args.episodes - 1}; solve rate / mean return")
            print("| policy | " + " | ".join(f"ECI {t}" for t in range(1, 6)) + " |")
            print("|---|" + "---|" * 5)
            steps = ""
            for policy in ("oracle", "heuristic", "random"):
                tiers = evaluate(pkg, policy, range(1, 6), args.episodes).tiers
                print(f"| {policy} | " + " | ".join(f"{t.solve_rate:.3f} / {t.mean_return:.3f}" for t in tiers) + " |")
                if policy == "oracle":
                    steps = " / ".join(f"{t.mean_steps:.1f}" for t in tiers)
            # the shortest honest episode's length: what a solver must get right in a row before any reward
            print(f"oracle steps per episode, ECI 1-5: {steps}")


if __name__ == "__main__":
    main()
