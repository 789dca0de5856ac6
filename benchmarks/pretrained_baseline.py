"""Zero-shot held-out solve rate of a pretrained model (default: the Qwen2.5-Coder-0.5B-Instruct preset) per
tier on the seed packages: no training, greedy decoding, the package's system prompt and the whole conversation
(the model's own chat template), held-out seeds from 1,000,000 up, until the environment ends the episode (its
own step budget).

Two backends over the same weights:
- `llama` (default): llama-cpp-python on the GGUF file itself (quantized as distributed), which reuses the
  conversation's prefix from one turn to the next; the only way a CPU answers this table in hours.
- `transformers`: the dequantized model openadapt trains (`eval --policy model:qwen2.5-coder-0.5b` runs this
  one), for a cross-check on a few episodes.

    python benchmarks/pretrained_baseline.py --episodes 10 [--tiers 1-5] [--packages seed:incident_triage,...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadwatch import LoadWatch  # noqa: E402

from openadapt.envpkg.evaluation import EVAL_SEED_START, EpisodeResult, summarise  # noqa: E402
from openadapt.envpkg.loader import load  # noqa: E402
from openadapt.envpkg.textenv import LocalTextEnv  # noqa: E402
from openadapt.kit.eci import parse_tiers  # noqa: E402
from openadapt.training.pretrained import gguf_path  # noqa: E402


class LlamaChat:
    def __init__(self, model: str, threads: int, n_ctx: int, max_tokens: int):
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(gguf_path(model)), n_ctx=n_ctx, n_threads=threads, verbose=False,
                         seed=0)
        self.max_tokens = max_tokens

    def __call__(self, messages: list[dict[str, str]]) -> str:
        out = self.llm.create_chat_completion(messages=messages, temperature=0.0, max_tokens=self.max_tokens)
        return out["choices"][0]["message"]["content"] or ""

    def fits(self, messages: list[dict[str, str]]) -> bool:
        text = "".join(m["content"] for m in messages)
        return len(self.llm.tokenize(text.encode(), add_bos=False)) + self.max_tokens + 64 < self.llm.n_ctx()


class TransformersChat:
    def __init__(self, model: str, max_tokens: int):
        from openadapt.training.modelpolicy import ModelPolicy

        self.policy = ModelPolicy.from_run(model)
        self.max_tokens = max_tokens

    def __call__(self, messages: list[dict[str, str]]) -> str:
        import torch

        tok, model = self.policy.tokenizer, self.policy.model
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=self.max_tokens, do_sample=False)
        return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)

    def fits(self, messages: list[dict[str, str]]) -> bool:
        return True


def play(chat, env: LocalTextEnv, seed: int, eci: int, repeats: int) -> tuple[EpisodeResult, int, bool]:
    """One greedy episode. It stops early, unsolved, when the model has written the same reply `repeats` times in a
    row (greedy decoding on an all-but-unchanged conversation keeps writing it: a loop, not a recovery) or the
    conversation outgrows the context window."""
    step = env.reset(seed=seed, eci=eci)
    messages = [{"role": "system", "content": env.system_prompt()}, {"role": "user", "content": step.prompt}]
    total, turns, parsed = 0.0, 0, 0
    replies: list[str] = []
    while not step.done:
        if not chat.fits(messages) or (repeats and len(replies) >= repeats and len(set(replies[-repeats:])) == 1):
            break
        reply = chat(messages)
        replies.append(reply)
        step = env.step(reply)
        turns += 1
        parsed += step.parse_error is None
        total += float(step.reward)
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": step.prompt}]
    meta = step.metadata
    solved = bool(meta.get("solved")) if step.done else False
    components = {k: float(v) for k, v in (meta.get("reward_components") or {}).items()} if step.done else {}
    result = EpisodeResult(seed=seed, eci=eci, solved=solved, episode_return=round(total, 6),
                           final_reward=float(step.reward), steps=turns, components=components)
    return result, parsed, step.done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--backend", choices=("llama", "transformers"), default="llama")
    parser.add_argument("--packages", default="seed:incident_triage,seed:enterprise_workflow,seed:daily_report")
    parser.add_argument("--tiers", default="1-5")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=256)  # modelpolicy.PRETRAINED_TOKENS
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=16384)
    parser.add_argument("--stop-after-repeats", type=int, default=3, help="stop an episode (unsolved) after this "
                        "many identical replies in a row (0: play to the environment's budget)")
    parser.add_argument("--first-seed", type=int, default=EVAL_SEED_START)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    watch = LoadWatch().__enter__()
    chat = LlamaChat(args.model, args.threads, args.n_ctx, args.max_tokens) if args.backend == "llama" else \
        TransformersChat(args.model, args.max_tokens)
    rows = []
    for ref in args.packages.split(","):
        env = LocalTextEnv(load(ref))
        for eci in parse_tiers(args.tiers):
            clock = time.monotonic()
            results, parsed, turns = [], 0, 0
            for seed in range(args.first_seed, args.first_seed + args.episodes):
                result, ok, _ = play(chat, env, seed, eci, args.stop_after_repeats)
                results.append(result)
                parsed += ok
                turns += result.steps
            tier = summarise(eci, results)
            seconds = time.monotonic() - clock
            row = {"package": ref, "eci": eci, "episodes": tier.episodes, "solve_rate": tier.solve_rate,
                   "solve_rate_ci95": tier.solve_rate_ci95, "mean_return": tier.mean_return,
                   "mean_steps": tier.mean_steps, "parsed_share": round(parsed / max(turns, 1), 3),
                   "seconds": round(seconds, 1), "load": round(watch.now(), 2)}
            rows.append(row)
            ci = tier.solve_rate_ci95
            print(f"{ref} ECI {eci}: solve rate {tier.solve_rate:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] on {tier.episodes} "
                  f"seeds, mean reward {tier.mean_return:+.3f}, {tier.mean_steps:.1f} steps, "
                  f"{100 * row['parsed_share']:.0f}% of replies parsed, {seconds:.0f} s, load {row['load']}",
                  flush=True)
    watch.__exit__()
    print(watch.summary())
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "backend": args.backend, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
