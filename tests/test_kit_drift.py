import pytest

from openadapt.kit import FieldRename, FieldUse, SchemaDrift

FIELDS = ("deal_value", "client")


def drift() -> SchemaDrift:
    return SchemaDrift([FieldRename("deal_value", "contract_amount", at_step=3)], penalty=0.1)


def test_the_rename_shows_from_its_step_on():
    d = drift()
    record = {"client": "Acme", "deal_value": 5}
    assert d.view(record, 2) == {"client": "Acme", "deal_value": 5}
    assert d.view(record, 3) == {"client": "Acme", "contract_amount": 5}
    assert list(d.view(record, 3)) == ["client", "contract_amount"]  # order kept
    assert [r.new for r in d.fired(2)] == [] and [r.new for r in d.fired(3)] == ["contract_amount"]
    assert d.name("client", 9) == "client"


def test_classify_against_the_schema_shown():
    d = drift()
    assert d.classify("deal_value", FIELDS, 2) == (FieldUse.CURRENT, "deal_value")
    assert d.classify("contract_amount", FIELDS, 2) == (FieldUse.UNKNOWN, None)  # not renamed yet
    assert d.classify("deal_value", FIELDS, 3) == (FieldUse.STALE, None)
    assert d.classify("contract_amount", FIELDS, 3) == (FieldUse.CURRENT, "deal_value")
    assert d.classify("price", FIELDS, 3) == (FieldUse.UNKNOWN, None)
    assert d.classify("client", FIELDS, 3) == (FieldUse.CURRENT, "client")


def test_stale_uses_cost_until_the_agent_adapts():
    d = drift()
    assert d.judge("deal_value", FIELDS, 2, acted_at=3)[2] == 0.0  # answering the old schema is fine
    assert d.judge("deal_value", FIELDS, 3, acted_at=4) == (FieldUse.STALE, None, 0.1)
    assert d.judge("deal_value", FIELDS, 4, acted_at=5)[2] == 0.1
    assert not d.adapted and d.stale_uses == 2
    assert d.judge("contract_amount", FIELDS, 5, acted_at=6) == (FieldUse.CURRENT, "deal_value", 0.0)
    assert d.adapted and d.adapted_at == 6
    assert d.judge("contract_amount", FIELDS, 6, acted_at=7)[2] == 0.0
    assert d.adapted_at == 6  # the first adaptation is the one recorded


def test_no_renames_is_a_fixed_schema():
    d = SchemaDrift()
    assert d.view({"a": 1}, 100) == {"a": 1} and d.fired(100) == []
    assert d.classify("a", ("a",), 100) == (FieldUse.CURRENT, "a")


def test_bad_renames_are_refused():
    with pytest.raises(ValueError, match="itself"):
        FieldRename("a", "a", 3)
    with pytest.raises(ValueError, match="at_step"):
        FieldRename("a", "b", 0)
    with pytest.raises(ValueError, match="twice"):
        SchemaDrift([FieldRename("a", "b", 2), FieldRename("a", "c", 4)])
