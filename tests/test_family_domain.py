"""The helpers every family shares: the domain checks of `openadapt.families.domain` and the engine base of
`openadapt.families.engine` (each family's own tests exercise them on its domains)."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from openadapt.families import get_family
from openadapt.families.domain import (
    DomainPart,
    bad_placeholders,
    dependency_cycle,
    duplicate_values,
    fill,
    name_field,
    names_differ,
    template_pattern,
    unknown_ref,
    unknown_refs,
)
from openadapt.families.engine import FamilyEnvironment, per_domain


def _messages(problems):
    return [f"{p.path}: {p.message}" for p in problems]


def test_dependency_cycle_names_the_first_loop_and_ignores_unknown_nodes():
    assert dependency_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert dependency_cycle({"a": ["ghost"], "b": []}) is None
    assert dependency_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert dependency_cycle({"x": [], "a": ["b"], "b": ["b"]}) == ["a", "b", "b"]


def test_references_and_repeats():
    assert unknown_ref("b", ["a", "b"], "domain.x", "thing") == []
    assert _messages(unknown_ref("z", ["b", "a", "b"], "domain.x", "thing")) == [
        "domain.x: 'z' is not a defined thing (defined: a, b)"]
    assert _messages(unknown_ref("z", {}, "domain.x", "thing")) == [
        "domain.x: 'z' is not a defined thing (defined: none)"]
    assert _messages(unknown_refs(["a", "q"], ["a"], "domain.y", "thing")) == [
        "domain.y[1]: 'q' is not a defined thing (defined: a)"]
    assert _messages(duplicate_values(["Ana", "ben", "ana", "ben"], "domain.names")) == [
        "domain.names[2]: 'ana' repeats domain.names[0]", "domain.names[3]: 'ben' repeats domain.names[1]"]
    assert names_differ(["read", "submit"], "domain.tools", "tool names") == []
    assert _messages(names_differ(["read", "read"], "domain.tools", "tool names")) == [
        "domain.tools: tool names must differ: ['read', 'read']"]
    # a record's names: each repeat at its own field, to be renamed alone
    assert _messages(names_differ({"logs": "read", "notes": "read", "ask": "ask", "fix": "read"}, "domain.tools",
                                  "tool names")) == [
        "domain.tools.notes: 'read' is already the name of `logs`: tool names must differ (read, read, ask, read)",
        "domain.tools.fix: 'read' is already the name of `logs`: tool names must differ (read, read, ask, read)"]


def test_placeholders_allowed_and_required():
    assert bad_placeholders("{a} and {b}", ("a", "b"), "domain.t", required=("a",)) == []
    assert _messages(bad_placeholders("{c} only", ("a", "b"), "domain.t", required=("a", "b"))) == [
        "domain.t: unknown placeholder(s) {c}; allowed here: {a}, {b}", "domain.t: must contain {a}, {b}"]


def test_template_pattern_matches_what_fill_makes():
    text = "WARN {component} call to {dependency} timed out after {n} ms ({dependency})"
    line = fill(text, component="api-7", dependency="db-2", n=812)
    found = template_pattern(text, capture=("dependency",)).search(line)
    assert found and found.group(1) == found["dependency"] == "db-2"
    assert not template_pattern(text, capture=("dependency",)).search(line.replace("(db-2)", "(db-3)"))
    loose = template_pattern("We can offer {offer}. Regards, {counterpart}", matches=".*?", flags=re.DOTALL)
    assert loose.search("We can offer 5 units at 3 EUR\neach. Regards, Jonas Weber (Hartmann)")
    slots = template_pattern("Revenue of {region} in {month}?", {"region": ".+?", "month": ".+?"})
    assert slots.fullmatch("Revenue of North Sea in March?").groupdict() == {"region": "North Sea", "month": "March"}
    assert template_pattern("cost {x}.", matches="1").fullmatch("cost 1.")  # the fixed text is escaped
    assert not template_pattern("cost {x}.", matches="1").fullmatch("cost 1!")


def test_domain_parts_are_strict_and_name_fields_are_identifiers():
    class Names(DomainPart):
        read: str = name_field("read_log", "reading a log", "tail_log")

    assert Names().read == "read_log" and Names(read="  cat_log ").read == "cat_log"
    with pytest.raises(ValidationError):
        Names(read="Cat Log")
    with pytest.raises(ValidationError):
        Names(other="x")
    names = Names()
    with pytest.raises(ValidationError):
        names.read = "tail_log"  # frozen once parsed


def test_per_domain_facts_are_built_once_per_bound_class():
    family = get_family("diagnosis")
    built = []

    class Engine(family.environment):
        @per_domain
        def facts(cls):
            built.append(cls)
            return [c.name for c in cls.domain.components]

    first = family.load_example("incident_triage")
    second = family.load_example("kubernetes_cluster")
    section = family.section(task="t")
    a = Engine.bind(section, domain=first)
    b = Engine.bind(section, domain=second)
    assert a.facts() is a.facts() and a.facts() == [c.name for c in first.components]
    assert b.facts() == [c.name for c in second.components] and built == [a, b]
    assert issubclass(family.environment, FamilyEnvironment)


def test_every_family_engine_declares_its_reward_as_data():
    for name in ("assessment", "diagnosis", "inventory", "negotiation", "querying", "reconciliation", "report",
                 "scheduling", "workflow"):
        family = get_family(name)
        env_cls = family.bind(family.load_example(next(iter(family.examples()))), family.section(task="t")).env_cls
        rubric = env_cls().rubric
        assert [c.name for c in rubric.components] == [part[0] for part in env_cls.REWARD], name
        assert rubric.range[1] <= family.reward_range[1] + 1e-9, name


def test_a_text_repeating_the_schemas_description_or_breaking_into_another_script_is_a_problem():
    from openadapt.families.domain import DomainError, without_foreign_tail

    family = get_family("diagnosis")
    data = family.load_example("kubernetes_cluster").model_dump(mode="json")
    data["faults"][0]["constraint"]["note"] = ("If the pressure is low, this is a fact about the faulty component that "
                                               "makes the usual fix wrong and calls for another (check_supply)")
    data["faults"][0]["constraint"]["fix"] = "check_supply"
    # the description's quoted example is a shape a text may take: not an echo
    data["faults"][1]["constraint"]["note"] = ("runbook note: {component} is the only unit of its kind running "
                                               "today; do not take it offline. Move its load to the standby unit "
                                               "instead (shift_to_standby).")
    data["faults"][1]["constraint"]["fix"] = "shift_to_standby"
    data["components"][0]["note"] = "the main pump of the farm; if it fails the irrigation system will无法供水"
    data["components"][1]["note"] = "农场的主水泵，为灌溉系统供水"  # written in one script: fine
    data["components"][2]["note"] = "the booster pump runs at a fixed rate of ￥{n} per hour"  # a full-width sign
    data["components"][3]["note"] = "the well pump feeds the tank при низком давлении"  # Cyrillic
    with pytest.raises(DomainError) as caught:
        family.parse_domain(data)
    problems = {p.path: p.message for p in caught.value.problems}
    assert "repeats the schema's description" in problems["domain.faults[0].constraint.note"]
    assert "domain.faults[1].constraint.note" not in problems
    assert "breaks into another script ('无法供水')" in problems["domain.components[0].note"]
    assert "domain.components[1].note" not in problems
    assert "breaks into another script ('￥{n} per hou')" in problems["domain.components[2].note"]
    assert "breaks into another script ('при низком д')" in problems["domain.components[3].note"]
    text = "pump-5 lifts water from the reservoir. It feeds the channels. If it fails the system will无法"
    assert without_foreign_tail(text) == "pump-5 lifts water from the reservoir. It feeds the channels."


def test_a_text_holding_a_slot_left_unfilled_is_a_problem():
    # the Kubernetes prompt's 1.5B, 2026-12-03: 'ERROR {component} <pod-name> CPU usage 90% above limit'
    from openadapt.families.domain import DomainError

    family = get_family("diagnosis")
    data = family.load_example("kubernetes_cluster").model_dump(mode="json")
    data["faults"][0]["evidence"][0] = "ERROR {component} <pod-name> CPU usage {pct}% above limit"
    data["faults"][1]["evidence"][0] = "WARN {component} queue depth < 5 for {n} minutes, then > 40"  # a comparison
    with pytest.raises(DomainError) as caught:
        family.parse_domain(data)
    problems = {p.path: p.message for p in caught.value.problems}
    assert "the slot '<pod-name>'" in problems["domain.faults[0].evidence[0]"]
    assert "domain.faults[1].evidence[0]" not in problems


def test_a_text_that_writes_its_records_fields_as_data_is_a_problem():
    # the irrigation prompt's 1.5B, 2026-12-07, published: an evidence line "telltales':['worn out', ...],metrics:[...]"
    from openadapt.families.domain import Code, DomainError

    family = get_family("diagnosis")
    data = family.load_example("incident_triage").model_dump(mode="json")
    data["faults"][0]["evidence"][0] = ("{component} telltales':['worn out', 'suction pressure'],metrics:['suction "
                                        "pressure'],runbook:['check motor']")
    data["faults"][1]["evidence"][0] = "ERROR {component} status: degraded, pool: 40 of 40 connections in use"
    with pytest.raises(DomainError) as caught:
        family.parse_domain(data)
    problems = {p.path: p for p in caught.value.problems}
    leaked = problems["domain.faults[0].evidence[0]"]
    assert leaked.code == Code.NOT_CONTENT and "(metrics, runbook, telltales)" in leaked.message
    assert "domain.faults[1].evidence[0]" not in problems  # words before a colon that are no field of the schema
