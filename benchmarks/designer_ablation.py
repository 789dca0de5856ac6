"""Does each of the designer's rules earn its place? The fixed prompt set once with every rule on, then once per
switch (openadapt/designer/switches.py) with that one rule off; the table says what each costs or saves.

    python benchmarks/designer_ablation.py --base-url URL --model MODEL                 # every switch, in turn
    python benchmarks/designer_ablation.py --base-url URL --model M --switches state_rules --only restaurant_lease
    python benchmarks/designer_ablation.py --summarize runs/designer_ablation            # the table of a finished run

Rows go to OUT/<switch off, or "none">/.../results.jsonl (benchmarks/designer_endpoint.py's rows), so runs made
apart (one relay stand-in per prompt, in parallel) are summarised together. A rule whose removal changes
nothing measured goes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from designer_endpoint import load_prompts, run_prompts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--prompts", type=Path, default=ROOT / "benchmarks" / "whole_prompts.yaml")
    parser.add_argument("--only", default="", help="comma-separated prompt ids")
    parser.add_argument("--switches", default="", help="comma-separated switches (default: every one)")
    parser.add_argument("--max-attempts", type=int, default=4)
    parser.add_argument("--max-retries", type=int, default=4)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "designer_ablation")
    parser.add_argument("--summarize", type=Path, metavar="RUN", help="print the table of a finished run")
    args = parser.parse_args()
    if args.summarize:
        return print(table(collect(args.summarize)))
    if not (args.base_url and args.model):
        parser.error("--base-url and --model are needed to run (or --summarize RUN)")

    from openadapt.designer.switches import SWITCHES, checked
    from openadapt.llm.endpoint import LLMConfig

    switches = sorted(checked(set(filter(None, args.switches.split(","))))) or list(SWITCHES)
    llm = LLMConfig(base_url=args.base_url, model=args.model, api_key=os.environ.get("OPENADAPT_API_KEY", ""),
                    max_retries=args.max_retries)
    prompts = load_prompts(args.prompts, args.only)
    for off in [BASELINE, *switches]:
        run_prompts(prompts, llm, args.out / off, max_attempts=args.max_attempts,
                    off=frozenset() if off == BASELINE else frozenset({off}))
    print(table(collect(args.out)))


def collect(run: Path) -> dict[str, list[dict]]:
    """The rows of a run, by the switch that was off (`none` for the baseline); the last row per prompt."""
    by_switch: dict[str, dict[str, dict]] = {}
    for path in sorted(run.glob("*/**/results.jsonl")) + sorted(run.glob("*/results.jsonl")):
        switch = path.relative_to(run).parts[0]
        for line in path.read_text().splitlines():
            row = json.loads(line)
            by_switch.setdefault(switch, {})[row["id"]] = row
    return {switch: list(rows.values()) for switch, rows in by_switch.items()}


def table(runs: dict[str, list[dict]]) -> str:
    def stats(rows: list[dict]) -> dict:
        return {"n": len(rows), "published": sum(r["published"] for r in rows),
                "first": sum(r["published"] and r["attempts"] == 1 for r in rows),
                "requests": statistics.median(r["requests"] for r in rows),
                "tokens": sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows),
                "seconds": statistics.median(r["seconds"] for r in rows)}

    base = stats(runs[BASELINE]) if BASELINE in runs else None
    lines = ["| off | prompts | published | first attempt | median requests | tokens in all | median seconds |",
             "|---|---|---|---|---|---|---|"]
    for switch in sorted(runs, key=lambda s: (s != BASELINE, s)):
        s = stats(runs[switch])

        def delta(key: str, s=s, switch=switch) -> str:
            return "" if base is None or switch == BASELINE else f" ({s[key] - base[key]:+,.0f})"
        lines.append(f"| {switch} | {s['n']} | {s['published']}{delta('published')} | {s['first']}{delta('first')} "
                     f"| {s['requests']:g}{delta('requests')} | {s['tokens']:,}{delta('tokens')} "
                     f"| {s['seconds']:.0f}{delta('seconds')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
