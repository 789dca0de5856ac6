"""Speed of the embedded designer models: load time, prompt and generation tokens/s, free and schema-constrained
(the grammar checked against the likeliest tokens first, and against the whole vocabulary).

For each installed catalogue model (or --models) and each --threads value: load the model (a fresh load per
thread count), then --repeats times each of a free reply and a JSON-schema-constrained reply (both ways) to one fixed
short prompt, with the KV cache cleared before each call so the whole prompt is evaluated every time. Prints medians.
Figures depend on load: on 2 cores shared with a training run 1 thread was much faster than 2; idle, 2 were
faster than 1.

    python benchmarks/local_llm.py [--threads 1 2] [--models qwen2.5-coder-0.5b] [--repeats 3] [--max-tokens 128]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

from pydantic import BaseModel, Field

from openadapt.llm.local import CATALOGUE, LocalLLM, LocalSettings, list_models
from openadapt.llm.local.sampling import CHECK_FIRST

PROMPT = [
    {"role": "system", "content": "You design training environments. Answer briefly."},
    {"role": "user", "content": "Describe one way a farm irrigation pump fails: a short snake_case name, two "
                                "symptoms an operator would see in its logs, and the fix."},
]


class FailureMode(BaseModel):
    name: str
    symptoms: list[str] = Field(min_length=2, max_length=2)
    fix: str


class Row(BaseModel):
    model: str
    threads: int
    load_s: float
    mode: str  # free | schema
    prompt_tokens: int
    prompt_tok_s: float
    completion_tokens: int
    gen_tok_s: float
    seconds: float
    finish: str
    same_as_full: bool | None = None  # schema modes: the same replies with and without the top-k check


def measure(model_id: str, threads: int, repeats: int, max_tokens: int) -> list[Row]:
    settings = LocalSettings(model=model_id, threads=threads, n_ctx=2048, max_tokens=max_tokens, temperature=0.2,
                             seed=0)
    failure_mode = FailureMode.model_json_schema()
    rows, texts = [], {}
    # schema: the grammar checked against the likeliest tokens first (the default); schema-full: against the whole
    # vocabulary at every step, as llama.cpp's own grammar sampler does. One loaded model serves all three.
    for mode, schema, check_first in (("free", None, CHECK_FIRST), ("schema", failure_mode, CHECK_FIRST),
                                      ("schema-full", failure_mode, 0)):
        backend = LocalLLM(settings.model_copy(update={"grammar_check_first": check_first}))
        runs = []
        for _ in range(repeats):
            backend.reset_cache()
            runs.append(backend.complete(PROMPT, schema=schema))
        texts[mode] = {r.text for r in runs}
        last = runs[-1]
        rows.append(Row(model=model_id, threads=threads, load_s=backend.load_s, mode=mode,
                        prompt_tokens=last.usage.prompt_tokens,
                        prompt_tok_s=statistics.median(r.prompt_tokens_per_s or 0.0 for r in runs),
                        completion_tokens=last.usage.completion_tokens,
                        gen_tok_s=statistics.median(r.tokens_per_s or 0.0 for r in runs),
                        seconds=statistics.median(r.duration_s for r in runs), finish=last.finish_reason or "-"))
    same = texts["schema"] == texts["schema-full"]
    return [row.model_copy(update={"same_as_full": same}) if row.mode != "free" else row for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--models", nargs="+", choices=list(CATALOGUE))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    installed = [s.id for s in list_models() if s.state == "installed"]
    models = [m for m in (args.models or installed) if m in installed]
    if not models:
        raise SystemExit("no local model installed: run `bash scripts/fetch_models.sh`")
    rows = [row for model in models for threads in args.threads
            for row in measure(model, threads, args.repeats, args.max_tokens)]
    if args.json:
        print(json.dumps([r.model_dump() for r in rows], indent=2))
        return
    print(f"cpus: {os.cpu_count()}  load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  "
          f"repeats: {args.repeats} (medians)")
    print(f"{'model':<20} {'thr':>3} {'load s':>6} {'mode':<11} {'prompt':>6} {'prompt t/s':>10} {'gen':>4} "
          f"{'gen t/s':>7} {'call s':>6} finish same")
    for r in rows:
        print(f"{r.model:<20} {r.threads:>3} {r.load_s:>6.2f} {r.mode:<11} {r.prompt_tokens:>6} "
              f"{r.prompt_tok_s:>10.1f} {r.completion_tokens:>4} {r.gen_tok_s:>7.1f} {r.seconds:>6.2f} {r.finish:<6} "
              f"{'' if r.same_as_full is None else 'yes' if r.same_as_full else 'NO'}")


if __name__ == "__main__":
    main()
