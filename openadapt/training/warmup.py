"""Format warm-up: a short supervised pass on *random* schema-valid actions before GRPO.

A randomly initialised model almost never writes a parseable JSON action, so every GRPO group would score the
same malformed reward and carry no signal. The warm-up teaches the form of an action and nothing about which
action is right: its targets come from `SchemaRandomActions` (openadapt.kit's RandomPolicy over the schema:
uniform enum values, uniform numbers, and for strings words drawn at random from the prompt the model is shown,
so it learns to fill a string with a word it can see; a field whose default is a value, like an empty evidence
list, is left out half the time, so short actions are in its repertoire), never from an oracle, and it sees no
reward. After it the model writes well-formed actions at about the random agent's solve rate.

The warm start from demonstrations (`demonstration_warmup`) comes after it: the same cross-entropy on the turns
of solved episodes of a policy that reads only its observations (openadapt.training.demonstrations), so that GRPO
starts from a model that solves some episodes and its groups differ. A real model needs no format warm-up; its warm
start is supervised fine-tuning on the same turns with TRL's SFTTrainer (`sft_warm_start`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel

from openadapt.envpkg.textenv import TextEnv
from openadapt.training.chat import first_messages, prompt_ids
from openadapt.training.demonstrations import Demonstration, DemonstrationSource
from openadapt.training.envinfo import SchemaRandomActions, written_form


class WarmupResult(BaseModel):
    steps: int
    examples: int
    seeds: tuple[int, int]  # first and last seed whose first observation was used
    tiers: list[int]
    first_loss: float
    final_loss: float
    seconds: float
    targets: str = ("random schema-valid actions (openadapt.kit RandomPolicy over the action schema, strings drawn "
                    "from the prompt's words, defaulted fields left out half the time, floats rounded to one "
                    "decimal); no oracle, no reward")


def warmup_batches(env: TextEnv, tokenizer: Any, schema: dict[str, Any], tiers: list[int], seeds: range,
                   batch_size: int, system_prompt: str | None, prompt_loss: bool = False,
                   later_turns: int = 0) -> Any:
    """Yields (batch, last seed): (input_ids, labels) pairs of a prompt of a seed and a random action as the
    target. With `later_turns` > 0, seed i's prompt is the observation after `i % (later_turns + 1)` random actions
    (so the format is also learnt on the observations of later turns, as a `context="last"` run sees them).
    `system_prompt` None leaves the system turn out (as the run's conversations do)."""
    batch: list[tuple[list[int], list[int]]] = []
    for i, seed in enumerate(seeds):
        eci = tiers[i % len(tiers)]
        step = env.reset(seed=seed, eci=eci)
        agent = SchemaRandomActions(schema, random.Random(f"warmup:{seed}"), omit_defaulted=0.5)
        for _ in range(i % (later_turns + 1)):
            after = env.step(agent.completion(step.prompt))
            if after.done:
                break
            step = after
        target = agent.completion(step.prompt)
        messages = first_messages(system_prompt, step.prompt, tokenizer)
        ids = prompt_ids(tokenizer, messages)
        answer = list(tokenizer(target, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
        context = list(ids) if prompt_loss else [-100] * len(ids)
        if prompt_loss:  # the observation text itself, not the chat scaffolding around it
            special = set(tokenizer.all_special_ids)
            context = [-100 if t in special else t for t in context]
        batch.append((ids + answer, context + answer))
        if len(batch) == batch_size:
            yield batch, seed
            batch = []


def answer_loss(model: Any, input_ids: Any, mask: Any, labels: Any) -> Any:
    """Next-token cross-entropy on the answer tokens only, projecting just those positions onto the vocabulary
    (the prompt positions' logits, most of the sequence, are never computed)."""
    import torch

    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=mask).last_hidden_state
    targets = labels[:, 1:]
    keep = targets != -100
    logits = model.get_output_embeddings()(hidden[:, :-1][keep])
    return torch.nn.functional.cross_entropy(logits.float(), targets[keep])


def format_warmup(model: Any, tokenizer: Any, env: TextEnv, schema: dict[str, Any], tiers: list[int],
                  seeds: range, steps: int, batch_size: int = 16, lr: float = 3e-3,
                  system_prompt: str | None = None, prompt_loss: bool = False, later_turns: int = 0,
                  progress: Callable[[int, float], None] | None = None) -> WarmupResult:
    """Train `model` for `steps` steps of `batch_size` random-action targets. The loss is on the action tokens,
    and with `prompt_loss` also next-token prediction on the prompt's own text (language modelling of what the
    environment shows: no answer, no reward), which is where a model trained from scratch learns to copy words
    from its context."""
    started = time.perf_counter()
    seen = [seeds.start]
    batches = warmup_batches(env, tokenizer, schema, tiers, seeds, batch_size, system_prompt, prompt_loss,
                             later_turns)

    def tracked():
        for batch, seed in batches:
            seen.append(seed)
            yield batch

    losses = fit(model, tokenizer, tracked(), steps, lr, progress)
    return WarmupResult(steps=len(losses), examples=len(losses) * batch_size, seeds=(seeds.start, seen[-1]),
                        tiers=tiers, first_loss=round(losses[0], 4) if losses else 0.0,
                        final_loss=_tail(losses), seconds=round(time.perf_counter() - started, 2))


def fit(model: Any, tokenizer: Any, batches: Iterable[list[tuple[list[int], list[int]]]], steps: int, lr: float,
        progress: Callable[[int, float], None] | None = None) -> list[float]:
    """`steps` AdamW steps of answer-token cross-entropy over `batches` of (input ids, labels); the losses."""
    import torch

    model.train()
    optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    losses: list[float] = []
    pad = tokenizer.pad_token_id
    for step, batch in enumerate(batches):
        if step >= steps:
            break
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch])
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
        mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in batch])
        loss = answer_loss(model, input_ids.to(model.device), mask.to(model.device), labels.to(model.device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        if progress is not None:
            progress(step + 1, losses[-1])
    model.eval()
    return losses


def _tail(losses: list[float]) -> float:
    return round(sum(losses[-5:]) / len(losses[-5:]), 4) if losses else 0.0


class WarmStartResult(BaseModel):
    """A warm start from demonstrations: what it learnt from and how the imitation went."""

    source: DemonstrationSource
    steps: int
    turns: int  # the demonstrations' turns, each a (prompt, completion) example
    first_loss: float
    final_loss: float
    seconds: float


def demonstration_rows(tokenizer: Any, demonstrations: list[Demonstration],
                       system_prompt: str | None) -> list[tuple[list[int], list[int]]]:
    """Every turn of `demonstrations` as (input ids, labels): the context a `context="last"` run generates that
    turn from (the system turn where the run shows it, then the observation) and the demonstrated completion with
    its EOS (in its `written_form`); the loss is on the completion only."""
    rows = []
    for episode in demonstrations:
        for turn in episode.turns:
            ids = list(prompt_ids(tokenizer, first_messages(system_prompt, turn.prompt, tokenizer)))
            answer = list(tokenizer(written_form(turn.completion), add_special_tokens=False)["input_ids"])
            answer.append(tokenizer.eos_token_id)
            rows.append((ids + answer, [-100] * len(ids) + answer))
    return rows


def demonstration_warmup(model: Any, tokenizer: Any, demonstrations: list[Demonstration],
                         source: DemonstrationSource, steps: int, batch_size: int = 16, lr: float = 3e-3,
                         system_prompt: str | None = None, seed: int = 0,
                         progress: Callable[[int, float], None] | None = None) -> WarmStartResult:
    """Imitate the demonstrations' turns for `steps` steps of `batch_size`, in a seeded order, each turn once per
    pass."""
    started = time.perf_counter()
    rows = demonstration_rows(tokenizer, demonstrations, system_prompt)
    if not rows:
        raise ValueError("no demonstrated turns to learn from")
    rng = random.Random(f"warm-start:{seed}")

    def batches():
        order: list[int] = []
        while True:
            if len(order) < batch_size:
                order += rng.sample(range(len(rows)), len(rows))
            yield [rows[i] for i in order[:batch_size]]
            del order[:batch_size]

    losses = fit(model, tokenizer, batches(), steps, lr, progress)
    return WarmStartResult(source=source, steps=len(losses), turns=len(rows),
                           first_loss=round(losses[0], 4) if losses else 0.0, final_loss=_tail(losses),
                           seconds=round(time.perf_counter() - started, 2))


def sft_warm_start(model: Any, tokenizer: Any, demonstrations: list[Demonstration], source: DemonstrationSource, *,
                   steps: int, lr: float, peft_config: Any = None, system_prompt: str | None = None, seed: int = 0,
                   gradient_checkpointing: bool = False, batch_size: int = 16,
                   progress: Callable[[int, float], None] | None = None) -> tuple[Any, WarmStartResult]:
    """A real model's warm start: TRL's `SFTTrainer` on the demonstrations' turns, each a prompt-completion pair
    in the model's chat template (the conversation a `context="last"` run generates the turn from, then the
    demonstrated action as the assistant's reply), the loss on the completion only; with `peft_config`, on a new
    LoRA adapter. `steps` steps of `batch_size` turns (accumulated four at a time). Returns the trained model (a
    PeftModel where it trained an adapter) and the record."""
    import gc
    import tempfile

    import torch
    from datasets import Dataset
    from transformers import PrinterCallback, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    rows = [{"prompt": first_messages(system_prompt, turn.prompt, tokenizer),
             "completion": [{"role": "assistant", "content": written_form(turn.completion)}]}
            for episode in demonstrations for turn in episode.turns]
    if not rows:
        raise ValueError("no demonstrated turns to learn from")
    losses: list[float] = []

    class Losses(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))
                if progress is not None:
                    progress(state.global_step, losses[-1])

    started = time.perf_counter()
    cuda = torch.cuda.is_available()
    accumulate = min(4, batch_size)
    with tempfile.TemporaryDirectory(prefix="openadapt-sft-") as scratch:  # nothing is saved: the run saves it
        args = SFTConfig(output_dir=scratch, max_steps=steps, learning_rate=lr, lr_scheduler_type="constant",
                         per_device_train_batch_size=batch_size // accumulate, gradient_accumulation_steps=accumulate,
                         logging_steps=1, save_strategy="no", report_to=[], seed=seed, disable_tqdm=True,
                         use_cpu=not cuda, bf16=cuda and torch.cuda.is_bf16_supported(),
                         gradient_checkpointing=gradient_checkpointing, dataloader_num_workers=0,
                         max_length=None)  # a turn is trained whole, as GRPO generates it: never cut
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                             processing_class=tokenizer, peft_config=peft_config, callbacks=[Losses()])
        trainer.remove_callback(PrinterCallback)  # the losses go to `progress`, not to stdout
        trainer.train()
    model = trainer.model
    model.eval()
    del trainer  # its optimizer's state is not GRPO's: freed before GRPO builds its own
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return model, WarmStartResult(source=source, steps=len(losses), turns=len(rows),
                                  first_loss=round(losses[0], 4) if losses else 0.0, final_loss=_tail(losses),
                                  seconds=round(time.perf_counter() - started, 2))
