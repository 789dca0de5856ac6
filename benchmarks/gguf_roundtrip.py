"""Does a model written back to GGUF the way `benchmarks/pretrained_lora.py --merged-gguf` writes the trained one
(`write_gguf`: the transformers weights, the original file's metadata) answer as the original GGUF does? The
untrained base goes through that path, and both files answer one fixed prompt greedily under llama.cpp. Identical
replies rule the conversion and the writing out as the cause of a merged model's different behaviour.

    python benchmarks/gguf_roundtrip.py [--model qwen2.5-coder-0.5b] [--out /tmp/base.gguf] [--max-tokens 80]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pretrained_lora import write_gguf  # noqa: E402

PROMPT = [{"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number."}]


def greedy(path: Path, max_tokens: int) -> str:
    from llama_cpp import Llama

    llm = Llama(str(path), n_ctx=512, n_threads=1, verbose=False, seed=0)
    reply = llm.create_chat_completion(PROMPT, max_tokens=max_tokens, temperature=0.0)
    return reply["choices"][0]["message"]["content"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--out", type=Path, default=Path("runs/gguf-roundtrip/base.gguf"))
    parser.add_argument("--max-tokens", type=int, default=80)
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM

    from openadapt.training.pretrained import gguf_path, trainable_model_dir

    started = time.monotonic()
    source = trainable_model_dir(args.model, progress=print)
    print(f"transformers model: {source} ({time.monotonic() - started:.0f} s)", flush=True)
    base = AutoModelForCausalLM.from_pretrained(source)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_gguf(base, args.model, args.out)
    del base
    print(f"written back: {args.out} ({args.out.stat().st_size:,} bytes, {time.monotonic() - started:.0f} s)")
    original = greedy(gguf_path(args.model), args.max_tokens)
    written = greedy(args.out, args.max_tokens)
    print(f"original GGUF: {original!r}\nwritten back:  {written!r}")
    print("replies identical" if original == written else "replies DIFFER")


if __name__ == "__main__":
    main()
