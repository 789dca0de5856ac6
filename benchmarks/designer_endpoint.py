"""An endpoint designer (any OpenAI-compatible model) on the fixed capable-model prompt set: published, attempts,
requests, prompt and completion tokens, seconds and the mechanical fidelity score of benchmarks/designer_local.py.

    python benchmarks/designer_endpoint.py --base-url URL --model MODEL                  # every prompt, in turn
    python benchmarks/designer_endpoint.py --base-url URL --model relay --only restaurant_lease --max-retries 40

The prompts are benchmarks/whole_prompts.yaml (committed before any output was seen); `--prompts` takes another
file of the same form. The API key is read from OPENADAPT_API_KEY. With the relay stand-in
(`../shared/tools/relay/`), whoever answers takes minutes per reply: `--max-retries` lets the client wait through
the relay's 503s (each ~110 s), and its token counts are characters / 4. Label such figures as what they are.
Packages and `results.jsonl` go to runs/designer_endpoint/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from designer_local import fidelity, foreign_material, last_domain_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", type=Path, default=ROOT / "benchmarks" / "whole_prompts.yaml")
    parser.add_argument("--only", default="", help="comma-separated prompt ids")
    parser.add_argument("--design-mode", default="whole", choices=["whole", "pieces"])
    parser.add_argument("--max-attempts", type=int, default=4)
    parser.add_argument("--max-retries", type=int, default=4, help="the client's retries of a 5xx or time-out")
    parser.add_argument("--off", default="", help="comma-separated designer switches to turn off "
                        "(openadapt/designer/switches.py; benchmarks/designer_ablation.py)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "designer_endpoint")
    args = parser.parse_args()

    from openadapt.llm.endpoint import LLMConfig

    llm = LLMConfig(base_url=args.base_url, model=args.model, api_key=os.environ.get("OPENADAPT_API_KEY", ""),
                    max_retries=args.max_retries)
    rows = run_prompts(load_prompts(args.prompts, args.only), llm, args.out, design_mode=args.design_mode,
                       max_attempts=args.max_attempts, off=frozenset(filter(None, args.off.split(","))))
    summary(rows)


def load_prompts(path: Path, only: str = "") -> list[dict]:
    prompts = yaml.safe_load(path.read_text())["prompts"]
    wanted = set(filter(None, only.split(",")))
    return [p for p in prompts if not wanted or p["id"] in wanted]


def run_prompts(prompts: list[dict], llm, out: Path, design_mode: str = "whole", max_attempts: int = 4,
                off: frozenset[str] = frozenset()) -> list[dict]:
    """Generate a package per prompt, appending one row each to out/results.jsonl."""
    from openadapt.designer.generate import GenerateRequest, generate
    from openadapt.validator import Validator

    foreign = foreign_material()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with Validator() as validator:
        for prompt in prompts:
            started = time.monotonic()
            result = generate(GenerateRequest(task=prompt["task"], name=prompt["id"], output_root=out,
                                              force=True, llm=llm, design_mode=design_mode,
                                              max_attempts=max_attempts, switched_off=off),
                              progress=lambda phase, attempt, detail: print(f"  {phase} {attempt}: {detail}",
                                                                            file=sys.stderr, flush=True),
                              validator=validator)
            p = result.provenance
            choice = next((a.notes.get("choice") for a in p.attempts if a.notes.get("choice")), None) or {}
            folder = result.path or result.failed_dir
            score = fidelity(last_domain_text(folder), prompt["family"], choice.get("family"), prompt["terms"],
                             foreign, prompt["task"])
            row = {"id": prompt["id"], "expected": prompt["family"], "family": choice.get("family"),
                   "published": result.ok, "attempts": len(p.attempts),
                   "requests": max((a.notes.get("requests", 0) for a in p.attempts), default=0),
                   "problems_per_round": [a.notes.get("problems_per_round") for a in p.attempts],
                   "prompt_tokens": p.usage.prompt_tokens, "completion_tokens": p.usage.completion_tokens,
                   "seconds": round(time.monotonic() - started, 1),
                   "fidelity": score["family"] + score["terms"] + score["own_world"], "detail": score,
                   "off": sorted(off), "reason": result.reason, "folder": str(folder) if folder else None}
            rows.append(row)
            with (out / "results.jsonl").open("a") as results:
                results.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    return rows


def summary(rows: list[dict]) -> None:
    print(f"\n{'prompt':28} {'expected':14} {'chosen':14} published att req prompt_tok compl_tok seconds fidelity")
    for r in rows:
        print(f"{r['id']:28} {r['expected']:14} {str(r['family']):14} {str(r['published']):9} {r['attempts']:>3} "
              f"{r['requests']:>3} {r['prompt_tokens']:>10} {r['completion_tokens']:>9} {r['seconds']:7.0f} "
              f"{r['fidelity']}/3")
    if rows:
        print(f"\npublished {sum(r['published'] for r in rows)}/{len(rows)}; first attempt "
              f"{sum(r['published'] and r['attempts'] == 1 for r in rows)}; median requests "
              f"{statistics.median(r['requests'] for r in rows)}")


if __name__ == "__main__":
    main()
