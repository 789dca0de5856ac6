"""How fast the command line answers: `--help`, a usage error of every command, `list` and `show`.

Each case runs as a fresh process (what a user waits for), `--repeats` times; the median and the slowest are
printed beside the target (< 1 s) and the machine's load average, since a loaded machine slows everything.

    python benchmarks/cli_latency.py [--repeats 5] [--target 1.0] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES: list[tuple[str, list[str], int]] = [  # (label, arguments, expected exit code)
    ("--help", ["--help"], 0),
    ("generate: empty prompt", ["generate", ""], 2),
    ("generate: prompt not in English", ["generate", "Trainiere einen Agenten, der Pumpen auf einem Hof prüft"], 2),
    ("validate: no such package", ["validate", "no/such/pkg"], 2),
    ("eval: tier 7", ["eval", "seed:incident_triage", "--eci", "7"], 2),
    ("train: unknown seed", ["train", "seed:nosuch"], 2),
    ("train: tier 7", ["train", "seed:incident_triage", "--eci", "7"], 2),
    ("curriculum: bad learning rate", ["curriculum", "seed:incident_triage", "--lr", "-1"], 2),
    ("report: no such run", ["report", "/no/such/run"], 2),
    ("serve: unknown seed", ["serve", "seed:nosuch"], 2),
    ("play: tier 7", ["play", "seed:incident_triage", "--eci", "7"], 2),
    ("info: unknown seed", ["info", "seed:nosuch"], 2),
    ("list: no such root", ["list", "--root", "/no/such/root"], 2),
    ("show: no such package", ["show", "nosuch"], 2),
    ("render: unknown seed", ["render", "seed:nosuch"], 2),
    ("models: unknown model", ["models", "pull", "nosuch"], 2),
    ("doctor: bad flag", ["doctor", "--nosuch"], 2),
    ("list", ["list"], 0),
    ("show kubernetes_cluster", ["show", "kubernetes_cluster"], 0),
]


def command() -> list[str]:
    script = Path(sys.executable).parent / "openadapt"
    return [str(script)] if script.exists() else [sys.executable, "-m", "openadapt.cli"]


def time_case(args: list[str], expected: int, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run([*command(), *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "COLUMNS": "120"})
        times.append(time.perf_counter() - started)
        if done.returncode != expected:
            raise SystemExit(f"{args}: exit {done.returncode}, expected {expected}: {done.stderr[-300:]}")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--target", type=float, default=1.0, help="seconds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = []
    for label, argv, expected in CASES:
        times = time_case(argv, expected, args.repeats)
        rows.append({"case": label, "median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3),
                     "ok": statistics.median(times) < args.target})
    load_after = os.getloadavg()
    if args.json:
        print(json.dumps({"load_before": load_before, "load_after": load_after, "cpus": os.cpu_count(),
                          "repeats": args.repeats, "rows": rows}, indent=2))
    else:
        print(f"load average before {load_before[0]:.2f} / after {load_after[0]:.2f} on {os.cpu_count()} CPUs; "
              f"{args.repeats} runs per case; target < {args.target:g} s (median)")
        print(f"{'case':<36} {'median s':>9} {'max s':>7}  target")
        for r in rows:
            print(f"{r['case']:<36} {r['median_s']:>9.3f} {r['max_s']:>7.3f}  {'met' if r['ok'] else 'MISSED'}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
