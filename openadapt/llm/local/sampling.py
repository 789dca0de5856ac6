"""Grammar-constrained sampling that checks the likeliest tokens against the grammar first.

llama.cpp's grammar sampler checks every token of the vocabulary against the grammar at every step: for Qwen's
152k tokens that costs more than a small model's forward pass, and halves the speed of schema-constrained replies
(`python benchmarks/local_llm.py`). `TopKGrammar` stands in the sampling chain where
the grammar sampler stood: it checks the `k` likeliest tokens first and keeps those the grammar allows; only when
none of them is allowed does it check the whole vocabulary. This is how llama.cpp's own tools avoid the cost
(they sample first and check the one token); checking k tokens keeps the chain's seeded sampling as it is.

What the chain then samples from differs from grammar-first sampling only in allowed tokens ranked below the
k likeliest overall, which top_k, top_p and min_p almost always drop anyway: the reply is as constrained as before.
"""

from __future__ import annotations

import ctypes
from typing import Any

#: How many of the likeliest tokens are checked against the grammar before the whole vocabulary is.
CHECK_FIRST = 64


class TopKGrammar:
    """A llama.cpp sampler (implemented in Python over its C interface) that applies a grammar to the `k`
    likeliest candidates, falling back to all of them; it advances the grammar on every accepted token."""

    def __init__(self, vocab: Any, grammar_text: str, root: str, k: int = CHECK_FIRST):
        import llama_cpp
        import numpy as np

        self._c = llama_cpp
        self._np = np
        self.k = max(1, k)
        self.grammar = llama_cpp.llama_sampler_init_grammar(vocab, grammar_text.encode("utf-8"),
                                                            root.encode("utf-8"))
        if not self.grammar:
            raise ValueError("llama.cpp rejected the grammar")
        self._small = (llama_cpp.llama_token_data * self.k)()
        self._small_view = np.ctypeslib.as_array(self._small)
        self._small_array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._small, llama_cpp.llama_token_data_p), size=self.k, selected=-1, sorted=False)
        # The C interface; the callbacks are kept referenced for as long as the sampler lives.
        self._callbacks = (
            llama_cpp.llama_sampler_i_name(lambda smpl: b"openadapt-topk-grammar"),
            llama_cpp.llama_sampler_i_accept(lambda smpl, token: llama_cpp.llama_sampler_accept(self.grammar, token)),
            llama_cpp.llama_sampler_i_apply(lambda smpl, cur_p: self.apply(cur_p)),
            llama_cpp.llama_sampler_i_reset(lambda smpl: llama_cpp.llama_sampler_reset(self.grammar)),
        )
        self._iface = llama_cpp.llama_sampler_i()
        self._iface.name, self._iface.accept, self._iface.apply, self._iface.reset = self._callbacks
        self._sampler = llama_cpp.llama_sampler(iface=ctypes.pointer(self._iface), ctx=None)

    def get_sampler(self) -> Any:
        return ctypes.pointer(self._sampler)

    def apply(self, cur_p: Any) -> None:
        cur = cur_p.contents
        n = int(cur.size)
        if n <= self.k:
            self._c.llama_sampler_apply(self.grammar, cur_p)
            return
        np = self._np
        view = np.ctypeslib.as_array(cur.data, shape=(n,))
        top = np.argpartition(view["logit"], n - self.k)[n - self.k:]
        small = self._small_view
        small[:] = view[top]
        self._small_array.size, self._small_array.selected, self._small_array.sorted = self.k, -1, False
        self._c.llama_sampler_apply(self.grammar, ctypes.byref(self._small_array))
        allowed = small[np.isfinite(small["logit"])]
        if not len(allowed):  # none of the likeliest fits the grammar: check them all
            self._c.llama_sampler_apply(self.grammar, cur_p)
            return
        view[: len(allowed)] = allowed
        cur.size, cur.selected, cur.sorted = len(allowed), -1, False

    def close(self) -> None:
        if self.grammar:
            self._c.llama_sampler_free(self.grammar)
            self.grammar = None

    def __del__(self) -> None:
        self.close()


def constrained_chain(llama: Any, grammar: Any, *, top_k: int, top_p: float, min_p: float, typical_p: float,
                      temp: float, repeat_penalty: float, frequency_penalty: float, presence_penalty: float,
                      k: int = CHECK_FIRST) -> Any:
    """The sampling chain llama-cpp-python builds for a grammar (penalties, grammar, top_k, typical, top_p,
    min_p, temperature, seeded draw; greedy at temperature 0), with `TopKGrammar` in the grammar's place."""
    import llama_cpp
    from llama_cpp import _internals

    chain = _internals.LlamaSampler()
    chain.add_penalties(n_vocab=llama.n_vocab(), penalty_last_n=llama.last_n_tokens_size,
                        penalty_repeat=repeat_penalty, penalty_freq=frequency_penalty,
                        penalty_present=presence_penalty)
    sampler = TopKGrammar(llama._model.vocab, grammar._grammar, grammar._root, k=max(k, top_k))
    llama_cpp.llama_sampler_chain_add(chain.sampler, sampler.get_sampler())
    # LlamaSampler takes a custom sampler out of the chain before freeing the chain (which would free it).
    chain.custom_samplers.append((llama_cpp.llama_sampler_chain_n(chain.sampler) - 1, sampler))
    if temp == 0.0:
        chain.add_greedy()
    else:
        chain.add_top_k(top_k)
        chain.add_typical(typical_p, 1)
        chain.add_top_p(top_p, 1)
        chain.add_min_p(min_p, 1)
        chain.add_temp(temp)
        chain.add_dist(llama._seed)
    return chain


def fast_grammar_llama(llama_class: type) -> type:
    """A subclass of llama-cpp-python's `Llama` whose grammar-constrained sampling uses `TopKGrammar`. Any
    other sampling (no grammar, mirostat, logits processors) is llama-cpp-python's own."""

    class FastGrammarLlama(llama_class):  # type: ignore[misc, valid-type]
        grammar_check_first = CHECK_FIRST  # set per request by the backend; 0: llama-cpp-python's own sampling

        def _init_sampler(self, **kw: Any) -> Any:
            grammar = kw.get("grammar")
            if (grammar is None or not self.grammar_check_first or kw.get("logits_processor") is not None
                    or kw.get("mirostat_mode", 0)):
                return super()._init_sampler(**kw)
            return constrained_chain(self, grammar, k=self.grammar_check_first, **{name: kw[name] for name in (
                "top_k", "top_p", "min_p", "typical_p", "temp", "repeat_penalty", "frequency_penalty",
                "presence_penalty")})

    return FastGrammarLlama
