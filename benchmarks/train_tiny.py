"""GRPO with the `tiny` model on seed:incident_triage at ECI 1, on this machine's CPUs, with the library's
default solver settings (docs/training.md: multi-turn episodes, each turn generated from the latest
observation, the environment's own step budget as the turn limit (10 at ECI 1; `--config '{"max_turns": 2}'`
sets one), 8 episode groups x 4 generations per step, lr 1e-3, KL 0.1).

Prints the held-out solve rate of the model GRPO starts from (after the format warm-up on random actions), the
training curve, held-out evaluations every --eval-every minutes of training, and the held-out solve rate of the
trained model on --eval-episodes seeds from 1,000,000 up (never drawn in training) with its Wilson interval, plus
the machine load sampled during the run. Training stops at --steps or when the budget (--minutes, counted from
the start of model building, warm-up included, evaluations excluded) runs out.

    OMP_NUM_THREADS=1 python benchmarks/train_tiny.py [--minutes 15] [--eval-episodes 200] [--eval-every 5]

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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadwatch import LoadWatch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from openadapt.training.config import TrainConfig  # noqa: E402
from openadapt.training.progress import StepProgress, WarmupProgress  # noqa: E402
from openadapt.training.solver import Solver  # noqa: E402


class Budget(TrainerCallback):
    """Stops training once the wall-clock training budget is spent; asks for a held-out evaluation every
    `eval_every` minutes of training (the evaluation's own time is added back to the budget)."""

    def __init__(self, started: float, minutes: float, eval_every: float | None):
        self.started = started
        self.deadline = started + minutes * 60
        self.eval_every = eval_every
        self.next_eval = started + eval_every * 60 if eval_every else float("inf")
        self.excluded = 0.0
        self.hit = False
        self.due = False

    def training_minutes(self) -> float:
        return (time.monotonic() - self.started - self.excluded) / 60

    def on_step_end(self, args, state, control, **kwargs):
        now = time.monotonic()
        if now >= self.deadline:
            self.hit = True
            control.should_training_stop = True
        elif now >= self.next_eval:
            self.due = True
        return control


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=15.0, help="training budget (model build + warm-up + GRPO)")
    parser.add_argument("--steps", type=int, default=100_000, help="GRPO step cap")
    parser.add_argument("--eci", type=int, default=1)
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--eval-every", type=float, default=5.0, help="minutes of training between held-out "
                        "evaluations (0: only before and after)")
    parser.add_argument("--skip-before", action="store_true", help="skip the untrained evaluation")
    parser.add_argument("--output", type=Path, default=Path("/tmp/openadapt-train-tiny"))
    parser.add_argument("--config", type=json.loads, default={}, help="TrainConfig overrides, as JSON")
    args = parser.parse_args()

    if args.output.exists():
        shutil.rmtree(args.output)
    settings = dict(package="seed:incident_triage", model="tiny", eci=[args.eci], steps=args.steps,
                    eval_episodes=0, output=args.output, wandb="disabled")
    settings.update(args.config)
    config = TrainConfig(**settings)
    print(f"config: {json.dumps(config.model_dump(mode='json', exclude={'output'}), sort_keys=True)}", flush=True)
    watch = LoadWatch().__enter__()
    print(f"load average at start: {watch.now():.2f} ({os.cpu_count()} CPUs)", flush=True)

    started = time.monotonic()
    budget = Budget(started, args.minutes, args.eval_every or None)
    solver = Solver.create(config, callbacks=[budget],
                           warmup_progress=WarmupProgress(config.warmup_steps or 1, write=print, every=100))
    built = time.monotonic() - started
    warm = solver.loaded.warmup
    print(f"model built in {built:.1f} s (format warm-up: {warm.steps if warm else 0} steps, "
          f"{warm.seconds if warm else 0:.1f} s, loss {warm.first_loss if warm else '-'} -> "
          f"{warm.final_loss if warm else '-'})", flush=True)

    timeline: list[tuple[float, int, float, tuple[float, float], float]] = []

    reports: dict[str, object] = {}

    def held_out(label: str) -> object:
        clock = time.monotonic()
        full = solver.evaluate([args.eci], args.eval_episodes)
        reports.setdefault("before" if label.startswith("untrained") else "after", full)
        if label.startswith("after"):
            reports["after"] = full
        report = full.tier(args.eci)
        spent = time.monotonic() - clock
        budget.deadline += spent
        budget.excluded += spent
        minute = budget.training_minutes()
        step = solver.trainer.state.global_step
        timeline.append((minute, step, report.solve_rate, report.solve_rate_ci95, report.mean_return))
        print(f"[{minute:5.1f} min, step {step}] held-out ({label}): solve rate {report.solve_rate:.3f} (95% CI "
              f"{report.solve_rate_ci95[0]:.3f}-{report.solve_rate_ci95[1]:.3f}), mean reward "
              f"{report.mean_return:+.3f} on {report.episodes} seeds ({spent:.0f} s, load {watch.now():.2f})",
              flush=True)
        return report

    class Periodic(TrainerCallback):
        def on_step_end(self, args_, state, control, **kwargs):
            if budget.due:
                budget.due = False
                budget.next_eval = time.monotonic() + args.eval_every * 60
                held_out("during training")
            return control

    solver.trainer.add_callback(Periodic())
    with solver:
        if not args.skip_before:
            held_out("untrained: after the warm-up, before GRPO")
        progress = StepProgress(config.steps, write=print, every=50)
        solver.metrics.listeners.append(progress)
        clock = time.monotonic()
        summary = solver.train()
        grpo_s = time.monotonic() - clock
        after = held_out("after GRPO")
        training_min = budget.training_minutes()
        # keep both evaluations with the run, so `openadapt report` shows them
        recorded = summary.model_copy(update={"before": reports.get("before"), "after": reports.get("after")})
        solver.run.write_summary(recorded.model_dump(mode="json"))

    watch.__exit__()
    rows = solver.run.metrics()
    width = max(10, len(rows) // 25 // 10 * 10)
    print(f"\ncurve (step: sampled solve rate / reward / turns, mean over {width} steps):")
    for i in range(0, len(rows), width):
        chunk = rows[i:i + width]
        print(f"  {chunk[-1]['step']:5d}: {sum(r['solve_rate'] for r in chunk) / len(chunk):.3f} / "
              f"{sum(r['reward_mean'] for r in chunk) / len(chunk):+.3f} / "
              f"{sum(r['turns_mean'] for r in chunk) / len(chunk):.2f}")
    print("\nheld-out timeline (training minutes, step, solve rate [95% CI], mean reward):")
    for minute, step, rate, ci, reward in timeline:
        print(f"  {minute:5.1f} min  step {step:5d}  {rate:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]  {reward:+.3f}")
    print(f"\nGRPO steps: {summary.global_step} ({'budget reached' if budget.hit else summary.stopped}); "
          f"median {summary.seconds_per_step_median:.2f} s/step; GRPO {grpo_s / 60:.1f} min incl. evaluations")
    print(f"training time (model build + warm-up + GRPO, evaluations excluded): {training_min:.1f} min "
          f"(build {built / 60:.1f} min)")
    print(f"held-out solve rate after GRPO: {after.solve_rate:.3f} (95% CI {after.solve_rate_ci95[0]:.3f}-"
          f"{after.solve_rate_ci95[1]:.3f}), mean reward {after.mean_return:+.3f}, {after.episodes} seeds from "
          "1,000,000, greedy")
    print(f"target >= 0.90 within {args.minutes:g} min: {'MET' if after.solve_rate >= 0.9 else 'NOT MET'}")
    print(watch.summary())
    print(f"run directory: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
