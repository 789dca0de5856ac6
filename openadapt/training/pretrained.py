"""Pretrained models without a hub: named presets over GGUF files on this machine, made trainable.

`--model qwen2.5-coder-0.5b` (or `qwen2.5-coder-1.5b`) names a GGUF file in the model cache, the folder the
embedded designer pulls its models into: `$OPENADAPT_MODELS_DIR`, else `~/.cache/openadapt/models/`
(`scripts/fetch_models.sh` / `openadapt.llm.local.store` put `<id>.gguf` there; training never imports the
designer, it only reads the same folder). `--model /path/to/file.gguf` works the same for any GGUF file.

transformers 5 loads a GGUF with `gguf_file=` (the `gguf` package), dequantized to float32, but such a model
cannot be saved (`save_pretrained` refuses a model "quantized with gguf"), and a LoRA adapter records its base
model's path, which must load again later. So the first use converts the file once into an ordinary
transformers directory beside it, `<id>-hf/`: the model rebuilt from its config without the quantization
config, the dequantized weights loaded into it (`load_state_dict`, every key matched), saved with its tokenizer
and chat template. Later runs, `eval --policy model:RUN_DIR` and resumes load that directory. The conversion is
atomic (written to `<id>-hf.partial/`, then renamed) and one process at a time does it (`<id>-hf.lock`); a
directory converted from a file of another size or modification time is converted again.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from openadapt.training.errors import TrainingError

ENV_MODELS_DIR = "OPENADAPT_MODELS_DIR"
SOURCE_FILE = "openadapt_source.json"


class Preset(BaseModel):
    name: str
    gguf: str  # file name in the model cache
    summary: str


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset(name="qwen2.5-coder-0.5b", gguf="qwen2.5-coder-0.5b.gguf",
           summary="Qwen2.5 Coder 0.5B Instruct (630M parameters, ChatML); ~2 GB in float32, LoRA on CPU"),
    Preset(name="qwen2.5-coder-1.5b", gguf="qwen2.5-coder-1.5b.gguf",
           summary="Qwen2.5 Coder 1.5B Instruct (1.78B parameters, ChatML); ~7 GB in float32"),
)}


def models_dir() -> Path:
    """`$OPENADAPT_MODELS_DIR`, else `~/.cache/openadapt/models/` (the designer's model cache)."""
    configured = os.environ.get(ENV_MODELS_DIR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "openadapt" / "models"


def is_gguf_model(name: str) -> bool:
    return name in PRESETS or name.endswith(".gguf")


def gguf_path(name: str) -> Path:
    """The GGUF file a preset or a `.gguf` path names; TrainingError (one line) when it is not there."""
    if name in PRESETS:
        path = models_dir() / PRESETS[name].gguf
        if not path.is_file():
            raise TrainingError(f"model {name!r} is not in the model cache ({path} missing): fetch it first "
                                f"(`bash scripts/fetch_models.sh`), or set {ENV_MODELS_DIR} to the folder that "
                                "holds it")
        return path
    path = Path(name).expanduser()
    if not path.is_file():
        raise TrainingError(f"GGUF file {name} does not exist")
    return path


def converted_dir(gguf: Path) -> Path:
    stem = gguf.name.removesuffix(".gguf")
    return gguf.parent / f"{stem}-hf" if os.access(gguf.parent, os.W_OK) else models_dir() / f"{stem}-hf"


def _source_record(gguf: Path) -> dict[str, Any]:
    stat = gguf.stat()
    return {"gguf": str(gguf.resolve()), "size": stat.st_size, "mtime": int(stat.st_mtime)}


def _is_current(dest: Path, gguf: Path) -> bool:
    try:
        recorded = json.loads((dest / SOURCE_FILE).read_text())
    except (OSError, ValueError):
        return False
    return recorded == _source_record(gguf) and (dest / "config.json").is_file()


def trainable_model_dir(name: str, progress: Any = None) -> Path:
    """A transformers directory for the GGUF model `name` (a preset or a `.gguf` path), converting it on first
    use (module docstring). `progress(message)` hears what takes time."""
    gguf = gguf_path(name)
    dest = converted_dir(gguf)
    if _is_current(dest, gguf):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f"{dest.name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process converting the same file: wait for it
        if _is_current(dest, gguf):
            return dest
        if progress is not None:
            progress(f"converting {gguf.name} to a transformers model in {dest} (once)")
        started = time.monotonic()
        partial = dest.parent / f"{dest.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        convert_gguf(gguf, partial)
        (partial / SOURCE_FILE).write_text(json.dumps(_source_record(gguf), sort_keys=True) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        partial.rename(dest)
        if progress is not None:
            progress(f"converted in {time.monotonic() - started:.0f} s")
    return dest


def convert_gguf(gguf: Path, dest: Path) -> None:
    """Load `gguf` with transformers (dequantized), rebuild the model from its config without the quantization
    config, load the weights into it and save model, generation config and tokenizer to `dest`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except ImportError as exc:
        raise TrainingError(f"loading a GGUF model needs the `gguf` package (pip install gguf): {exc}") from None
    except (OSError, ValueError, KeyError) as exc:
        raise TrainingError(f"cannot load {gguf} with transformers: {str(exc).splitlines()[0]}") from None
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    clean = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    result = clean.load_state_dict(loaded.state_dict(), strict=False)
    missing = [k for k in result.missing_keys if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or result.unexpected_keys:
        raise TrainingError(f"{gguf}: the dequantized weights do not fit the model rebuilt from its config "
                            f"(missing {missing[:3]}, unexpected {result.unexpected_keys[:3]})")
    if clean.get_output_embeddings() is not None and config.tie_word_embeddings:
        clean.tie_weights()
    clean.generation_config = loaded.generation_config
    stops = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>") if
             "<|im_end|>" in tokenizer.get_vocab() else None, loaded.generation_config.eos_token_id}
    clean.generation_config.eos_token_id = sorted(s for s in stops if isinstance(s, int))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    clean.generation_config.pad_token_id = tokenizer.pad_token_id
    dest.mkdir(parents=True)
    clean.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
