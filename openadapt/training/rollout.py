"""Episodes played by a model through the text protocol, batched across environments.

Every episode starts from the environment's first prompt; the model's reply (its generated tokens, EOS
included) is decoded and sent to `TextEnv.step`. Each turn's generation is one batched `generate` over the
episodes still running (finished ones drop out). What the model sees at the next turn depends on `context`:

- `"full"`: the next observation is appended to the conversation with the chat template. The token record of an
  episode is `prompt_ids` (first prompt) plus `completion_ids`: every turn's generated tokens and, between turns,
  the template's environment tokens (the next user turn and the next generation prompt), with `env_mask` 1 on
  generated tokens and 0 on environment tokens, so GRPO trains on the model's own tokens only. The next turn is
  generated from exactly those tokens (no re-tokenisation of history).
- `"last"`: the next turn is generated from the opening conversation rebuilt around the latest observation alone
  (the system prompt when the run shows it, then that observation). Valid where an observation carries the whole
  case so far (openadapt's families render everything the episode has shown, the last action's feedback and the
  steps left), and it keeps every context as short as the first one. The record is one `TurnRow` per turn: the
  exact context the turn was generated from and its generated tokens.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from openadapt.envpkg.textenv import TextEnv, TextStep
from openadapt.training.chat import Messages, continuation_ids, first_messages, prompt_ids
from openadapt.training.envinfo import action_text
from openadapt.training.errors import TrainingError

# ids of every context -> ids each context's reply (EOS included when the model produced one)
Generator = Callable[[list[list[int]]], list[list[int]]]
SAFETY_TURNS = 200  # an environment must end its episodes within its budget; this only stops a broken one


Context = Literal["full", "last"]


class Opening(BaseModel):
    """An exploration draw (`grpo.EnvironmentRollout.explore`): the reply of turn `turn` starts with these action
    fields, the model writes the rest; the turn's row records the tokens the draw wrote (`TurnRow.drawn`), so that
    `explore_credit="positive"` can train them only where the episode beat its group."""

    fields: dict[str, str] = Field(description="values drawn before the episode, e.g. {'tool': 'inspect_logs'}")
    turn: int = Field(default=1, ge=1, description="the turn whose reply opens so (1: the first)")
    fills: dict[str, list[str]] = Field(default_factory=dict, description="action field -> its values: at the "
                                        "first turn after `turn` whose reply writes the field (and is not the drawn "
                                        "choice again), its value is drawn too (`fill`), e.g. {'fix': [the enum]}")
    draw_from: dict[str, str] = Field(default_factory=dict, description="action field -> the list in that turn's "
                                      "observation its value is drawn from (`text`), e.g. {'component': "
                                      "'components'}")
    seed: str = Field(default="", description="seeds the draws from the observation")

    def text(self, observation: dict[str, Any]) -> str:
        """The opening of the action's JSON (no closing brace), in the order the fields are given. A value is
        drawn in proportion to how often the rest of the observation mentions it (each mention one ticket), and
        uniformly from the list where nothing mentions any: the list names every component of the system (15 in
        incident_triage), and a read drawn from all of them landed on the upstream root 11 times in 300 seeds at
        ECI 3, where the alert and the log lines blaming the dependency mention the root, the alerting component
        and a few bystanders. Nothing privileged is read: only what the agent is shown."""
        rng = random.Random(f"openadapt-opening:{self.seed}")
        values = dict(self.fields)
        for field, source in self.draw_from.items():
            listed = observation.get(source)
            if not isinstance(listed, list) or not listed:
                raise TrainingError(f"explore_targets: the observation of turn {self.turn} has no list `{source}` to "
                                    f"draw `{field}` from (its fields: {', '.join(sorted(observation))})")
            rest = json.dumps({k: v for k, v in observation.items() if k != source})
            mentions = [str(v) for v in listed for _ in range(rest.count(str(v)))]
            values[field] = rng.choice(mentions or [str(v) for v in listed])
        return action_text(values)[:-1]

    def fill(self, field: str, observation: dict[str, Any]) -> str | None:
        """A value for `field` drawn from its values in proportion to how often `observation` mentions each (None
        where it mentions none: the model's own value stands). What the agent was shown, never the answer."""
        shown = json.dumps(observation)
        mentions = [v for v in self.fills[field] for _ in range(shown.count(v))]
        return random.Random(f"openadapt-fill:{self.seed}:{field}").choice(mentions) if mentions else None


class EpisodeSpec(BaseModel):
    seed: int
    eci: int
    max_turns: int | None = Field(default=None, description="this episode's turn limit (None: the run's)")
    opening: Opening | None = Field(default=None, description="what the first reply starts with (exploration)")
    prefix: list[str] = Field(default_factory=list, description="actions stepped before the model plays (a "
                              "continuation from a state an episode reached: `credit.turn_values`); they count "
                              "against the turn limit and are in the trace's turns and return, never in its rows")


class TurnRow(BaseModel):
    """One turn of a `context="last"` episode: the tokens it was generated from, and what the model wrote."""

    prompt_ids: list[int]
    completion_ids: list[int]
    drawn: list[tuple[int, int]] = Field(default_factory=list, description="[start, end) spans of the completion "
                                         "an exploration draw wrote (an opening, a filled value): not the model's "
                                         "choice")


class Turn(BaseModel):
    action: str
    reward: float
    done: bool
    error: str | None = None


class EpisodeTrace(BaseModel):
    """One played episode: tokens for the trainer, outcome for rewards, metrics and evaluation."""

    seed: int
    eci: int
    prompt_ids: list[int]
    completion_ids: list[int] = Field(default_factory=list)
    env_mask: list[int] = Field(default_factory=list)
    turns: list[Turn] = Field(default_factory=list)
    finished: bool = False  # the environment ended the episode (False: cut by max_turns)
    solved: bool = False
    episode_return: float = 0.0
    final_reward: float = 0.0
    components: dict[str, float] = Field(default_factory=dict)
    solve_rate_signal: float | None = None
    generated_tokens: int = 0
    rows: list[TurnRow] = Field(default_factory=list, description="context='last': one per turn")

    def record_end(self, step: TextStep) -> None:
        meta = step.metadata
        self.finished = True
        self.solved = bool(meta.get("solved", False))
        self.components = {k: float(v) for k, v in (meta.get("reward_components") or {}).items()}
        signal = meta.get("solve_rate_signal")
        self.solve_rate_signal = float(signal) if signal is not None else None


def step_error(step: TextStep) -> str | None:
    """The environment's machine-readable error code (e.g. `malformed_completion`, `unknown_service`), else the
    parse error text."""
    return step.observation.get("error") or step.parse_error or None


def eos_ids(tokenizer: Any, model: Any = None) -> list[int]:
    ids = {tokenizer.eos_token_id}
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(configured if isinstance(configured, list) else [configured])
    return sorted(i for i in ids if i is not None)


def model_generator(model: Any, tokenizer: Any, *, max_new_tokens: int, greedy: bool, temperature: float = 1.0,
                    batch_size: int = 64) -> Generator:
    """Batched `model.generate` with left padding: pure sampling at `temperature` (no top-k/top-p, so the
    sampling distribution is the one GRPO's log-probabilities describe), or greedy decoding."""
    import torch
    from transformers import GenerationConfig

    stops = eos_ids(tokenizer, model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=not greedy,
                              temperature=None if greedy else temperature, top_k=None if greedy else 0,
                              top_p=None if greedy else 1.0, pad_token_id=pad, eos_token_id=stops)

    def generate(contexts: list[list[int]]) -> list[list[int]]:
        device = next(model.parameters()).device
        replies: list[list[int]] = []
        for start in range(0, len(contexts), batch_size):
            chunk = contexts[start:start + batch_size]
            width = max(len(c) for c in chunk)
            ids = torch.tensor([[pad] * (width - len(c)) + c for c in chunk], device=device)
            mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in chunk], device=device)
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            for row in out[:, width:].tolist():
                end = next((i for i, t in enumerate(row) if t in stops), None)
                replies.append(row if end is None else row[:end + 1])
        return replies

    return generate


class _Live:
    def __init__(self, trace: EpisodeTrace, env: TextEnv, messages: Messages):
        self.trace = trace
        self.env = env
        self.messages = messages
        self.limit = SAFETY_TURNS
        self.context_ids: list[int] = trace.prompt_ids  # what the next turn is generated from
        self.observation: dict[str, Any] = {}  # the latest observation (an exploration draw reads it)
        self.pending: Opening | None = None  # an exploration draw for a turn still to come
        self.filling: Opening | None = None  # a draw whose `fills` wait for the turn that writes their field
        self.opening: list[int] = []  # tokens the next reply starts with (the pending draw's, at its turn)

    def open_turn(self, tokenizer: Any) -> None:
        """Before a turn is generated: the pending draw's tokens when this is its turn."""
        if self.pending is not None and len(self.trace.turns) + 1 == self.pending.turn:
            text = self.pending.text(self.observation)
            self.opening = list(tokenizer(text, add_special_tokens=False)["input_ids"])
            self.filling = self.pending if self.pending.fills else None
            self.pending = None

    def cut_for_fill(self, reply: list[int], tokenizer: Any) -> tuple[int, list[int]] | None:
        """Where a pending fill applies to `reply` (opening included): how many of its tokens stand before the
        field's value and the drawn value's tokens; None where this reply does not write such a field at a token
        boundary or the observation mentions none of its values. A fill waits for a turn after the explored one
        whose reply is not the drawn choice again: the fields a model adds to the drawn read are not its answer
        (the tiny model writes a fix into its runbook reads)."""
        if self.filling is None or len(self.trace.turns) + 1 <= self.filling.turn:
            return None
        text = tokenizer.decode(reply, skip_special_tokens=True)
        if any(re.search(rf'"{re.escape(k)}"\s*:\s*"{re.escape(v)}"', text) for k, v in self.filling.fields.items()):
            return None
        for field in self.filling.fills:
            found = re.search(rf'"{re.escape(field)}"\s*:\s*"', text)
            value = self.filling.fill(field, self.observation) if found else None
            if found is None or value is None:
                continue
            self.filling = None  # one draw per episode
            for k in range(len(reply) + 1):
                before = tokenizer.decode(reply[:k], skip_special_tokens=True)
                if len(before) >= found.end():
                    return (k, list(tokenizer(value, add_special_tokens=False)["input_ids"])) \
                        if before == text[:found.end()] else None
        return None


def run_episodes(envs: Sequence[TextEnv], specs: Sequence[EpisodeSpec], generate: Generator, tokenizer: Any, *,
                 system_prompt: str | None, max_turns: int | None = None, stop_ids: Sequence[int] = (),
                 context: Context = "full") -> list[EpisodeTrace]:
    """Play `specs[i]` on `envs[i]` (all at once, one batched generation per turn over the episodes still
    running) and return their traces in order. An episode ends when the environment says done, or after its
    turn limit (`spec.max_turns`, else `max_turns`; None: only the environment ends it). `system_prompt` None
    leaves the system turn out of the conversation; `context` is what each turn is generated from (module
    docstring)."""
    if len(specs) > len(envs):
        raise ValueError(f"{len(specs)} episodes need as many environments; the pool has {len(envs)}")
    stops = set(stop_ids) or {tokenizer.eos_token_id}
    live: list[_Live] = []
    for env, spec in zip(envs, specs, strict=False):
        first = env.reset(seed=spec.seed, eci=spec.eci)
        messages = first_messages(system_prompt, first.prompt, tokenizer)
        episode = _Live(EpisodeTrace(seed=spec.seed, eci=spec.eci, prompt_ids=prompt_ids(tokenizer, messages)),
                        env, messages)
        episode.limit = spec.max_turns or max_turns or SAFETY_TURNS
        episode.context_ids = episode.trace.prompt_ids
        episode.observation, episode.pending = first.observation, spec.opening
        live.append(episode)
        if spec.prefix:
            _replay(episode, spec.prefix, system_prompt, tokenizer, context)
    active = [e for e in live if not e.trace.finished and len(e.trace.turns) < e.limit]
    while active:
        for episode in active:
            episode.open_turn(tokenizer)
        replies = generate([e.context_ids + e.opening for e in active])
        drawn = [[(0, len(e.opening))] if e.opening else [] for e in active]
        replies = [e.opening + reply for e, reply in zip(active, replies, strict=True)]
        _fill(active, replies, drawn, generate, tokenizer)
        still = []
        for episode, reply, spans in zip(active, replies, drawn, strict=True):
            trace = episode.trace
            episode.opening = []
            text = tokenizer.decode(reply, skip_special_tokens=True)
            step = episode.env.step(text)
            if context == "last":
                trace.rows.append(TurnRow(prompt_ids=episode.context_ids, completion_ids=reply, drawn=spans))
            trace.completion_ids += reply
            trace.env_mask += [1] * len(reply)
            trace.generated_tokens += len(reply)
            _record(trace, text, step)
            episode.observation = step.observation
            if step.done:
                continue
            if len(trace.turns) >= episode.limit:
                continue  # cut by its turn limit: not finished, not solved
            if context == "last":
                episode.context_ids = prompt_ids(tokenizer, first_messages(system_prompt, step.prompt, tokenizer))
            else:
                ended = bool(reply) and reply[-1] in stops
                env_tokens = continuation_ids(tokenizer, episode.messages, text, step.prompt, reply_ended=ended)
                trace.completion_ids += env_tokens
                trace.env_mask += [0] * len(env_tokens)
                episode.messages = [*episode.messages, {"role": "assistant", "content": text},
                                    {"role": "user", "content": step.prompt}]
                episode.context_ids = trace.prompt_ids + trace.completion_ids
            still.append(episode)
        active = still
    return [e.trace for e in live]


def _fill(active: list[_Live], replies: list[list[int]], drawn: list[list[tuple[int, int]]], generate: Generator,
          tokenizer: Any) -> None:
    """Pending fills (`Opening.fills`): a reply that writes such a field is cut before its value, the drawn value
    put in its place, and the model writes the rest again given it (one batched generation over those replies)."""
    cuts = {i: cut for i, e in enumerate(active) if (cut := e.cut_for_fill(replies[i], tokenizer)) is not None}
    if not cuts:
        return
    heads = {i: replies[i][:k] + value for i, (k, value) in cuts.items()}
    tails = generate([active[i].context_ids + heads[i] for i in cuts])
    for (i, (k, value)), tail in zip(cuts.items(), tails, strict=True):
        replies[i] = heads[i] + tail
        drawn[i] = [span for span in drawn[i] if span[1] <= k] + [(k, k + len(value))]


def _record(trace: EpisodeTrace, action: str, step: TextStep) -> None:
    trace.turns.append(Turn(action=action, reward=float(step.reward), done=step.done, error=step_error(step)))
    trace.episode_return = round(trace.episode_return + float(step.reward), 6)
    trace.final_reward = float(step.reward)
    if step.done:
        trace.record_end(step)


def _replay(episode: _Live, prefix: Sequence[str], system_prompt: str | None, tokenizer: Any,
            context: Context) -> None:
    """Step `prefix`'s actions as if the model had written them; the episode goes on from the state they leave
    (context 'last' only: a 'full' context would need the replies' tokens)."""
    if context != "last":
        raise TrainingError("a replayed prefix needs context 'last'")
    for action in prefix:
        step = episode.env.step(action)
        _record(episode.trace, action, step)
        episode.observation = step.observation
        if step.done:
            return
        episode.context_ids = prompt_ids(tokenizer, first_messages(system_prompt, step.prompt, tokenizer))
