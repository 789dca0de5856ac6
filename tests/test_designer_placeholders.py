"""Placeholder rules as each family declares them (`Domain.PLACEHOLDERS`), checked, and the grammar patterns made of
them."""

from __future__ import annotations

import json
import re

import pytest

from openadapt.designer.pieces import constrained_schema, plan_pieces, replace_value
from openadapt.designer.placeholders import (
    family_rules,
    piece_schema,
    rule_for,
    text_pattern,
    with_placeholders,
)
from openadapt.families import all_families, get_family
from openadapt.families.domain import Code, DomainError, values_at

FAMILIES = [f.name for f in all_families()]


def encoded(text: str) -> str:
    """A text as the grammar writes it, inside a JSON string (the patterns are of this form)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def python_pattern(rule, limit=300):
    from openadapt.llm.local.grammar import bounded_pattern

    return re.compile(bounded_pattern(text_pattern(rule, limit), 1))


def test_the_grammar_reads_the_families_declarations():
    diagnosis = get_family("diagnosis")
    rules = family_rules(diagnosis)
    assert rules["domain.alert"] == (("component", "latency", "rate"), ("component",))
    assert rules["domain.noise_lines[]"] == (("build", "component", "date", "m", "n", "pct"), ("component",))
    assert rules["domain.faults[].constraint.note"] == (("component",), ())
    assert rule_for(diagnosis, "domain.faults[3].evidence[1]") == rules["domain.faults[].evidence[]"]
    # written with names in the placeholders' place: the names it may hold, none required
    assert rule_for(diagnosis, "domain.symptom_lines[0]") == (rules["domain.symptom_lines[]"][0], ())
    scheduling = family_rules(get_family("scheduling"))
    assert scheduling["domain.late_start[]"] == (("staff", "time"), ("staff", "time"))
    # names from the domain's own data (an assessment's slots) are not known before they are written: no grammar
    assert "domain.header" not in family_rules(get_family("assessment"))


@pytest.mark.parametrize("name", FAMILIES)
def test_every_declared_rule_is_checked_and_held_by_the_grammar(name):
    """The pattern admits every example text, while an unknown placeholder or a missing required one is refused by
    the pattern and reported by the check, at that text's path, by its code."""
    family = get_family(name)
    assert family.domain.PLACEHOLDERS, "every family declares its texts' placeholders"
    for example in family.examples():
        domain = family.load_example(example)
        for declared in family.domain.PLACEHOLDERS:
            for at, text, record in values_at(domain, declared.at):
                if declared.kind is not None and record.kind != declared.kind:
                    continue
                rule = rule_for(family, at, declared.kind)
                if rule is None or text.count(" ") < 1:  # names from the data, or lines written with names
                    continue
                pattern = python_pattern(rule, 600)  # the placeholders' rule; the length split is tested below
                if '"' in text:
                    assert not pattern.fullmatch(encoded(text))  # the grammar writes no quote in a templated text
                    continue
                assert pattern.fullmatch(encoded(text)), (at, text, rule)
                spoiled = text + " {zzunknown}"
                assert not pattern.fullmatch(spoiled)
                with pytest.raises(DomainError) as raised:
                    family.parse_domain(replace_value(domain, text, spoiled))
                assert any(p.path == at and p.code == Code.UNKNOWN_PLACEHOLDER for p in raised.value.problems)
                for needed in rule[1]:
                    bare = text.replace("{" + needed + "}", needed)
                    if len(rule[1]) <= 2:
                        assert not pattern.fullmatch(encoded(bare))
                    with pytest.raises(DomainError) as raised:
                        family.parse_domain(replace_value(domain, text, bare))
                    assert any(p.path == at and p.code == Code.MISSING_PLACEHOLDER and needed in p.required
                               for p in raised.value.problems)


def test_a_text_whose_rule_depends_on_its_records_kind_is_asked_for_again_under_that_kinds_rule():
    """A scheduling hidden rule's placeholders depend on its kind (the operating rooms' 1.5B wrote a site_ends_by
    rule as 'the patient is ready to be scheduled', twice): no rule holds for every kind, but each kind's does,
    and a text asked for again under its record's kind must name what that kind names."""
    from pydantic import create_model

    from openadapt.designer.pieces import bounded

    family = get_family("scheduling")
    assert rule_for(family, "domain.hidden_rules[1].text") is None  # the kinds disagree
    assert rule_for(family, "domain.hidden_rules[1].text", "site_ends_by") == (("site", "time"), ("site", "time"))
    assert rule_for(family, "domain.hidden_rules[0].text", "staff_excludes_type")[1] == ("staff", "task_type")
    one = create_model("OneText", text=(str, ...))
    schema = with_placeholders(bounded(one.model_json_schema()), family, "domain.hidden_rules[1].text", "text",
                               kind="site_ends_by")
    pattern = re.compile(schema["properties"]["text"]["pattern"])
    assert pattern.fullmatch("Theatre {site} closes at {time} for deep cleaning")
    assert not pattern.fullmatch("the patient is ready to be scheduled")
    assert not pattern.fullmatch("Theatre {site} closes early for {staff}")


def asked_schema(family_name: str, path: str) -> dict:
    """The schema the designer asks the piece at `path` under (with its first example as the worked example)."""
    family = get_family(family_name)
    pieces = plan_pieces(family.domain, family.load_example(sorted(family.examples())[0]))
    piece = next(p for p in pieces if p.path == path)
    return piece_schema(constrained_schema(piece, pieces, family.domain), family, piece)


def test_a_piece_schema_holds_its_texts_to_their_rules():
    schema = asked_schema("scheduling", "domain.late_start")
    pattern = re.compile(schema["properties"]["items"]["items"]["pattern"])
    assert pattern.fullmatch("{staff} is running late and will be in at {time}.")
    assert pattern.fullmatch("Running late: {time} at the earliest, says {staff}.")  # either order
    assert not pattern.fullmatch("{staff} is running late.")  # {time} missing
    assert not pattern.fullmatch("{staff} will be late at {time} for {surgeon}.")  # not a placeholder here
    assert not pattern.fullmatch("{staff} is late\nat {time}")  # a raw line break is no JSON
    limit = schema["properties"]["items"]["items"]["maxLength"]
    assert not pattern.fullmatch("{staff}" + "x" * (limit // 2) + "{time}" + "y" * (limit // 2))  # the whole bound
    assert not pattern.fullmatch(encoded('{staff} says "late" at {time}'))  # no quote (looped escaped)
    assert "pattern" not in json.dumps(asked_schema("scheduling", "domain")["properties"]["title"])


def test_no_text_under_a_pattern_can_hold_a_slot_left_to_fill():
    """A slot in angle brackets ('<pod-name>') is a name left unfilled: the check reports one, and no pattern lets
    one be written, in lines written with names as in any other; a comparison ('< 200 ms') stays writable."""
    family = get_family("diagnosis")
    lines = asked_schema("diagnosis", "domain.symptom_lines")["properties"]["items"]["items"]
    note = asked_schema("diagnosis", "domain.faults[0]")["$defs"]["Constraint"]["properties"]["note"]
    for schema, text in [(lines, "ERROR {component} request to {dependency} <pod-name> timed out"),
                         (note, "runbook note: the interface <interface-name> of {component} is down (restart)")]:
        pattern = re.compile(schema["pattern"])
        assert not pattern.fullmatch(text)
        assert not pattern.fullmatch(text.replace("<", "< "))  # nor with a space after the bracket
        assert pattern.fullmatch(text.replace("<pod-name>", "< 200 ms").replace("<interface-name>", "<=5%"))
    domain = family.load_example(sorted(family.examples())[0])
    for slot in ("<pod-name>", "< pod-name>"):
        slotted = replace_value(domain, domain.symptom_lines[0], f"{domain.symptom_lines[0]} {slot}")
        with pytest.raises(DomainError) as raised:
            family.parse_domain(slotted)
        assert any(p.path == "domain.symptom_lines[0]" and p.code == Code.NOT_CONTENT
                   for p in raised.value.problems)


def test_a_text_with_no_required_placeholder_holds_its_minimum_length():
    """llama.cpp ignores minLength beside a pattern: a Kubernetes background line came back empty."""
    schema = asked_schema("negotiation", "domain.issues[0]")
    item = schema["properties"]["priority_tells"]["items"]
    pattern = re.compile(item["pattern"])
    assert item["minLength"] >= 3
    assert not pattern.fullmatch("") and not pattern.fullmatch("okay"[: item["minLength"] - 1])
    assert pattern.fullmatch("{counterpart} watches every cent here")
    assert pattern.fullmatch("{counterpart}" * item["minLength"])  # a placeholder counts as one


def test_a_nested_record_and_a_list_item_piece_get_their_patterns():
    schema = asked_schema("diagnosis", "domain.faults[0]")
    evidence = re.compile(schema["properties"]["evidence"]["items"]["pattern"])
    assert evidence.fullmatch("WARN {component} intake strainer blocked for {n} minutes")
    assert not evidence.fullmatch("WARN {component} upstream {dependency} timed out")
    note = re.compile(schema["$defs"]["Constraint"]["properties"]["note"]["pattern"])
    assert note.fullmatch("runbook note: {component} feeds the only greenhouse line (flush_line).")
    assert not note.fullmatch("runbook note: {pump} feeds the only line (flush_line).")


def test_a_map_keyed_by_references_is_asked_for_with_one_entry_for_each_key_that_exists():
    """A negotiation persona's weights: the 1.5B wrote the description's `{unit_price: 6, delivery_days: 1, ...}`
    for a packaging deal whose issues were price, delivery_terms and packaging_terms."""
    family = get_family("negotiation")
    example = family.load_example("freight_rate")
    pieces = plan_pieces(family.domain, example)
    ids = [issue.id for issue in example.issues][:3]
    for piece in pieces:
        if piece.keys:
            piece.value = piece.model(items=[i.id for i in getattr(example, piece.field)][:3])
    persona = next(p for p in pieces if p.path == "domain.personas[0]")
    weights = piece_schema(constrained_schema(persona, pieces, family.domain), family, persona)["properties"]["weights"]
    assert weights["required"] == ids and sorted(weights["properties"]) == sorted(ids)
    assert weights["additionalProperties"] is False and weights["properties"][ids[0]]["type"] == "number"


def test_a_rename_reaches_the_keys_of_a_map_but_never_a_field_name():
    family = get_family("negotiation")
    persona = family.load_example("freight_rate").personas[0]
    old = next(iter(persona.weights))
    renamed = type(persona).model_validate(replace_value(persona, old, "id"))
    assert "id" in renamed.weights and old not in renamed.weights and renamed.id == persona.id
    assert replace_value({"id": "id", "n": ["id", "x"]}, "id", "key") == {"key": "key", "n": ["key", "x"]}


def test_the_first_items_of_a_list_write_the_optional_parts_a_check_asks_for():
    # the supplier's 1.5B gave every issue `constraint: null`, though two are needed
    issues = [asked_schema("negotiation", f"domain.issues[{i}]") for i in range(3)]
    for schema in issues[:2]:
        assert "constraint" in schema["required"]
        assert "null" not in json.dumps(schema["properties"]["constraint"])
    assert "constraint" not in issues[2].get("required", [])  # the third may still write none
    parties = [asked_schema("reconciliation", f"domain.parties[{i}]") for i in range(3)]
    assert [p["properties"]["aliases"].get("minItems", 0) for p in parties] == [1, 1, 0]


def test_a_record_that_may_be_null_holds_its_texts_to_their_rules_too():
    # the supplier's third issue (its constraint optional) wrote a reveal without {value}
    schema = asked_schema("negotiation", "domain.issues[2]")
    assert "null" in json.dumps(schema["properties"]["constraint"])  # still optional
    reveal = schema["$defs"]["HiddenConstraint"]["properties"]["reveal"]
    pattern = re.compile(reveal["pattern"])
    assert pattern.fullmatch("Our mill is booked solid: the earliest we can deliver is {value}.")
    assert not pattern.fullmatch("Our mill is booked solid until the end of the month.")


def test_a_text_that_must_hold_no_figure_cannot_be_written_with_one():
    # the supplier's 1.5B wrote "... you will need to pay a fee of 200 EUR." into two constraint hints
    defs = asked_schema("negotiation", "domain.issues[0]")["$defs"]["HiddenConstraint"]["properties"]
    hint, reveal = re.compile(defs["hint"]["pattern"]), re.compile(defs["reveal"]["pattern"])
    assert hint.fullmatch("Delivery that fast is simply not something {counterpart} can commit to.")
    assert not hint.fullmatch("Changing it costs a fee of 200 EUR.")
    assert reveal.fullmatch("We are booked for 3 weeks: the fastest we can ship is {value}.")  # figures allowed


def test_a_scheduling_rule_is_asked_for_as_one_alternative_per_kind_with_its_texts_and_targets():
    """Once the kind is written, the text must name what the kind names and the targets come from the list the
    kind acts on: the operating rooms' 1.5B wrote targets 'site_1', 'site_2' and a site_ends_by rule naming
    neither {site} nor {time}."""
    family = get_family("scheduling")
    pieces = plan_pieces(family.domain, family.load_example(sorted(family.examples())[0]))
    for piece in pieces:
        if piece.keys:
            piece.value = piece.model.model_construct(items=[f"{piece.field}_{k}" for k in range(1, 4)])
    piece = next(p for p in pieces if p.path == "domain.hidden_rules[0]")
    schema = piece_schema(constrained_schema(piece, pieces, family.domain), family, piece)
    branches = {b["properties"]["kind"]["enum"][0]: b["properties"] for b in schema["anyOf"]}
    assert set(branches) == {"site_excludes_type", "staff_excludes_type", "site_ends_by", "staff_ends_by",
                             "shared_equipment"}
    assert branches["site_ends_by"]["targets"]["items"]["enum"] == ["sites_1", "sites_2", "sites_3"]
    assert branches["staff_excludes_type"]["targets"]["items"]["enum"] == ["staff_1", "staff_2", "staff_3"]
    assert branches["shared_equipment"]["targets"]["maxItems"] == 0
    assert branches["site_ends_by"]["task_types"]["items"]["enum"] == ["task_types_1", "task_types_2",
                                                                      "task_types_3"]
    site_ends = re.compile(branches["site_ends_by"]["text"]["pattern"])
    assert site_ends.fullmatch("{site} closes at {time} for deep cleaning")
    assert not site_ends.fullmatch("the patient is ready to be scheduled")
    rule = {"kind": "site_ends_by", "text": "{site} closes at {time} for deep cleaning", "task_types": [],
            "targets": ["sites_2"]}
    assert piece.model.model_validate(rule).targets == ["sites_2"]


def test_a_required_placeholder_comes_first_or_after_a_space_or_a_mark_never_inside_a_word():
    # forced in where its stretch ran out, the supplier's 1.5B wrote 'Please{offer}.', 'a 21{offer}' and
    # 'the packaging terms{top} meet our needs'
    offer = python_pattern((("counterpart", "subject", "offer"), ("offer",)), 120)
    for glued in ("Please{offer}.", "a 21{offer} and more", "We offer{offer}"):
        assert not offer.fullmatch(encoded(glued)), glued
    for text in ("{offer} is ours.", "Agreed: {offer}. Fine.", "We can do ({offer}).", "So {offer}, {counterpart}."):
        assert offer.fullmatch(encoded(text)), text
    top = python_pattern((("top", "least"), ("top",)), 200)
    assert top.fullmatch("Honestly, {top} matters; {least} less.") and top.fullmatch("{least} less than {top}.")
    assert not top.fullmatch("the packaging terms{top} meet our needs; {least} less.")
