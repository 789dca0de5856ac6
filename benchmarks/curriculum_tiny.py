"""A real curriculum run: the tiny model from ECI 1, the library's default solver settings (docs/training.md),
the default rule (windowed solve rate >= 0.90 escalates, 10% replay of earlier tiers), the offline designer
re-certifying each tier, for --minutes of run time. Prints every escalation and held-out evaluation as it happens
(minute, step, tier, held-out solve rate with its Wilson 95% interval), the machine load beside them, then the
timeline and a final held-out evaluation of every tier reached (the replayed tiers included).

    OMP_NUM_THREADS=1 python benchmarks/curriculum_tiny.py --minutes 180 --output runs/bench-curriculum
    OMP_NUM_THREADS=1 python benchmarks/curriculum_tiny.py --source seed:enterprise_workflow --minutes 180 \\
        --output runs/bench-curriculum-workflow

The settings that climbed furthest so far (docs/benchmarks.md, "Curriculum"): self-imitation of solved episodes from
ECI 2 on (off at ECI 1, where it copies lucky guesses), the first turn's log read explored (from ECI 4 the second
turn's runbook read, and the diagnosis's fix drawn from the fixes the observation names), each tier's shortest
honest turn budget, the KL anchor moved per tier and dropped from ECI 3; with a greedy check on 100 fresh seeds
confirming each escalation (its 0.7 floor from ECI 5, where four sampled turns keep the windowed rate low), from
ECI 1 this mastered ECI 5 in 132 minutes, every escalation at >= 0.90 held-out:

    OMP_NUM_THREADS=1 python benchmarks/curriculum_tiny.py --minutes 180 --replay-share 0.25 \\
        --settings benchmarks/settings/triage_climb.yaml --eval-episodes 100 --final-episodes 100 \\
        --check-episodes 100 --check-floor 0.7 --check-floor-from 5 --check-every 50

At ECI 3 the KL term held the model near the anchor that never reads, so the recipe drops it there (`beta` per
tier, `{1: 0.1, 3: 0.0}`); a trailing reference (`reference_sync_steps`) moves the anchor with the policy instead.

A killed run continues with `--resume` (same --output); the timeline then spans both parts.
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

from openadapt.curriculum.controller import Curriculum, CurriculumConfig  # noqa: E402
from openadapt.curriculum.report import describe_event  # noqa: E402
from openadapt.curriculum.rule import RuleConfig  # noqa: E402
from openadapt.runfiles import read_jsonl  # noqa: E402
from openadapt.training.config import read_settings_file  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=180.0)
    parser.add_argument("--source", default="seed:incident_triage")
    parser.add_argument("--output", type=Path, default=Path("runs/bench-curriculum"))
    parser.add_argument("--window", type=int, default=128)
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--final-episodes", type=int, default=200, help="held-out seeds per tier at the end")
    parser.add_argument("--replay-share", type=float, default=0.1, help="share of episodes on earlier tiers")
    parser.add_argument("--check-episodes", type=int, default=0, help="greedy check on fresh seeds before each "
                        "escalation (0: the windowed rate decides)")
    parser.add_argument("--check-floor", type=float, help="windowed rate that calls for a check")
    parser.add_argument("--check-floor-from", type=int, default=1, help="first tier the floor applies to (below: "
                        "the threshold calls for a check)")
    parser.add_argument("--check-every", type=int, default=50, help="steps between two checks")
    parser.add_argument("--settings", type=Path, help="solver settings from a YAML or JSON file (benchmarks/settings/)")
    parser.add_argument("--solver", type=json.loads, default={}, help="solver settings overrides, as JSON (win over "
                        "--settings)")
    parser.add_argument("--fresh", action="store_true", help="delete --output first")
    parser.add_argument("--resume", action="store_true", help="continue the run in --output")
    args = parser.parse_args()
    if args.fresh and args.output.exists():
        shutil.rmtree(args.output)

    config = CurriculumConfig(source=args.source, output=args.output, model="tiny",
                              rule=RuleConfig(window=args.window, min_episodes=args.window,
                                              replay_share=args.replay_share, check_episodes=args.check_episodes,
                                              check_floor=args.check_floor, check_floor_from=args.check_floor_from,
                                              check_every=args.check_every),
                              hours=args.minutes / 60, eval_episodes=args.eval_episodes, wandb="disabled",
                              **(read_settings_file(args.settings) if args.settings else {}) | args.solver)
    if args.resume:
        from openadapt.curriculum.config import resume_config

        config = resume_config(args.output, hours=args.minutes / 60)
    print(f"solver settings: {json.dumps(config.settings(), default=str, sort_keys=True)}", flush=True)
    watch = LoadWatch().__enter__()
    started = time.monotonic()
    run_minutes = {"value": 0.0}

    def listen(event: dict) -> None:
        kind = event["event"]
        if kind == "progress":
            run_minutes["value"] = event["train_seconds"] / 60
            if event["step"] % 25 == 0:
                rates = " ".join(f"ECI{t}={r:.2f}({event['counts'].get(t, event['counts'].get(str(t), 0))})"
                                 for t, r in sorted(event["windowed"].items()))
                print(f"[{run_minutes['value']:6.1f} min] step {event['step']:5d} tier {event['tier']} windowed "
                      f"{rates} load {watch.now():.2f}", flush=True)
            return
        prefix = f"[{run_minutes['value']:6.1f} min] step {event['step']:5d}"
        if kind == "escalated":
            print(f"{prefix} ESCALATED ECI {event['tier']} -> {event['target']}", flush=True)
        elif kind == "heldout_eval":
            ci = event["solve_rate_ci95"]
            print(f"{prefix} held-out ECI {event['eci']} ({event['when']}): solve rate {event['solve_rate']:.3f} "
                  f"[{ci[0]:.3f}, {ci[1]:.3f}] on {event['episodes']} seeds, reward {event['mean_return']:+.3f}, "
                  f"load {watch.now():.2f}", flush=True)
        elif kind == "check":
            print(f"{prefix} {describe_event(event)}", flush=True)
        elif kind in ("escalation_rejected", "collapse", "stopped", "validation", "resumed", "escalation_triggered"):
            detail = {k: v for k, v in event.items() if k not in ("at", "summary", "event", "step")}
            print(f"{prefix} {kind} {json.dumps(detail, sort_keys=True, default=str)}", flush=True)

    curriculum = Curriculum(config, resume=args.resume, listener=listen)
    summary = curriculum.run()
    wall = (time.monotonic() - started) / 60
    print("\n== result ==")
    print(f"status: {summary.status} ({summary.reason})")
    print(f"reached ECI {summary.tier} in {summary.global_step} steps, {summary.episodes} training episodes, "
          f"{summary.train_seconds / 60:.1f} min of run time ({wall:.1f} min wall clock incl. start-up)")

    events = read_jsonl(args.output / "events.jsonl")
    print("\ntimeline (run minute, step, event, held-out solve rate [95% CI] on the tier it names):")
    tiers = {r["step"]: r for r in read_jsonl(args.output / "tiers.jsonl")}
    for e in events:
        if e["event"] not in ("escalated", "heldout_eval", "check", "collapse", "stopped", "started", "resumed"):
            continue
        minute = tiers.get(e["step"], {}).get("train_seconds", 0.0) / 60
        if e["event"] == "heldout_eval":
            ci = e["solve_rate_ci95"]
            text = f"held-out ECI {e['eci']} ({e['when']}): {e['solve_rate']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
        elif e["event"] == "check":
            text = describe_event(e)
        elif e["event"] == "escalated":
            text = f"escalated ECI {e['tier']} -> {e['target']}"
        elif e["event"] == "collapse":
            text = f"collapse reported: ECI {e['tier']} replays at {e['replay_solve_rate']:.2f}"
        else:
            text = e["event"] + (f" ({e.get('status')}: {e.get('reason')})" if e["event"] == "stopped" else "")
        print(f"  {minute:6.1f} min  step {e['step']:5d}  {text}")

    if args.final_episodes and summary.global_step:
        print(f"\nfinal held-out evaluation of every tier reached ({args.final_episodes} seeds each, greedy):")
        final = final_evaluation(args.output, summary.tier, args.final_episodes, config.source)
        for tier, rate, ci, reward in final:
            print(f"  ECI {tier}: {rate:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]  reward {reward:+.3f}")
    watch.__exit__()
    print(watch.summary())


def final_evaluation(run_dir: Path, top: int, episodes: int, source: str) -> list[tuple]:
    """The final model on every tier up to `top`, on the package version of the last tier (the seeds' own
    versions are the seed itself)."""
    from openadapt.curriculum.state import CurriculumState
    from openadapt.training.modelpolicy import evaluate_run

    state = CurriculumState.load(run_dir / "state.json")
    ref = state.current_version.ref
    report = evaluate_run(str(run_dir / "train"), ref, list(range(1, top + 1)), episodes)
    return [(t.eci, t.solve_rate, t.solve_rate_ci95, t.mean_return) for t in report.tiers]


if __name__ == "__main__":
    main()
