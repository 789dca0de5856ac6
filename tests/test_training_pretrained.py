"""The pretrained-model path without a hub: a GGUF file (here a tiny one written by the test with the `gguf`
package, a 2-layer Qwen2 with a byte-level vocabulary and ChatML) becomes a trainable transformers directory,
once, atomically, and trains a LoRA adapter through the solver; presets resolve through the model cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

import gguf  # noqa: E402  (the train extra installs it: a missing install step fails here, not skips)
import numpy as np  # noqa: E402

from openadapt.training.config import TrainConfig  # noqa: E402
from openadapt.training.errors import TrainingError  # noqa: E402
from openadapt.training.pretrained import (  # noqa: E402
    ENV_MODELS_DIR,
    PRESETS,
    SOURCE_FILE,
    gguf_path,
    trainable_model_dir,
)

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 32, 2, 4, 2, 64


def byte_alphabet() -> list[str]:
    """GPT-2's byte-to-unicode table, in byte order (what a byte-level BPE vocabulary spells tokens with)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def write_tiny_gguf(path: Path, seed: int = 0) -> Path:
    """A real GGUF file: qwen2 architecture, float32 tensors, byte-level BPE tokenizer with a few merges, the
    ChatML special tokens marked as control tokens, a chat template."""
    rng = np.random.default_rng(seed)
    tokens = byte_alphabet() + ["Ġt", "Ġa", "in", "er"] + ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [1] * (len(tokens) - 3) + [3, 3, 3]
    vocab = len(tokens)
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_name("tiny test qwen2")
    writer.add_block_count(LAYERS)
    writer.add_context_length(256)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(["Ġ t", "Ġ a", "i n", "e r"])
    writer.add_eos_token_id(vocab - 1)
    writer.add_pad_token_id(vocab - 3)
    writer.add_bos_token_id(vocab - 3)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    head = HIDDEN // HEADS
    writer.add_tensor("token_embd.weight", weight(vocab, HIDDEN))
    writer.add_tensor("output.weight", weight(vocab, HIDDEN))
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    for i in range(LAYERS):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(HIDDEN, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_q.bias", weight(HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(KV_HEADS * head, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_k.bias", weight(KV_HEADS * head))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(KV_HEADS * head, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_v.bias", weight(KV_HEADS * head))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(HIDDEN, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(FFN, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(FFN, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(HIDDEN, FFN))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-qwen.gguf")


@pytest.fixture(scope="module")
def converted(tiny_gguf) -> Path:
    return trainable_model_dir(str(tiny_gguf))


def test_a_gguf_file_becomes_a_transformers_directory_with_the_same_weights(tiny_gguf, converted):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert converted == tiny_gguf.parent / "tiny-qwen-hf"
    assert (converted / "config.json").exists() and (converted / "model.safetensors").exists()
    config = json.loads((converted / "config.json").read_text())
    assert "quantization_config" not in config and config["num_hidden_layers"] == LAYERS
    assert json.loads((converted / SOURCE_FILE).read_text())["size"] == tiny_gguf.stat().st_size
    saved = AutoModelForCausalLM.from_pretrained(converted)
    direct = AutoModelForCausalLM.from_pretrained(tiny_gguf.parent, gguf_file=tiny_gguf.name)
    ours, theirs = saved.state_dict(), direct.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    tokenizer = AutoTokenizer.from_pretrained(converted)
    assert tokenizer.chat_template == CHATML
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "tea"}], add_generation_prompt=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    text = tokenizer.decode(ids)
    assert text == "<|im_start|>user\ntea<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in saved.generation_config.eos_token_id


def test_the_conversion_happens_once_and_again_when_the_file_changes(tiny_gguf, converted):
    stamp = (converted / "model.safetensors").stat().st_mtime_ns
    assert trainable_model_dir(str(tiny_gguf)) == converted
    assert (converted / "model.safetensors").stat().st_mtime_ns == stamp  # not redone
    assert not (converted.parent / "tiny-qwen-hf.partial").exists()


def test_a_preset_resolves_through_the_model_cache(tmp_path, monkeypatch, tiny_gguf):
    monkeypatch.setenv(ENV_MODELS_DIR, str(tmp_path))
    with pytest.raises(TrainingError, match="not in the model cache.*fetch_models"):
        gguf_path("qwen2.5-coder-0.5b")
    (tmp_path / PRESETS["qwen2.5-coder-0.5b"].gguf).symlink_to(tiny_gguf)
    assert gguf_path("qwen2.5-coder-0.5b") == tmp_path / "qwen2.5-coder-0.5b.gguf"
    with pytest.raises(TrainingError, match="does not exist"):
        gguf_path(str(tmp_path / "nope.gguf"))


def test_a_gguf_model_trains_a_lora_adapter_and_evaluates(tiny_gguf, converted, tmp_path):
    from openadapt.training.modelpolicy import ModelPolicy, evaluate_model
    from openadapt.training.pool import TextEnvPool
    from openadapt.training.solver import Solver

    config = TrainConfig(package="seed:incident_triage", model=str(tiny_gguf), output=tmp_path / "run", steps=1,
                         num_generations=2, prompts_per_step=1, max_completion_length=8, max_turns=1,
                         eval_episodes=0, wandb="disabled", validate_package=False, lr=1e-3)
    assert config.context == "full" and config.system_prompt and config.lora is not None
    with Solver.create(config) as solver:
        assert solver.loaded.kind == "lora" and solver.loaded.source == str(converted)
        summary = solver.train()
    assert summary.global_step == 1
    adapter = json.loads((tmp_path / "run" / "final" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(converted)
    policy = ModelPolicy.from_run(tmp_path / "run")
    with TextEnvPool("seed:incident_triage", 1) as pool:
        report = evaluate_model(policy, pool, [1], 1)
    assert report.tiers[0].episodes == 1
