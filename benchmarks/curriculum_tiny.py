"""A real curriculum run: the tiny model on seed:incident_triage from ECI 1, the default rule (windowed solve
rate >= 0.90 escalates), offline designer, for --minutes of run time. Prints each escalation as it happens and
the held-out solve rate at each tier, then how far the run got.

    OMP_NUM_THREADS=1 python benchmarks/curriculum_tiny.py --minutes 30 --output runs/bench-curriculum
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from openadapt.curriculum.controller import Curriculum, CurriculumConfig
from openadapt.curriculum.rule import RuleConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--source", default="seed:incident_triage")
    parser.add_argument("--output", type=Path, default=Path("runs/bench-curriculum"))
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--fresh", action="store_true", help="delete --output first")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.fresh and args.output.exists():
        shutil.rmtree(args.output)

    # The solver settings of benchmarks/train_tiny.py (the best of our CPU runs at ECI 1). Single-turn episodes:
    # enough at ECI 1, where the evidence is in view; later tiers would need the multi-turn setting.
    solver = {"max_turns": 1, "max_completion_length": 48, "beta": 0.1, "warmup_prompt_lm": True}
    config = CurriculumConfig(source=args.source, output=args.output, model="tiny",
                              rule=RuleConfig(window=args.window, min_episodes=args.window),
                              hours=args.minutes / 60, eval_episodes=args.eval_episodes, wandb="disabled",
                              lr=1e-3, num_generations=4, prompts_per_step=8, warmup_steps=400, save_steps=50,
                              solver=solver)
    started = time.monotonic()

    def listen(event: dict) -> None:
        minutes = (time.monotonic() - started) / 60
        kind = event["event"]
        if kind == "progress":
            if event["step"] % 10 == 0:
                rates = " ".join(f"ECI{t}={r:.2f}" for t, r in sorted(event["windowed"].items()))
                print(f"[{minutes:5.1f} min] step {event['step']:4d} tier {event['tier']} windowed {rates}",
                      flush=True)
        elif kind == "escalated":
            print(f"[{minutes:5.1f} min] ESCALATED ECI {event['tier']} -> {event['target']} at step {event['step']}",
                  flush=True)
        elif kind == "heldout_eval":
            print(f"[{minutes:5.1f} min] held-out ECI {event['eci']} ({event['when']}): solve rate "
                  f"{event['solve_rate']:.3f} {event['solve_rate_ci95']} on {event['episodes']} seeds, "
                  f"reward {event['mean_return']:.3f}", flush=True)
        elif kind in ("escalation_rejected", "collapse", "stopped", "validation"):
            detail = {k: v for k, v in event.items() if k not in ("at", "summary")}
            print(f"[{minutes:5.1f} min] {json.dumps(detail, sort_keys=True)}", flush=True)

    summary = Curriculum(config, listener=listen).run()
    print("\n== result ==")
    print(f"status: {summary.status} ({summary.reason})")
    print(f"reached ECI {summary.tier} in {summary.global_step} steps, {summary.episodes} training episodes, "
          f"{summary.train_seconds / 60:.1f} min")
    for e in summary.escalations:
        print(f"escalation ECI {e['tier']} -> {e['target']} at step {e['step']} ({e['at']})")
    for e in summary.evaluations:
        print(f"held-out ECI {e.eci} at step {e.step} ({e.when}): solve rate {e.solve_rate:.3f} "
              f"[{e.solve_rate_ci95[0]:.2f}, {e.solve_rate_ci95[1]:.2f}] on {e.episodes} seeds; reward "
              f"{e.mean_return:.3f}")


if __name__ == "__main__":
    main()
