"""What an hour of GRPO with LoRA does to a real pretrained model on CPU: the Qwen2.5-Coder-0.5B-Instruct
preset on seed:incident_triage at ECI 1, trained for --minutes of wall time (model load and conversion excluded),
then the adapter merged into the base model and written as a GGUF file (`--merged-gguf`) so that
`benchmarks/pretrained_baseline.py --model FILE` evaluates it on the same held-out seeds and with the same
procedure as the zero-shot baseline. Prints every step (reward, sampled solve rate, share of turns that parsed)
and the machine load.

    python benchmarks/pretrained_lora.py --minutes 60 --output runs/bench-lora
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
from transformers import TrainerCallback  # noqa: E402

from openadapt.training.config import TrainConfig  # noqa: E402
from openadapt.training.progress import StepProgress  # noqa: E402
from openadapt.training.solver import Solver  # noqa: E402


class Budget(TrainerCallback):
    def __init__(self, minutes: float):
        self.minutes = minutes
        self.started: float | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if self.started is not None and time.monotonic() - self.started >= self.minutes * 60:
            control.should_training_stop = True
        return control


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--output", type=Path, default=Path("runs/bench-lora"))
    parser.add_argument("--merged-gguf", type=Path, help="write the merged model here as a GGUF file")
    parser.add_argument("--base-gguf", type=Path, help="write the untrained base model here the same way (the "
                        "fair 'before' for the merged model)")
    parser.add_argument("--config", type=json.loads, default={}, help="TrainConfig overrides, as JSON")
    args = parser.parse_args()
    if args.output.exists():
        shutil.rmtree(args.output)
    settings = dict(package="seed:incident_triage", model=args.model, eci=[1], steps=10_000, output=args.output,
                    num_generations=4, prompts_per_step=1, max_turns=1, max_completion_length=256, lr=1e-4,
                    eval_episodes=0, save_steps=5, wandb="disabled")
    settings.update(args.config)
    config = TrainConfig(**settings)
    print(f"config: {json.dumps(config.model_dump(mode='json', exclude={'output'}), sort_keys=True)}", flush=True)
    watch = LoadWatch().__enter__()
    if args.base_gguf:
        from transformers import AutoModelForCausalLM

        from openadapt.training.pretrained import trainable_model_dir

        base = AutoModelForCausalLM.from_pretrained(trainable_model_dir(args.model))
        print(f"base model written to {write_gguf(base, args.model, args.base_gguf)}", flush=True)
        del base
    clock = time.monotonic()
    budget = Budget(args.minutes)
    solver = Solver.create(config, callbacks=[budget])
    print(f"model ready in {time.monotonic() - clock:.0f} s ({solver.loaded.kind}, {solver.loaded.source})",
          flush=True)
    with solver:
        progress = StepProgress(config.steps, write=print)

        def show(row: dict) -> None:
            turns = solver.rollout.last_traces
            parsed = sum(1 for t in turns for turn in t.turns if turn.error != "malformed_completion")
            total = sum(len(t.turns) for t in turns)
            print(f"{progress.line(row)}  parsed {parsed}/{total}  load {watch.now():.2f}", flush=True)

        solver.metrics.listeners.append(show)
        summary = solver.train()
        merged = None
        if args.merged_gguf:
            merged = merge_to_gguf(solver, args.model, args.merged_gguf)
    watch.__exit__()
    rows = solver.run.metrics()
    print(f"\nsteps: {summary.global_step} in {summary.train_seconds / 60:.1f} min, median "
          f"{summary.seconds_per_step_median} s/step")
    if rows:
        first, last = rows[: max(1, len(rows) // 4)], rows[-max(1, len(rows) // 4):]
        for label, chunk in (("first quarter", first), ("last quarter", last)):
            print(f"{label}: reward {sum(r['reward_mean'] for r in chunk) / len(chunk):+.3f}, sampled solve rate "
                  f"{sum(r['solve_rate'] for r in chunk) / len(chunk):.3f}")
    for label, report in (("held-out before", summary.before), ("held-out after", summary.after)):
        for tier in report.tiers if report else []:
            low, high = tier.solve_rate_ci95
            print(f"{label} (ECI {tier.eci}, {tier.episodes} seeds, greedy): solve rate {tier.solve_rate:.3f} "
                  f"({low:.3f}-{high:.3f}), mean return {tier.mean_return:+.3f}, {tier.mean_steps:.1f} turns")
    if merged:
        print(f"merged model: {merged}")
    print(watch.summary())


def merge_to_gguf(solver: Solver, model: str, dest: Path) -> Path:
    """The LoRA adapter merged into the base weights, written as a GGUF (`write_gguf`)."""
    merged = solver.model.merge_and_unload() if hasattr(solver.model, "merge_and_unload") else solver.model
    return write_gguf(merged, model, dest)


def write_gguf(hf_model, model: str, dest: Path, half: bool = True) -> Path:
    """A transformers Qwen2/Llama model as a GGUF file with the original file's metadata (architecture,
    tokenizer, chat template), tensor names mapped back to GGUF's; matrices in float16 (`half`) or float32."""
    import gguf
    import numpy as np

    from openadapt.training.pretrained import gguf_path

    state = {k: v.detach().float().numpy() for k, v in hf_model.state_dict().items()}
    source = gguf.GGUFReader(str(gguf_path(model)))
    arch = source.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(dest), arch)
    for name, field in source.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
            continue
        value = field.contents()
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(name, value)
        else:
            writer.add_key_value(name, value, kind)
    for hf_name, array in state.items():
        writer.add_tensor(gguf_name(hf_name), array.astype(np.float16 if half and array.ndim > 1 else np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dest


def gguf_name(hf: str) -> str:
    """transformers' Qwen2/Llama parameter names -> GGUF tensor names."""
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if hf in fixed:
        return fixed[hf]
    parts = hf.split(".")  # model.layers.N.<module>.<proj>.<weight|bias>
    layer, rest = parts[2], ".".join(parts[3:])
    names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
             "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
             "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
             "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
             "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
             "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    return f"blk.{layer}.{names[rest]}"


if __name__ == "__main__":
    main()
