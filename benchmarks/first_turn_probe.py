"""Where does a trained policy fail on a multi-step incident_triage tier: its first move, or what follows it?

Analysis only, on held-out seeds (from 1,000,000 up), nothing is trained:

1. **first turns**: the run's model samples its first action (temperature 1, as in training) `--samples` times per
   seed; each is counted by tool and by the component it names (the incident's root, the alerting component, or
   another one).
2. **after a read**: the first turn is scripted as a read of the root's logs (the root comes from the
   environment's privileged view: this is a probe, never a training target), then the model answers greedily;
   counted: solved, right component, right fault.

3. **the read's odds**: the mean probability that the first turn opens `{"tool": "inspect_logs"` (sampling
   counts of (1) cannot show a 1-in-1,000 chance that training moves), and, given that opening (what an
   exploration draw of the tool forces), which component the model then names when it samples the rest.

A policy that solves (2) but never samples the read in (1) fails on exploration, not on what it knows.

    python benchmarks/first_turn_probe.py RUN_DIR [--eci 3] [--seeds 100] [--samples 4]
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter

os.environ.setdefault("OMP_NUM_THREADS", "1")

from openadapt.envpkg.evaluation import EVAL_SEED_START  # noqa: E402
from openadapt.envpkg.loader import load  # noqa: E402
from openadapt.envpkg.textenv import LocalTextEnv, text_step  # noqa: E402
from openadapt.training.chat import first_messages, prompt_ids  # noqa: E402
from openadapt.training.modelpolicy import ModelPolicy  # noqa: E402
from openadapt.training.rollout import model_generator  # noqa: E402

PACKAGE = "seed:incident_triage"


def parse(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def first_turns(policy: ModelPolicy, eci: int, seeds: range, samples: int) -> Counter:
    pkg = load(PACKAGE)
    sample = model_generator(policy.model, policy.tokenizer, max_new_tokens=policy.max_new_tokens, greedy=False)
    contexts, incidents = [], []
    for seed in seeds:
        env = pkg.make_env()
        prompt = text_step(pkg.protocol, env.reset(seed=seed, eci=eci)).prompt
        contexts.append(prompt_ids(policy.tokenizer, first_messages(None, prompt, policy.tokenizer)))
        incidents.append(env.oracle_view())
    counts: Counter = Counter()
    for _ in range(samples):
        for inc, reply in zip(incidents, sample(contexts), strict=True):
            action = parse(policy.tokenizer.decode(reply, skip_special_tokens=True))
            if not action:
                counts["malformed", "-"] += 1
                continue
            named = action.get("component")
            counts[action.get("tool"), "root" if named == inc.root else "alert" if named == inc.path[0]
                   else "other"] += 1
    return counts


def after_a_read(policy: ModelPolicy, eci: int, seeds: range) -> Counter:
    pkg = load(PACKAGE)
    greedy = model_generator(policy.model, policy.tokenizer, max_new_tokens=policy.max_new_tokens, greedy=True)
    counts: Counter = Counter()
    for seed in seeds:
        env, view = LocalTextEnv(pkg), pkg.make_env()
        env.reset(seed=seed, eci=eci)
        view.reset(seed=seed, eci=eci)
        inc = view.oracle_view()
        step = env.step(json.dumps({"tool": "inspect_logs", "component": inc.root}))
        context = prompt_ids(policy.tokenizer, first_messages(None, step.prompt, policy.tokenizer))
        reply = policy.tokenizer.decode(greedy([context])[0], skip_special_tokens=True)
        final, action = env.step(reply), parse(reply)
        counts["solved"] += bool(final.metadata.get("solved"))
        counts["component right"] += action.get("component") == inc.root
        counts["fault right"] += action.get("fault") == inc.fault.id
    return counts


def read_odds(policy: ModelPolicy, eci: int, seeds: range, samples: int) -> tuple[float, Counter]:
    """Mean P(the first turn opens with the log read), and what a sampled rest names after that opening."""
    import torch

    pkg, tok = load(PACKAGE), policy.tokenizer
    opening = tok('{"tool": "inspect_logs"', add_special_tokens=False)["input_ids"]
    named = tok('{"tool": "inspect_logs", "component": "', add_special_tokens=False)["input_ids"]
    sample = model_generator(policy.model, tok, max_new_tokens=16, greedy=False)
    chances, contexts, incidents = [], [], []
    for seed in seeds:
        env = pkg.make_env()
        context = prompt_ids(tok, first_messages(None, text_step(pkg.protocol, env.reset(seed=seed, eci=eci)).prompt,
                                                 tok))
        ids = torch.tensor([context + opening])
        with torch.no_grad():
            logps = torch.log_softmax(policy.model(ids).logits[0, :-1].float(), dim=-1)
        chances.append(logps[torch.arange(ids.size(1) - 1), ids[0, 1:]][len(context) - 1:].sum().exp().item())
        contexts.append(context + named)
        incidents.append(env.oracle_view())
    counts: Counter = Counter()
    for _ in range(samples):
        for inc, reply in zip(incidents, sample(contexts), strict=True):
            name = tok.decode(reply, skip_special_tokens=True).split('"')[0]
            counts["root" if name == inc.root else "alert" if name == inc.path[0] else "other"] += 1
    return sum(chances) / len(chances), counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--eci", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--samples", type=int, default=4, help="sampled first turns per seed")
    args = parser.parse_args()
    policy = ModelPolicy.from_run(args.run_dir)
    seeds = range(EVAL_SEED_START, EVAL_SEED_START + args.seeds)
    firsts = first_turns(policy, args.eci, seeds, args.samples)
    total = sum(firsts.values())
    print(f"first turns at ECI {args.eci}, {total} sampled ({args.samples} per seed on {args.seeds} held-out seeds):")
    for (tool, named), n in firsts.most_common():
        print(f"  {tool!s:<20} {named:<6} {n:>5}  {n / total:.1%}")
    chance, named = read_odds(policy, args.eci, seeds, args.samples)
    total = sum(named.values())
    print(f"P(first turn opens with inspect_logs), mean over {args.seeds} seeds: {chance:.2e}; after that opening "
          f"the sampled component is the root {named['root'] / total:.1%}, the alerting one "
          f"{named['alert'] / total:.1%}, another {named['other'] / total:.1%}")
    read = after_a_read(policy, args.eci, seeds)
    print(f"after a scripted read of the root's logs, greedy, {args.seeds} seeds: " +
          ", ".join(f"{k} {read[k]}" for k in ("solved", "component right", "fault right")))


if __name__ == "__main__":
    main()
