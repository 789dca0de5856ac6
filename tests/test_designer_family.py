"""The family-domain designer against a real chat-completions server on loopback whose replies come from a
scripted "model": it describes the task, scores the families, and writes the pieces it is asked for from a domain
it knows (the kubernetes_cluster example), so the test can break single pieces and watch the repair by path."""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import re
from dataclasses import replace
from typing import ClassVar

import pytest
import yaml
from fake_openai import FakeOpenAI, Scripted
from pydantic import BaseModel, Field

from openadapt.designer.copying import ENTITY_NAME, copied_from_example
from openadapt.designer.deadline import NO_DEADLINE
from openadapt.designer.draft import Draft
from openadapt.designer.family_design import FamilyDomainDesigner
from openadapt.designer.generate import GenerateRequest, generate
from openadapt.designer.pieces import (
    cut_rambles,
    distinct_references,
    drop_repeated_prose,
    plan_pieces,
    thin_repeats,
)
from openadapt.designer.repair import drop_hopeless, drop_surplus, regenerate
from openadapt.designer.session import Session
from openadapt.envpkg.loader import seed_names
from openadapt.families import all_families, get_family
from openadapt.families.domain import Code, DomainError, DomainProblem, iter_texts, without_tasked
from openadapt.llm.chat import LLMError
from openadapt.llm.endpoint import LLMClient, LLMConfig

TASK = "Train an agent to debug a Kubernetes deployment whose pods keep crashing, using events, logs and manifests"
KEY = "sk-test-FAMILY-8e21"


BRIEF = ("1. **Crash loop**: check the pod's events; you see BackOff restarting failed container.\n"
         "2. **Out of memory**: check the last state; you see OOMKilled, exit code 137.\n"
         "3. **Bad image tag**: check the events; you see ErrImagePull.")


class ScriptedModel:
    """Answers each request from `world` (a domain as a dict) by what the last user message asks for."""

    def __init__(self, world: dict, fits: dict[str, int] | None = None, break_once: dict[str, dict] | None = None):
        self.world = world
        self.fits = {"diagnosis": 9} if fits is None else fits
        self.break_once = dict(break_once or {})  # piece path -> a wrong value sent the first time
        self.asked: list[str] = []
        self.counts: dict[str, int] = {}  # items per list, as the designer asks for them
        self.brief = BRIEF
        self.keys: dict[str, str] = {}  # a list's key field where it is neither `name` nor `id` (Domain.KEYS)

    def __call__(self, body: dict) -> Scripted:
        text = body["messages"][-1]["content"]
        start = max(text.rfind("\n\nWrite "), text.rfind("\n\nYour `"), text.rfind("\n\n`domain."),
                    text.rfind("\n\nFirst name the `"))
        if text.startswith("The task:") and "This world's domain so far: " in text:  # aside: the task, the world
            text = text.split("This world's domain so far: ", 1)[1].split("\n\n", 1)[1]
        elif text.startswith("The task:") and start > 0:  # a request aside: the task, then the instruction
            text = text[start + 2:]
        self.asked.append(text)
        self.schema = body.get("response_format", {}).get("json_schema", {}).get("schema", {})
        if "response_format" not in body and "As an expert of this world" in text:  # the brief, free text
            return Scripted(self.brief)
        if "Answer with the whole domain as one JSON object" in text:  # --design-mode whole: the world as it is
            return Scripted(json.dumps(self.world))
        return Scripted(json.dumps(self.answer(text, self.schema.get("title", ""))))

    def answer(self, text: str, title: str):
        if title == "TaskMechanic":
            return {"world": "a Kubernetes cluster", "agent_does": "reads pod events and logs, then names the "
                    "broken workload and its fix.", "succeeds_when": "the workload is healthy again"}
        if title == "FamilyPick":
            best = max(self.fits, key=self.fits.get) if self.fits else "none"
            return {"reason": f"scripted: {best} models it", "family": best}
        if title == "_Reason":
            return {"reason": "scripted reason"}
        if (match := re.match(r"Your `([^`]+)` has problems", text)):
            return self.piece(match.group(1))
        if (match := re.match(r"First name the `(\w+)`", text)):
            field = match.group(1)
            count = self.schema["properties"]["items"]["maxItems"]
            key = self.keys.get(field) or ("name" if field == "components" else "id")
            names = [item[key] for item in self.world[field][:count]]
            if f"domain.{field}.keys" in self.break_once:
                names = self.break_once.pop(f"domain.{field}.keys")
            return {"items": names}
        if "Write one more line for the domain's `symptom_lines`" in text:
            return {"line": f"ERROR {{component}}: call to {{dependency}} timed out (scripted {len(self.asked)})"}
        if "Write one more line for the domain" in text:
            return {"line": f"INFO {{component}} scripted benign line {len(self.asked)}"}
        if (match := re.search(r"Name one more of the `(\w+)` of this world", text)):
            field, taken = match.group(1), set(re.findall(r'"([^"]+)"', text.split("every one of ")[1].split("]")[0]))
            key = self.keys.get(field) or ("name" if field == "components" else "id")
            return {"name": next(i[key] for i in self.world[field] if i[key] not in taken)}
        if (match := re.search(r"entry .* needs another `(\w+)`", text)):
            return {match.group(1): f"scripted_reading_{len(self.asked)}"}
        if " repeats another item's" in text:
            return {"text": f"scripted note number {len(self.asked)}, in its own words"}
        if text.startswith("The name "):  # a name of its own each time (a number would make numbered copies)
            return {"name": "renamed-" + "".join(chr(97 + int(d)) for d in str(len(self.asked)))}
        if text.startswith("Write the domain's header fields"):
            return {k: v for k, v in self.world.items() if not isinstance(v, (list, dict))}
        if (match := re.match(r"Write `(\w+)` item (\d+) of (\d+)", text)):
            self.counts[match.group(1)] = int(match.group(3))
            path = f"domain.{match.group(1)}[{int(match.group(2)) - 1}]"
            if path in self.break_once:
                return self.break_once.pop(path)
            return self.piece(path)
        if (match := re.match(r"Write `(\w+)\.(\w+)` as JSON", text)):  # one list of a record (the local model)
            if f"domain.{match.group(1)}.{match.group(2)}" in self.break_once:
                return self.break_once.pop(f"domain.{match.group(1)}.{match.group(2)}")
            lines = self.world[match.group(1)][match.group(2)]
            return {"items": lines[: self.schema["properties"]["items"]["maxItems"]]}
        if (match := re.match(r"Write `(\w+)` as JSON", text)):
            if f"domain.{match.group(1)}" in self.break_once:
                return self.break_once.pop(f"domain.{match.group(1)}")
            value = self.world[match.group(1)]
            if isinstance(value, list):  # as many as the schema asks for
                return {"items": value[: self.schema["properties"]["items"].get("maxItems", len(value))]}
            return value
        if text.startswith("An earlier version"):
            return {"ok": True}
        if (match := re.search(r"Name three other values for (?:its )?`(\w+)`", text)):  # an identifier of a record
            n = "".join(chr(97 + int(d)) for d in str(len(self.asked)))
            return {"values": [f"{match.group(1)}_{n}_{suffix}" for suffix in ("one", "two", "three")]}
        if (match := re.match(r"`(\w+)` (has|is|takes) ", text)):  # one header text, asked for aside
            return {"text": self.world[match.group(1)]}
        raise AssertionError(f"the scripted model does not know how to answer: {text[:300]} ... {text[-400:]}")

    def piece(self, path: str):
        match = re.match(r"domain\.(\w+)\[(\d+)\]", path)
        if match is None:
            field = path.removeprefix("domain").lstrip(".")
            if not field:
                return {k: v for k, v in self.world.items() if not isinstance(v, (list, dict))}
            value = self.world[field]
            if isinstance(value, list):
                return {"items": value[: self.schema["properties"]["items"].get("maxItems", len(value))]}
            return value
        field, index = match.group(1), int(match.group(2))
        item = dict(self.world[field][index])
        if field == "components":  # only refer to the components the designer will have asked for
            written = {c["name"] for c in self.world[field][: self.counts.get(field, len(self.world[field]))]}
            item["depends_on"] = [d for d in item["depends_on"] if d in written]
        return item


FIRST = ["ingress-nginx", "checkout-api", "payments-gateway", "payments-postgres", "orders-postgres", "redis-cache"]


@pytest.fixture
def world():
    """The kubernetes example, its components ordered so that any first six make a valid smaller world."""
    data = get_family("diagnosis").load_example("kubernetes_cluster").model_dump(mode="json")
    data["components"].sort(key=lambda c: FIRST.index(c["name"]) if c["name"] in FIRST else len(FIRST))
    return data


def config(server: FakeOpenAI) -> LLMConfig:
    return LLMConfig(base_url=server.base_url, model="designer-1", api_key=KEY, backoff_s=0.01)


def test_the_family_is_chosen_by_scores_and_the_domain_written_in_pieces(llm, world, tmp_path):
    from openadapt.validator import Validator

    model = ScriptedModel(world, fits={"diagnosis": 9, "workflow": 6})
    llm.responder = model
    with Validator("bwrap") as validator:  # the default 20 episodes: tier separation on 6 is noise
        result = generate(GenerateRequest(task=TASK, output_root=tmp_path, name="pods", llm=config(llm),
                                          design_mode="pieces"), validator=validator)
    assert result.ok, result.reason
    provenance = json.loads((result.path / "provenance.json").read_text())
    choice = provenance["attempts"][0]["notes"]["choice"]
    assert choice["family"] == "diagnosis" and choice["method"] == "constrained choice with a reason"
    assert choice["reason"].startswith("scripted") and set(choice["scores"]) >= {"diagnosis", "workflow"}
    assert provenance["designer"]["family"] == "diagnosis@1"
    used = [a["usage"]["completion_tokens"] for a in provenance["attempts"]]
    assert provenance["usage"]["completion_tokens"] == sum(used) > 0  # each attempt counts only its own tokens
    domain = (result.path / "domain.yaml").read_text()
    assert "kubectl_logs" in domain and "api-gateway" not in domain
    # every piece was its own constrained request; the conversation grew (the model's cache is reused)
    pieces = [r for r in llm.requests if r.get("response_format", {}).get("json_schema", {}).get("schema", {})
              .get("title") == "Fault"]
    family = get_family("diagnosis")
    planned = [p for p in plan_pieces(family.domain, family.load_example("incident_triage"))
               if p.field == "faults" and not p.keys]
    assert len(pieces) == len(planned) >= 5
    # a fault holds lines of prose (its evidence): each is written aside, out of the worked example's sight,
    # with the brief, the world so far and every field's description; later pieces see them all
    assert all(len(p["messages"]) == 2 and "Here is a worked example" not in json.dumps(p["messages"])
               and "Crash loop" in p["messages"][1]["content"] and "`evidence`: Log lines" in p["messages"][1][
                   "content"] for p in pieces)
    victims = [r for r in llm.requests if r["messages"][-1]["content"].startswith("Write `victim_metrics` item 1")]
    assert len(victims[0]["messages"]) > len(pieces[0]["messages"]) + 2 * len(pieces)
    # the conversation records each fault's request in one line, not with the world and the guide it was sent
    recorded = [m["content"] for m in victims[0]["messages"] if m["content"].startswith("Write `faults` item")]
    assert len(recorded) == len(pieces) and all("\n" not in r and r.endswith("as JSON.") for r in recorded)
    assert KEY not in "".join(p.read_text() for p in result.path.rglob("*") if p.is_file())
    # the expert's brief: free text asked before any piece, out of the worked example's sight, then in every
    # piece's context ahead of the example, markdown emphasis off; provenance keeps it
    (asked,) = [r for r in llm.requests if "As an expert of this world" in r["messages"][-1]["content"]]
    assert "response_format" not in asked and "Here is a worked example" not in json.dumps(asked["messages"])
    assert "the six most common root causes" in asked["messages"][-1]["content"]  # the family's own question
    opening = victims[0]["messages"][1]["content"]
    brief = "1. Crash loop: check the pod's events; you see BackOff restarting failed container."
    assert brief in opening and opening.index(brief) < opening.index("Here is a worked example")
    # the task's mechanic as whole sentences (run together, the 1.5B wrote it into a summary as it stood)
    assert "names the broken workload and its fix. It succeeds when the workload is healthy again.\n" in opening
    assert provenance["attempts"][0]["notes"]["brief"].startswith(brief)


def test_a_broken_piece_is_asked_for_again_by_its_field_path(llm, world):
    broken = {**world["components"][1], "depends_on": ["ghost-service"]}  # what a schema-blind model might send
    model = ScriptedModel(world, break_once={"domain.components[1]": broken})
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    repair = next(a for a in model.asked if a.startswith("Your `domain.components[1]` has problems"))
    assert "domain.components[1].depends_on[0]: 'ghost-service' is not a defined component" in repair
    assert candidate.notes["piece_repair_rounds"] == 1


def test_a_text_written_four_times_is_reworded_in_one_round_keeping_the_first(llm, world):
    same = "owned by the platform team; checked by the on-call engineer every morning"
    def copy(i: int) -> dict:
        item = world["components"][i]
        return {**item, "note": same, "depends_on": [d for d in item["depends_on"] if d in FIRST]}

    model = ScriptedModel(world, break_once={f"domain.components[{i}]": copy(i) for i in range(4)})
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    asked = [a for a in model.asked if " repeats another item's" in a]
    assert [a.split("`")[3] for a in asked] == [f"domain.components[{i}]" for i in (1, 2, 3)]
    notes = [c["note"] for c in yaml.safe_load(candidate.files["domain.yaml"])["components"]]
    assert candidate.notes["piece_repair_rounds"] == 1 and notes.count(same) == 1 and notes[0] == same


def test_a_repair_switched_off_leaves_its_problem_to_the_pieces_rewrite(llm, world):
    same = "owned by the platform team; checked by the on-call engineer every morning"
    broken = {f"domain.components[{i}]": {**world["components"][i], "note": same, "depends_on": [
        d for d in world["components"][i]["depends_on"] if d in FIRST]} for i in range(3)}
    model = ScriptedModel(world, break_once=broken)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible",
                                    off=frozenset({"regenerate"}))
    assert designer.design().usable
    assert not any(" repeats another item's" in a for a in model.asked)  # the primitive is off
    assert any(a.startswith("Your `domain.components[1]` has problems") for a in model.asked)  # the piece instead
    assert designer.info.settings["switched_off"] == ["regenerate"]
    with pytest.raises(ValueError, match="unknown designer switch"):
        FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, off=frozenset({"no_such_rule"}))


def test_a_name_copied_from_the_worked_example_is_renamed_everywhere(llm, world):
    names = [c["name"] for c in world["components"][:6]]
    copied = [n if n != "payments-postgres" else "wt-01" for n in names]  # the worked example's (wind park) name
    world["components"] = [{**c, "name": "wt-01"} if c["name"] == "payments-postgres" else
                           {**c, "depends_on": ["wt-01" if d == "payments-postgres" else d
                                                for d in c["depends_on"]]} for c in world["components"]]
    model = ScriptedModel(world, break_once={"domain.components.keys": copied})
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert any("copied from the worked example" in a and a.startswith("The name 'wt-01'") for a in model.asked)
    assert candidate.usable, candidate.problems
    domain = candidate.files["domain.yaml"]
    assert "wt-01" not in domain and domain.count("renamed-") >= 2  # the item and who depends on it
    assert ENTITY_NAME.match("domain.components[0].name") and not ENTITY_NAME.match("domain.faults[0].metrics[0].name")


@pytest.mark.parametrize("first", ["wt-02", "north-wt-01", "scada-server"])
def test_a_copied_name_renamed_to_the_same_name_numbered_is_asked_once_more_hotter(llm, world, first):
    # the packaging supplier, 2026-12-05: asked to rename the freight example's persona 'rate_hawk', the 1.5B
    # answered 'rate_hawk2', refused as the same name numbered, and the copy stayed to the end; the daily sales
    # report's 'inventory_flow' came back 'weekly_inventory_flow', the old name with a word added; the invoice
    # matching's 'deposit_in_transit' came back 'outstanding_cheque', another name of the worked example
    names = [c["name"] for c in world["components"][:6]]
    copied = [n if n != "payments-postgres" else "wt-01" for n in names]
    world["components"] = [{**c, "name": "wt-01"} if c["name"] == "payments-postgres" else
                           {**c, "depends_on": ["wt-01" if d == "payments-postgres" else d
                                                for d in c["depends_on"]]} for c in world["components"]]

    class Numbers(ScriptedModel):
        def answer(self, text, title):
            if "The name 'wt-01' of `components`" in text:
                return {"name": "edge-router" if f"{first!r} is " in text else first}
            return super().answer(text, title)

    model = Numbers(world, break_once={"domain.components.keys": copied})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    asked = [r for r in llm.requests if "The name 'wt-01' of `components`" in r["messages"][-1]["content"]]
    assert len(asked) == 2 and asked[1].get("temperature", 0) > asked[0].get("temperature", 0)
    domain = candidate.files["domain.yaml"]
    assert "wt-0" not in domain and domain.count("edge-router") >= 2  # the item and who depends on it


def test_a_task_no_family_fits_is_a_clear_answer(llm, world):
    llm.responder = ScriptedModel(world, fits={})  # every family scores 2
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "poems", "Train an agent to compose sonnets",
                                    kind="openai-compatible")
    candidate = designer.design()
    assert not candidate.usable and candidate.problems[0].startswith("no family fits the task (scripted")
    assert designer.deterministic  # asking again would give the same answer: the loop stops


def test_the_endpoint_falls_back_to_custom_mechanics_when_no_family_fits(llm, world, tmp_path, validator):
    from scripted_designs import design_reply

    scripted, choice_requests = ScriptedModel(world, fits={}), 1  # the family choice ('none')

    def respond(body: dict) -> Scripted:
        return scripted(body) if len(llm.requests) <= choice_requests else Scripted(design_reply())

    llm.responder = respond
    result = generate(GenerateRequest(task="A lock opened by a code from higher/lower hints", output_root=tmp_path,
                                      name="lock_game", llm=config(llm)), validator=validator)
    assert result.ok, result.reason
    notes = result.provenance.attempts[0].notes
    assert notes["fallback"] == "custom mechanics" and notes["choice"]["family"] is None
    assert (result.path / "custom" / "environment.py").is_file()


class PriorBiased:
    """A backend whose next-token log-probabilities favour one name whatever the task (a small model's prior),
    plus a real preference for the task's family: calibration must remove the first and keep the second."""

    def __init__(self, prior: str, truth: str):
        self.prior, self.truth = prior, truth

    def option_logprobs(self, messages, options):
        task = messages[-1]["content"]
        return {o: (3.0 if o == self.prior else 0.0) + (1.0 if o == self.truth and "(no task" not in task else 0.0)
                for o in options}

    def describe(self):
        from openadapt.llm.chat import BackendInfo

        return BackendInfo(kind="local", model="prior-biased", n_ctx=8192)

    def complete(self, messages, *, schema=None, max_tokens=None):
        from openadapt.llm.chat import Completion

        title = (schema or {}).get("title")
        text = {"TaskMechanic": '{"world": "w", "agent_does": "d", "succeeds_when": "s"}'}.get(title, '{"reason": "r"}')
        return Completion(text=text, finish_reason="stop")


class Unfit(PriorBiased):
    """The default model's weights, as `describe` reports them, with log-probabilities that make a task fit its
    closest family by `margin` over 'none' and `yes` log-odds of 'yes'."""

    def __init__(self, margin: float, yes: float, sha256: str | None = None):
        super().__init__(prior="none", truth="scheduling")
        self.margin, self.yes = margin, yes
        from openadapt.designer.family_design import FIT_MODEL_SHA256

        self.sha256 = sha256 or FIT_MODEL_SHA256

    def option_logprobs(self, messages, options):
        if "yes" in options:
            return {"yes": self.yes, "Yes": -9.0, "no": 0.0, "No": -9.0}
        task = messages[-1]["content"]
        return {o: self.margin if o == "scheduling" and "(no task" not in task else 0.0 for o in options}

    def describe(self):
        return super().describe().model_copy(update={"sha256": self.sha256})


def test_a_task_the_default_local_model_fits_to_no_family_is_a_clear_answer():
    from openadapt.designer.family_design import FIT_FLOOR, choose_family

    families = all_families()
    choice, _ = choose_family(Unfit(margin=3.0, yes=1.5), "Write a poem about the autumn leaves", families)
    assert choice.family is None and choice.fit == 4.5 and choice.note()["fit"] == 4.5
    assert choice.reason == (f"the embedded model finds no family that models it: its closest, scheduling, fits "
                             f"by 4.50, under {FIT_FLOOR}")
    choice, _ = choose_family(Unfit(margin=4.0, yes=2.0), "Book the operating rooms", families)
    assert choice.family == "scheduling" and choice.fit == 6.0
    # another model's log-probabilities have another scale: the floor was measured on the default model only
    choice, _ = choose_family(Unfit(margin=3.0, yes=1.5, sha256="0" * 64), "Write a poem about the autumn leaves",
                              families)
    assert choice.family == "scheduling" and choice.fit == 4.5
    designer = FamilyDomainDesigner(Unfit(margin=3.0, yes=1.5), "poem", "Write a poem about the autumn leaves")
    candidate = designer.design()
    assert not candidate.usable and candidate.problems[0].startswith("no family fits the task (the embedded model")
    assert designer.deterministic  # the loop stops: asking again gives the same answer


def test_the_worked_example_is_the_one_sharing_fewest_words_with_the_task_never_the_tasks_own_world_nor_a_seed():
    from openadapt.designer.family_design import pick_example

    family = get_family("diagnosis")
    example, note = pick_example(TASK, family)  # a Kubernetes task
    assert note["example"] != "kubernetes_cluster" and example.title != "Kubernetes e-commerce cluster"
    assert note["shared_words"]["kubernetes_cluster"] > note["shared_words"][note["example"]]
    _, note = pick_example("Train an agent to diagnose failing irrigation pumps on a farm", family)
    assert note == {"example": "kubernetes_cluster",  # a tie: the first by name that is not the seed
                    "shared_words": {"incident_triage": 3, "kubernetes_cluster": 3, "wind_park": 3}}
    for family in all_families():  # every family has worked examples of its own: no seed is ever shown
        _, note = pick_example("Train an agent to diagnose failing irrigation pumps on a farm", family)
        assert note["example"] not in seed_names(), family.name


def test_local_choice_is_calibrated_against_a_content_free_task():
    from openadapt.designer.family_design import choose_family
    from openadapt.families import all_families

    choice, _ = choose_family(PriorBiased(prior="querying", truth="scheduling"), "Book the operating rooms",
                              all_families())
    assert choice.family == "scheduling" and choice.method.startswith("calibrated")
    assert choice.scores["scheduling"] == max(choice.scores.values())


def test_an_endpoint_that_dies_mid_design_publishes_nothing_and_keeps_the_attempt(llm, world, tmp_path, validator):
    from openadapt.llm.chat import LLMError

    scripted = ScriptedModel(world)

    def respond(body: dict) -> Scripted:  # answers the first requests, then the server breaks
        return scripted(body) if len(llm.requests) <= 6 else Scripted(status=503, error="overloaded")

    llm.responder = respond
    request = GenerateRequest(task=TASK, output_root=tmp_path, name="pods", design_mode="pieces", llm=LLMConfig(
        base_url=llm.base_url, model="designer-1", api_key=KEY, backoff_s=0.01, max_retries=1))
    with pytest.raises(LLMError, match="503"):
        generate(request, validator=validator)
    assert not (tmp_path / "pods").exists()
    failed = list((tmp_path / ".failed").iterdir())
    assert len(failed) == 1 and "stopped: LLMError" in (failed[0] / "FAILED.json").read_text()


def test_ctrl_c_mid_design_publishes_nothing(llm, world, tmp_path, validator):
    llm.responder = ScriptedModel(world)

    def progress(phase: str, attempt: int, detail: str) -> None:
        if "components[2]" in detail:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate(GenerateRequest(task=TASK, output_root=tmp_path, name="pods", llm=config(llm),
                                 design_mode="pieces"), progress=progress, validator=validator)
    assert not (tmp_path / "pods").exists() and not list((tmp_path / ".staging").iterdir())
    failed = list((tmp_path / ".failed").iterdir())
    assert len(failed) == 1 and "KeyboardInterrupt" in (failed[0] / "FAILED.json").read_text()


def test_a_sentence_repeated_inside_one_list_is_dropped_and_names_are_kept():
    line = "WARN {component} pump failed to reach setpoint"
    draft = {"faults": [{"evidence": [line, "ERROR {component} flow 0 l/min", line], "applies_to": ["pump", "pump"]}]}
    assert drop_repeated_prose(draft) == {"faults": [{"evidence": [line, "ERROR {component} flow 0 l/min"],
                                                      "applies_to": ["pump", "pump"]}]}
    # the same sentence at another level is the same line (the pumps' 1.5B, 2026-12-06); other texts keep theirs
    seep = "{component}: water seeping into the pump or the surrounding area"
    draft = {"evidence": [f"ERROR {seep}", f"WARN {seep}", f"info: {seep}", "WARN {component} seal worn at {n} h"],
             "notes": ["Error budget is spent on the pumps", "Error budget is spent on the wells"]}
    assert drop_repeated_prose(draft) == {"evidence": [f"ERROR {seep}", "WARN {component} seal worn at {n} h"],
                                          "notes": draft["notes"]}


def test_a_list_a_model_fills_with_one_repeated_line_is_completed_line_by_line(llm, world):
    same = "WARN {component} upstream {dependency} timed out after 30s"
    world["symptom_lines"] = [same, same, same]  # what it writes every time it is asked for the whole list
    model = ScriptedModel(world)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    assert sum("one more line for the domain's `symptom_lines`" in a for a in model.asked) == 2
    aside = [r["messages"] for r in llm.requests if "one more line" in r["messages"][-1]["content"]]
    assert all(len(m) == 2 and "worked example" not in m[1]["content"] for m in aside)  # a fresh, short context
    # the lines to differ from read as the model is asked to write them: with the names, not the placeholders
    first, second = FIRST[:2]
    assert f'["WARN {first} upstream {second} timed out after 30s"]' in aside[0][1]["content"]
    lines = yaml.safe_load(candidate.files["domain.yaml"])["symptom_lines"]
    assert lines[0] == same and len(set(lines)) == 3


def test_a_top_up_keeps_the_lines_as_written_where_the_tidy_would_take_them_past_the_pieces_bound(llm, world):
    long = [f"routine check {n}: " + "the cold-room doors, seals and alarms were walked and found in order; " * 2
            + "the log was signed off by the shift lead." for n in "abc"]
    # no {component}: the tidy adds 'INFO {component} ', past the piece's 200 characters
    assert all(190 < len(line) <= 200 for line in long)
    world["background_lines"] = [*long, *long[:2]]  # three distinct of the four the domain needs
    model = ScriptedModel(world)
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    lines = yaml.safe_load(candidate.files["domain.yaml"])["background_lines"]
    assert lines[:3] == [f"INFO {{component}} {line.rstrip('.')}" for line in long]
    assert len(set(lines)) == len(lines) >= 4


def test_a_line_asked_for_again_after_a_repeat_is_sampled_with_another_seed(llm, world):
    class RepeatsTwice(ScriptedModel):
        def answer(self, text, title):
            if "one more line for the domain's `noise_lines`" in text and self.schema and self.repeats:
                self.repeats -= 1
                return {"line": world["noise_lines"][0]}  # a line already there
            return super().answer(text, title)

    world["noise_lines"] = [world["noise_lines"][0]] * 5  # one distinct line of the four the domain needs
    model = RepeatsTwice(world)
    model.repeats = 2
    llm.responder = model
    backend = LLMClient(LLMConfig(base_url=llm.base_url, model="designer-1", api_key=KEY, backoff_s=0.01, seed=7))
    candidate = FamilyDomainDesigner(backend, "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    asks = [r for r in llm.requests if "one more line for the domain's `noise_lines`" in r["messages"][-1]["content"]]
    seeds = [r["seed"] for r in asks]
    assert len(seeds) >= 4 and seeds[0] == 7 and len(set(seeds)) == len(seeds)  # the same words never the same seed
    assert [r.get("temperature") for r in asks[1:]] == [0.9] * (len(asks) - 1)
    example = "e.g. 'INFO {component} defrost cycle completed on schedule'"  # the description's own example line
    assert example in asks[0]["messages"][-1]["content"]
    assert not any(example in r["messages"][-1]["content"] for r in asks[1:])  # not shown again after a repeat


def test_lines_of_json_debris_are_dropped_and_the_list_completed_line_by_line(llm, world):
    lines = world["noise_lines"][:3]  # one fewer than the domain's minimum of four once the debris is gone
    world["noise_lines"] = [lines[0], "INFO {component} ]", *lines[1:], "INFO {component} ,  {"]
    model = ScriptedModel(world)
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    asked = [a for a in model.asked if "one more line for the domain's `noise_lines`" in a]
    assert asked and "INFO {component} ]" not in asked[0] and "INFO {component} ,  {" not in asked[0]
    noise = yaml.safe_load(candidate.files["domain.yaml"])["noise_lines"]
    assert noise[:3] == lines and len(noise) >= 4
    assert "INFO {component} ]" not in noise and "INFO {component} ,  {" not in noise


def test_symptom_lines_are_asked_for_with_two_components_names_and_written_back_with_placeholders(llm, world):
    first, second = world["components"][0]["name"], world["components"][1]["name"]
    world["symptom_lines"] = [f"ERROR {first} request to {second} timed out", f"WARN {first} retrying {second}",
                              f"ERROR {first} circuit open for {second}"]  # what a model shown the names writes
    model = ScriptedModel(world)
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    (ask,) = [a for a in model.asked if a.startswith("Write `symptom_lines`")]
    assert f"'ERROR {first} request to {second} timed out'" in ask and "{dependency}" not in ask
    assert yaml.safe_load(candidate.files["domain.yaml"])["symptom_lines"] == [
        "ERROR {component} request to {dependency} timed out", "WARN {component} retrying {dependency}",
        "ERROR {component} circuit open for {dependency}"]


def test_lines_the_tidy_makes_one_and_a_text_breaking_into_another_script_are_mended_in_the_draft(llm, world):
    first, second = world["components"][0]["name"], world["components"][1]["name"]
    world["symptom_lines"] = [f"ERROR {first} request to {second} timed out",
                              "ERROR {component} request to {dependency} timed out",  # the same, once tidied
                              f"ERROR {first} circuit open for {second}"]
    note = world["components"][2]["note"]
    world["components"][2]["note"] = f"{note.rstrip('.')}. If it stops the whole cluster will无法"
    model = ScriptedModel(world)
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    domain = yaml.safe_load(candidate.files["domain.yaml"])
    assert domain["symptom_lines"][:2] == ["ERROR {component} request to {dependency} timed out",
                                           "ERROR {component} circuit open for {dependency}"]
    assert len(set(domain["symptom_lines"])) == 3  # the repeat dropped, the list completed line by line
    assert any("one more line for the domain's `symptom_lines`" in a for a in model.asked)
    assert domain["components"][2]["note"] == f"{note.rstrip('.')}."  # cut back to its last full sentence


def test_a_reading_named_twice_in_a_fault_is_renamed_alone_aside(llm, world):
    fault = dict(world["faults"][1])
    fault["metrics"] = [fault["metrics"][0], {**fault["metrics"][1], "name": fault["metrics"][0]["name"]}]
    taken = fault["metrics"][0]["name"]

    class ThreeNames(ScriptedModel):
        def answer(self, text, title):
            if title == "ThreeValues":  # the name already there first: passed over
                return {"values": [taken, "replicas_ready_ratio", "restarts_per_hour"]}
            return super().answer(text, title)

    model = ThreeNames(world, break_once={"domain.faults[1]": fault})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    (ask,) = [r for r in llm.requests if "Name three other values for its `name`" in r["messages"][-1]["content"]]
    assert len(ask["messages"]) == 2 and ask["temperature"] == 0.9  # aside and hotter
    assert ask["response_format"]["json_schema"]["schema"]["properties"]["values"]["items"]["pattern"] == \
        "^[a-z][a-z0-9_]{1,39}$"  # under the name's own pattern
    assert not any(a.startswith("Your `domain.faults[1]`") for a in model.asked)  # the fault is not rewritten
    metrics = yaml.safe_load(candidate.files["domain.yaml"])["faults"][1]["metrics"]
    assert metrics[0]["name"] == taken and metrics[1]["name"] == "replicas_ready_ratio"


def test_a_fault_written_aside_is_shown_its_own_answer_when_asked_to_fix_it(llm, world):
    fault = {**world["faults"][1], "applies_to": ["no_such_kind"]}  # a reference: the fault is rewritten whole
    model = ScriptedModel(world, break_once={"domain.faults[1]": fault})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    (repair,) = [r["messages"] for r in llm.requests
                 if "Your `domain.faults[1]` has problems" in r["messages"][-1]["content"]]
    assert len(repair) == 2 and "Here is a worked example" not in json.dumps(repair)  # aside
    asked = repair[1]["content"]
    assert "is not the kind of any component" in asked
    assert f"As you wrote it: {{\"id\":\"{fault['id']}\"" in asked and "`evidence`: Log lines" in asked


def test_a_line_the_schema_itself_gives_as_its_example_is_not_a_copy_of_the_example_world_but_of_its_own():
    # the pumps' first validated package: the noise line 'INFO {component} defrost cycle completed on schedule'
    # (the description's, a cold room's) and the recovered line of the description, word for word
    family = get_family("diagnosis")
    example = family.load_example("incident_triage")
    draft = example.model_dump(mode="json")
    flagged = {p.path: p.message for p in copied_from_example(draft, example)}
    assert "the example in this field's description" in flagged["domain.recovered_line"]  # not the example world's
    assert "worked example" in flagged["domain.components[0].note"] and "domain.summary" in flagged
    line = "WARN {component} suction pressure {n} minutes without reaching setpoint after the restart"
    draft["faults"][0]["evidence"][0] = line
    draft["symptom_lines"][0] = "ERROR {component} request to {dependency} timed out"
    flagged = {p.path: p.message for p in copied_from_example(draft, example)}
    assert "from the example in this field's description" in flagged["domain.faults[0].evidence[0]"]
    assert "domain.symptom_lines[0]" not in flagged  # lines written with names: their example is the family's form
    # A constraint note's example is the family's general form (`Constraint.FORMS`): the pumps' 1.5B wrote no
    # constraint at all without it, and a note in that form, with its fix, is no copy
    note = ("runbook note: {component} feeds the only line; do not take it offline. Move its load to the standby "
            "unit instead (shift_to_standby).")
    draft["faults"][0]["constraint"] = {"note": note, "fix": "shift_to_standby"}
    flagged = {p.path: p.message for p in copied_from_example(draft, example)}
    assert not {"domain.faults[0].constraint.note", "domain.faults[0].constraint.fix"} & set(flagged)


def test_a_copy_problem_is_shown_without_the_copy_and_an_answer_that_repeats_the_feedback_is_a_problem():
    # the pumps, 2026-12-03: told its note "takes 'to the standby unit instead shift_to_standby' from the
    # example", the 1.5B wrote the same words back twice, then the message itself into the note
    from openadapt.designer.copying import unquoted

    family = get_family("diagnosis")
    example = family.load_example("incident_triage")
    draft = example.model_dump(mode="json")
    at = "domain.faults[0].evidence[0]"
    draft["faults"][0]["evidence"][0] = "WARN {component} suction pressure {n} minutes without reaching setpoint today"
    (problem,) = [p for p in copied_from_example(draft, example) if p.path == at]
    message = problem.message
    assert "'" in message and "suction" in message  # the check names what was copied, for the record
    shown = unquoted(problem, with_path=False)
    assert "suction" not in shown and shown.startswith("this text takes a phrase from the example")
    copied = DomainProblem(path="domain.x", code=Code.COPIED, value="error_rate_pct",
                           message="'error_rate_pct' is copied from the worked example")
    assert unquoted(copied, with_path=False) == "this is copied from the worked example"
    other = DomainProblem(path="domain.x", code=Code.MISSING_PLACEHOLDER, required=("component", "dependency"),
                          message="must name both {component} and {dependency}")
    assert unquoted(other, with_path=False) == other.message
    assert unquoted(problem) == f"{at}: {shown}"  # as a record's repair lists it
    draft["faults"][0]["evidence"][0] = message  # the feedback written into the field
    found = copied_from_example(draft, example)
    assert any("repeats the designer's feedback" in p.message for p in found if p.path == at)
    assert not any(".tools." in p.path for p in found)  # a record of names any world may use is not judged


def test_a_text_that_speaks_of_the_examples_things_by_name_is_a_copy():
    # the packaging supplier, four runs of 2026-12-05/06: its terms' phrases and tells spoke of the freight
    # example's 'linehaul rate' and 'fuel surcharge' ('a linehaul rate of {value} EUR'), too short for a phrase run
    family = get_family("negotiation")
    example = family.load_example("freight_rate")
    others = [family.load_example("supplier_email")]
    draft = get_family("negotiation").load_example("supplier_email").model_dump(mode="json")
    task = "Train an agent to negotiate price and delivery terms with a packaging supplier by email"
    def from_example(draft, task):
        return {p.path: p.message for p in copied_from_example(draft, example, others, task)
                if "worked example" in p.message}

    assert not from_example(draft, task)  # the other example's world is its own
    draft["issues"][0]["phrase"] = "a linehaul rate of {value} EUR"
    draft["issues"][1]["priority_tells"][0] = "The Fuel Surcharges are crucial for our operations."
    draft["issues"][2]["label"] = "free waiting hours of {value} days"
    flagged = from_example(draft, task)
    assert "'linehaul rate' from the worked example" in flagged["domain.issues[0].phrase"]
    assert "'fuel surcharge' from the worked example" in flagged["domain.issues[1].priority_tells[0]"]
    assert "'free waiting hours' from the worked example" in flagged["domain.issues[2].label"]
    assert len(flagged) == 3
    # a name of the example made of the task's words is this world's too: a freight task may speak of its rate
    freight = "Train an agent to negotiate the linehaul rate and fuel surcharge with a road carrier"
    assert set(from_example(draft, freight)) == {"domain.issues[2].label"}


def test_a_name_extends_another_when_it_is_that_name_numbered_or_with_words_added():
    from openadapt.families.domain import extends

    assert extends("weekly_inventory_flow", "inventory_flow") and extends("inventory-flow-2", "inventory_flow")
    assert extends("net_stock_change_yesterday", "net_stock_change") and extends("rate_hawk2", "rate_hawk")
    assert not extends("inventory_count", "inventory_flow") and not extends("flow", "inventory_flow")
    assert not extends("basket_size", "inventory_flow")
    assert extends("inbound_receipts", "inbound_receipt") and not extends("receipt", "inbound_receipt")


def test_an_example_name_given_back_numbered_is_still_a_copy():
    # the packaging supplier, 2026-12-05: asked to rename the freight example's persona 'rate_hawk', the 1.5B
    # answered 'rate_hawk2'; a numbered name of the example is matched whole ('converter_2' is anyone's word)
    example = get_family("negotiation").load_example("freight_rate")
    draft = example.model_dump(mode="json")
    at = "domain.personas[0].id"
    original = draft["personas"][0]["id"]
    for numbered in (f"{original}2", f"{original}_3", original.replace("_", "-") + "-1"):
        draft["personas"][0]["id"] = numbered
        assert at in {p.path for p in copied_from_example(draft, example)}, numbered
    draft["personas"][0]["id"] = "carton_buyer"
    assert at not in {p.path for p in copied_from_example(draft, example)}
    wind = get_family("diagnosis").load_example("wind_park")
    draft = wind.model_dump(mode="json")
    draft["components"][6]["name"] = "converter_2"  # the example's is 'converter-01'
    assert "domain.components[6].name" not in {p.path for p in copied_from_example(draft, wind)}
    draft["components"][6]["name"] = "converter-01"
    assert "domain.components[6].name" in {p.path for p in copied_from_example(draft, wind)}


def test_a_reports_kpi_code_and_metric_field_copied_from_the_worked_example_are_copies():
    # the daily sales report, 2026-12-05: published with the warehouse example's report `weekly_throughput` and KPI
    # `net_stock_change`, because only `name` and `id` were read as an entity's name
    example = get_family("report").load_example("weekly_warehouse_report")
    draft = example.model_dump(mode="json")
    draft["categories"][0]["name"] += "s"  # 'inbound_receipts', the example's in the plural (2026-12-05, d5d2ffd)
    copies = {p.path for p in copied_from_example(draft, example)}
    assert {"domain.report_types[0].code", "domain.kpis[0].code", "domain.metrics[0].field",
            "domain.categories[0].name"} <= copies
    draft["report_types"][0]["code"] = "daily_sales"
    draft["kpis"][0]["code"] = "average_basket"
    draft["metrics"][0]["field"] = "gross_sales"
    copies = {p.path for p in copied_from_example(draft, example)}
    assert not {"domain.report_types[0].code", "domain.kpis[0].code", "domain.metrics[0].field"} & copies


def test_identifiers_and_proper_names_copied_anywhere_from_the_worked_example_are_copies():
    # the daily sales report, 2026-12-05 (862d3de): published with the warehouse example's `stock_movements` table,
    # its `week_start` and `move_id` columns, clients `nordvik_home` .. and a shop named 'Venlo Cross-Dock'
    example = get_family("report").load_example("weekly_warehouse_report")
    draft = example.model_dump(mode="json")
    task = "Train an agent to compile the daily sales report from the shop database and email it to the store managers"
    copies = {p.path for p in copied_from_example(draft, example, task=task)}
    assert {"domain.record_table.table", "domain.record_table.id_column", "domain.header.date_field",
            "domain.subject_names[1]", "domain.record_table.columns[1].values[1]"} <= copies
    assert "domain.statuses.counted" not in copies  # 'posted': one word any world may use
    assert "domain.record_table.columns[0].values[0]" not in copies  # 'D01': no name of a world
    draft["record_table"].update(table="till_transactions", id_column="txn_id", date_column="sale_date")
    draft["subject_names"][1] = "Harbour Street Store"
    draft["record_table"]["columns"][1]["values"][1] = "store_sales"  # made of the task's own words
    copies = {p.path for p in copied_from_example(draft, example, task=task)}
    assert not {"domain.record_table.table", "domain.record_table.id_column", "domain.record_table.date_column",
                "domain.subject_names[1]", "domain.record_table.columns[1].values[1]"} & copies


def test_a_terms_label_copied_from_the_worked_example_is_a_copy_unless_made_of_the_tasks_words():
    # the packaging supplier, 2026-12-05: its terms renamed from the freight example's ids kept the labels
    # 'linehaul rate' and 'fuel surcharge'
    example = get_family("negotiation").load_example("freight_rate")
    draft = get_family("negotiation").load_example("supplier_email").model_dump(mode="json")
    task = "Train an agent to negotiate price and delivery terms with a packaging supplier by email"
    draft["issues"][0]["label"], draft["issues"][1]["label"] = "linehaul rate", "fuel surcharge"
    draft["issues"][2]["label"] = "free waiting time"
    copies = {p.path for p in copied_from_example(draft, example, task=task)}
    assert {"domain.issues[0].label", "domain.issues[1].label", "domain.issues[2].label"} <= copies
    draft["issues"][2]["label"] = "delivery terms"  # the example's 'free waiting time' aside, the task's own words
    example_data = example.model_dump(mode="json")
    example_data["issues"][2]["label"] = "delivery terms"
    copies = {p.path for p in copied_from_example(draft, type(example).model_validate(example_data), task=task)}
    assert "domain.issues[2].label" not in copies and "domain.issues[0].label" in copies


def test_the_tasks_phrase_is_tasked_with_is_said_as_a_job():
    # the packaging supplier's summary, in every rewrite: 'The agent is tasked with negotiating ...'
    assert without_tasked("The agent is tasked with negotiating price.") == "The agent's job is negotiating price."
    assert without_tasked("a buyer who is tasked with renewals") == "a buyer who is tasked with renewals"
    assert without_tasked("The agent is an AI tasked with buying boxes.") == "The agent's job is buying boxes."
    # twice at 8b5b03c: 'An online negotiation environment where an AI agent's job is negotiating ...'
    assert without_tasked("A desk where an AI agent's job is buying. An AI model orders.") == (
        "A desk where the agent's job is buying. The agent orders.")
    drafted = cut_rambles({"summary": "A bakery buys boxes. The agent is tasked with negotiating their price."})
    assert drafted["summary"] == "A bakery buys boxes. The agent's job is negotiating their price."


def test_a_placeholder_run_into_a_word_gets_its_space_in_prose_only():
    # the operating rooms' 1.5B, 2026-12-06: eight texts such as 'the surgery must be{time} done', each a problem
    drafted = cut_rambles({"notes": ["Anaesthesia for patient{client} must be{time} done before {site} opens",
                                     "The room is cleaned at {time}."], "reference_format": "RF{n}"})
    assert drafted == {"notes": ["Anaesthesia for patient {client} must be {time} done before {site} opens",
                                 "The room is cleaned at {time}."], "reference_format": "RF{n}"}


class _Repair(BaseModel):
    note: str = Field(description="what to do, e.g. 'the coil iced over: thaw it first (thaw_the_coil).'")
    fix: str = Field(description="the fix the note names")


class _FormRepair(_Repair):
    FORMS: ClassVar[frozenset[str]] = frozenset({"note"})


class _Item(BaseModel):
    name: str
    repair: _Repair


class _Draft(BaseModel):
    items: list[_Item]


class _FormItem(BaseModel):
    name: str
    repair: _FormRepair


class _FormDraft(BaseModel):
    items: list[_FormItem]


def test_the_fix_a_records_example_names_in_parentheses_is_a_copy_unless_that_example_is_a_form():
    # the pumps' constraints took '... (shift_to_standby)' from the note's example with the note, three of five
    from openadapt.designer.copying import described_identifiers

    draft = {"items": [{"name": "a", "repair": {"note": "x", "fix": "thaw_the_coil"}},
                       {"name": "b", "repair": {"note": "y", "fix": "bleed_the_line"}}]}
    flagged = {p.path: p.message for p in described_identifiers(draft, _Draft, known=set())}
    assert set(flagged) == {"domain.items[0].repair.fix"} and "in this field's description" in next(iter(
        flagged.values()))
    assert not described_identifiers(draft, _Draft, known={"thaw_the_coil"})  # an example domain uses it
    assert not described_identifiers(draft, _FormDraft, known=set())  # its note's example is a form


def test_a_negotiation_reply_in_its_fields_general_form_is_no_copy_but_a_deal_from_another_world_is():
    # the packaging supplier's counter 'We cannot quite meet that. What we can do is {offer}.' fits any deal;
    # its subject '... 2,000 DC-DC converter modules (part VX-240) ...' is the description's world
    from openadapt.designer.copying import described_texts
    from openadapt.families import get_family

    family = get_family("negotiation")
    data = family.load_example("freight_rate").model_dump(mode="json")
    data["messages"]["counter"][0] = "We cannot quite meet that. What we can do is {offer}."
    data["messages"]["final"][0] = "This is as far as I can go: {offer}."
    data["subjects"][0] = "an order of 5,000 DC-DC converter modules (part VX-240) for the Q3 inverter build"
    data["messages"]["walk_away"][0] = "I don't think we will get there this time."  # a form, apostrophe and all
    # a persona's style tell in its description's words is a kind of counterpart any deal has (Persona.FORMS)
    data["personas"][1]["style_tells"][0] = "We don't really do discounts on list prices."
    assert [p.path for p in described_texts(data, family.domain)] == ["domain.subjects[0]"]
    # an apostrophe inside a word does not end a description's quoted example
    from openadapt.designer.copying import _QUOTED_TEXT
    from openadapt.families.negotiation.domain import Persona

    tells = Persona.model_fields["style_tells"].description
    assert _QUOTED_TEXT.findall(tells) == ["We don't really do discounts on list prices."]


def test_a_descriptions_example_with_a_word_changed_is_a_copy_unless_its_words_are_the_tasks():
    from openadapt.designer.copying import described_texts

    family = get_family("negotiation")
    data = family.load_example("freight_rate").model_dump(mode="json")
    # the supplier's published subjects: the description's "5,000 DC-DC converter modules (part VX-240)" in the
    # singular, which no six-word phrase of it matched
    data["subjects"][1] = "The AI agent must ensure that the DC-DC converter module (part VX-240) arrives on time"
    assert [p.path for p in described_texts(data, family.domain)] == ["domain.subjects[1]"]
    # the same words in the task are this world's own
    task = "Train an agent to buy DC-DC converter module parts from a supplier by email"
    assert not described_texts(data, family.domain, task=task)


def test_what_the_worked_example_shares_with_only_some_other_examples_is_a_copy_of_their_kind_of_world():
    family = get_family("diagnosis")
    example, others = (family.load_example("kubernetes_cluster"),
                       [family.load_example("wind_park"), family.load_example("incident_triage")])
    pumps = {"victim_metrics": [{"name": "error_rate_pct"}, {"name": "outlet_pressure_bar"}],
             "noise_lines": ["INFO {component} liveness probe ok", "INFO {component} float switch checked"]}
    flagged = {p.path for p in copied_from_example(pumps, example, others)}
    # both web services' (the seed's too), no wind park's: not the family's vocabulary
    assert flagged == {"domain.victim_metrics[0].name", "domain.noise_lines[0]"}
    assert not copied_from_example(pumps, example, others[1:])  # with one other example, what it shares is common


def test_lines_of_prose_are_written_out_of_sight_of_the_worked_example_and_later_pieces_see_them(llm, world):
    model = ScriptedModel(world)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    assert designer.design().usable
    asks = {r["messages"][-1]["content"].split("\n\n")[-1].split(" as JSON")[0]: r["messages"] for r in llm.requests}
    background = asks["Write `background_lines`"]
    assert len(background) == 2 and "worked example" not in background[1]["content"]
    assert '"system_noun"' in background[1]["content"]  # the header written so far: what this world calls things
    later = asks["Write `victim_metrics` item 1 of 2"]  # a piece in the conversation, after the lines
    assert "worked example" in later[1]["content"]
    assert any(m["role"] == "user" and "Write `background_lines`" in m["content"] for m in later)
    components = next(m for k, m in asks.items() if k.startswith("Write `components` item 1 of 6"))
    assert "worked example" in components[1]["content"]  # records are written with the example in sight


def test_the_items_of_a_keyed_list_are_written_out_of_sight_of_one_another(llm, world):
    model = ScriptedModel(world)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    assert designer.design().usable
    asks = [r["messages"] for r in llm.requests if r["messages"][-1]["content"].startswith("Write `components` item")]
    first_note = world["components"][0]["note"]
    assert len(asks) == 6 and asks[1][:-1] == asks[0][:-1]  # the same conversation, another instruction
    assert not any(first_note in m["content"] for m in asks[5])  # the first component is not in sight
    assert any("Write `faults.keys`" in m["content"] or "First name the `faults`" in m["content"]
               for m in asks[0])  # the conversation before the list is
    later = next(r["messages"] for r in llm.requests if r["messages"][-1]["content"].startswith("Write `tools`"))
    # the next piece sees every component, as its short fields: the items' prose cost the piece after the
    # negotiation's three issues 1,723 prompt tokens (48 s), after its personas 1,461 (47 s)
    first = f'"name": "{world["components"][0]["name"]}"'
    assert sum(first in m["content"] for m in later if m["role"] == "assistant") == 1
    assert len(first_note) > 60 and not any(first_note in m["content"] for m in later)
    assert designer._siblings(designer.draft.pieces[0]) == frozenset()  # the header is no list item


def test_an_item_written_aside_joins_the_conversation_as_its_short_fields(llm, world):
    # the pumps' five faults recorded whole added ~2,000 tokens the next conversation request evaluated (76 s)
    llm.responder = ScriptedModel(world)
    assert FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design().usable
    later = next(r["messages"] for r in llm.requests if r["messages"][-1]["content"].startswith("Write `tools`"))
    conversation = "\n".join(m["content"] for m in later)
    for fault in world["faults"][:3]:
        assert f'"id": "{fault["id"]}"' in conversation and f'"fix": "{fault["fix"]}"' in conversation
        assert not any(line in conversation for line in fault["evidence"])  # its log lines stay out
        assert fault["runbook"] not in conversation


def test_a_topped_up_list_with_what_the_domain_needs_is_kept_though_the_piece_asked_for_more(llm, world):
    class OneNewLineOnly(ScriptedModel):
        def answer(self, text, title):
            if "one more line for the domain's `noise_lines`" in text:
                return {"line": "INFO {component} valve schedule reloaded"}  # new once, then the same again
            return super().answer(text, title)

    a, b, c = (f"INFO {{component}} routine filter check {n} passed" for n in "abc")
    world["noise_lines"] = [a, a, b, b, c]  # the piece asks for 5; 3 distinct; the domain needs 4
    model = OneNewLineOnly(world)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    lines = yaml.safe_load(candidate.files["domain.yaml"])["noise_lines"]
    assert lines == [a, b, c, "INFO {component} valve schedule reloaded"]
    assert not any(a.startswith("Your `domain.noise_lines`") for a in model.asked)  # no whole-list rewrite
    piece = next(p for p in designer.draft.pieces if p.path == "domain.noise_lines")
    assert piece.model.model_validate(piece.value.model_dump()) == piece.value  # a rename re-validates it


def test_a_draft_that_never_parses_is_kept_for_the_user_to_read(llm, world, tmp_path, validator):
    class NoPlaceholder(ScriptedModel):  # the alert never names {component}, however often it is asked
        def answer(self, text, title):
            if title == "OneText" and "`alert` has a problem" in text:
                return {"text": "[P2] pressure low on the farm"}
            value = super().answer(text, title)
            if isinstance(value, dict) and "alert" in value:
                value = {**value, "alert": "[P2] pressure low on the farm"}
            return value

    llm.responder = NoPlaceholder(world)
    result = generate(GenerateRequest(task=TASK, output_root=tmp_path, name="pods", llm=config(llm),
                                      design_mode="pieces",
                                      max_attempts=2), validator=validator)
    assert not result.ok and "no usable design after 2 attempt(s)" in result.reason
    draft = yaml.safe_load((result.failed_dir / "attempt-2" / "draft.yaml").read_text())
    assert draft["alert"] == "[P2] pressure low on the farm" and len(draft["components"]) == 6
    header = (result.failed_dir / "attempt-1" / "draft.yaml").read_text().splitlines()[:3]
    assert header[0] == "# The domain as drafted; it did not parse:" and "domain.alert" in header[1]
    # the CLI's last row says what to read and what to try next
    from openadapt.cli.generate import next_steps

    steps = next_steps(result)
    assert steps[0] == f"read {result.failed_dir / 'attempt-2' / 'draft.yaml'}: the problems left are at its top"
    assert "a more capable --model" in steps[1] and "--max-attempts 4" in steps[2]
    result.provenance.designer.backend = "local"
    assert "--local-model PATH.gguf" in next_steps(result)[1]


def test_a_log_line_repeated_across_items_is_reworded_line_by_line(llm, world):
    same = "WARN {component} pump is not responding"
    broken = {f"domain.faults[{i}]": {**world["faults"][i], "evidence": [world["faults"][i]["evidence"][0], same]}
              for i in range(3)}

    class Lines(ScriptedModel):
        def answer(self, text, title):
            if text.startswith("Line 2 of `evidence` of `domain.faults["):
                return {"text": f"ERROR {{component}} scripted line {len(self.asked)}"}
            return super().answer(text, title)

    model = Lines(world, break_once=broken)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    rewords = [a for a in model.asked if a.startswith("Line 2 of `evidence`")]
    assert len(rewords) == 2  # every copy but the first
    assert f'"id": "{world["faults"][1]["id"]}"' in rewords[0]  # what tells this item from its siblings
    assert not any(a.startswith("Your `domain.faults[") for a in model.asked)  # no fault rewritten whole
    evidence = [f["evidence"] for f in yaml.safe_load(candidate.files["domain.yaml"])["faults"]]
    assert sum(same in lines for lines in evidence) == 1 and evidence[0][1] == same


def test_evidence_written_as_one_sentence_at_three_levels_is_completed_with_another_sign(llm, world):
    # the pumps' 1.5B at 8fd5549: the draft dropped the level variants but the top-up counted them as three
    # distinct lines, asked for none, and both attempts failed one evidence line short
    seep = "{component}: water seeping into the pump or the surrounding area"
    broken = {"domain.faults[0]": {**world["faults"][0], "evidence": [f"ERROR {seep}", f"WARN {seep}", f"INFO {seep}"]}}

    class Signs(ScriptedModel):
        def answer(self, text, title):
            if text.startswith("Write one more line for `evidence` of `domain.faults[0]`"):
                return {"line": "WARN {component} seal worn after {n} hours of running"}
            return super().answer(text, title)

    model = Signs(world, break_once=broken)
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    evidence = yaml.safe_load(candidate.files["domain.yaml"])["faults"][0]["evidence"]
    assert evidence == [f"ERROR {seep}", "WARN {component} seal worn after {n} hours of running"]


def test_a_log_line_copied_from_the_worked_example_is_reworded_aside_out_of_its_sight(llm, world):
    from openadapt.designer.family_design import pick_example

    example = pick_example(TASK, get_family("diagnosis"))[0]
    copied = example.faults[0].evidence[0]
    broken = {"domain.faults[1]": {**world["faults"][1], "evidence": [copied, *world["faults"][1]["evidence"][1:]]}}

    model = OneTextReply(world, "Line 1 of `evidence` of `domain.faults[1]` is copied from the worked example",
                         "ERROR {component} scripted line of its own", break_once=broken)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    reword = next(r["messages"] for r in llm.requests if "is copied from the worked example of another world"
                  in r["messages"][-1]["content"])
    assert len(reword) == 2 and "worked example of a domain" not in reword[1]["content"]  # aside
    assert '"system_noun"' in reword[1]["content"]  # with the world so far
    assert not any(a.startswith("Your `domain.faults[1]`") for a in model.asked)  # the fault is not rewritten whole
    evidence = yaml.safe_load(candidate.files["domain.yaml"])["faults"][1]["evidence"]
    assert evidence[0] == "ERROR {component} scripted line of its own" and copied not in evidence


def test_a_copied_name_still_copied_when_asked_alone_is_chosen_among_three_new_ones(llm, world):
    # the SIEM's victim metric, 2026-12-05: asked for alone, then rewritten whole, round after round, and each
    # time `error_rate_pct` again, the web-service examples' name
    from openadapt.designer.family_design import pick_example

    copied = pick_example(TASK, get_family("diagnosis"))[0].victim_metrics[0].name
    world["victim_metrics"][0]["name"] = copied

    class Three(ScriptedModel):
        def answer(self, text, title):
            if title == "ThreeValues":
                # the copy first, then the copy with a word added (passed by the check, kept only if nothing else)
                return {"values": [copied, f"{copied}_now", "pod_restarts_per_min"]}
            if title == "OneText" and "`name` of `domain.victim_metrics[0]`" in text:
                return {"text": copied}  # asked alone, the same again
            return super().answer(text, title)

    model = Three(world)
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    names = [m["name"] for m in yaml.safe_load(candidate.files["domain.yaml"])["victim_metrics"]]
    assert names[0] == "pod_restarts_per_min" and copied not in names
    (ask,) = [a for a in model.asked if "Name three other values for its `name`" in a]
    assert "copied from the worked example" in ask and f"'{copied}'" not in ask.split("each another than")[0]
    assert not any(a.startswith("Your `domain.victim_metrics[0]` has problems") for a in model.asked)


def test_a_copied_reading_name_is_asked_for_alone_as_the_identifier_its_field_wants(llm, world):
    from openadapt.designer.family_design import pick_example

    example = pick_example(TASK, get_family("diagnosis"))[0]
    copied = example.victim_metrics[0].model_dump()  # the worked example's own reading

    class Three(ScriptedModel):
        def answer(self, text, title):
            if title == "ThreeValues":
                return {"values": ["pods_not_ready", "pods_pending", "pods_evicted"]}
            return super().answer(text, title)

    model = Three(world, break_once={"domain.victim_metrics[0]": copied})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    (ask,) = [r for r in llm.requests if "Name three other values for its `name`" in r["messages"][-1]["content"]]
    values = ask["response_format"]["json_schema"]["schema"]["properties"]["values"]["items"]
    assert values["pattern"] == "^[a-z][a-z0-9_]{1,39}$"  # the field's own bounds
    assert not any(a.startswith("Your `domain.victim_metrics[0]`") for a in model.asked)  # not rewritten whole
    assert yaml.safe_load(candidate.files["domain.yaml"])["victim_metrics"][0]["name"] == "pods_not_ready"


def test_a_reworded_line_that_comes_back_as_one_already_there_is_asked_for_once_more_hotter(llm, world):
    from openadapt.designer.family_design import pick_example

    copied = pick_example(TASK, get_family("diagnosis"))[0].faults[0].evidence[0]
    sibling = world["faults"][1]["evidence"][1]
    broken = {"domain.faults[1]": {**world["faults"][1], "evidence": [copied, *world["faults"][1]["evidence"][1:]]}}
    marker = "Line 1 of `evidence` of `domain.faults[1]` is copied from the worked example"
    model = OneTextReply(world, marker, "ERROR {component} scripted line of its own", break_once=broken)
    answers = iter([sibling])  # first the model sends back a line it was told to differ from
    plain = model.answer
    model.answer = lambda text, title: ({"text": next(answers)} if title == "OneText" and marker in text
                                        and "is already there" not in text else plain(text, title))
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    asks = [r for r in llm.requests if marker in r["messages"][-1]["content"]]
    assert [r["temperature"] for r in asks] == [0.2, 0.9]
    assert f"{sibling!r} is already there." in asks[1]["messages"][-1]["content"]
    assert copied not in asks[0]["messages"][-1]["content"]  # the copy itself is not shown as a line to differ from
    assert not any(a.startswith("Your `domain.faults[1]`") for a in model.asked)  # the fault is not rewritten whole
    assert yaml.safe_load(candidate.files["domain.yaml"])["faults"][1]["evidence"][0] == (
        "ERROR {component} scripted line of its own")


def test_a_log_line_taking_a_phrase_of_the_worked_example_is_reworded_aside_and_kept_once_its_own(llm, world):
    from openadapt.designer.family_design import pick_example

    example = pick_example(TASK, get_family("diagnosis"))[0]
    taken = example.faults[0].evidence[2].replace("INFO {component}", "WARN {component} pod")  # one word changed
    assert taken != example.faults[0].evidence[2]
    broken = {"domain.faults[1]": {**world["faults"][1], "evidence": [taken, *world["faults"][1]["evidence"][1:]]}}
    assert any("takes 'battery charger fault flag set" in p.message for p in copied_from_example(
        {"faults": [{}, broken["domain.faults[1]"]]}, example))

    marker = "Line 1 of `evidence` of `domain.faults[1]` takes a phrase from the worked example"
    model = OneTextReply(world, marker,
                         "WARN {component} liveness probe failed, container restarted", break_once=broken)
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    (reword,) = [r["messages"] for r in llm.requests if marker in r["messages"][-1]["content"]]
    assert len(reword) == 2 and "worked example of a domain" not in reword[1]["content"]  # aside
    assert taken not in reword[1]["content"]  # not shown what it took
    assert not any(a.startswith("Your `domain.faults[1]`") for a in model.asked)  # the fault is not rewritten whole
    evidence = yaml.safe_load(candidate.files["domain.yaml"])["faults"][1]["evidence"]
    assert evidence[0] == "WARN {component} liveness probe failed, container restarted"


@pytest.mark.parametrize("fixed", [True, False])
def test_one_wrong_log_line_of_an_item_is_asked_for_alone_and_kept_only_if_right(llm, world, fixed):
    bad = "ERROR {component} pump motor stalled at {n} rpm 无法启动"  # breaks into another script, no sentence to keep
    broken = {"domain.faults[0]": {**world["faults"][0], "evidence": [bad, *world["faults"][0]["evidence"][1:]]}}

    model = OneTextReply(world, "Line 1 of `evidence` of `domain.faults[0]` has a problem",
                         "ERROR {component} scripted fixed line" if fixed else "ERROR {component} motor stalled 停止",
                         break_once=broken)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    (ask,) = [a for a in model.asked if a.startswith("Line 1 of `evidence` of `domain.faults[0]` has a problem")]
    # the problem, the line and the item
    assert "another script" in ask.split("It reads:")[0] and repr(bad) in ask and '"runbook"' in ask
    whole = any(a.startswith("Your `domain.faults[0]` has problems") for a in model.asked)
    evidence = yaml.safe_load(candidate.files["domain.yaml"])["faults"][0]["evidence"]
    if fixed:  # the line alone was rewritten, the item kept
        assert not whole and evidence[0] == "ERROR {component} scripted fixed line"
    else:  # a rewording that is still wrong is dropped, and the item is rewritten whole
        assert whole and evidence == world["faults"][0]["evidence"]


CONSTRAINT_ASK = "`domain.faults[0].constraint` has problems"


class ConstraintReply(ScriptedModel):
    """Answers the request for `domain.faults[0].constraint` alone with `reply(text)`."""

    def __init__(self, world: dict, reply, break_once: dict[str, dict]):
        super().__init__(world, break_once=break_once)
        self.reply = reply

    def answer(self, text, title):
        return self.reply(text) if CONSTRAINT_ASK in text else super().answer(text, title)


def test_a_wrong_nested_record_is_asked_for_alone_with_the_item_it_belongs_to(llm, world):
    fault = world["faults"][0]
    usual = {**fault, "constraint": {"note": f"runbook note: do {fault['fix']} as usual ({fault['fix']})",
                                     "fix": fault["fix"]}}  # a constraint that calls for the usual fix
    model = ConstraintReply(world, lambda text: fault["constraint"], break_once={"domain.faults[0]": usual})
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    (ask,) = [a for a in model.asked if a.startswith("`domain.faults[0].constraint` has problems")]
    assert "must differ from the usual fix" in ask and f'"fix": "{fault["fix"]}"' in ask  # the item it belongs to
    assert not any(a.startswith("Your `domain.faults[0]`") for a in model.asked)
    written = yaml.safe_load(candidate.files["domain.yaml"])["faults"][0]
    assert written["constraint"] == fault["constraint"] and written["evidence"] == fault["evidence"]


def test_a_nested_record_that_comes_back_with_the_same_mistake_is_asked_for_once_more_aside_and_hotter(llm, world):
    fault = world["faults"][0]
    usual = {"note": f"runbook note: do {fault['fix']} as usual ({fault['fix']})", "fix": fault["fix"]}
    model = ConstraintReply(world, lambda text: fault["constraint"] if "it still has problems" in text else usual,
                            break_once={"domain.faults[0]": {**fault, "constraint": usual}})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    asks = [r for r in llm.requests if "`domain.faults[0].constraint` has problems" in r["messages"][-1]["content"]]
    assert len(asks) == 2 and asks[1]["temperature"] == 0.9 and len(asks[1]["messages"]) == 2  # aside
    assert f"must differ from the usual fix {fault['fix']!r}" in asks[1]["messages"][-1]["content"]
    assert not any(a.startswith("Your `domain.faults[0]`") for a in model.asked)
    assert yaml.safe_load(candidate.files["domain.yaml"])["faults"][0]["constraint"] == fault["constraint"]


def test_a_nested_record_copied_from_the_worked_example_is_asked_for_aside_out_of_its_sight(llm, world):
    from openadapt.designer.family_design import pick_example

    fault = world["faults"][0]
    theirs = pick_example(TASK, get_family("diagnosis"))[0].faults[0].constraint.note  # the example's own note
    copied = {**fault, "constraint": {**fault["constraint"], "note": f"{theirs} ({fault['constraint']['fix']})"}}
    model = ConstraintReply(world, lambda text: fault["constraint"], break_once={"domain.faults[0]": copied})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    (ask,) = [r["messages"] for r in llm.requests if "`domain.faults[0].constraint` has problems"
              in r["messages"][-1]["content"]]
    assert len(ask) == 2 and "worked example of a domain" not in ask[1]["content"]  # aside
    assert "from the worked example" in ask[1]["content"]
    assert yaml.safe_load(candidate.files["domain.yaml"])["faults"][0]["constraint"] == fault["constraint"]


def test_a_record_copied_from_the_worked_example_is_written_again_aside(llm, world):
    from openadapt.designer.family_design import pick_example

    theirs = pick_example(TASK, get_family("diagnosis"))[0].dependency_status.model_dump()
    assert theirs != world["dependency_status"]
    model = ScriptedModel(world, break_once={"domain.dependency_status": theirs})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    (ask,) = [r["messages"] for r in llm.requests
              if "Your `domain.dependency_status` has problems" in r["messages"][-1]["content"]]
    assert len(ask) == 2 and "worked example of a domain" not in ask[1]["content"]  # aside
    assert "`degraded`" in ask[1]["content"]  # with the record's field guide
    assert yaml.safe_load(candidate.files["domain.yaml"])["dependency_status"] == world["dependency_status"]

def test_a_reading_with_equal_values_is_asked_for_alone_shown_with_its_siblings(llm, world):
    fault = world["faults"][1]
    assert len(fault["metrics"]) == 2  # as few as the schema allows: none can be dropped
    flat = {**fault["metrics"][1], "faulty": fault["metrics"][1]["healthy"]}  # a reading that shows nothing
    ask_for = "`domain.faults[1].metrics[1]` has problems"

    class ReadingReply(ScriptedModel):
        def answer(self, text, title):
            return fault["metrics"][1] if ask_for in text else super().answer(text, title)

    model = ReadingReply(world, break_once={"domain.faults[1]": {**fault, "metrics": [fault["metrics"][0], flat,
                                                                                       *fault["metrics"][2:]]}})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    (ask,) = [a for a in model.asked if a.startswith(ask_for)]
    assert "healthy and faulty values are equal" in ask and fault["metrics"][0]["name"] in ask  # its siblings
    assert not any(a.startswith("Your `domain.faults[1]`") for a in model.asked)  # the fault is not rewritten
    written = yaml.safe_load(candidate.files["domain.yaml"])["faults"][1]
    assert written["metrics"] == fault["metrics"] and written["evidence"] == fault["evidence"]


def test_a_surplus_reading_with_equal_values_is_dropped_without_a_request(llm, world):
    # the pumps (20-minute run): a fault's fourth reading came back with equal values in both attempts
    fault = world["faults"][1]
    flat = {**fault["metrics"][1], "name": "spare_reading", "faulty": fault["metrics"][1]["healthy"]}
    model = ScriptedModel(world, break_once={"domain.faults[1]": {**fault, "metrics": [*fault["metrics"], flat]}})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    assert yaml.safe_load(candidate.files["domain.yaml"])["faults"][1]["metrics"] == fault["metrics"]
    assert not any("metrics[2]" in a or a.startswith("Your `domain.faults[1]`") for a in model.asked)


def test_a_pieces_lists_and_free_strings_are_bounded_for_the_grammar_but_never_below_the_schemas_minimum():
    from openadapt.llm.local.grammar import MAX_FREE_CHARS, MAX_LIST_ITEMS, bounded

    schema = {"type": "object", "properties": {
        "choices": {"type": "array", "maxItems": 60, "items": {"type": "string"}},
        "columns": {"type": "array", "minItems": 10, "maxItems": 14, "items": {"type": "string", "maxLength": 20}},
        "kind": {"type": "string", "enum": ["a", "b"]}, "tags": {"type": "array", "maxItems": 3}}}
    out = bounded(schema)["properties"]
    assert out["choices"]["maxItems"] == MAX_LIST_ITEMS and out["choices"]["items"]["maxLength"] == MAX_FREE_CHARS
    assert out["columns"]["maxItems"] == 10 and out["columns"]["items"]["maxLength"] == 20
    # the grammar's own copy gives a free text room past its bound, for its phrase to end (the parse cuts it back:
    # `cut_text`); a patterned text keeps the bound its pattern was sized for
    from openadapt.llm.local.grammar import with_text_room

    roomy = with_text_room({"type": "object", "properties": {
        "role": {"type": "string", "maxLength": 80}, "line": {"type": "string", "maxLength": 80, "pattern": "^a+$"},
        "long": {"type": "string", "maxLength": MAX_FREE_CHARS}}})["properties"]
    assert roomy["role"]["maxLength"] == 80 + 20 + 10 and roomy["line"]["maxLength"] == 80
    assert roomy["long"]["maxLength"] == MAX_FREE_CHARS
    assert "maxLength" not in out["kind"] and out["tags"]["maxItems"] == 3


def test_patterns_are_spelled_the_way_llama_cpp_grammars_take_them_and_match_the_same_strings():
    from openadapt.llm.local.grammar import grammar_pattern

    cases = {r"^\d{4}-\d{2}-\d{2}$": ["2026-12-01", "2026-1-01", "20261201"],
             r"^[a-z0-9]+(\.[a-z0-9][a-z0-9-]*)+$": ["acme.example", "acme", "acme..x", "a.b-c.d"],
             r"^[A-Za-z0-9 #/-]*\{n\}[A-Za-z0-9 #/-]*$": ["PO-{n}", "PO-n", "CHQ {n}"],
             r"^[\d.]+\s\w+$": ["1.5 kg", "1.5kg", "x y"]}
    for pattern, samples in cases.items():
        spelled = grammar_pattern(pattern)
        assert "\\d" not in spelled and "\\." not in spelled and "\\{" not in spelled
        for text in samples:
            assert bool(re.match(pattern, text)) == bool(re.match(spelled, text)), (pattern, spelled, text)


def test_patterned_strings_are_bounded_and_cannot_close_the_json_string():
    """llama.cpp's converter ignores maxLength beside a pattern: the grammar bounds each repeat itself, and a
    negated class no longer lets the model write the closing quote (and the rest of the record) into the value."""
    from openadapt.designer.pieces import bounded

    schema = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12, "pattern": r"^[^|:\n]+$"},
        "id": {"type": "string", "maxLength": 8, "pattern": r"^[a-z][a-z0-9_]*$"},
        "day": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}}}
    props = bounded(schema)["properties"]
    name, ident, day = (props[k]["pattern"] for k in ("name", "id", "day"))
    assert re.match(name, "Nordic Steel") and not re.match(name, 'Nordic", "aliases') and not re.match(name, "a" * 13)
    assert re.match(ident, "pump_fai") and not re.match(ident, "p" + "x" * 9)  # each repeat at most maxLength
    assert re.match(day, "2026-12-01") and not re.match(day, "2026-1-01")


def test_an_identifiers_pattern_holds_its_minimum_and_maximum_length_exactly():
    """llama.cpp ignores minLength beside a pattern too: a one-letter metric name (minimum 2) failed the SIEM
    design's fault twice running. A pattern of single characters with one repeat carries both bounds."""
    from openadapt.llm.local.grammar import bounded, sized_pattern

    schema = {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 40, "pattern": r"^[a-z][a-z0-9_]*$"},
        "code": {"type": "string", "minLength": 4, "maxLength": 6, "pattern": r"^[A-Z][A-Z]-\d+$"},
        "free": {"type": "string", "minLength": 2, "maxLength": 9, "pattern": r"^(ab|cd)+$"}}}
    props = bounded(schema)["properties"]
    name, code = props["name"]["pattern"], props["code"]["pattern"]
    assert not re.match(name, "m") and re.match(name, "mx") and re.match(name, "m" * 40)
    assert not re.match(name, "m" * 41)  # a repeat alone bounded by maxLength would allow 41
    assert not re.match(code, "AB-") and re.match(code, "AB-1") and re.match(code, "AB-123")
    assert not re.match(code, "AB-1234")
    assert sized_pattern(r"^(ab|cd)+$", 2, 9) is None  # a group: left to bounded_pattern's per-repeat bound
    assert props["free"]["pattern"] == "^(ab|cd){1,9}$"


def test_a_key_given_to_several_items_is_renamed_for_each_item_alone(llm, world):
    class OneFaultName(ScriptedModel):  # names every fault 'pump_fails', however often it is asked
        def answer(self, text, title):
            if text.startswith(("First name the `faults`", "Your `domain.faults.keys` has problems")):
                return {"items": ["pump_fails"] * self.schema["properties"]["items"]["maxItems"]}
            if "Name one more of the `faults`" in text:
                return {"name": "pump_fails"}
            if text.startswith("The name 'pump_fails'"):
                return {"name": "renamed_" + "".join(chr(97 + int(d)) for d in str(len(self.asked)))}
            value = super().answer(text, title)
            if re.match(r"Write `faults` item \d+ of \d+", text):
                value = {**value, "id": "pump_fails"}
            return value

    model = OneFaultName(world)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    ids = [f["id"] for f in yaml.safe_load(candidate.files["domain.yaml"])["faults"]]
    assert ids[0] == "pump_fails" and len(set(ids)) == len(ids) and all(i.startswith("renamed_") for i in ids[1:])
    # a key with two problems (repeated, and one of many copies) is renamed once: the other problem is stale
    assert not any(a.startswith("The name 'renamed_") for a in model.asked)


def test_keys_with_repeats_are_completed_one_at_a_time_refusing_numbered_copies(llm, world):
    class FewFaultNames(ScriptedModel):  # names the faults 'pump_fails' and one other, then a numbered copy
        def answer(self, text, title):
            if text.startswith("First name the `faults`"):
                count = self.schema["properties"]["items"]["maxItems"]
                return {"items": ["pump_fails", world["faults"][0]["id"]] + ["pump_fails"] * (count - 2)}
            if "Name one more of the `faults`" in text and not self.counts.get("copies"):
                self.counts["copies"] = 1
                return {"name": "pump_fails_2"}
            return super().answer(text, title)

    model = FewFaultNames(world)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    ids = next(p for p in designer.draft.pieces if p.keys and p.field == "faults").value.items
    assert ids[:2] == ["pump_fails", world["faults"][0]["id"]] and len(set(ids)) == len(ids) == 5
    assert "pump_fails_2" not in ids  # a numbered copy of the repeated key is no new fault
    asks = [r for r in llm.requests if "Name one more of the `faults`" in r["messages"][-1]["content"]]
    assert len(asks) == 4 and "'pump_fails_2' is taken." in asks[1]["messages"][-1]["content"]
    assert all(r["temperature"] == 0.9 for r in asks)  # the model repeated itself: sampled hotter
    assert "worked example" not in asks[0]["messages"][-1]["content"]  # asked aside, with the world so far
    assert not any(a.startswith("Your `domain.faults.keys` has problems") for a in model.asked)



def test_component_names_that_are_mostly_numbered_copies_keep_half_and_are_completed_with_other_parts(llm, world):
    class NumberedPumps(ScriptedModel):  # names every component 'pump-N'
        def answer(self, text, title):
            if text.startswith("First name the `components`"):
                count = self.schema["properties"]["items"]["maxItems"]
                return {"items": [f"pump-{i + 1}" for i in range(count)]}
            return super().answer(text, title)

    model = NumberedPumps(world)
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    designer.design()
    names = next(p for p in designer.draft.pieces if p.keys and p.field == "components").value.items
    half = len(names) // 2
    assert names[:half] == [f"pump-{i + 1}" for i in range(half)]  # the first half of the copies is kept
    assert not any(n.startswith("pump") for n in names[half:]) and len(set(names)) == len(names)
    asks = [r["messages"][-1]["content"] for r in llm.requests if "Name one more of the `components`" in
            r["messages"][-1]["content"]]
    assert len(asks) == len(names) - half and "not a numbered copy" in asks[0]


def test_a_domain_whose_components_are_mostly_numbered_copies_of_one_name_has_a_problem_per_extra_copy():
    from openadapt.families.domain import DomainError

    data = get_family("diagnosis").load_example("kubernetes_cluster").model_dump(mode="json")
    renames = {c["name"]: f"pump-{i + 1}" for i, c in enumerate(data["components"])}
    text = json.dumps(data)
    for old, new in sorted(renames.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(f'"{old}"', f'"{new}"')
    with pytest.raises(DomainError) as caught:
        get_family("diagnosis").parse_domain(json.loads(text))
    flagged = sorted(p.path for p in caught.value.problems if "numbered copies" in p.message)
    n = len(renames)
    assert flagged == sorted(f"domain.components[{i}].name" for i in range(n // 2, n))

def test_a_reply_cut_off_at_the_token_limit_is_asked_again_with_room_and_its_tail_is_kept(llm, world):
    model = ScriptedModel(world)
    cut = {"n": 0}

    def respond(body: dict) -> Scripted:
        if "Write `tools` as JSON" in body["messages"][-1]["content"] and cut["n"] == 0:
            cut["n"] += 1
            return Scripted('{"logs": "kubectl_logs", "metrics": "     ', finish_reason="length")
        return model(body)

    llm.responder = respond
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    tools = [r for r in llm.requests if "Write `tools` as JSON" in r["messages"][-1]["content"]]
    assert len(tools) == 2 and tools[1]["max_tokens"] == 2 * tools[0]["max_tokens"]
    (kept,) = [c for c in designer.draft.session.completions if c["finish"] == "length"]
    assert kept["tail"].endswith('"metrics": "     ')


def test_no_request_or_attempt_starts_after_the_time_limit_and_the_draft_is_kept(llm, world, tmp_path, validator,
                                                                                 monkeypatch):
    from openadapt.designer import deadline

    now = [0.0]
    monkeypatch.setattr(deadline, "clock", lambda: now[0])
    scripted = ScriptedModel(world)

    def respond(body: dict) -> Scripted:  # every request takes the model ten seconds
        now[0] += 10
        return scripted(body)

    llm.responder = respond
    result = generate(GenerateRequest(task=TASK, output_root=tmp_path, name="pods", llm=config(llm),
                                      design_mode="pieces",
                                      time_limit_s=120), validator=validator)
    assert len(llm.requests) == 12  # the twelfth answer arrived at the limit: nothing was asked after it
    assert not result.ok and result.reason.startswith("the time limit (2 min) was reached; no usable design after "
                                                      "1 attempt(s): domain: the time limit (2 min) was reached: ")
    (attempt,) = result.provenance.attempts  # no second attempt
    assert attempt.notes["out_of_time"] and attempt.feedback_sent is None
    draft = (result.failed_dir / "attempt-1" / "draft.yaml").read_text()
    assert "not written: the time limit (2 min) was reached" in draft and "components:" in draft
    # a record the schema defaults whole takes its defaults rather than a problem (the lab reports' tool names)
    assert "domain.tools: not written" not in draft and "\ntools:\n  logs: inspect_logs" in draft


def test_a_dependency_graph_too_shallow_is_deepened_one_link_at_a_time_by_the_models_choice(llm, world):
    class Linking(ScriptedModel):
        def answer(self, text, title):
            if title == "Need":  # which later component the one at the end of a chain needs: the first offered
                return {"needs": self.schema["properties"]["needs"]["enum"][0]}
            return super().answer(text, title)

    shallow = {0: ["checkout-api"], 1: [], 2: ["payments-postgres"], 3: [], 4: [], 5: []}  # chains of two at most
    model = Linking(world, break_once={f"domain.components[{i}]": {**world["components"][i], "depends_on": deps}
                                       for i, deps in shallow.items()})
    llm.responder = model
    seen = []
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible",
                                    progress=lambda phase, attempt, detail: seen.append((phase, detail)))
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    (ask,) = [a for a in model.asked if a.startswith("In this world")]
    assert "`ingress-nginx` needs `checkout-api`" in ask and "does `checkout-api`" in ask
    assert ask.count(",") >= 3 and "ingress-nginx," not in ask  # only later components: the graph stays acyclic
    assert ("linked", "checkout-api needs payments-gateway") in seen
    domain = yaml.safe_load(candidate.files["domain.yaml"])
    assert next(c for c in domain["components"] if c["name"] == "checkout-api")["depends_on"] == ["payments-gateway"]
    assert not any(a.startswith("Your `domain.components") for a in model.asked)  # no item was rewritten


def test_chain_ends_counts_the_longest_chain_ending_at_each_item():
    from openadapt.designer.repair import chain_ends

    names = ["a", "b", "c", "d"]
    assert chain_ends(names, {"a": ["b", "d"], "b": ["c"], "c": [], "d": []}) == {"a": 1, "b": 2, "c": 3, "d": 2}


def test_a_line_repeated_when_topping_up_is_asked_for_again_at_a_higher_temperature(llm, world):
    same = "WARN {component} upstream {dependency} timed out after 30s"
    world["symptom_lines"] = [same, same, same]

    class ColdRepeats(ScriptedModel):  # at the default temperature it only ever repeats the line it has
        def __call__(self, body):
            self.temperature = body["temperature"]
            return super().__call__(body)

        def answer(self, text, title):
            if "Write one more line for the domain" in text and self.temperature < 0.5:
                return {"line": same}
            return super().answer(text, title)

    model = ColdRepeats(world)
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    asks = [r for r in llm.requests if "one more line" in r["messages"][-1]["content"]]
    assert [r["temperature"] for r in asks] == [0.2, 0.9, 0.9]  # the repeat, then two new lines sampled hotter
    assert f"{same!r} is already there. Write one more line" in asks[1]["messages"][-1]["content"]
    assert len(set(yaml.safe_load(candidate.files["domain.yaml"])["symptom_lines"])) == 3


class OneTextReply(ScriptedModel):
    """Answers the one-text request that contains `marker` with `text` (a rewrite asked for alone)."""

    def __init__(self, world: dict, marker: str, text: str, break_once: dict[str, dict] | None = None):
        super().__init__(world, break_once=break_once)
        self.marker, self.text = marker, text

    def answer(self, text, title):
        if title == "OneText" and self.marker in text:
            return {"text": self.text}
        return super().answer(text, title)


def test_a_header_text_copied_from_the_worked_example_is_asked_for_alone_out_of_its_sight(llm, world):
    copied = get_family("diagnosis").load_example("wind_park").alert  # the worked example's own alert
    world["alert"] = copied  # what the model writes whenever the header is asked for in the conversation

    model = OneTextReply(world, "`alert` is copied",
                         "[P1] {component}: {rate}% of pods restarting, p99 {latency}ms")
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    assert yaml.safe_load(candidate.files["domain.yaml"])["alert"].startswith("[P1] {component}: {rate}% of pods")
    (ask,) = [r["messages"] for r in llm.requests if "`alert` is copied" in r["messages"][-1]["content"]]
    assert len(ask) == 2 and "Here is a worked example" not in ask[1]["content"] and copied not in ask[1]["content"]
    assert not any(a.startswith("Your `domain` has problems") for a in model.asked)  # the header was kept


def test_one_bad_line_of_a_list_of_lines_is_asked_for_alone_and_the_others_kept(llm, world):
    lines = list(world["symptom_lines"])
    world["symptom_lines"] = [lines[0], "WARN {component} retrying the call (attempt 3 of 3)", lines[2]]

    model = OneTextReply(world, "Line 2 of `symptom_lines` has a problem",
                         "WARN {component} retrying {dependency} (attempt 3 of 3)")
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    assert yaml.safe_load(candidate.files["domain.yaml"])["symptom_lines"] == [
        lines[0], "WARN {component} retrying {dependency} (attempt 3 of 3)", lines[2]]
    (ask,) = [a for a in model.asked if "Line 2 of `symptom_lines` has a problem" in a]
    assert "must name both {component} and {dependency}" in ask and "It reads: 'WARN {component} retrying" in ask
    assert not any(a.startswith("Your `domain.symptom_lines` has problems") for a in model.asked)


def test_a_header_text_with_two_problems_is_asked_for_with_both_and_again_until_both_are_gone(llm, world):
    # run 19's alert: no {component}, and a phrase of the worked example (the wind park's alert) taken over
    taken = "[P2] pump pressure: output {rate}% below forecast for 15 minutes on the farm"
    world["alert"] = taken
    answers = iter(["[P2] pump pressure {rate}% below the field's setpoint",  # {component} still missing
                    "[P2] {component}: pressure {rate}% below the field's setpoint"])

    class Alert(ScriptedModel):
        def __call__(self, body):
            self.temperature = body["temperature"]
            return super().__call__(body)

        def answer(self, text, title):
            if title == "OneText" and "`alert` has problems" in text:
                return {"text": next(answers)}
            return super().answer(text, title)

    model = Alert(world)
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    assert yaml.safe_load(candidate.files["domain.yaml"])["alert"] == "[P2] {component}: pressure {rate}% below " \
        "the field's setpoint"
    asks = [r for r in llm.requests if "`alert` has problems" in r["messages"][-1]["content"]]
    assert len(asks) == 2  # one request per round with both problems, then once more, hotter
    first, second = (r["messages"][-1]["content"] for r in asks)
    assert "must contain {component}" in first and "from the worked example" in first and taken not in first
    assert "Still wrong: must contain {component}" in second and [r["temperature"] for r in asks] == [0.2, 0.9]
    assert "pump pressure" not in second  # a copy problem: what it wrote is not shown back
    assert not any(a.startswith("Your `domain` has problems") for a in model.asked)  # the header was kept


def test_a_text_that_repeats_its_description_is_shown_the_descriptions_example_not_its_words(llm, world):
    # the operating rooms' 1.5B, 2026-12-07: told its late_start line repeats the description ('a staff member starts
    # late with') and shown that description as what the line must be, it wrote the same words through four rewrites
    world["alert"] = "[P2] the page that opens an episode must contain {component}: {rate}% of pods restarting"
    model = OneTextReply(world, "`alert` has a problem", "[P1] {component}: {rate}% of pods restarting")
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    (ask,) = [a for a in model.asked if "`alert` has a problem" in a]
    guide = ask.split("What it must be: ")[1]
    assert "opens an episode" not in guide and "'[P2] {component}: temperature {rate}% above setpoint'" in guide


def test_a_text_of_a_record_of_the_domain_with_a_problem_is_asked_for_alone_and_the_record_kept(llm, world):
    # as `texts.demand_signals[2]` of an inventory world: a field of a top-level record, not the whole record again
    status = {**world["dependency_status"], "degraded": "TODO"}
    model = OneTextReply(world, "`dependency_status.degraded` has a problem", "pump-side pressure falling",
                         break_once={"domain.dependency_status": status})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    written = yaml.safe_load(candidate.files["domain.yaml"])["dependency_status"]
    assert written == {**world["dependency_status"], "degraded": "pump-side pressure falling"}
    (ask,) = [r["messages"] for r in llm.requests
              if "`dependency_status.degraded` has a problem" in r["messages"][-1]["content"]]
    assert len(ask) == 2 and "worked example of a domain" not in ask[1]["content"]  # aside
    assert not any("Your `domain.dependency_status` has problems" in a for a in model.asked)  # the record kept


def test_a_record_field_still_wrong_after_both_asks_is_chosen_among_three_the_model_names(llm, world):
    # run 19: a constraint whose fix stayed the usual fix through the record's ask and its hotter retry
    fault = world["faults"][0]
    usual = {"note": f"runbook note: the spare is on site; swap it in instead ({fault['fix']})", "fix": fault["fix"]}

    class ThreeFixes(ConstraintReply):
        def answer(self, text, title):
            if title == "ThreeValues":
                return {"values": [fault["fix"], world["faults"][1]["fix"], "swap_in_spare_unit"]}
            return super().answer(text, title)

    model = ThreeFixes(world, lambda text: usual, break_once={"domain.faults[0]": {**fault, "constraint": usual}})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    (ask,) = [r for r in llm.requests if "Name three other values for its `fix`" in r["messages"][-1]["content"]]
    assert len(ask["messages"]) == 2 and f"another than every one of [{json.dumps(fault['fix'])}" in ask[
        "messages"][-1]["content"]
    # the usual fix and another fault's usual fix are passed over; the note's '(fix)' follows the new one
    assert yaml.safe_load(candidate.files["domain.yaml"])["faults"][0]["constraint"] == {
        "note": "runbook note: the spare is on site; swap it in instead (swap_in_spare_unit)",
        "fix": "swap_in_spare_unit"}


def test_a_draft_that_never_parsed_is_repaired_further_while_it_fixes_problems():
    from openadapt.designer.family_design import _keeps_repairing

    assert _keeps_repairing({"redesign": 3, "fixed": 0})  # the first continuation after any attempt
    assert _keeps_repairing({"continued": 2, "problems": [1, 5], "fixed": 1})  # a schema problem fixed: once more
    assert not _keeps_repairing({"continued": 2, "problems": [3, 3], "fixed": 0})  # stuck: every piece rewritten
    assert not _keeps_repairing({"continued": 2})


def test_a_list_of_lines_in_an_item_left_short_by_a_repeat_is_completed_line_by_line_aside(llm, world):
    # run 20: `faults[1].evidence` one line short once its repeat was dropped; the fault rewritten whole got it back
    fault = world["faults"][1]
    first = fault["evidence"][0]
    new = "WARN {component} strainer differential pressure high for {n} minutes"

    class Evidence(ScriptedModel):
        def answer(self, text, title):
            if title == "OneLine" and "Write one more line for `evidence` of `domain.faults[1]`" in text:
                return {"line": new}
            return super().answer(text, title)

    model = Evidence(world, break_once={"domain.faults[1]": {**fault, "evidence": [first, first]}})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    assert yaml.safe_load(candidate.files["domain.yaml"])["faults"][1]["evidence"] == [first, new]
    (ask,) = [r for r in llm.requests if "one more line for `evidence`" in r["messages"][-1]["content"]]
    content = ask["messages"][-1]["content"]
    assert len(ask["messages"]) == 2 and world["faults"][0]["evidence"][0] in content  # aside; told the others
    assert not any(a.startswith("Your `domain.faults[1]`") for a in model.asked)  # the fault was kept


def test_an_identifier_the_schema_quotes_from_no_example_world_is_a_copy_and_is_renamed_aside(llm, world,
                                                                                            monkeypatch):
    # run 20: a failing irrigation pump's fix was the description's own example, `run_defrost_cycle` (the
    # description quotes none now: the benchmark's SIEM draft took it for three faults; the check stays)
    from openadapt.families.diagnosis.domain import Fault

    assert "'" not in Fault.model_fields["fix"].description
    monkeypatch.setattr(Fault.model_fields["fix"], "description", "Identifier of the usual fix, e.g. "
                        "'run_defrost_cycle'.")
    family = get_family("diagnosis")
    example, *others = [family.load_example(n) for n in family.examples()]
    draft = {**world, "faults": [{**world["faults"][0], "fix": "run_defrost_cycle"}, *world["faults"][1:]]}
    flagged = [p for p in copied_from_example(draft, example, others) if "description" in p.message]
    assert [p.path for p in flagged] == ["domain.faults[0].fix"]
    assert not [p for p in copied_from_example(world, example, others) if "description" in p.message]

    class Three(ScriptedModel):
        def answer(self, text, title):
            if title == "ThreeValues":
                return {"values": ["clear_intake_strainer", "flush_the_strainer", "clean_the_intake"]}
            return super().answer(text, title)

    llm.responder = Three(world, break_once={"domain.faults[0]": draft["faults"][0]})
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    assert yaml.safe_load(candidate.files["domain.yaml"])["faults"][0]["fix"] == "clear_intake_strainer"
    (ask,) = [r for r in llm.requests if "Name three other values for its `fix`" in r["messages"][-1]["content"]]
    assert len(ask["messages"]) == 2  # aside, told that it copied its description's example
    assert "is copied from the worked example in this field's description" in ask["messages"][-1]["content"]


def test_a_header_written_again_for_one_field_keeps_what_its_other_fields_were(llm, world):
    # run 20: the header rewritten whole for its copied agent role brought back the copied alert fixed just before
    header = {k: v for k, v in world.items() if not isinstance(v, (list, dict))}

    class Header(ScriptedModel):
        def answer(self, text, title):
            if title == "OneText" and "`agent_role` has a problem" in text:
                return {"text": "TODO"}  # the field asked for alone never gets better
            if text.startswith("Your `domain` has problems"):
                return {**header, "agent_role": "the farm's pump technician", "title": "A title written again"}
            return super().answer(text, title)

    model = Header({**world, "agent_role": "TODO"})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    written = yaml.safe_load(candidate.files["domain.yaml"])
    assert any(a.startswith("Your `domain` has problems") for a in model.asked)  # the header was written again
    assert written["agent_role"] == "the farm's pump technician" and written["title"] == world["title"]


def test_names_repeated_in_a_record_take_their_defaults_without_a_request(llm, world):
    # run 21: the five tool names all `submit_diagnosis`; the record written again whole came back the same,
    # and renamed field by field it took four to eight requests the time limit did not leave
    from openadapt.families.diagnosis.domain import ToolNames

    same = {field: "run_check" for field in world["tools"]}
    model = ScriptedModel(world, break_once={"domain.tools": same})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    assert yaml.safe_load(candidate.files["domain.yaml"])["tools"] == ToolNames().model_dump()
    assert not any("tools" in a and "has a problem" in a for a in model.asked)  # no request spent on it
    assert not any(a.startswith("Your `domain.tools`") for a in model.asked)


def test_a_repeated_name_keeps_the_first_and_defaults_the_rest(llm, world):
    from openadapt.families.diagnosis.domain import ToolNames

    tools = {**world["tools"], "notes": world["tools"]["logs"]}
    model = ScriptedModel(world, break_once={"domain.tools": tools})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    assert yaml.safe_load(candidate.files["domain.yaml"])["tools"] == {**world["tools"], "notes": ToolNames().notes}


def test_an_item_written_again_for_one_field_keeps_its_other_fields(llm, world):
    # run 21: a pump fault rewritten whole for its fix brought back the constraint fix chosen just before
    fault = world["faults"][0]
    kept = [*fault["evidence"][:1], "ERROR {component} pod evicted: node memory pressure"]
    rewritten = {**world["faults"][0], "evidence": fault["evidence"], "runbook": "Check the events and the probe."}
    echo = "a hidden operational fact that makes the usual fix wrong for this episode"  # the schema's own words

    class Runbook(ScriptedModel):
        def answer(self, text, title):
            if title == "OneText" and "`runbook` of `domain.faults[0]` has" in text:
                return {"text": echo}  # asked alone it never gets better
            if text.startswith("Your `domain.faults[0]` has problems"):
                return rewritten
            return super().answer(text, title)

    model = Runbook(world, break_once={"domain.faults[0]": {**fault, "evidence": kept, "runbook": echo}})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    written = yaml.safe_load(candidate.files["domain.yaml"])["faults"][0]
    assert any(a.startswith("Your `domain.faults[0]` has problems") for a in model.asked)
    assert written["runbook"] == "Check the events and the probe." and written["evidence"] == kept


def test_a_line_that_is_its_fields_own_example_is_asked_for_again_aside_without_the_example(llm, world):
    # the pumps' first validated package: 'INFO {component} defrost cycle completed on schedule', a cold room's
    example = "INFO {component} defrost cycle completed on schedule"
    noise = [example, *world["noise_lines"][1:5]]  # as many as the piece asks for
    model = OneTextReply(world, "Line 1 of `noise_lines` is copied", "INFO {component} intake screen rinsed",
                         break_once={"domain.noise_lines": {"items": noise}})
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    written = yaml.safe_load(candidate.files["domain.yaml"])["noise_lines"]
    assert written[0] == "INFO {component} intake screen rinsed" and example not in written
    (ask,) = [r["messages"] for r in llm.requests if "Line 1 of `noise_lines` is copied" in
              r["messages"][-1]["content"]]
    assert len(ask) == 2 and "defrost" not in ask[1]["content"]  # aside, and never shown the example again
    assert "is copied from the example its description gives" in ask[1]["content"]


def _freight_world() -> dict:
    """The freight example with as many terms as the designer asks for (the shown example's count); the trimmed
    world leaves problems of its own, beside the point of the tests that use it."""
    world = get_family("negotiation").load_example("freight_rate").model_dump(mode="json")
    world["issues"] = world["issues"][:3]
    for persona in world["personas"]:
        persona["weights"] = {i["id"]: persona["weights"][i["id"]] for i in world["issues"]}
    return world


def test_a_list_of_lines_in_a_record_left_short_is_completed_line_by_line(llm):
    # the packaging supplier's `messages.anchors`: one line each time the whole record was written again
    task = "Train an agent to negotiate road freight contract rates with a haulier"  # shown the supplier example
    world = _freight_world()
    first = world["messages"]["anchors"][0]
    new = "Most of our accounts sign at {value} without a second thought."

    class Anchors(ScriptedModel):
        def answer(self, text, title):
            if title == "OneLine" and "Write one more line for `anchors` of `domain.messages`" in text:
                return {"line": new}
            return super().answer(text, title)

    model = Anchors(world, fits={"negotiation": 9},
                    break_once={"domain.messages": {**world["messages"], "anchors": [first, first]}})
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "deal", task, kind="openai-compatible")
    candidate = designer.design()
    assert not any("messages.anchors" in p for p in candidate.problems)
    assert next(p for p in designer.draft.pieces if p.path == "domain.messages").value.anchors == [first, new]
    assert not any(a.startswith("Your `domain.messages`") for a in model.asked)  # the record was kept


def test_the_local_model_writes_a_record_of_many_lists_of_lines_one_list_at_a_time(llm):
    # asked for the supplier's 11 lists of replies at once, the 1.5B wrote 2,979 tokens in 258 s, notes about the
    # JSON from the second line on ('{offer} is a placeholder for the actual offer ...')
    task = "Train an agent to negotiate road freight contract rates with a haulier"
    world = _freight_world()
    first = world["messages"]["anchors"][0]
    new = "Most of our accounts sign at {value} without a second thought."

    class Anchors(ScriptedModel):
        def answer(self, text, title):
            if title == "OneLine" and "Write one more line for the domain's `messages.anchors`" in text:
                return {"line": new}
            return super().answer(text, title)

    model = Anchors(world, fits={"negotiation": 9}, break_once={"domain.messages.anchors": {"items": [first, first]}})
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "deal", task, kind="local")
    candidate = designer.design()
    assert not any("messages" in p for p in candidate.problems), candidate.problems
    asks = {r["messages"][-1]["content"].split("\n\nWrite `messages.", 1)[1].split("`")[0]: r
            for r in llm.requests if "\n\nWrite `messages." in r["messages"][-1]["content"]}
    assert set(asks) == set(world["messages"])  # each list asked for on its own, aside
    opening = asks["opening"]["response_format"]["json_schema"]["schema"]["properties"]["items"]
    longest = max(map(len, designer.draft.example.messages.opening))  # the worked example's (the supplier's)
    assert opening["minItems"] == opening["maxItems"] == 2 and opening["items"]["maxLength"] < longest * 3 // 2
    written = yaml.safe_load(candidate.files["domain.yaml"])["messages"]
    assert written["opening"] == world["messages"]["opening"][:2] and written["anchors"] == [first, new]
    assert not any(a.startswith("Your `domain.messages") for a in model.asked)  # completed line by line


def test_a_reply_written_aside_cut_off_at_the_token_limit_is_asked_again_with_room(llm, world):
    # an assessment criterion written aside was cut at 1,297 tokens and lost as unusable
    model = ScriptedModel(world)
    cut = {"n": 0}

    def respond(body: dict) -> Scripted:
        text = body["messages"][-1]["content"]
        if text.startswith("The task:") and "Write `faults` item 1 of" in text and cut["n"] == 0:
            cut["n"] += 1
            return Scripted('{"id": "oom_killed", "evidence": ["WARN', finish_reason="length")
        return model(body)

    llm.responder = respond
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible")
    assert designer.design().usable
    asks = [r for r in llm.requests if "Write `faults` item 1 of" in r["messages"][-1]["content"]]
    assert len(asks) == 2 and len(asks[1]["messages"]) == 2  # aside both times
    assert asks[1]["max_tokens"] == 2 * asks[0]["max_tokens"]


def test_a_sentence_written_three_times_is_dropped_from_lists_that_keep_their_minimum_without_it():
    # the supplier's 1.5B: 'This is as far as I can go: {offer}.' as an opening, a counter and a final (the
    # counter at its minimum of two), and one style tell beside each persona's own
    family = get_family("negotiation")
    data = family.load_example("freight_rate").model_dump(mode="json")
    line, tell = "This is as far as I can go: {offer}.", "We don't really do discounts on list prices."
    messages = data["messages"]
    messages["opening"].append(line)
    messages["counter"] = [messages["counter"][0], line]
    messages["final"].append(line)
    for persona in data["personas"]:
        persona["style_tells"] = [persona["style_tells"][0], tell]
    with pytest.raises(DomainError, match="the same text appears"):
        family.parse_domain(data)
    thinned = thin_repeats(data, family.domain)
    texts = [t for _, t in iter_texts(thinned)]
    assert texts.count(line) == 2 and texts.count(tell) == 2
    assert line in thinned["messages"]["counter"]  # at its minimum: kept
    assert [p["style_tells"] for p in thinned["personas"][2:]] == [p["style_tells"][:1] for p in data["personas"][2:]]
    assert messages["opening"][-1] == line  # the caller's draft is left as it was
    family.parse_domain(thinned)


def test_the_worked_examples_template_with_this_worlds_names_filled_in_is_a_copy():
    family = get_family("diagnosis")
    example, others = (family.load_example("kubernetes_cluster"),
                       [family.load_example("wind_park"), family.load_example("incident_triage")])
    # run 31's fresh-clone pumps: the Kubernetes example's "namespace shop; 4 replicas; HPA 4-12 on CPU; owner
    # team-web." with the farm's words and other numbers; too few long words for a phrase of six
    pumps = {"components": [{"name": "water-quality-checker",
                             "note": "namespace farm; 1 replica; HPA 1-4 on CPU; owner team-farm."},
                            {"name": "pressure-gauge", "note": "bourdon gauge on the pump outlet; owner team-farm."}]}
    flagged = {p.path for p in copied_from_example(pumps, example, others)}
    assert flagged == {"domain.components[0].note"}
    # the example's clause with its own words further apart (runs 31-33's pumps and CI failures): 'platform' and
    # 'team' are everyone's words and 'via' a short one, so no four words in a row hold two of the example's own
    helm = {"components": [{"name": "pump-1", "note": "15 kW motor in pump house 2; managed by the platform team via "
                                                      "Helm."}]}
    assert [p.path for p in copied_from_example(helm, example, others)] == ["domain.components[0].note"]
    assert not copied_from_example({"components": [{"name": "pump-1", "note": "15 kW motor in pump house 2; "
                                                    "serviced by the farm team every spring."}]}, example, others)
    # words every family's examples use are nobody's template: a pump runbook sharing "the usual fix" is its own
    assert not copied_from_example({"summary": "Check the pressure first and apply the usual fix to the pump."},
                                   example, others)


class OtherFamilyModel(ScriptedModel):
    """A scripted model writing another family's example world: its lists keyed as the family keys them, and a
    numbered text of its own for each text asked for alone (the example's texts that its own descriptions quote
    come back as copies)."""

    def __init__(self, family, world: dict):
        super().__init__(world, fits={family.name: 9})
        self.keys = dict(family.domain.KEYS)

    def answer(self, text: str, title: str):
        if 'as JSON {"text": ...}' in text:
            return {"text": f"World text number {len(self.asked)} of its own"}
        return super().answer(text, title)


def design_with(llm, model: ScriptedModel, name: str, task: str):
    llm.responder = model
    designer = FamilyDomainDesigner(LLMClient(config(llm)), name, task, kind="openai-compatible")
    return designer, designer.design()


def test_a_list_the_domain_finds_too_short_for_its_tiers_is_topped_up_line_by_line(llm):
    """`too_few`'s problems ('has 11 item(s); at least 15 are needed ...') are topped up like the schema's: the
    helpdesk's staff names were asked for again whole, and came back the same 11, until the time limit."""
    family = get_family("report")
    world = family.load_example("daily_report").model_dump(mode="json")
    # the plan asks for the 10 the tiers need; three come back as JSON debris, dropped, so 7 are left
    world["subject_names"] = world["subject_names"][:7] + ["} ]", "``` ```", "] ,"]
    world["agent_role"] = "the reporting clerk of a chain of garden centres"  # the seed's is the description's

    class Names(OtherFamilyModel):
        def answer(self, text: str, title: str):
            if "Write one more name for the domain's `subject_names`" in text:
                return {"line": f"Store number {'ABCDEFGHIJ'[len(self.asked) % 10]}{len(self.asked)}"}
            if "Write one more name for the domain's `mailboxes`" in text:  # the plan asked for fewer too
                return {"line": "desk" + "".join(chr(97 + int(d)) for d in str(len(self.asked)))}
            return super().answer(text, title)

    model = Names(family, world)
    _, candidate = design_with(llm, model, "sales", "Train an agent to compile the daily sales report and email "
                               "it to the store managers")
    asked = [a for a in model.asked if "one more name for the domain's `subject_names`" in a]
    assert len(asked) >= 3  # one at a time, as many as the piece asks for (it may ask for more than 10)
    assert not any("subject_names" in p for p in candidate.problems)
    assert not any(a.startswith("Your `domain.subject_names` has problems") for a in model.asked)


def test_a_repeated_line_that_comes_back_repeated_is_dropped_and_the_list_topped_up(llm):
    """The daily sales report's tenth subject name, 'Acme Lending' again, came back the same each time it was asked
    for alone, and the list was rewritten whole every round of two attempts (2026-12-05)."""
    family = get_family("report")
    world = family.load_example("daily_report").model_dump(mode="json")
    world["agent_role"] = "the reporting clerk of a chain of garden centres"  # the seed's is the description's
    names = world["subject_names"][:10]
    repeated = names[2]
    world["subject_names"] = [*names[:9], repeated]

    class Repeats(OtherFamilyModel):
        def answer(self, text: str, title: str):
            if "Line 10 of `subject_names`" in text:
                return {"text": repeated}  # a line already there, however often it is asked
            if "Write one more name for the domain's `subject_names`" in text:
                return {"line": "Harbourside Garden Centre"}
            return super().answer(text, title)

    model = Repeats(family, world)
    designer, _ = design_with(llm, model, "sales", "Train an agent to compile the daily sales report and email "
                              "it to the store managers")
    kept = designer.draft.data()["subject_names"]
    assert kept.count(repeated) == 1 and "Harbourside Garden Centre" in kept and len(kept) == 10
    assert sum("Line 10 of `subject_names`" in a for a in model.asked) == 2  # asked alone twice, then dropped
    assert not any(a.startswith("Your `domain.subject_names` has problems") for a in model.asked)


def test_an_item_still_wrong_after_a_round_of_repairs_is_dropped_where_the_list_keeps_enough(llm):
    """The helpdesk's third scenario held three of its draft's four problems after two rounds and two attempts,
    rewritten whole each time and sent back the same; its two sound scenarios were enough for the domain."""
    family = get_family("workflow")
    world = family.load_example("it_service_desk").model_dump(mode="json")
    hopeless = world["scenarios"][2]
    hopeless["escalate_categories"] = ["critical", "urgent", "contract_breach_notice"]  # two undefined categories

    class SameAnswer(OtherFamilyModel):
        def answer(self, text: str, title: str):
            if text.startswith("Your `domain.scenarios[2]` has problems"):
                return hopeless  # what a small model sends back, however it is asked
            if title == "Chosen":  # the grammar holds a real model to the defined ones; this one ignores it
                return {"items": hopeless["escalate_categories"]}
            return super().answer(text, title)

    model = SameAnswer(family, world)
    designer, candidate = design_with(llm, model, "desk", "Train an agent to route IT helpdesk tickets to the right "
                                      "team")
    assert sum(a.startswith("Your `domain.scenarios[2]` has problems") for a in model.asked) == 1  # one repair
    assert not any("scenarios" in p for p in candidate.problems), candidate.problems
    scenarios = [p for p in designer.draft.pieces if p.field == "scenarios" and not p.keys]
    assert [p.path for p in scenarios] == ["domain.scenarios[0]", "domain.scenarios[1]"]
    keys = next(p for p in designer.draft.pieces if p.field == "scenarios" and p.keys).value.items
    assert keys == [world["scenarios"][0]["name"], world["scenarios"][1]["name"]]
    assert not any(turn[0] == "domain.scenarios[2]" for turn in designer.draft.session.turns)


def test_references_to_what_an_item_does_not_define_are_chosen_again_among_its_own(llm):
    """The helpdesk's 1.5B (2026-12-05) escalated 'legal_threat', 'data_loss' and 'financial_risk' in a scenario
    whose skills handled none of them; rewritten whole, the scenario came back with the same."""
    family = get_family("workflow")
    world = family.load_example("it_service_desk").model_dump(mode="json")
    scenario = world["scenarios"][1]
    handled = [c for skill in scenario["skills"] for c in skill["categories"]]
    free = [c for c in handled if c not in scenario["defer_categories"]]
    scenario["escalate_categories"] = ["legal_threat", "data_loss", "financial_risk"]

    class Chooses(OtherFamilyModel):
        def answer(self, text: str, title: str):
            if title == "Chosen":
                self.schema_seen = self.schema
                return {"items": free[:3]}
            return super().answer(text, title)

    model = Chooses(family, world)
    designer, candidate = design_with(llm, model, "desk", "Train an agent to route IT helpdesk tickets to the right "
                                      "team")
    assert candidate.usable, candidate.problems
    assert yaml.safe_load(candidate.files["domain.yaml"])["scenarios"][1]["escalate_categories"] == free[:3]
    enum = model.schema_seen["properties"]["items"]["items"]["enum"]
    assert sorted(enum) == sorted(c for c in handled if c not in scenario["defer_categories"])  # not a deferred one
    assert model.schema_seen["properties"]["items"]["maxItems"] == 3  # as many as it named
    (asked,) = [a for a in model.asked if "Choose its `escalate_categories` again" in a]
    assert '"legal_threat"' in asked  # shown what it named wrong
    assert not any(a.startswith("Your `domain.scenarios[1]` has problems") for a in model.asked)  # not rewritten


def test_a_single_reference_to_nothing_defined_is_chosen_among_the_defined(llm):
    """The warehouse's 1.5B (2026-12-05) kept items in 'inventory' (no location of the domain) and had suppliers
    offer 'item1' .. 'item4'; each was left to a rewrite of the whole item, which wrote every offer again."""
    family = get_family("inventory")
    world = family.load_example("warehouse_restocking").model_dump(mode="json")
    locations = [loc["id"] for loc in world["locations"]]
    world["items"][1]["location"] = "inventory"
    meant = world["suppliers"][0]["offers"][0]["item"]
    world["suppliers"][0]["offers"][0]["item"] = "item1"
    siblings = {o["item"] for o in world["suppliers"][0]["offers"][1:]}

    class Chooses(OtherFamilyModel):
        def answer(self, text: str, title: str):
            if title == "Chosen":
                enum = self.schema["properties"]["items"]["enum"]
                if "'item1'" in text:  # its supplier's other offers are not offered again
                    assert siblings and not siblings & set(enum), (siblings, enum)
                return {"items": locations[-1] if "'inventory'" in text else meant if meant in enum else enum[0]}
            return super().answer(text, title)

    model = Chooses(family, world)
    designer, _ = design_with(llm, model, "stock", "Train an agent to keep a warehouse restocked when supplier "
                              "lead times keep drifting")
    draft = designer.draft.data()  # (this scripted world leaves other problems, unrelated: its items are too few)
    assert draft["items"][1]["location"] == locations[-1] and draft["suppliers"][0]["offers"][0]["item"] == meant
    assert sum("which this world does not define" in a for a in model.asked) == 2  # one short request each
    assert not any(a.startswith(("Your `domain.items[1]` has problems", "Your `domain.suppliers[0]` has problems"))
                   for a in model.asked)


def test_a_line_that_still_copies_an_example_after_a_round_is_dropped_where_its_list_keeps_enough(llm, world):
    """Asked for again, the supplier's third persona kept its description's style tell beside one of its own:
    a round later the copy is dropped (no request) where the list holds more lines than its schema needs."""
    from openadapt.designer.family_design import pick_example

    copied = pick_example(TASK, get_family("diagnosis"))[0].faults[0].evidence[0]
    evidence = world["faults"][1]["evidence"]
    assert len(evidence) > 2  # above the schema's minimum with the copy left out
    world["faults"][1]["evidence"] = [*evidence, copied][:5]
    model = OneTextReply(world, "of `domain.faults[1]`", copied)  # asked for the line again, it sends the copy back
    llm.responder = model
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    kept = yaml.safe_load(candidate.files["domain.yaml"])["faults"][1]["evidence"]
    assert copied not in kept and len(kept) == len(world["faults"][1]["evidence"]) - 1
    # asked for again in one round (reworded alone, then the fault rewritten; the copy sent back both times), then
    # dropped: no second round for it
    assert sum("Your `domain.faults[1]` has problems" in a for a in model.asked) == 1


@pytest.mark.parametrize("name", ["scheduling", "report"])
def test_pieces_ask_for_as_many_items_as_the_family_checks_need(name):
    """Written to the schema's minimum, a draft's lists fell short of what the tiers draw (the operating rooms:
    3 sites, 3 staff where 4 and 6 are needed) and were topped up one item at a time, or left short."""
    family = get_family(name)
    example = family.load_example(next(iter(family.examples())))
    planned = {p.path: p for p in plan_pieces(family.domain, example)}
    checked = 0
    for list_name, value in example:
        piece = planned.get(f"domain.{list_name}.keys") or planned.get(f"domain.{list_name}")
        if not isinstance(value, list) or piece is None or "items" not in piece.model.model_fields:
            continue
        count = next(m.min_length for m in piece.model.model_fields["items"].metadata
                     if getattr(m, "min_length", None) is not None)
        short = [p for p in example.model_copy(update={list_name: value[:count - 1]}).family_problems()
                 if p.path == f"domain.{list_name}" and "are needed" in p.message]
        enough = [p for p in example.model_copy(update={list_name: value[:count]}).family_problems()
                  if p.path == f"domain.{list_name}" and "are needed" in p.message]
        assert not enough, (list_name, count, enough)
        checked += bool(short)
    assert checked >= 2  # lists whose count is set by the checks, not the schema


def test_a_key_repeated_in_a_list_of_references_is_listed_once():
    """The grammar bounds a list of references but cannot make its values differ: the operating rooms' 1.5B gave
    every site one capability six times."""
    from openadapt.designer.pieces import distinct_references

    family = get_family("scheduling")
    draft = {"sites": [{"id": "or_1", "capabilities": ["laminar_flow"] * 6 + ["imaging", "laminar_flow"]}],
             "staff": [{"id": "dr_a", "skills": ["ortho", "ortho"]}], "title": "x"}
    tidied = distinct_references(draft, family.domain)
    assert tidied["sites"][0]["capabilities"] == ["laminar_flow", "imaging"]
    assert tidied["staff"][0]["skills"] == ["ortho"] and tidied["title"] == "x"
    assert draft["sites"][0]["capabilities"][1] == "laminar_flow"  # the draft itself is not edited


def _local_design(llm, family_name: str, example: str, task: str) -> dict:
    """The requests of one embedded-model design of `family_name` (scripted from its example `example`)."""
    family = get_family(family_name)
    world = family.load_example(example).model_dump(mode="json")
    llm.responder = OtherFamilyModel(family, world)
    with contextlib.suppress(LLMError):  # the script does not answer every repair after the first draft
        FamilyDomainDesigner(LLMClient(config(llm)), "x", task, kind="local").design()
    return world


def _pieces_asked(llm, field: str) -> list[dict]:
    return [r for r in llm.requests if re.search(rf"(^|\n\n)(Write|First name the) `{field}`",
                                                 r["messages"][-1]["content"])]


def test_the_embedded_model_writes_a_marked_familys_pieces_out_of_the_worked_examples_sight(llm):
    """In the conversation, the 1.5B copied the worked example's world into the task's (the dock example's reefer
    doors and hauliers into the operating rooms): where the family asks it (`PIECES_ASIDE`), every piece after
    the header is written aside, with the header in sight, and the keys without the description's names."""
    _local_design(llm, "scheduling", "warehouse_dock", "Train an agent to schedule tomorrow's surgeries")
    header = [r for r in llm.requests if "Write the domain's header" in r["messages"][-1]["content"]]
    assert len(header) == 1 and "Here is a worked example" in json.dumps(header[0]["messages"])
    for field in ("sites", "staff", "task_types"):
        asked = _pieces_asked(llm, field)
        assert len(asked) >= 2 and all(len(r["messages"]) == 2 for r in asked), field
        assert all("Here is a worked example" not in json.dumps(r["messages"]) for r in asked)
        assert all("This world's domain so far" in r["messages"][1]["content"] for r in asked)
    (keys,) = _pieces_asked(llm, "staff")[:1]
    assert "Identifier of one staff member or crew" in keys["messages"][1]["content"]
    assert "crew_bravo" not in keys["messages"][1]["content"]  # the 1.5B named its surgeons after it


def test_an_unmarked_family_keeps_the_conversation_with_the_embedded_model(llm):
    """Aside, the warehouse's items were named 'inventory', 'item2', ... (32 problems against 9) and the sales
    database's questions named tables that did not exist: those families keep the conversation."""
    world = _local_design(llm, "querying", "sales_database", "Train an agent to answer sales questions with SQL")
    questions = [r for r in llm.requests if r["messages"][-1]["content"].startswith("Write `questions` item")]
    assert _pieces_asked(llm, "tables") and all(len(r["messages"]) > 2 for r in _pieces_asked(llm, "tables"))
    assert questions and all(len(r["messages"]) > 2 and world["title"] not in r["messages"][-1]["content"]
                             for r in questions)


class _WritesItBack(ScriptedModel):
    """Answers a request to write one evidence line again with that same line."""

    def answer(self, text: str, title: str):
        if EVIDENCE_ASKED_AGAIN.search(text):
            return {"text": self.world["faults"][0]["evidence"][0]}
        return super().answer(text, title)


EVIDENCE_ASKED_AGAIN = re.compile(r"Line 1 of (`faults\[0\]\.evidence` has|`evidence` of `domain\.faults\[0\]`)")


def test_a_descriptions_phrase_found_in_two_repair_rounds_is_accepted_as_this_worlds(llm, world):
    # the irrigation pumps' evidence took 'minutes without reaching setpoint' (a cold room's, in the field's
    # description) four times running, and the time limit failed the design: a pump's pressure has a setpoint too
    line = "WARN {component} replica count {n} minutes without reaching setpoint"
    world["faults"][0]["evidence"][0] = line
    model = _WritesItBack(world)
    llm.responder = model
    seen: list[tuple[str, str]] = []
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible",
                                    progress=lambda phase, attempt, detail: seen.append((phase, detail)))
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    asked_again = [t for t in model.asked if EVIDENCE_ASKED_AGAIN.search(t)]
    assert len(asked_again) == 2  # one round of repair (a try and a retry), then taken as it is
    assert line in yaml.safe_load(candidate.files["domain.yaml"])["faults"][0]["evidence"]
    assert candidate.notes["accepted_phrases"] == ["domain.faults[].evidence[]: minute without reaching setpoint"]
    assert [d for p, d in seen if p == "accepted"] == [
        "faults[].evidence[]: 'minute without reaching setpoint' (taken from its description's example 2 rounds "
        "running: this world's words too)"]
    # a whole text copied from a description stays a problem however often it comes back: the line is dropped
    copied = "WARN {component} suction pressure {n} minutes without reaching setpoint"
    world["faults"][0]["evidence"][0] = copied
    llm.responder = _WritesItBack(world)
    again = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert again.usable and not again.notes["accepted_phrases"]
    assert copied not in yaml.safe_load(again.files["domain.yaml"])["faults"][0]["evidence"]


def test_a_text_going_round_in_a_loop_is_cut_before_its_first_repeated_clause():
    from openadapt.designer.pieces import cut_rambles

    # the pumps' runbook of 2026-12-05 (run 34), written until the grammar's bound cut it mid-clause
    loop = ("check_pressure gauge; if reading is below setpoint, check if pump is running; if pump is running, check "
            "if pressure is below setpoint; if pressure is below setpoint, check if pump is running; if pump is "
            "running, check if pressure is below setpoint; if pressure is below setpoint, check if pump is not")
    line = "WARN {component} pressure low"
    draft = {"faults": [{"runbook": loop, "evidence": [line, line]}],
             "summary": "Check the pump. Check the valve. Call the farm manager."}
    cut = cut_rambles(draft)
    assert cut["faults"][0]["runbook"] == ("check_pressure gauge; if reading is below setpoint, check if pump is "
                                           "running; if pump is running, check if pressure is below setpoint; if "
                                           "pressure is below setpoint, check if pump is running.")
    assert cut["summary"] == draft["summary"]  # nothing said twice: unchanged
    assert cut["faults"][0]["evidence"] == draft["faults"][0]["evidence"]  # a repeated list item is not a loop
    # a short clause that comes again in a row (the packaging supplier's constraint, 2026-12-05)
    reveal = "The rate is fixed. Anything else about this term? (Y/N) Y/N? Y/N? Y/N? Y{value} EUR per unit."
    assert cut_rambles(reveal) == "The rate is fixed. Anything else about this term? (Y/N) Y/N?"
    # a text the grammar stopped at its cap mid-sentence (the pumps' summary at de18d58) keeps its whole sentences
    from openadapt.llm.local.grammar import MAX_FREE_CHARS

    whole = " ".join(f"Pump {n} on the farm's field {n} has lost pressure since dawn." for n in range(1, 6))
    capped = f"{whole} The agent must check the pump's motor and shaft for any signs of wear or"[:MAX_FREE_CHARS - 1]
    assert len(whole) < len(capped) and cut_rambles(capped) == whole
    assert cut_rambles(capped[:200]) == capped[:200]  # shorter: no cap reached, nothing to tell


def test_a_descriptions_phrase_with_a_number_in_it_is_never_accepted_as_this_worlds():
    # the packaging supplier, 2026-12-05: its subjects took '000 dc-dc converter modules part vx-240' from the
    # description's example three rounds running, and it was accepted as a phrase of the cartons' world
    draft = Draft.__new__(Draft)
    draft.phrase_rounds, draft.attempt, draft.progress = {}, 1, lambda *args: None
    part = DomainProblem(path="domain.subjects[1]", code=Code.DESCRIBED_PHRASE,
                         value="000 dc-dc converter modules part vx-240", message="this text takes '000 dc-dc "
                         "converter modules part vx-240' from the example in this field's description")
    form = DomainProblem(path="domain.faults[0].evidence[0]", code=Code.DESCRIBED_PHRASE,
                         value="minutes without reaching setpoint", message="this text takes 'minutes without "
                         "reaching setpoint' from the example in this field's description")
    for _ in range(3):
        left = draft.accept_phrases([part, form])
    assert left == [part]


class EachLineItsOwn(ScriptedModel):
    """Answers every one-line rewrite with a line of its own."""

    def answer(self, text, title):
        if title == "OneText" and (match := re.search(r"Line (\d+) of `(\w+)`", text)):
            return {"text": f"INFO {{component}} scripted {match.group(2)} line {match.group(1)} of its own"}
        return super().answer(text, title)


def test_a_line_asked_for_again_is_not_shown_its_siblings_that_copied_too(llm, world):
    # the packaging supplier, 2026-12-05: its three subjects each took the description's 'DC-DC converter modules
    # (part VX-240)'; each rewrite was shown the other two as lines to differ from, and wrote the copy back
    from openadapt.designer.family_design import pick_example

    example = pick_example(TASK, get_family("diagnosis"))[0]
    first, second = example.noise_lines[0], example.noise_lines[1]
    own = "INFO {component} node pool autoscaler evaluated the cluster, no change"
    world["noise_lines"] = [first, second, own, *world["noise_lines"][2:]]
    llm.responder = EachLineItsOwn(world)
    candidate = FamilyDomainDesigner(LLMClient(config(llm)), "pods", TASK, kind="openai-compatible").design()
    assert candidate.usable, candidate.problems
    asks = [r["messages"][-1]["content"] for r in llm.requests
            if re.search(r"Line [12] of `noise_lines` (has|is)", r["messages"][-1]["content"])]
    assert len(asks) >= 2 and all(first not in a and second not in a for a in asks)
    assert all(own in a for a in asks)  # a sibling of its own is still one to differ from
    lines = yaml.safe_load(candidate.files["domain.yaml"])["noise_lines"]
    assert first not in lines and second not in lines and own in lines


def test_a_personas_description_and_style_tell_in_their_fields_general_form_are_no_copy():
    # the packaging supplier, 2026-12-05: three attempts ended on a persona 'A sales manager judged on margin:
    # concedes slowly, cares about price above all', the description's own example, which fits any deal
    negotiation = get_family("negotiation")
    example = negotiation.load_example("freight_rate")
    draft = negotiation.load_example("supplier_email").model_dump(mode="json")
    draft["personas"][0]["description"] = ("A sales manager judged on margin: concedes slowly, cares about price "
                                           "above all")
    draft["personas"][1]["style_tells"][0] = "We don't really do discounts on list prices."
    found = {p.path for p in copied_from_example(draft, example)}
    assert not {"domain.personas[0].description", "domain.personas[1].style_tells[0]"} & found


def _filled_designer(llm, family_name: str, draft_name: str, example_name: str) -> FamilyDomainDesigner:
    """A designer whose pieces hold the example `draft_name` as written, shown `example_name` as its worked
    example (no request made)."""
    family = get_family(family_name)
    designer = FamilyDomainDesigner(LLMClient(config(llm)), "x", "a task", families=[family], kind="local")
    draft = family.load_example(draft_name)
    example = family.load_example(example_name)
    session = Session(designer.backend, [{"role": "system", "content": "You design."},
                                         {"role": "user", "content": "The task: a task"}])
    designer.draft = Draft(family=family, example=example, others=[], task="a task", session=session,
                           deadline=NO_DEADLINE, progress=designer.progress,
                           pieces=plan_pieces(family.domain, example, split_records=True))
    counts = {}
    for piece in designer.draft.pieces:
        value = getattr(draft, piece.field) if piece.field else None
        if piece.keys:
            counts[piece.field] = len(value)
            key = family.domain.KEYS[piece.field]
            piece.value = piece.model.model_construct(items=[getattr(i, key) for i in value])
        elif piece.index is not None:
            piece.value = value[piece.index] if piece.index < len(value) else None
        elif piece.part is not None:
            piece.value = piece.model.model_construct(items=getattr(value, piece.part))
        elif piece.field is None:
            piece.value = piece.model.model_construct(**{n: getattr(draft, n) for n in piece.model.model_fields})
        elif "items" in piece.model.model_fields and not isinstance(value, BaseModel):
            piece.value = piece.model.model_construct(items=value)
        else:
            piece.value = value
    for field, count in counts.items():  # as many items as the draft has, whatever the plan asked for
        items = [p for p in designer.draft.pieces if p.field == field and p.index is not None]
        at = designer.draft.pieces.index(items[-1]) + 1
        for i in range(len(items), count):
            extra = replace(items[-1], path=f"domain.{field}[{i}]", index=i, value=getattr(draft, field)[i])
            designer.draft.pieces.insert(at, extra)
            at += 1
    designer.draft.pieces = [p for p in designer.draft.pieces if p.value is not None]
    return designer


def test_an_item_with_problems_left_is_dropped_only_where_the_list_keeps_enough_without_it(llm):
    # the daily sales report at 91559cc: a KPI with two problems was dropped for one, 'kpis: has 3 item(s); at
    # least 4 are needed', and the time ran out rewriting the others to make up for it
    def drop(draft: str, example: str) -> list[str]:
        designer = _filled_designer(llm, "report", draft, example)
        wrong = [DomainProblem(path="domain.kpis[0].label", message="a problem"),
                 DomainProblem(path="domain.kpis[0].formula", message="another problem")]
        designer.draft.item_tries = {"domain.kpis[0]": 1}
        drop_hopeless(designer.draft, [*designer.draft.check(), *wrong])
        return [p.path for p in designer.draft.pieces if p.field == "kpis" and p.index is not None]

    assert len(drop("daily_report", "weekly_warehouse_report")) == 4  # the 4 the tiers need: kept
    assert len(drop("weekly_warehouse_report", "daily_report")) == 5  # 6, one to spare: dropped


def test_a_value_repeating_another_of_its_list_is_dropped_without_a_request_where_the_list_keeps_enough(llm):
    # the daily sales report at ed13b24: `attributes[0].values` ['retail', 'wholesale', 'retail', 'wholesale'],
    # rewritten whole four times, came back the same each time
    designer = _filled_designer(llm, "report", "daily_report", "weekly_warehouse_report")
    table = next(p for p in designer.draft.pieces if p.path == "domain.subject_table")
    attributes = table.value.model_dump()["attributes"]
    attributes[0]["values"] = ["retail", "wholesale", "retail", "wholesale"]
    table.value = table.model.model_validate({**table.value.model_dump(), "attributes": attributes})
    llm.responder = lambda body: pytest.fail("no request is needed")
    for _ in range(2):  # one at a time: a drop moves the lines after it
        problem = next(p for p in designer.draft.check()
                       if p.path.startswith("domain.subject_table.attributes[0].values["))
        assert drop_surplus(designer.draft, problem, set())
    assert table.value.attributes[0].values == ["retail", "wholesale"]
    assert not [p for p in designer.draft.check() if p.path.startswith("domain.subject_table")]


def test_a_record_written_list_by_list_keeps_each_lines_own_bounds():
    # an inventory notice is 10 characters at least: asked for with 5, a 7-character signal failed the parse
    family = get_family("inventory")
    example = family.load_example(sorted(family.examples())[0])
    parts = {p.part: p for p in plan_pieces(family.domain, example, split_records=True) if p.part}
    assert set(parts) == {"drift_notices", "demand_signals", "promotions"}
    for name, piece in parts.items():
        line = piece.model.model_json_schema()["properties"]["items"]["items"]
        assert line["minLength"] == 10 and line["maxLength"] <= 240, (name, line)
    assert not any(p.part for p in plan_pieces(family.domain, example))  # an endpoint writes the record whole


def test_an_identifier_of_a_record_copied_or_clashing_is_chosen_among_three_not_the_record_rewritten(llm):
    # the daily sales report at bf6952d: its header rewritten whole four times kept the warehouse example's
    # `week_start`, and its record table kept `sale_id`, the subjects' key too
    designer = _filled_designer(llm, "report", "daily_report", "weekly_warehouse_report")
    header = next(p for p in designer.draft.pieces if p.path == "domain.header")
    records = next(p for p in designer.draft.pieces if p.path == "domain.record_table")
    subject_key = next(p for p in designer.draft.pieces if p.path == "domain.subject_table").value.id_column
    header.value = header.value.model_copy(update={"date_field": "week_start"})
    records.value = records.value.model_copy(update={"id_column": subject_key})
    problems = {p.path: p for p in designer.draft.check()}
    asked = []

    def respond(body: dict) -> Scripted:
        asked.append(body["messages"][-1]["content"])
        if "date_field" in asked[-1]:
            return Scripted(json.dumps({"values": ["week_start", "sale_day", "trading_day"]}))
        return Scripted(json.dumps({"values": [subject_key, "receipt_no", "line_id"]}))

    none_clears = {"values": ["week_start"] * 3, "text": "week_start"}
    llm.responder = lambda body: Scripted(json.dumps(none_clears))
    done: set[str] = set()
    assert not regenerate(designer.draft, problems["domain.header.date_field"], done)
    assert header.value.date_field == "week_start"  # left to the header's rewrite
    llm.responder, asked[:] = respond, []
    done = set()
    assert regenerate(designer.draft, problems["domain.header.date_field"], done)
    assert regenerate(designer.draft, problems["domain.record_table.id_column"], done)
    assert header.value.date_field == "sale_day" and records.value.id_column == "receipt_no"  # the first that clears
    assert len(asked) == 2 and all("Name three other values" in a for a in asked)  # one request each
    left = {p.path for p in designer.draft.check()}
    assert not {"domain.header.date_field", "domain.record_table.id_column"} & left


@pytest.fixture
def reworded(monkeypatch):
    """Every problem a family reports says only 'reworded': a repair that read a message's English would stop."""
    from openadapt.families.base import Family
    from openadapt.families.domain import DomainError

    parse = Family.parse_domain

    def parse_reworded(self, data, source="domain"):
        try:
            return parse(self, data, source)
        except DomainError as exc:
            raise DomainError([p.model_copy(update={"message": "reworded"}) for p in exc.problems], source) from None

    monkeypatch.setattr(Family, "parse_domain", parse_reworded)


@pytest.mark.parametrize("repair", [test_a_single_reference_to_nothing_defined_is_chosen_among_the_defined,
                                    test_a_list_the_domain_finds_too_short_for_its_tiers_is_topped_up_line_by_line,
                                    test_names_repeated_in_a_record_take_their_defaults_without_a_request,
                                    test_a_key_given_to_several_items_is_renamed_for_each_item_alone,
                                    test_a_text_written_four_times_is_reworded_in_one_round_keeping_the_first,
                                    test_a_record_field_still_wrong_after_both_asks_is_chosen_among_three_the_model_names],
                         ids=lambda f: f.__name__.removeprefix("test_")[:40])
def test_repairs_act_on_the_problems_code_and_data_never_on_its_words(repair, reworded, request):
    repair(**{name: request.getfixturevalue(name) for name in inspect.signature(repair).parameters})


def test_a_value_of_a_closed_set_is_chosen_not_copied_and_is_never_flagged():
    # a capable model's reconciliation design (issue 49): a column's `role` flagged as copied from the worked
    # example, where every other role was taken; seven requests went round it until a full rewrite
    from openadapt.designer.copying import closed_set

    family = get_family("reconciliation")
    example = family.load_example("three_way_match")
    draft = example.model_dump(mode="json")
    at = next(f"domain.sources[{i}].columns[{j}]" for i, s in enumerate(draft["sources"])
              for j, c in enumerate(s["columns"]) if c["role"] == "unit_price")
    i, j = (int(n) for n in re.findall(r"\d+", at))
    draft["sources"][i]["columns"][j]["label"] = "unit_price"  # the same word, written where it is free text
    found = {p.path for p in copied_from_example(draft, example)}
    assert f"{at}.label" in found  # still a copy where it was written
    assert not [p for p in found if p.endswith((".role", ".mechanism", ".direction"))]
    roles = type(example).model_fields["sources"].annotation.__args__[0].model_fields["columns"]
    assert closed_set(roles.annotation.__args__[0].model_fields["role"].annotation)
    assert not closed_set(roles.annotation.__args__[0].model_fields["label"].annotation)


def test_a_declared_rule_is_stated_before_the_model_writes_and_a_model_that_follows_requests_meets_it(llm):
    """Issue 49: every rule a capable model broke (the pair count among them) surfaced only as a problem after it
    wrote, each costing a repair round. The family declares it once (`Domain.RULES`); the request for every piece
    that writes a field it reads states it; the check reports it by its code in the same words."""
    family = get_family("reconciliation")
    world = family.load_example("three_way_match").model_dump(mode="json")
    # whichever items and sources the plan keeps (it sizes the lists as the worked example has them): every party
    # trades the first three items, and every source is scanned and, with a party column, written by others
    first = [item["id"] for item in world["items"][:3]]
    for party in world["parties"]:
        party["items"] = first
    for d in world["discrepancies"]:
        d["items"] = [i for i in d.get("items", []) if i in first]
    for source in world["sources"]:
        source["ocr"] = True
        source["external"] = any(c["role"] == "party" for c in source["columns"])
        source["split_items"] = [i for i in source.get("split_items", []) if i in first]
    rule = family.domain.rule("trade_pairs")

    class DoesWhatItIsTold(OtherFamilyModel):  # trades one item a party unless told the rule
        def answer(self, text: str, title: str):
            if title == "Chosen":  # a reference to an item the plan left out, chosen among those written
                answer = self.schema["properties"]["items"]
                return {"items": answer["items"]["enum"][:2] if "enum" not in answer else answer["enum"][0]}
            reply = super().answer(text, title)
            if text.startswith("Write `parties` item") and rule.says not in text:
                reply = {**reply, "items": reply["items"][:1]}
            return reply

    model = DoesWhatItIsTold(family, world)
    _, candidate = design_with(llm, model, "match", "Train an agent to match purchase orders, goods receipts and "
                               "supplier invoices")
    parties = [a for a in model.asked if a.startswith("Write `parties` item")]
    assert parties and all(rule.says in a for a in parties)
    assert not any(rule.says in a for a in model.asked if a.startswith("Write `resolutions` item"))  # not its field
    assert not any(a.startswith("Your `domain.parties") for a in model.asked)  # no repair round spent on it
    assert not any("trade_pairs" in p or rule.says in p for p in candidate.problems)


def test_the_tidies_change_no_sound_domain_and_are_idempotent():
    """What the draft's tidies do follows from the draft itself: a sound domain (every shipped example) passes
    through unchanged, and a tidied draft tidied again stays as it is."""
    for family in all_families():
        def tidy(data: dict, domain=family.domain) -> dict:  # the designer's draft pipeline, in its order
            drafted = distinct_references(cut_rambles(copy.deepcopy(data)), domain)
            return thin_repeats(drop_repeated_prose(domain.tidy(drop_repeated_prose(drafted))), domain)

        for name in family.examples():
            data = family.load_example(name).model_dump(mode="json")
            assert family.domain.tidy(copy.deepcopy(data)) == data, (family.name, name)
            assert tidy(data) == data, (family.name, name)
            once = tidy(_roughened(copy.deepcopy(data)))
            assert tidy(once) == once, (family.name, name)


def _roughened(data: dict) -> dict:
    """A draft as a model writes it: every list of lines with its first line written twice and its texts padded."""
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            data[key] = [f"  {value[0]}  ", *value]
    return data


def test_a_piece_that_repeated_its_description_is_asked_again_with_the_descriptions_example_alone():
    from openadapt.designer.pieces import instruction_for

    family = get_family("scheduling")
    pieces = plan_pieces(family.domain, family.load_example("warehouse_dock"))
    piece = next(p for p in pieces if p.path == "domain.late_start")
    echo = DomainProblem(path="domain.late_start[0]", code=Code.SCHEMA_ECHO, value="a staff member starts late with",
                         message="this text repeats the schema's description of a field")
    asked = instruction_for(piece, pieces, family, [echo])
    assert "Why a staff member starts late" not in asked
    assert "a text like '{staff} runs the outpatient clinic until {time}.'" in asked
    other = DomainProblem(path="domain.late_start[0]", code=Code.SCHEMA_ECHO, value="words of another field",
                          message="this text repeats the schema's description of a field")
    assert "Why a staff member starts late" in instruction_for(piece, pieces, family, [other])
