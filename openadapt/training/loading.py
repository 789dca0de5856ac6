"""Which model a run trains, and how it is loaded.

- `tiny`: built here (openadapt.training.tiny) from the package's own vocabulary, then a short format warm-up
  on random schema-valid actions; saved to `RUN_DIR/init` so evaluation and `--resume` reload it.
- a local directory or a hub id: transformers + a LoRA adapter (peft) by default (`lora=None`: full weights);
  unsloth's FastLanguageModel instead when unsloth is importable and CUDA is present.
- a preset (`qwen2.5-coder-0.5b`) or a `.gguf` file: converted once into a transformers directory in the model
  cache (`openadapt.training.pretrained`), then as a local directory.

A model that cannot be found fails before anything is written, with one clear line: a path that does not
exist, or a hub id that is neither in the local cache nor reachable (no network, `HF_HUB_OFFLINE`).
"""

from __future__ import annotations

import importlib.util
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from openadapt.envpkg.loader import PackageRef
from openadapt.training.config import TrainConfig
from openadapt.training.demonstrations import Demonstration, DemonstrationSource, collect, load_file
from openadapt.training.envinfo import TrainingError, action_schema, sample_env, written_form
from openadapt.training.pool import TextEnvPool
from openadapt.training.warmup import (
    WarmStartResult,
    WarmupResult,
    demonstration_warmup,
    format_warmup,
    sft_warm_start,
)

UNSLOTH_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
WARMUP_SEED_START = 500_000  # format warm-up prompts come from training seeds (below EVAL_SEED_START)
DEMONSTRATION_SEED_START = 600_000  # the heuristic's demonstrations too, on seeds of their own
DEMONSTRATION_TRIES = 10  # episodes played per tier: at most this many per demonstration wanted


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    kind: str  # tiny | lora | full | unsloth
    source: str  # where the weights came from
    peft_config: Any = None  # handed to GRPOTrainer, which wraps the model
    warmup: WarmupResult | None = None
    warm_start: WarmStartResult | None = None


def looks_like_path(name: str) -> bool:
    """A hub id is `name` or `org/name`; anything else that names a file system location is a path."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or "\\" in name


def hub_reachable(timeout: float = 3.0) -> bool:
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((endpoint.hostname or "huggingface.co", endpoint.port or 443),
                                      timeout=timeout):
            return True
    except OSError:
        return False


def resolve_model_source(name: str) -> tuple[str, bool]:
    """(what to pass to from_pretrained, whether it may only come from local files). Fails fast and clearly
    when the model cannot be had, instead of retrying the network for half a minute. A preset or a `.gguf` file
    (`pretrained`) becomes its converted transformers directory."""
    from openadapt.training.pretrained import is_gguf_model, trainable_model_dir

    if is_gguf_model(name):
        return str(trainable_model_dir(name, progress=_say)), True
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").exists() and not (path / "adapter_config.json").exists():
            raise TrainingError(f"model path {name} holds no config.json: not a transformers model directory")
        return str(path), True
    if looks_like_path(name):
        raise TrainingError(f"model path {name} does not exist (use 'tiny', an existing local model directory, "
                            "or a hub id)")
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "config.json")
    except Exception:  # an id huggingface_hub rejects outright
        raise TrainingError(f"{name!r} is neither an existing path nor a valid hub id") from None
    if isinstance(cached, str):
        return name, True
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False"):
        raise TrainingError(f"model {name!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set; "
                            "download it first or pass a local path")
    if not hub_reachable():
        raise TrainingError(f"model {name!r} is not a local directory, not in the local Hugging Face cache, and "
                            "the hub is unreachable (no network); download it where there is network, or pass a "
                            "local path or 'tiny'")
    return name, False


def _say(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:  # pragma: no cover - the train extra is installed
        return False


def unsloth_usable() -> bool:
    """unsloth is optional and GPU-only: used when importable and CUDA is present (it pins trl<=1.15, so it
    lives in its own environment; see pyproject's comment on the `train` extra)."""
    return _cuda() and importlib.util.find_spec("unsloth") is not None


def build_tiny(config: TrainConfig, pool: TextEnvPool, ref: PackageRef, tiers: list[int],
               progress: Any = None, warm_progress: Any = None) -> LoadedModel:
    """A tiny model over the package's own vocabulary, warmed up on the format of random actions, then (the
    warm start) on the turns of solved demonstrations."""
    from openadapt.training import tiny

    env = pool.envs[0]
    system = env.system_prompt()
    schema = action_schema(ref, system)
    sample = sample_env(env, schema, tiers, range(config.vocab_seeds))
    demonstrations, source = demonstrations_for(config, env, pool.section)
    shown = [t.prompt for d in demonstrations for t in d.turns]
    written = [written_form(t.completion) for d in demonstrations for t in d.turns]
    vocab = tiny.build_vocabulary([system, *tiny.schema_words(schema), *sample.completions, *written],
                                  [*sample.prompts, *shown], min_count=config.vocab_min_count)
    tokenizer = tiny.build_tokenizer(vocab, slots=config.value_slots)
    model = tiny.build_model(tokenizer, config.tiny_size, seed=config.seed)
    if config.max_completion_length is None:
        config.__dict__["max_completion_length"] = fit_completion_length(tokenizer, [*sample.completions, *written])
    warmup = None
    if config.warmup_steps:
        warmup = format_warmup(model, tokenizer, env, schema, list(config.eci),
                               range(WARMUP_SEED_START, WARMUP_SEED_START + 16 * config.warmup_steps),
                               steps=config.warmup_steps, lr=config.warmup_lr,
                               system_prompt=system if config.system_prompt else None,
                               prompt_loss=bool(config.warmup_prompt_lm), progress=progress,
                               later_turns=1 if config.context == "last" else 0)
    warm_start = None
    if demonstrations:
        warm_start = demonstration_warmup(model, tokenizer, demonstrations, source, steps=config.warm_start_steps,
                                          lr=config.warm_start_lr, seed=config.seed, progress=warm_progress,
                                          system_prompt=system if config.system_prompt else None)
    return LoadedModel(model, tokenizer, "tiny", f"built in-process ({len(vocab)} tokens)", warmup=warmup,
                       warm_start=warm_start)


def demonstrations_for(config: TrainConfig, env: Any, section: Any) -> tuple[list[Demonstration],
                                                                             DemonstrationSource | None]:
    """The demonstrations a run's warm start imitates: the user's file, else solved episodes of the package's
    heuristic at the run's tiers, else none. TrainingError where the heuristic is asked for and cannot give any;
    `auto` then starts without a warm start."""
    if config.demonstrations is not None:
        return load_file(config.demonstrations)
    if config.warm_start not in ("heuristic", "auto"):
        return [], None
    asked = config.warm_start == "heuristic"
    if section.family is None and section.mechanics.policies.heuristic is None:
        if not asked:
            return [], None
        raise TrainingError("warm_start 'heuristic': the package ships no heuristic policy; give --demonstrations "
                            "FILE or turn the warm start off")
    tries = DEMONSTRATION_TRIES * config.warm_start_episodes
    found, source = collect(env, list(config.eci), range(DEMONSTRATION_SEED_START, DEMONSTRATION_SEED_START + tries),
                            config.warm_start_episodes)
    if not found and asked:
        raise TrainingError(f"warm_start 'heuristic': the heuristic solved none of {source.played} episodes at "
                            f"ECI {', '.join(map(str, config.eci))}; give --demonstrations FILE or turn it off")
    return found, source if found else None


TINY_MIN_COMPLETION = 48


def fit_completion_length(tokenizer: Any, completions: list[str]) -> int:
    """Tokens per turn for tiny: the longest random schema-valid action with every field filled (what the
    vocabulary sample played), plus its EOS, plus 15%, rounded up to a multiple of 8 and at least 48. A fixed
    limit below that cuts every action of a package whose schema has many slots (enterprise_workflow's random
    actions are 64 tokens): each one would parse as malformed and no group would ever differ."""
    longest = max((len(tokenizer(c, add_special_tokens=False)["input_ids"]) + 1 for c in completions), default=0)
    return max(TINY_MIN_COMPLETION, -(-int(longest * 1.15) // 8) * 8)


def load_saved(directory: Path, kind: str) -> LoadedModel:
    """A model and tokenizer saved by `save_pretrained` (tiny init, a final model, or a checkpoint). A LoRA
    adapter directory is loaded on its base model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    if (directory / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(directory, dtype=_dtype())
    else:
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=_dtype())
    return LoadedModel(model, tokenizer, kind, str(directory))


def _dtype() -> Any:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def load_pretrained(config: TrainConfig) -> LoadedModel:
    """A real model for training: unsloth (GPU, when installed), else transformers with LoRA or full weights."""
    source, local_only = resolve_model_source(config.model)
    if unsloth_usable():
        return _load_unsloth(config, source)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=_dtype(), local_files_only=local_only)
    except OSError as exc:
        raise TrainingError(f"cannot load model {config.model!r}: {str(exc).splitlines()[0]}") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.chat_template is None:
        raise TrainingError(f"model {config.model!r} has no chat template; use an instruct/chat model")
    tokenizer.padding_side = "left"
    peft_config = None
    if config.lora is not None:
        from peft import LoraConfig

        lora = config.lora
        peft_config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                 target_modules=lora.target_modules, task_type="CAUSAL_LM")
    return LoadedModel(model, tokenizer, "lora" if peft_config else "full", source, peft_config=peft_config)


def warm_start_pretrained(loaded: LoadedModel, config: TrainConfig, pool: TextEnvPool,
                          progress: Any = None) -> LoadedModel:
    """A real model after its warm start (`sft_warm_start`), where the run asks for one and there are
    demonstrations: its LoRA adapter (or its weights) trained, and handed on to GRPO as it is."""
    env = pool.envs[0]
    demonstrations, source = demonstrations_for(config, env, pool.section)
    if not demonstrations:
        return loaded
    model, loaded.warm_start = sft_warm_start(
        loaded.model, loaded.tokenizer, demonstrations, source, steps=config.warm_start_steps,
        lr=config.warm_start_lr, peft_config=loaded.peft_config, seed=config.seed,
        gradient_checkpointing=config.gradient_checkpointing, progress=progress,
        system_prompt=env.system_prompt() if config.system_prompt else None)
    # the adapter is on the model now: GRPO trains it, and wraps no other
    loaded.model, loaded.peft_config = model, None
    return loaded


def _load_unsloth(config: TrainConfig, source: str) -> LoadedModel:  # pragma: no cover - GPU only
    from unsloth import FastLanguageModel

    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name=source, max_seq_length=8192, load_in_4bit=False, dtype=None)
    if config.lora is not None:
        lora = config.lora
        targets = UNSLOTH_TARGETS if lora.target_modules == "all-linear" else lora.target_modules
        model = FastLanguageModel.get_peft_model(model, r=lora.r, lora_alpha=lora.alpha, lora_dropout=0.0,
                                                 target_modules=targets, random_state=config.seed,
                                                 use_gradient_checkpointing="unsloth")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return LoadedModel(model, tokenizer, "unsloth", source)
