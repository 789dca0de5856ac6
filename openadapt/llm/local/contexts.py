"""Saved KV states: a long conversation interrupted by a short request aside resumes without re-evaluating.

llama.cpp holds one context. The designer's conversation grows to thousands of tokens, and a request aside (a short
fresh context: the task and one instruction) overwrites it, so the next conversation request would evaluate its
whole prompt again (over a minute on a busy 2-core machine). Before a request throws away most of a long context,
that context's state is saved; a request that continues a saved context more than the current one loads it back (a
memory copy, well under a second). Only contexts about to be lost are saved, so a conversation that never leaves
costs nothing. The newest state is kept, beside the costliest of the others to evaluate again, and a state that a
newer one continues is dropped: kept by age or by how much of the request they share, states of a run of requests
aside would push the conversation out. A design starts with none (`new_design`, from `LocalLLM.new_design`), or the
longer states of the design before would push its conversation out.
"""

from __future__ import annotations

from typing import Any

from openadapt.llm.chat import Message
from openadapt.llm.local.errors import LocalLLMError

MIN_SAVED_TOKENS = 512  # a shorter context is cheaper to evaluate again than to keep (a state is ~0.5 GB)
SAVED_STATES = 2  # the conversation, and one other


def chat_tokens(llama: Any, messages: list[Message]) -> list[int]:
    """The tokens llama.cpp evaluates for `messages` under the GGUF's own chat template, generation prompt
    included (what `create_chat_completion` renders)."""
    from llama_cpp import llama_chat_format

    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise LocalLLMError("the model has no chat template")
    eos = llama.detokenize([llama.token_eos()]).decode("utf-8", errors="ignore")
    bos = llama.detokenize([llama.token_bos()]).decode("utf-8", errors="ignore")
    prompt = llama_chat_format.Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)(
        messages=messages).prompt
    return llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)


def shared_prefix(a: Any, b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class SavedContexts:
    """The states of contexts a request overwrote: the newest, and the costliest of the others."""

    def __init__(self) -> None:
        self.states: list[Any] = []  # llama_cpp.LlamaState
        self._held_is_stale = False  # the context llama.cpp holds is an earlier design's: never saved

    def before(self, llama: Any, tokens: list[int]) -> int:
        """Call before evaluating `tokens`: saves the current context if `tokens` would discard most of it, and
        loads a saved one that `tokens` continue further than the current one. Returns the tokens of `tokens`
        the loaded context holds (0 when none was loaded), for the provenance."""
        held = llama.n_tokens
        shared = shared_prefix(llama._input_ids[:held], tokens)
        stale, self._held_is_stale = self._held_is_stale, False
        if held >= MIN_SAVED_TOKENS and shared < held // 2 and not stale:
            current = llama._input_ids[:held]
            kept = [s for s in self.states if shared_prefix(current, s.input_ids[: s.n_tokens]) < s.n_tokens]
            ranked = sorted(kept, key=lambda s: s.n_tokens)  # the costliest to evaluate again last
            self.states = [*ranked[len(ranked) - (SAVED_STATES - 1):], llama.save_state()]
        best = max(self.states, key=lambda s: shared_prefix(s.input_ids[: s.n_tokens], tokens), default=None)
        restored = shared_prefix(best.input_ids[: best.n_tokens], tokens) if best is not None else 0
        if restored > shared + MIN_SAVED_TOKENS:
            llama.load_state(best)
            return restored
        return 0

    def clear(self) -> None:
        self.states.clear()

    def new_design(self) -> None:
        """No state of an earlier design is kept, nor the context it left behind saved."""
        self.states.clear()
        self._held_is_stale = True
