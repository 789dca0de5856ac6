"""Can the tiny model represent ECI 3's moves at all? A supervised probe, analysis only.

At ECI 3 of incident_triage the alert fires on a component whose logs blame a dependency ("upstream X timed
out"), and the shortest honest episode reads X's logs first. GRPO runs never made the tiny model do that on its
own (docs/history/training.md, "What stops the climb"). This probe separates capacity from credit: it trains the same
network by plain next-token cross-entropy on (first observation -> `{"tool": "inspect_logs", "component": ROOT}`)
pairs, the root taken from the environment's privileged view (a probe, never a training target of the solver),
and prints how often greedy decoding then names the root on held-out seeds. A model that learns this in minutes
has the capacity, and what the RL runs lack is the signal; one that cannot needs a larger model. `--move second`
probes the move after: from the observation after that read of the root's logs to the diagnosis that solves
(the root, its fault and fix), counting whether greedy decoding names the root and its fault, or the alerting
component.

    python benchmarks/capacity_probe.py RUN_DIR/train [--minutes 8] [--reinit] [--eci 3] [--move second]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections import Counter
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from openadapt.envpkg.evaluation import EVAL_SEED_START  # noqa: E402
from openadapt.envpkg.loader import load  # noqa: E402
from openadapt.envpkg.textenv import LocalTextEnv  # noqa: E402
from openadapt.training.chat import first_messages, prompt_ids  # noqa: E402
from openadapt.training.modelpolicy import ModelPolicy  # noqa: E402
from openadapt.training.rollout import model_generator  # noqa: E402

PACKAGE = "seed:incident_triage"


def cases(tokenizer, eci: int, seeds: range, move: str) -> list[tuple[list[int], list[int], Any]]:
    """(prompt ids, target ids, incident) for each seed: the first observation -> read the root's logs, or
    (`move="second"`) the observation after that read -> the diagnosis that solves."""
    pkg = load(PACKAGE)
    out = []
    for seed in seeds:
        env, view = LocalTextEnv(pkg), pkg.make_env()
        prompt = env.reset(seed=seed, eci=eci).prompt
        view.reset(seed=seed, eci=eci)
        inc = view.oracle_view()
        target = {"tool": "inspect_logs", "component": inc.root}
        if move == "second":
            prompt = env.step(json.dumps(target)).prompt
            target = {"tool": "diagnose_incident", "component": inc.root, "fault": inc.fault.id, "fix": inc.fix,
                      "confidence": 0.9}
        out.append((prompt_ids(tokenizer, first_messages(None, prompt, tokenizer)),
                    tokenizer(json.dumps(target), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id],
                    inc))
    return out


def evaluate(model, tokenizer, held_out, max_new_tokens: int, move: str) -> dict[str, float]:
    model.eval()
    greedy = model_generator(model, tokenizer, max_new_tokens=max_new_tokens, greedy=True)
    counts: Counter = Counter()
    for (_, _, inc), reply in zip(held_out, greedy([c[0] for c in held_out]), strict=True):
        try:
            action = json.loads(tokenizer.decode(reply, skip_special_tokens=True))
        except ValueError:
            action = {}
        action = action if isinstance(action, dict) else {}
        named = action.get("component")
        if move == "first":
            read = action.get("tool") == "inspect_logs"
            counts["read the root" if read and named == inc.root else "read the alerting one"
                   if read and named == inc.path[0] else "other"] += 1
        else:
            right = action.get("tool") == "diagnose_incident" and named == inc.root
            counts["root and fault right" if right and action.get("fault") == inc.fault.id else "root right"
                   if right else "named the alerting one" if named == inc.path[0] else "other"] += 1
    model.train()
    return {k: v / len(held_out) for k, v in sorted(counts.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a training run directory (its model and tokenizer)")
    parser.add_argument("--eci", type=int, default=3)
    parser.add_argument("--move", choices=("first", "second"), default="first", help="first: read the root's "
                        "logs from the first observation; second: diagnose the root after that read")
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--train-seeds", type=int, default=3000)
    parser.add_argument("--held-out", type=int, default=100)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--reinit", action="store_true", help="the same network freshly initialised")
    parser.add_argument("--eval-every", type=float, default=1.0, help="minutes")
    args = parser.parse_args()

    policy = ModelPolicy.from_run(args.run_dir)
    model, tok = policy.model, policy.tokenizer
    if args.reinit:
        torch.manual_seed(0)
        model = type(model)(model.config)
    parameters = sum(p.numel() for p in model.parameters())
    train = cases(tok, args.eci, range(args.train_seeds), args.move)
    held_out = cases(tok, args.eci, range(EVAL_SEED_START, EVAL_SEED_START + args.held_out), args.move)
    print(f"{args.run_dir} ({'re-initialised' if args.reinit else 'as trained'}, {parameters:,} parameters), "
          f"ECI {args.eci}: {len(train)} training observations, {len(held_out)} held-out", flush=True)
    score = evaluate(model, tok, held_out, policy.max_new_tokens, args.move)
    print(f"[  0.0 min] step     0 held-out {score}", flush=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    rng = random.Random(0)
    pad = tok.pad_token_id
    started, last_eval, step = time.monotonic(), time.monotonic(), 0
    model.train()
    while time.monotonic() - started < args.minutes * 60:
        batch = rng.sample(train, args.batch)
        rows = [c[0] + c[1] for c in batch]
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        labels = torch.tensor([[-100] * len(c[0]) + c[1] + [-100] * (width - len(c[0]) - len(c[1])) for c in batch])
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if time.monotonic() - last_eval >= args.eval_every * 60:
            last_eval = time.monotonic()
            minutes = (last_eval - started) / 60
            print(f"[{minutes:5.1f} min] step {step:5d} loss {loss.item():.3f} held-out "
                  f"{evaluate(model, tok, held_out, policy.max_new_tokens, args.move)}", flush=True)
    print(f"[{(time.monotonic() - started) / 60:5.1f} min] step {step:5d} loss {loss.item():.3f} held-out (final) "
          f"{evaluate(model, tok, held_out, policy.max_new_tokens, args.move)}", flush=True)


if __name__ == "__main__":
    main()
