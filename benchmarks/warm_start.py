"""The warm start from demonstrations on every family: per family's first example, the held-out solve rate of the
heuristic (the demonstrator, through the text protocol), and of the `tiny` model after the warm start alone (no
GRPO step), on the same held-out seeds; optionally of a cold model (format warm-up only) beside it.

    python benchmarks/warm_start.py                               # every family, ECI 1, 50 held-out seeds
    python benchmarks/warm_start.py --only inventory,report --tier 2 --episodes 100 --cold

Each example is rendered as a package under --out and runs as generated packages do (in the sandbox). Rows go
to OUT/results.jsonl and a table is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("WANDB_MODE", "disabled")


def heuristic_rate(env, tier: int, seeds: range) -> float:
    from openadapt.training.demonstrations import play

    return round(sum(play(env, "heuristic", seed, tier).solved for seed in seeds) / len(seeds), 4)


def model_rate(package: Path, out: Path, tier: int, episodes: int, warm: bool, settings: dict) -> tuple[float, dict]:
    from openadapt.training.config import TrainConfig
    from openadapt.training.solver import Solver

    config = TrainConfig(package=str(package), output=out, steps=1, eci=[tier], eval_episodes=0,
                         validate_package=False, wandb="disabled", warm_start="heuristic" if warm else "off",
                         **settings)
    with Solver.create(config) as solver:
        report = solver.evaluate([tier], episodes)
        started = solver.loaded.warm_start
        return report.tier(tier).solve_rate, {"warm_start": started.model_dump() if started else None,
                                              "heuristic": heuristic_rate(solver.pool.envs[0], tier, range(
                                                  1_000_000, 1_000_000 + episodes))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated family names")
    parser.add_argument("--tier", type=int, default=1)
    parser.add_argument("--episodes", type=int, default=50, help="held-out seeds")
    parser.add_argument("--cold", action="store_true", help="also the model without the warm start")
    parser.add_argument("--settings", default="{}", help="JSON of solver settings (e.g. warm_start_steps)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "warm_start")
    args = parser.parse_args()

    from openadapt.envpkg.examples import write_example_package
    from openadapt.families import all_families

    wanted = set(filter(None, args.only.split(",")))
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for family in all_families():
        if wanted and family.name not in wanted:
            continue
        example = sorted(family.examples())[0]
        stamp = time.strftime("%Y%m%dT%H%M%S")
        package = write_example_package(family.name, example, args.out / "packages" / stamp, example)
        started = time.monotonic()
        warm, detail = model_rate(package, args.out / f"{family.name}-{stamp}-warm", args.tier, args.episodes,
                                  True, json.loads(args.settings))
        row = {"family": family.name, "example": example, "tier": args.tier, "episodes": args.episodes,
               "heuristic": detail["heuristic"], "after_warm_start": warm, "warm_start": detail["warm_start"],
               "seconds": round(time.monotonic() - started, 1)}
        if args.cold:
            row["cold"], _ = model_rate(package, args.out / f"{family.name}-{stamp}-cold", args.tier, args.episodes,
                                        False, json.loads(args.settings))
        rows.append(row)
        with (args.out / "results.jsonl").open("a") as results:
            results.write(json.dumps(row) + "\n")
        print(json.dumps({k: v for k, v in row.items() if k != "warm_start"}), flush=True)
    print(f"\n{'family':15} {'example':24} {'heuristic':>9} {'warm start':>10} {'cold':>6} {'seconds':>8}")
    for r in rows:
        print(f"{r['family']:15} {r['example']:24} {r['heuristic']:9.2f} {r['after_warm_start']:10.2f} "
              f"{r.get('cold', float('nan')):6.2f} {r['seconds']:8.0f}")


if __name__ == "__main__":
    sys.exit(main())
