"""The conversation of one design with a chat backend (the embedded model or an endpoint)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from openadapt.designer.deadline import NO_DEADLINE, Deadline
from openadapt.llm.chat import ChatBackend, Completion, ReplyError, Usage


@dataclass
class Session:
    """The conversation of one design: a fixed prefix, then the (instruction, answer) turns in the order they
    were asked. It only ever grows, so every request reuses the model's KV cache for all that came before and
    pays only for its own instruction; a rewritten piece is a new turn (the latest answer of a piece is the one
    that counts). When the conversation nears the context window it is compacted to the latest answer of each
    piece, in plan order (one re-evaluation, then growth again)."""

    backend: ChatBackend
    prefix: list[dict[str, str]]
    usage: Usage = field(default_factory=Usage)
    completions: list[dict[str, Any]] = field(default_factory=list)
    turns: list[tuple[str | None, str, str]] = field(default_factory=list)  # (piece path, instruction, answer)
    order: list[str] = field(default_factory=list)  # the pieces' paths in plan order
    budget_chars: int = 0  # compact beyond this many characters (0: from the backend's context window)
    deadline: Deadline = NO_DEADLINE  # no request starts after it (OutOfTime)

    @property
    def messages(self) -> list[dict[str, str]]:
        return self._messages()

    def _messages(self, apart: frozenset[str] = frozenset()) -> list[dict[str, str]]:
        out = list(self.prefix)
        for key, ask, answer in self.turns:
            if key not in apart:
                out += [{"role": "user", "content": ask}, {"role": "assistant", "content": answer}]
        return out

    def ask(self, instruction: str, model: type[BaseModel], max_tokens: int, key: str | None = None,
            schema: dict[str, Any] | None = None, apart: frozenset[str] = frozenset(),
            recorded: Callable[[BaseModel], str] | None = None) -> BaseModel:
        """One constrained request; with `key`, the answer is kept as that piece's latest turn (as `recorded`
        gives it, default the reply). The turns of the pieces in `apart` are left out of this request (not of
        later ones): the items of one list are each written from the same point of the conversation, out of
        sight of each other, and the model's cache still serves everything up to that point."""
        self.deadline.check()
        self._compact_if_needed(len(instruction) + max_tokens * 4)
        messages = [*self._messages(apart), {"role": "user", "content": instruction}]
        schema = schema or _schema(model)
        completion = self.backend.complete(messages, schema=schema, max_tokens=max_tokens)
        self.record(completion, key)
        try:
            value = completion.parse_as(model)
        except ReplyError:
            if not completion.truncated:
                raise
            # The constrained answer ran out of room: ask once more with twice the room.
            self.deadline.check()
            completion = self.backend.complete(messages, schema=schema, max_tokens=max_tokens * 2)
            self.record(completion, key)
            value = completion.parse_as(model)
        if key is not None:
            self.turns.append((key, instruction, recorded(value) if recorded else completion.text.strip()))
        return value

    def ask_aside(self, instruction: str, model: type[BaseModel], max_tokens: int, key: str | None = None,
                  schema: dict[str, Any] | None = None, temperature: float | None = None,
                  turn: str | None = None, reseed: int = 0,
                  recorded: Callable[[BaseModel], str] | None = None) -> BaseModel:
        """One constrained request outside the conversation: the system prompt and the task (the first part of
        the opening message, before the worked example), then the instruction. For a small model that keeps
        copying what the conversation already holds, a short fresh context breaks the loop. With `key`, the
        answer joins the conversation as that piece's latest turn (later pieces see it). `temperature` overrides
        the backend's for this request (a repeat asked again gets more varied words), and `reseed` is added to its
        seed (asked again in the same words, the model gives the same answer at any temperature). `turn` is the
        request as the conversation records it (default: the instruction): a short one costs the next conversation
        request less to evaluate, and `recorded` the answer as it records it (default: the reply)."""
        self.deadline.check()
        task = self.prefix[1]["content"].split("\n\nYou will write")[0] if len(self.prefix) > 1 else ""
        messages = [self.prefix[0], {"role": "user", "content": f"{task}\n\n{instruction}"}]
        hotter = ({} if temperature is None else {"temperature": temperature}) | ({"reseed": reseed} if reseed else {})
        completion = self.backend.complete(messages, schema=schema or _schema(model), max_tokens=max_tokens,
                                           **hotter)
        self.record(completion, key, aside=True)
        if completion.truncated:  # out of room, like `ask`: once more with twice the room
            self.deadline.check()
            completion = self.backend.complete(messages, schema=schema or _schema(model), max_tokens=max_tokens * 2,
                                               **hotter)
            self.record(completion, key, aside=True)
        value = completion.parse_as(model)
        if key is not None:
            answer = recorded(value) if recorded is not None else completion.text.strip()
            self.turns.append((key, turn or instruction, answer))
        return value

    def forget(self) -> None:
        """Drop every piece's turns (a whole new design starts from the prefix)."""
        self.turns.clear()

    def _compact_if_needed(self, extra_chars: int) -> None:
        budget = self.budget_chars or int(0.8 * 3.0 * (self.backend.describe().n_ctx or 8192))
        size = sum(len(m["content"]) for m in self.messages) + extra_chars
        if size <= budget:
            return
        latest: dict[str, tuple[str | None, str, str]] = {}
        for turn in self.turns:
            if turn[0] is not None:
                latest[turn[0]] = turn
        rank = {path: i for i, path in enumerate(self.order)}
        self.turns = sorted(latest.values(), key=lambda t: rank.get(t[0], len(rank)))

    def record(self, completion: Completion, key: str | None, aside: bool = False) -> None:
        """Count a completion in this session's usage and provenance (one asked outside it, too)."""
        self.usage.add(completion.usage)
        record = {"piece": key, "aside": aside} if aside else {"piece": key}
        record |= {"tokens": completion.usage.completion_tokens, "s": round(completion.duration_s, 2),
                  "tokens_per_s": completion.tokens_per_s, "finish": completion.finish_reason}
        if completion.prompt_s is not None:  # the local model: what the prompt cost, and how much was cached
            record |= {"prompt_tokens": completion.usage.prompt_tokens, "cached": completion.cached_prompt_tokens,
                       "prompt_s": completion.prompt_s}
            if completion.restored_tokens:
                record["restored"] = completion.restored_tokens  # a saved context loaded back
        if completion.truncated:  # where a reply that ran out of room was going (provenance keeps it)
            record["tail"] = completion.text[-160:]
        self.completions.append(record)


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()
