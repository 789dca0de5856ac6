"""Conversations as the model sees them: system prompt, then observations (user) and actions (assistant)."""

from __future__ import annotations

from typing import Any

Messages = list[dict[str, str]]


def first_messages(system_prompt: str | None, prompt: str, tokenizer: Any = None) -> Messages:
    """The opening conversation. Without a system prompt it is the user turn alone; with one whose chat template
    rejects a system role (some do), the system prompt opens the first user turn instead."""
    if system_prompt is None:
        return [{"role": "user", "content": prompt}]
    if tokenizer is not None and not supports_system_role(tokenizer):
        return [{"role": "user", "content": f"{system_prompt}\n\n{prompt}"}]
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": prompt}]


def supports_system_role(tokenizer: Any) -> bool:
    cached = getattr(tokenizer, "_openadapt_system_role", None)
    if cached is None:
        try:
            tokenizer.apply_chat_template([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
                                          tokenize=False, add_generation_prompt=True)
            cached = True
        except Exception:  # jinja2 TemplateError raised by the template itself ("System role not supported")
            cached = False
        tokenizer._openadapt_system_role = cached
    return cached


def prompt_ids(tokenizer: Any, messages: Messages) -> list[int]:
    """Token ids of `messages` followed by the assistant's generation prompt."""
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
    ids = out["input_ids"]
    return list(ids[0] if ids and isinstance(ids[0], list) else ids)


def continuation_ids(tokenizer: Any, messages: Messages, reply: str, observation: str,
                     reply_ended: bool = True) -> list[int]:
    """The tokens the chat template puts between the end of the assistant's `reply` and the next generation
    prompt, with the new `observation` as the user turn. When `reply_ended` the model generated its own EOS
    (already among its tokens), so the template's end-of-turn token is not repeated; a reply cut at the token
    limit gets it here. These are environment tokens: in a multi-turn rollout they are masked from the loss."""
    before = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": reply}], tokenize=False)
    after = tokenizer.apply_chat_template(
        [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": observation}],
        add_generation_prompt=True, tokenize=False)
    cut = before.rfind(reply) + len(reply) if reply else len(before)
    if not after.startswith(before[:cut]):
        raise ValueError("the chat template renders an earlier turn differently once a later turn follows")
    tail = after[cut:]
    eos = tokenizer.eos_token or ""
    stripped = tail.lstrip()
    if reply_ended and eos and stripped.startswith(eos):  # the model's own EOS already ended the reply
        tail = stripped[len(eos):]
    return list(tokenizer(tail, add_special_tokens=False)["input_ids"])
