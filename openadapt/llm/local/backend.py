"""`LocalLLM`: the embedded designer model, a `ChatBackend` over llama.cpp (`llama_cpp.Llama`) in this process.

Contracts:
- The model is loaded once per process: instances with the same resolved file, n_ctx, threads and n_batch share
  one `Llama` (a module-level cache), so the curriculum keeps it between escalations. Calls are serialised on it.
- Chat uses the GGUF's own chat template (`create_chat_completion`).
- `complete(schema=S)` compiles S to a grammar up front (`LlamaGrammar.from_json_schema`, then llama.cpp's own
  grammar parser) and passes that grammar, not `response_format`: llama-cpp-python falls back to free JSON when a
  schema does not compile, and this backend raises `SchemaError` instead. Compiled grammars are cached per schema.
- Sampling is seeded (`seed`, temperature, top_p, top_k, min_p): the same messages, model and settings give the
  same text. Temperature 0 is greedy.
- The grammar does not make the JSON close before `max_tokens`; a cut reply has `finish_reason == "length"`.
- Every call reports prompt/completion tokens, seconds, prompt and generation tokens/s (llama.cpp's own perf
  counters) and the finish reason in its `Completion`.
- llama.cpp's log chatter is off (`verbose=False`); errors of its own still reach stderr. Loading is reported to
  an `on_load` callback instead.

Threads: `--threads`, else `OPENADAPT_THREADS`, else the cores idle when the designer first starts (the cores
this process may use, less the load average, at least 1 and at most 8). llama.cpp's worker threads wait for each
other at every layer, so a descheduled worker stalls all of them (on 2 busy cores, 1 thread ran 8x faster than 2).
Each output value of a matrix product is computed by one thread, so the thread count does not change the text.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from openadapt.errors import UsageError
from openadapt.llm.chat import BackendInfo, Completion, Message, Sampling, SchemaError, Usage
from openadapt.llm.local.contexts import SavedContexts, chat_tokens, shared_prefix
from openadapt.llm.local.errors import LocalLLMError
from openadapt.llm.local.grammar import with_text_room
from openadapt.llm.local.sampling import CHECK_FIRST, fast_grammar_llama
from openadapt.llm.local.scripts import confined, uses_foreign_script
from openadapt.llm.local.store import ResolvedModel, resolve_model

ENV_THREADS = "OPENADAPT_THREADS"
INSTALL_HINT = "run `bash scripts/fetch_models.sh` (or `pip install 'openadapt-rl[local]'`)"


MAX_AUTO_THREADS = 8  # a cap, so that the designer does not take a large machine over whole


@functools.cache  # once per process: the loaded model is shared by thread count, and the curriculum keeps it
def idle_cores() -> int:
    """The cores this process may use that the load average leaves idle (at least 1, at most MAX_AUTO_THREADS)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        busy = round(os.getloadavg()[0])
    except OSError:  # no load average on this platform
        busy = 0
    return max(1, min(usable - busy, MAX_AUTO_THREADS))


def default_threads() -> int:
    raw = os.environ.get(ENV_THREADS, "").strip()
    if not raw:
        return idle_cores()
    if not raw.isdigit() or int(raw) < 1:
        raise UsageError(f"{ENV_THREADS}={raw!r} is not a thread count: use a whole number >= 1")
    return int(raw)


class LocalSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str | None = None  # catalogue id or .gguf path; None: $OPENADAPT_LOCAL_MODEL, then the default model
    n_ctx: int = Field(default=16384, ge=256)  # the designer's whole conversation (prefix + every piece) fits
    threads: int = Field(default_factory=default_threads, ge=1)
    n_batch: int = Field(default=512, ge=1)
    temperature: float = Field(default=0.2, ge=0.0)
    top_p: float = Field(default=0.95, gt=0.0, le=1.0)
    top_k: int = Field(default=40, ge=0)
    min_p: float = Field(default=0.05, ge=0.0, le=1.0)
    seed: int = Field(default=0, ge=0)
    max_tokens: int = Field(default=4096, ge=1)  # per call unless complete(max_tokens=) says otherwise
    # How many of the likeliest tokens are checked against a schema's grammar before the whole vocabulary is
    # (sampling.TopKGrammar); 0 checks the whole vocabulary at every step, as llama.cpp's grammar sampler does.
    grammar_check_first: int = Field(default=CHECK_FIRST, ge=0)

    def sampling(self) -> Sampling:
        return Sampling(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, min_p=self.min_p,
                        seed=self.seed, max_tokens=self.max_tokens, grammar_check_first=self.grammar_check_first)


class LoadEvent(BaseModel):
    phase: Literal["loading", "loaded"]
    model: str
    path: Path
    size: int
    seconds: float = 0.0
    cached: bool = False  # already loaded in this process
    note: str = ""  # how it was loaded where that is not the usual way (an AMX build: AMX_NOTE)


LoadCallback = Callable[[LoadEvent], None]


class _Loaded:
    """One llama.cpp model in memory, with the lock that serialises calls on it."""

    def __init__(self, llama: Any, seconds: float):
        self.llama = llama
        self.load_s = seconds
        self.lock = threading.Lock()
        self.saved = SavedContexts()


_LOADED: dict[tuple[str, int, int, int], _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def _load(model: ResolvedModel, settings: LocalSettings, on_load: LoadCallback | None) -> _Loaded:
    key = (str(model.path), settings.n_ctx, settings.threads, settings.n_batch)
    report = on_load or (lambda event: None)
    with _LOAD_LOCK:
        if key in _LOADED:
            loaded = _LOADED[key]
            report(LoadEvent(phase="loaded", model=model.name, path=model.path, size=model.size,
                             seconds=loaded.load_s, cached=True))
            return loaded
        llama_cpp = _import_llama_cpp()
        report(LoadEvent(phase="loading", model=model.name, path=model.path, size=model.size))
        started = time.monotonic()
        amx = amx_build(llama_cpp)
        try:
            with _without_extra_buffers(llama_cpp) if amx else contextlib.nullcontext():
                llama = fast_grammar_llama(llama_cpp.Llama)(model_path=str(model.path), n_ctx=settings.n_ctx,
                                        n_batch=settings.n_batch, n_threads=settings.threads,
                                        n_threads_batch=settings.threads, seed=settings.seed, verbose=False)
        except ValueError as exc:
            raise LocalLLMError(f"llama.cpp could not load {model.path} ({exc}): it is not a model this "
                                "llama.cpp supports, or the file is damaged (`openadapt models verify`)") from None
        loaded = _Loaded(llama, round(time.monotonic() - started, 3))
        _LOADED[key] = loaded
        report(LoadEvent(phase="loaded", model=model.name, path=model.path, size=model.size,
                         seconds=loaded.load_s, note=AMX_NOTE if amx else ""))
        return loaded


AMX_NOTE = ("this llama.cpp was built with its AMX kernels, which crash on Q4_K models on some Xeons "
            "(ggml-org/llama.cpp#20824): loaded without repacked weights, about a third slower; "
            "`bash scripts/setup.sh` rebuilds llama-cpp-python without them")


def amx_build(llama_cpp: Any) -> bool:
    """Whether this llama.cpp holds its AMX kernels (a `-march=native` build on a Sapphire Rapids Xeon does): on
    some Xeons they segfault in the first matrix product of a Q4_K model (`AMX_NOTE`)."""
    return "AMX_INT8 = 1" in llama_cpp.llama_print_system_info().decode("utf-8", "replace")


@contextlib.contextmanager
def _without_extra_buffers(llama_cpp: Any) -> Iterator[None]:
    """Load with llama.cpp's extra buffer types off (`use_extra_bufts`: the weights are not repacked, so the AMX
    kernels are never reached). `Llama()` takes no such argument: it builds its parameters from
    `llama_model_default_params()` and loads in the same call, so that function answers with the flag off for
    the length of the load (under `_LOAD_LOCK`)."""
    module = llama_cpp.llama_cpp
    default = module.llama_model_default_params

    def params() -> Any:
        value = default()
        value.use_extra_bufts = False
        return value

    module.llama_model_default_params = params
    try:
        yield
    finally:
        module.llama_model_default_params = default


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise LocalLLMError(f"the local model backend needs llama-cpp-python: {INSTALL_HINT}") from None
    return llama_cpp


class LocalLLM:
    """The embedded chat model. Raises `UsageError` subclasses for a missing/corrupt model, `LocalLLMError` for
    llama.cpp failures, `SchemaError` for a schema it cannot enforce."""

    def __init__(self, settings: LocalSettings | None = None, *, on_load: LoadCallback | None = None,
                 models_root: Path | None = None):
        self.settings = settings or LocalSettings()
        self.model = resolve_model(self.settings.model, root=models_root)
        self._loaded = _load(self.model, self.settings, on_load)
        self._grammars: dict[str, Any] = {}

    @property
    def load_s(self) -> float:
        return self._loaded.load_s

    def describe(self) -> BackendInfo:
        return BackendInfo(kind="local", model=self.model.name, model_id=self.model.model_id,
                           sha256=self.model.sha256, size_bytes=self.model.size, threads=self.settings.threads,
                           n_ctx=self.settings.n_ctx, sampling=self.settings.sampling())

    def reset_cache(self) -> None:
        """Forget the KV cache, so the next call evaluates its whole prompt (benchmarks; never needed for
        correctness: a cached prefix gives the same text)."""
        with self._loaded.lock:
            self._loaded.llama.reset()
            self._loaded.saved.clear()

    def new_design(self) -> None:
        """Forget the saved contexts of earlier designs (they are never continued, and they outweighed the new
        design's conversation); the KV cache itself stays."""
        with self._loaded.lock:
            self._loaded.saved.new_design()

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in this model's vocabulary (to size prompts and examples to n_ctx)."""
        return len(self._loaded.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def grammar_for(self, schema: dict, confine: bool = True) -> Any:
        """The compiled grammar of a JSON schema, `confine`d to the scripts of a conversation that uses none of
        `scripts.FOREIGN_SCRIPTS`; `SchemaError` when llama.cpp cannot enforce it."""
        key = json.dumps(schema, sort_keys=True) + str(confine)
        if key not in self._grammars:
            self._grammars[key] = _compile_schema(self._loaded.llama, with_text_room(schema), confine)
        return self._grammars[key]

    def option_logprobs(self, messages: list[Message], options: list[str]) -> dict[str, float]:
        """log P(the reply begins with each option): see `_option_logprobs`."""
        with self._loaded.lock:
            return _option_logprobs(self._loaded.llama, messages, options, self._loaded.saved)

    def complete(self, messages: list[Message], *, schema: dict | None = None, max_tokens: int | None = None,
                 temperature: float | None = None, reseed: int = 0) -> Completion:
        import llama_cpp

        confine = not uses_foreign_script([str(m.get("content") or "") for m in messages])
        grammar = self.grammar_for(schema, confine) if schema is not None else None
        s = self.settings
        llama = self._loaded.llama
        with self._loaded.lock:
            llama_cpp.llama_perf_context_reset(llama.ctx)
            started = time.monotonic()
            restored = self._loaded.saved.before(llama, chat_tokens(llama, messages))
            llama.grammar_check_first = s.grammar_check_first
            try:
                temperature = s.temperature if temperature is None else temperature
                response = llama.create_chat_completion(
                    messages=messages, temperature=temperature, top_p=s.top_p, top_k=s.top_k, min_p=s.min_p,
                    seed=None if s.seed is None else s.seed + reseed, max_tokens=max_tokens or s.max_tokens,
                    grammar=grammar, stream=False)
            except ValueError as exc:
                if "exceed context window" in str(exc):
                    raise LocalLLMError(f"the prompt does not fit the local model's context ({exc}): raise n_ctx "
                                        "or send less") from None
                raise LocalLLMError(f"llama.cpp failed: {exc}") from None
            duration = time.monotonic() - started
            perf = llama_cpp.llama_perf_context(llama.ctx)
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        prompt_s = perf.t_p_eval_ms / 1000
        # Generation as the caller waits for it: decoding plus sampling (a grammar's sampling cost is not in
        # llama.cpp's eval counter, and it is what makes constrained replies slower).
        gen_s = duration - prompt_s
        completion_tokens = int(usage.get("completion_tokens", 0))
        # llama.cpp reports at least 1 evaluated prompt token even when the whole prompt came from the KV cache.
        evaluated = perf.n_p_eval if perf.t_p_eval_ms > 0 else 0
        return Completion(
            text=choice["message"].get("content") or "", finish_reason=choice.get("finish_reason"),
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                        total_tokens=int(usage.get("total_tokens", 0))),
            duration_s=round(duration, 3), constrained=grammar is not None,
            tokens_per_s=round(completion_tokens / gen_s, 2) if gen_s > 0 and completion_tokens else None,
            prompt_tokens_per_s=round(evaluated / prompt_s, 2) if prompt_s > 0 else None,
            prompt_s=round(prompt_s, 3), cached_prompt_tokens=max(0, prompt_tokens - evaluated),
            restored_tokens=restored,
        )


def _option_logprobs(llama: Any, messages: list[Message], options: list[str],
                     saved: SavedContexts) -> dict[str, float]:
    """log P(the reply starts with each option) after `messages`, from the next-token logits: a reading of
    the model's preference that sampling cannot skew. The prompt shares the KV cache with previous calls."""
    import numpy as np

    tokens = chat_tokens(llama, messages)
    if len(tokens) >= llama.n_ctx():
        raise LocalLLMError(f"the prompt ({len(tokens)} tokens) does not fit the local model's context")
    saved.before(llama, tokens)
    cached = shared_prefix(llama._input_ids[: llama.n_tokens], tokens[:-1])
    llama.n_tokens = cached
    llama._ctx.kv_cache_seq_rm(-1, cached, -1)
    llama.eval(tokens[cached:])
    logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).astype(np.float64)
    logits -= logits.max()
    logprobs = logits - np.log(np.exp(logits).sum())
    scores = {}
    for option in options:
        ids = {llama.tokenize(variant.encode("utf-8"), add_bos=False, special=False)[0]
               for variant in (option, " " + option, option.capitalize(), " " + option.capitalize())}
        scores[option] = float(np.logaddexp.reduce([logprobs[i] for i in ids]))
    return scores


def _compile_schema(llama: Any, schema: dict, confine: bool = False) -> Any:
    """Compile in two steps, both of which llama-cpp-python would otherwise let fail quietly: the schema to GBNF
    (its converter raises), then the GBNF in llama.cpp's parser (it returns NULL and logs to stderr). `confine`:
    no character of `scripts.FOREIGN_SCRIPTS` in any string."""
    import llama_cpp
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

    try:
        gbnf = json_schema_to_gbnf(json.dumps(schema))
        grammar = LlamaGrammar.from_string(confined(gbnf) if confine else gbnf, verbose=False)
    except Exception as exc:  # the converter raises AssertionError, ValueError, KeyError, ...
        raise SchemaError(f"the JSON schema cannot be compiled to a llama.cpp grammar: {_one_line(exc)}") from None
    with _captured_stderr() as captured:
        # Private attributes: llama-cpp-python 0.3.x offers no public way to check a grammar against the vocab.
        sampler = llama_cpp.llama_sampler_init_grammar(llama._model.vocab, grammar._grammar.encode("utf-8"),
                                                       grammar._root.encode("utf-8"))
    if not sampler:
        why = next((line for line in captured() if line.strip()), "no reason given")
        raise SchemaError(f"llama.cpp rejected the grammar of the JSON schema: {why.strip()[:200]}")
    llama_cpp.llama_sampler_free(sampler)
    return grammar


@contextlib.contextmanager
def _captured_stderr() -> Iterator[Callable[[], list[str]]]:
    """Capture file descriptor 2 (llama.cpp writes there from C), so its message can go into our error."""
    lines: list[str] = []
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lambda: lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode("utf-8", "replace").splitlines())


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:240]
