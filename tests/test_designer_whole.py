"""The whole-domain designer (`--design-mode whole`) against a real chat-completions server on loopback, whose
"model" is scripted: it picks a family, writes a whole domain it knows, and in a revision fixes only what the
revision request lists (by the rule or code it names), so a test sees what the request states and what comes
back."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable

import pytest
from fake_openai import Scripted
from typer.testing import CliRunner

from openadapt.cli import app
from openadapt.designer.family_design import pick_example
from openadapt.designer.generate import GenerateRequest, generate
from openadapt.designer.whole import NotAnObject, WholeDomainDesigner, domain_rules, reply_object, whole_request
from openadapt.families import all_families, get_family
from openadapt.llm.chat import Completion
from openadapt.llm.endpoint import LLMClient, LLMConfig

TASK = "Train an agent to reconcile the bank statement against the cash book at month end"
FAMILY = get_family("reconciliation")


def bank_world() -> dict:
    """The bank reconciliation example: another world than the task's worked example (the three-way match), with
    the one item name that is its field description's own example renamed."""
    data = FAMILY.load_example("bank_reconciliation").model_dump(mode="json")
    data["items"][4]["name"] = "Cheque paid to a supplier"
    return data


def one_item_each(data: dict) -> None:
    """Every party trades one item: too few (party, item) pairs, which no one party can mend alone."""
    for party in data["parties"]:
        party["items"] = [data["items"][0]["id"]]


def no_scan(data: dict) -> None:
    for source in data["sources"]:
        source["ocr"] = False


class WholeModel:
    """Answers the family pick with `family`, the whole request with `world` broken by `breaks`, and a revision
    by applying, to the draft it is shown, the fix it knows for the first `per_round` rules the request lists
    (what follows from a problem, such as the discrepancies' items no party trades, it knows no fix for), and
    nothing else."""

    def __init__(self, world: dict, breaks: list[Callable[[dict], None]] = (), per_round: int = 99,
                 fixes: dict[str, Callable[[dict], None]] | None = None, family: str = "reconciliation"):
        self.world, self.breaks, self.per_round, self.family = world, breaks, per_round, family
        self.fixes = fixes or {}
        self.asked: list[str] = []

    def __call__(self, body: dict) -> Scripted:
        messages = body["messages"]
        text = messages[-1]["content"]
        self.asked.append(text)
        title = body.get("response_format", {}).get("json_schema", {}).get("schema", {}).get("title")
        if title == "FamilyPick":
            return Scripted(json.dumps({"reason": f"scripted: {self.family} models it", "family": self.family}))
        if text.startswith("The task:"):
            draft = copy.deepcopy(self.world)
            for brk in self.breaks:
                brk(draft)
            return Scripted("Here is the domain:\n```json\n" + json.dumps(draft) + "\n```")
        draft = json.loads(re.search(r"\{.*\}", messages[-2]["content"], re.DOTALL).group(0))
        listed = re.findall(r"^- \S+ \[(\w+)\]", text, re.MULTILINE)
        for code in [c for c in dict.fromkeys(listed) if c in self.fixes][:self.per_round]:
            self.fixes[code](draft)
        return Scripted(json.dumps(draft))


def restore(field: str) -> Callable[[dict], None]:
    def fix(draft: dict) -> None:
        draft[field] = copy.deepcopy(bank_world()[field])
    return fix


def config(server) -> LLMConfig:
    return LLMConfig(base_url=server.base_url, model="designer-1", api_key="sk-test-WHOLE-31", backoff_s=0.01)


def test_every_declared_rule_of_every_family_is_stated_in_the_whole_request():
    for family in all_families():
        example, _ = pick_example("a task", family)
        request = whole_request("a task", family, example)
        for rule in family.domain.RULES:
            assert f"{rule.says} {rule.why}".strip() in request, (family.name, rule.code)  # what, and why
        for path in family.domain.REFERENCES:
            name, field = path.split(".", 1)
            assert f"Each `{field}` of a `{name}` item" in request, (family.name, path)
        assert len(domain_rules(family.domain)) >= len(family.domain.RULES) + len(family.domain.KEYS)


def test_a_rule_no_single_piece_can_meet_is_stated_found_by_its_code_and_fixed_in_one_revision(llm):
    model = WholeModel(bank_world(), breaks=[one_item_each], fixes={"trade_pairs": restore("parties")})
    llm.responder = model
    designer = WholeDomainDesigner(LLMClient(config(llm)), "bank_rec", TASK)
    candidate = designer.design()
    assert candidate.usable, candidate.problems
    whole, revision = model.asked[1], model.asked[2]
    assert FAMILY.domain.rule("trade_pairs").says in whole  # stated before the model wrote
    assert "domain.parties [trade_pairs]:" in revision  # found afterwards by its path and code
    # the discrepancies whose items no party trades any more went with the parties mended
    assert candidate.notes["problems_per_round"] == [5, 0] and candidate.notes["requests"] == 3
    assert candidate.usage.completion_tokens > 0  # the family pick and both replies are counted


def test_a_problem_fixed_in_one_revision_is_never_sent_again(llm):
    model = WholeModel(bank_world(), breaks=[one_item_each, no_scan], per_round=1,
                       fixes={"trade_pairs": restore("parties"), "scanned_source": restore("sources")})
    llm.responder = model
    candidate = WholeDomainDesigner(LLMClient(config(llm)), "bank_rec", TASK).design()
    assert candidate.usable, candidate.problems
    first, second = model.asked[2], model.asked[3]
    assert "[trade_pairs]" in first and "[scanned_source]" in first
    assert "[trade_pairs]" not in second and "[scanned_source]" in second
    assert candidate.notes["problems_per_round"] == [6, 1, 0]


def test_problems_left_after_the_last_revision_make_an_unusable_attempt_whose_repair_goes_on_from_its_draft(llm):
    model = WholeModel(bank_world(), breaks=[one_item_each], fixes={"trade_pairs": lambda d: None})  # never fixed
    llm.responder = model
    designer = WholeDomainDesigner(LLMClient(config(llm)), "bank_rec", TASK)
    candidate = designer.design()
    assert not candidate.usable and candidate.notes["problems_per_round"] == [5, 5, 5]
    assert "domain.parties: The parties together must trade" in "\n".join(candidate.problems)
    assert candidate.draft.startswith("# The domain as drafted; it did not pass its checks:\n# - domain.")
    model.fixes["trade_pairs"] = restore("parties")
    again = designer.repair(candidate, "The reply could not be used", 2)
    assert again.usable and model.asked[-1].startswith("Checking this domain found 5 problem(s)")


def test_the_validators_feedback_goes_back_with_the_draft_for_a_revision_of_the_whole(llm):
    model = WholeModel(bank_world())
    llm.responder = model
    designer = WholeDomainDesigner(LLMClient(config(llm)), "bank_rec", TASK)
    first = designer.design()
    assert first.usable
    model.fixes["other"] = lambda d: None
    again = designer.repair(first, "- semantic.seed_dependence: FAIL: replayed actions solve other seeds", 2)
    assert again.usable
    request = llm.requests[-1]["messages"]
    assert request[-1]["content"].startswith("The environment validator ran this domain's package and failed it:\n"
                                             "- semantic.seed_dependence")
    assert request[-2]["role"] == "assistant" and '"batch_noun"' in request[-2]["content"]


def test_a_reply_that_is_not_an_object_is_told_so_and_asked_again(llm):
    replies = iter(["I will write the domain now.", None])
    world = bank_world()

    def respond(body: dict) -> Scripted:
        title = body.get("response_format", {}).get("json_schema", {}).get("schema", {}).get("title")
        if title == "FamilyPick":
            return Scripted(json.dumps({"reason": "r", "family": "reconciliation"}))
        text = next(replies)
        return Scripted(text if text is not None else json.dumps(world))

    llm.responder = respond
    candidate = WholeDomainDesigner(LLMClient(config(llm)), "bank_rec", TASK).design()
    assert candidate.usable and candidate.notes["problems_per_round"] == [1, 0]
    assert "the reply is not JSON" in llm.requests[2]["messages"][-1]["content"]


@pytest.mark.parametrize(("text", "finish", "said"), [
    ('{"a": 1}', "stop", None), ('Sure:\n```json\n{"a": 1}\n```\nDone.', "stop", None),
    ('Here: {"a": 1} -- ok', "stop", None), ("[1, 2]", "stop", "a JSON list"),
    ('{"a": ', "length", "cut off at the token limit")])
def test_the_object_of_a_reply_is_found_in_the_forms_capable_models_answer(text, finish, said):
    completion = Completion(text=text, finish_reason=finish)
    if said is None:
        assert reply_object(completion) == {"a": 1}
    else:
        with pytest.raises(NotAnObject, match=said):
            reply_object(completion)


def test_an_endpoint_designs_the_whole_domain_by_default_and_generate_publishes_it(llm, tmp_path, validator):
    # a diagnosis world: the module's validator runs few episodes, too few to tell reconciliation's tiers apart
    world = get_family("diagnosis").load_example("kubernetes_cluster").model_dump(mode="json")
    llm.responder = WholeModel(world, family="diagnosis")
    task = "Train an agent to debug a Kubernetes deployment whose pods keep crashing, using events, logs and manifests"
    result = generate(GenerateRequest(task=task, output_root=tmp_path, name="pods", llm=config(llm)),
                      validator=validator)
    assert result.ok, result.reason
    (attempt,) = result.provenance.attempts
    assert attempt.notes["design_mode"] == "whole" and attempt.notes["requests"] == 2
    assert result.provenance.designer.settings["design_mode"] == "whole"
    assert "sk-test-WHOLE-31" not in (result.path / "provenance.json").read_text()


def test_an_unknown_design_mode_is_refused_before_anything_runs(tmp_path):
    result = CliRunner().invoke(app, ["generate", TASK, "--design-mode", "halves", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "halves" in result.output and not any(tmp_path.iterdir())


def test_a_switched_off_rule_is_left_out_and_recorded(llm):
    model = WholeModel(bank_world(), breaks=[one_item_each], fixes={"trade_pairs": restore("parties")})
    llm.responder = model
    designer = WholeDomainDesigner(LLMClient(config(llm)), "bank_rec", TASK, off=frozenset({"state_rules",
                                                                                            "revise"}))
    candidate = designer.design()
    assert FAMILY.domain.rule("trade_pairs").says not in model.asked[1]  # not stated
    assert not candidate.usable and candidate.notes["problems_per_round"] == [5]  # and not revised
    assert designer.info.settings["switched_off"] == ["revise", "state_rules"]


def test_an_unknown_switch_is_refused():
    with pytest.raises(ValueError, match="unknown designer switch.*known: state_rules, revise"):
        WholeDomainDesigner(Offline(), "x", TASK, off=frozenset({"stating"}))


class Offline:
    def describe(self):
        from openadapt.llm.chat import BackendInfo

        return BackendInfo(kind="endpoint", model="offline")


def test_a_piece_request_and_a_problem_state_a_rule_without_the_tiers_behind_it():
    """A small model writes what it is told: stated 'ECI 4-5 hide a hard limit', the packaging supplier's 1.5B wrote
    'ECI 4' into a counterpart's reply. The tiers behind a rule are for people and the whole request."""
    import re

    from openadapt.designer.pieces import plan_pieces, stated_rules

    tiers = re.compile(r"\bECI\b|\btiers?\b")
    whys = 0
    for family in all_families():
        example = family.load_example(sorted(family.examples())[0])
        for piece in plan_pieces(family.domain, example):
            assert not tiers.search(stated_rules(family.domain, piece)), (family.name, piece.path)
        for rule in family.domain.RULES:
            assert not tiers.search(rule.broken("domain", "nothing").message), (family.name, rule.code)
            whys += bool(tiers.search(rule.why))
    assert whys >= 20  # the reasons are kept, apart
