"""Value slots: the values an observation shows reach tiny as slot tokens, and the slot tokens of its reply reach the
environment as those values."""

from __future__ import annotations

import json

import pytest

from openadapt.training import tiny
from openadapt.training.config import TrainConfig
from openadapt.training.pool import TextEnvPool
from openadapt.training.slots import SLOT_TOKENS, Slots


def test_the_values_an_observation_shows_become_slots_and_come_back_as_written():
    observation = "Invoice M-467 of 2026-01-04 for 1,234.50 EUR; see M-468. Posted at 08:00, 2 lines."
    slots = Slots.of(observation)
    assert slots.shown(observation) == "Invoice <v1> of <v2> for <v3> EUR; see <v4>. Posted at <v5>, 2 lines."
    action = json.dumps({"match": "M-467", "amount": "1,234.50", "note": "M-4670 is another"})
    shown = slots.shown(action)
    assert json.loads(shown) == {"match": "<v1>", "amount": "<v3>", "note": "M-4670 is another"}
    assert slots.written(shown) == action
    assert slots.written('{"match": "<v9>"}') == '{"match": "<v9>"}'  # no such slot: the parser says what is wrong


def test_a_slot_is_one_token_of_tiny_and_decodes_as_itself():
    tokenizer = tiny.build_tokenizer(tiny.build_vocabulary(["match"], []), slots=True)
    ids = tokenizer('{"match": "<v1>", "match": "<v12>"}', add_special_tokens=False)["input_ids"]
    assert {SLOT_TOKENS[0], SLOT_TOKENS[11]} <= set(tokenizer.convert_ids_to_tokens(ids))
    assert tokenizer.decode(ids, skip_special_tokens=True) == '{"match": "<v1>", "match": "<v12>"}'
    assert "<v1>" not in tiny.build_tokenizer(tiny.build_vocabulary(["match"], [])).get_vocab()


def test_the_environment_reads_the_values_an_action_writes_as_slots():
    """The heuristic's actions, written with the slots its observations show, solve the episodes they solve
    written in full: the environment sees the same actions."""
    with TextEnvPool("seed:enterprise_workflow", 1) as plain, \
            TextEnvPool("seed:enterprise_workflow", 1, slots=True) as slotted:
        for seed in (600_000, 600_001):
            a, b = plain.envs[0], slotted.envs[0]
            step_a, step_b = a.reset(seed=seed, eci=1), b.reset(seed=seed, eci=1)
            assert "<v1>" in step_b.prompt and "<v1>" not in step_a.prompt
            while not step_a.done:
                action, shown = a.suggest("heuristic"), b.suggest("heuristic")
                assert shown != action and b.slots.written(shown) == action
                step_a, step_b = a.step(action), b.step(shown)
                assert step_a.reward == step_b.reward and step_b.parse_error is None
            assert step_b.done and step_b.metadata["solved"] == step_a.metadata["solved"]


def test_value_slots_are_for_tiny_alone(tmp_path):
    with pytest.raises(ValueError, match="value_slots"):
        TrainConfig(package="seed:incident_triage", output=tmp_path, model="some/model", value_slots=True)
    assert not TrainConfig(package="seed:incident_triage", output=tmp_path).value_slots
