"""The embedded designer on a fixed prompt set: family chosen, attempts, verdict, seconds, tokens/s and a
mechanical fidelity score per prompt.

    python benchmarks/designer_local.py                       # the 1.5B default model, every prompt
    python benchmarks/designer_local.py --model qwen2.5-coder-0.5b --only irrigation_pumps,ci_failures
    python benchmarks/designer_local.py --minutes-per-prompt 10   # every prompt, bounded: at most ~2.5 h

The prompts, their expected family and their world terms are in benchmarks/designer_prompts.yaml, committed
before any output was seen. The fidelity rubric (docs/designer.md), each point 0 or 1:

- family: the designer chose the expected family;
- terms: at least 2 of the prompt's world terms occur in the package's domain.yaml (for a failed run, its last
  attempt's domain or unparsed draft);
- own world: no entity name (a key of a list, e.g. a component's name) and no text of 40+ characters of any
  example domain shipped with openadapt (every family's examples and the seeds) occurs in it. A name made only of
  the prompt's own words or world terms (`orders`, `purchase_order` for a prompt about orders and purchase
  orders) is the prompt's world, not a copy, and is listed apart (`own_names`); it counts against the strict
  score (`own_world_strict`, the rubric as first committed) only.

A package is *faithful* when it validated and scored 3/3. Packages go to runs/designer_local/<model>/.

    python benchmarks/designer_local.py --score-only runs/designer_local/default   # score a finished run again
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def foreign_material() -> tuple[set[str], set[str]]:
    """Entity names and long texts of every example domain openadapt ships."""
    from openadapt.families import all_families
    from openadapt.families.domain import iter_texts

    names, texts = set(), set()
    for family in all_families():
        keys = family.domain.KEYS
        for example in family.examples():
            domain = family.load_example(example)
            for list_name, key in keys.items():
                names.update(str(getattr(item, key)).lower() for item in getattr(domain, list_name))
            texts.update(t for _, t in iter_texts(domain) if len(t) >= 40)
    return names, texts


def _stems(text: str) -> set[str]:
    return {w.rstrip("s") for w in re.findall(r"[a-z0-9]+", text.lower())}


def fidelity(domain_text: str, expected: str, chosen: str | None, terms: list[str], foreign: tuple[set, set],
             task: str = "") -> dict:
    lowered = domain_text.lower()
    found = [t for t in terms if t.lower() in lowered]
    words = set(re.findall(r"[a-z0-9][a-z0-9_.-]*", lowered))
    shared = sorted(n for n in foreign[0] if n in words)
    prompt_words = _stems(" ".join([task, *terms]))
    own = [n for n in shared if _stems(n) <= prompt_words]  # made only of the prompt's own words: its world
    names = [n for n in shared if n not in own]
    texts = [t for t in foreign[1] if t in domain_text]
    return {"family": int(chosen == expected), "terms": int(len(found) >= 2), "own_world": int(not names and not texts),
            "own_world_strict": int(not shared and not texts), "terms_found": found, "foreign_names": names[:8],
            "own_names": own[:8], "foreign_texts": len(texts)}


def last_domain_text(folder: Path | None) -> str:
    """The domain a run ended with: the package's domain.yaml, or a failed run's last attempt's domain.yaml or
    draft.yaml (a draft that never parsed), without the draft's header of problems. Scoring only domain.yaml
    gave a run whose drafts never parsed an empty domain: no terms, and a vacuous 'own world'."""
    if folder is None:
        return ""

    def attempt(path: Path) -> int:
        match = re.fullmatch(r"attempt-(\d+)", path.parent.name)
        return int(match.group(1)) if match else 1 << 30  # a published package's own domain.yaml is the last word

    found = [*folder.rglob("domain.yaml"), *folder.rglob("draft.yaml")]
    if not found:
        return ""
    last = max(found, key=lambda path: (attempt(path), path.name == "domain.yaml"))
    return "\n".join(line for line in last.read_text().splitlines() if not line.startswith("#"))


def choice_only(args) -> None:
    """How often the designer's family choice is the expected family, and how long it takes."""
    from openadapt.designer.family_design import choose_family
    from openadapt.families import all_families
    from openadapt.llm.local import LocalLLM, LocalSettings

    listed = yaml.safe_load((ROOT / "benchmarks" / "designer_prompts.yaml").read_text())
    prompts, unfit = listed["prompts"], listed.get("no_family", [])
    settings = {"seed": args.seed, **({"model": args.model} if args.model else {}),
                **({"threads": args.threads} if args.threads else {})}
    backend, families, right, refused = LocalLLM(LocalSettings(**settings)), all_families(), 0, 0
    for prompt in [*prompts, *({"id": "(no family)", "task": task, "family": None} for task in unfit)]:
        started = time.monotonic()
        choice, _ = choose_family(backend, prompt["task"], families)
        right += prompt["family"] is not None and choice.family == prompt["family"]
        refused += prompt["family"] is None and choice.family is None
        ranked = sorted(choice.scores.items(), key=lambda kv: -kv[1])[:3]
        print(f"{prompt['id']:26} expected {str(prompt['family']):15} chose {str(choice.family):15} "
              f"{time.monotonic() - started:5.1f} s  fit {choice.fit:+.2f}  "
              + ", ".join(f"{n} {v:+.2f}" for n, v in ranked), flush=True)
    print(f"\nfamily chosen right for {right} of {len(prompts)} prompts ({choice.method}); {refused} of "
          f"{len(unfit)} tasks no family models refused")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="catalogue id or .gguf path (default: the default model)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="comma-separated prompt ids")
    parser.add_argument("--max-attempts", type=int, default=2)
    parser.add_argument("--minutes-per-prompt", type=float, default=None, help="no model request or attempt starts "
                        "after this long on one prompt (generate's --time-limit): bounds a whole run's time")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "designer_local")
    parser.add_argument("--off", default="", help="comma-separated designer switches to turn off "
                        "(openadapt/designer/switches.py), for an ablation; the run goes to OUT/off-NAME")
    parser.add_argument("--choice-only", action="store_true", help="measure only the family choice (seconds)")
    parser.add_argument("--score-only", type=Path, metavar="RUN", help="score a finished run (the folder that holds "
                        "its results.json) again, without the model")
    args = parser.parse_args()
    if args.choice_only:
        return choice_only(args)
    if args.score_only:
        return score_only(args.score_only)

    from openadapt.designer.generate import GenerateRequest, generate
    from openadapt.llm.local import LocalSettings
    from openadapt.validator import Validator

    prompts = yaml.safe_load((ROOT / "benchmarks" / "designer_prompts.yaml").read_text())["prompts"]
    if args.only:
        wanted = set(args.only.split(","))
        prompts = [p for p in prompts if p["id"] in wanted]
    settings = {"seed": args.seed, **({"model": args.model} if args.model else {}),
                **({"threads": args.threads} if args.threads else {})}
    local = LocalSettings(**settings)
    foreign = foreign_material()
    from openadapt.designer.switches import checked

    try:
        off = checked(frozenset(filter(None, args.off.split(","))))
    except ValueError as exc:
        parser.error(str(exc))
    out = args.out / (args.model or "default").replace("/", "_")
    out = out / f"off-{'+'.join(sorted(off))}" if off else out
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with Validator() as validator:
        for prompt in prompts:
            started = time.monotonic()
            result = generate(GenerateRequest(task=prompt["task"], name=prompt["id"], output_root=out, force=True,
                                              local=local, max_attempts=args.max_attempts, switched_off=off,
                                              time_limit_s=args.minutes_per_prompt and args.minutes_per_prompt * 60),
                              progress=lambda phase, attempt, detail: print(f"  {phase} {attempt}: {detail}",
                                                                            file=sys.stderr, flush=True),
                              validator=validator)
            seconds = time.monotonic() - started
            p = result.provenance
            choice = next((a.notes.get("choice") for a in p.attempts if a.notes.get("choice")), None) or {}
            folder = result.path or result.failed_dir
            text = last_domain_text(folder)
            score = fidelity(text, prompt["family"], choice.get("family"), prompt["terms"], foreign, prompt["task"])
            speeds = [c["tokens_per_s"] for a in p.attempts for c in a.notes.get("completions", [])
                      if c.get("tokens_per_s")]
            row = {"id": prompt["id"], "expected": prompt["family"], "family": choice.get("family"),
                   "attempts": len(p.attempts), "verdict": "pass" if result.ok else "fail",
                   "seconds": round(seconds, 1), "tokens": p.usage.completion_tokens,
                   "tokens_per_s": round(statistics.median(speeds), 1) if speeds else None,
                   "fidelity": score["family"] + score["terms"] + score["own_world"],
                   "faithful": result.ok and score["family"] + score["terms"] + score["own_world"] == 3,
                   "detail": score, "reason": result.reason, "folder": str(folder) if folder else None}
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    summary(rows)


def summary(rows: list[dict]) -> None:
    print(f"\n{'prompt':26} {'expected':15} {'chosen':15} att verdict  seconds tok/s fidelity strict")
    for r in rows:
        strict = r["detail"]["family"] + r["detail"]["terms"] + r["detail"].get("own_world_strict", r["detail"][
            "own_world"])
        print(f"{r['id']:26} {r['expected']:15} {str(r['family']):15} {r['attempts']:>3} {r['verdict']:7} "
              f"{r['seconds']:8.1f} {r['tokens_per_s'] or 0:5.1f} {r['fidelity']}/3      {strict}/3")
    validated = sum(r["verdict"] == "pass" for r in rows)
    faithful = sum(r["faithful"] for r in rows)
    median = statistics.median(r["seconds"] for r in rows) if rows else 0
    print(f"\nvalidated {validated}/{len(rows)}; faithful {faithful}/{len(rows)}; median {median:.0f} s per package")


def score_only(run: Path) -> None:
    """Score a finished run's results.json again from the domains it left (without running the model). A row
    without its folder (runs before the folder was recorded) takes the newest folder named after its prompt."""
    prompts = {p["id"]: p for p in yaml.safe_load((ROOT / "benchmarks" / "designer_prompts.yaml").read_text())[
        "prompts"]}
    rows, foreign = json.loads((run / "results.json").read_text()), foreign_material()
    for row in rows:
        prompt = prompts[row["id"]]
        folder = Path(row["folder"]) if row.get("folder") else max(
            [*run.glob(f".failed/{row['id']}-*"), *([run / row["id"]] if (run / row["id"]).is_dir() else [])],
            key=lambda path: path.stat().st_mtime, default=None)
        score = fidelity(last_domain_text(folder), prompt["family"], row["family"], prompt["terms"], foreign,
                         prompt["task"])
        total = score["family"] + score["terms"] + score["own_world"]
        row.update(detail=score, fidelity=total, faithful=row["verdict"] == "pass" and total == 3,
                   folder=str(folder) if folder else None)
        print(json.dumps(row), flush=True)
    summary(rows)


if __name__ == "__main__":
    main()
