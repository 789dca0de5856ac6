"""GRPO with the `tiny` model on seed:incident_triage at ECI 1, on this machine's CPUs.

Prints the held-out solve rate of the model GRPO starts from (after the format warm-up on random actions), the
seconds per step, the training curve, and the held-out solve rate of the trained model on >= 200 seeds from
1,000,000 up (never drawn in training), with its Wilson interval. Training stops at --steps or when the
training budget (--minutes, counted from the start of model building, evaluations excluded) runs out.

    OMP_NUM_THREADS=1 python benchmarks/train_tiny.py [--minutes 15] [--eval-episodes 200]

The environment is not touched, and the oracle is never a training target: the warm-up imitates random
schema-valid actions, and everything after it is GRPO on the environment's own reward.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from transformers import TrainerCallback  # noqa: E402

from openadapt.training.config import TrainConfig  # noqa: E402
from openadapt.training.solver import Solver  # noqa: E402


class Budget(TrainerCallback):
    """Stops training once the wall-clock training budget is spent."""

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.hit = False

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() >= self.deadline:
            self.hit = True
            control.should_training_stop = True
        return control


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=15.0, help="training budget (warm-up + GRPO)")
    parser.add_argument("--steps", type=int, default=2000, help="GRPO step cap")
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--skip-before", action="store_true", help="skip the untrained evaluation")
    parser.add_argument("--output", type=Path, default=Path("/tmp/openadapt-train-tiny"))
    parser.add_argument("--config", type=json.loads, default={}, help="TrainConfig overrides, as JSON")
    args = parser.parse_args()

    if args.output.exists():
        shutil.rmtree(args.output)
    # The learner settings that did best in our CPU runs (docs/training.md, "tiny on incident_triage").
    settings = dict(package="seed:incident_triage", model="tiny", eci=[1], steps=args.steps, eval_episodes=0,
                    output=args.output, wandb="disabled", save_steps=100, max_turns=1, max_completion_length=48,
                    lr=1e-3, beta=0.1, prompts_per_step=8, num_generations=4, warmup_steps=400,
                    warmup_prompt_lm=True)
    settings.update(args.config)
    config = TrainConfig(**settings)
    print(f"config: {json.dumps(config.model_dump(mode='json', exclude={'output'}), sort_keys=True)}", flush=True)

    started = time.monotonic()
    budget = Budget(started + args.minutes * 60)
    solver = Solver.create(config, callbacks=[budget])
    built = time.monotonic() - started
    warm = solver.loaded.warmup
    print(f"model built in {built:.1f} s (format warm-up: {warm.steps if warm else 0} steps, "
          f"{warm.seconds if warm else 0:.1f} s, loss {warm.first_loss if warm else '-'} -> "
          f"{warm.final_loss if warm else '-'})", flush=True)

    before_report = None
    with solver:
        if not args.skip_before:
            clock = time.monotonic()
            before_report = solver.evaluate([1], args.eval_episodes)
            before = before_report.tier(1)
            budget.deadline += time.monotonic() - clock  # evaluation does not count against training
            print(f"untrained (after warm-up, before GRPO): held-out solve rate {before.solve_rate:.3f} "
                  f"(95% CI {before.solve_rate_ci95[0]:.3f}-{before.solve_rate_ci95[1]:.3f}), mean reward "
                  f"{before.mean_return:+.3f} on {before.episodes} seeds ({time.monotonic() - clock:.0f} s)",
                  flush=True)

        def show(row: dict) -> None:
            if row["step"] % 50 == 0:
                print(f"step {row['step']:4d}  {time.monotonic() - started:6.0f} s  reward {row['reward_mean']:+.3f} "
                      f"sampled solve {row['solve_rate']:.3f}  {row['seconds_per_step']:.2f} s/step", flush=True)

        solver.metrics.listeners.append(show)
        clock = time.monotonic()
        summary = solver.train()
        grpo_s = time.monotonic() - clock
        training_s = built + grpo_s
        clock = time.monotonic()
        after_report = solver.evaluate([1], args.eval_episodes)
        after = after_report.tier(1)
        eval_s = time.monotonic() - clock
        # keep both evaluations with the run, so `openadapt report` shows them
        recorded = summary.model_copy(update={"before": before_report, "after": after_report})
        solver.run.write_summary(recorded.model_dump(mode="json"))

    rows = solver.run.metrics()
    width = max(10, len(rows) // 25 // 10 * 10)
    print(f"\ncurve (step: sampled solve rate / reward, mean over {width} steps):")
    for i in range(0, len(rows), width):
        chunk = rows[i:i + width]
        print(f"  {chunk[-1]['step']:4d}: {sum(r['solve_rate'] for r in chunk) / len(chunk):.3f} / "
              f"{sum(r['reward_mean'] for r in chunk) / len(chunk):+.3f}")
    print(f"\nGRPO steps: {summary.global_step} ({'budget reached' if budget.hit else summary.stopped}); "
          f"median {summary.seconds_per_step_median:.2f} s/step")
    print(f"training time (model build + warm-up + GRPO): {training_s / 60:.1f} min")
    print(f"held-out solve rate after GRPO: {after.solve_rate:.3f} (95% CI {after.solve_rate_ci95[0]:.3f}-"
          f"{after.solve_rate_ci95[1]:.3f}), mean reward {after.mean_return:+.3f}, {after.episodes} seeds from "
          f"1,000,000, greedy ({eval_s:.0f} s)")
    print(f"target >= 0.90 within {args.minutes:g} min: {'MET' if after.solve_rate >= 0.9 else 'NOT MET'}")
    print(f"run directory: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
