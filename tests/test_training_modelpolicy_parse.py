"""A pretrained instruct model, zero-shot, through the text protocol: the system prompt shows the action schema in a
form such a model answers with an action (not a copy of the schema), and its reply parses.

Regression: `eval --policy model:qwen2.5-coder-0.5b` parsed 0% of replies. The prompt showed pydantic's raw
schema (`{"additionalProperties": false, "description": ..., "properties": {"metadata": {...}, ...`) and the
model, greedy, copied or filled in that object on every seed; the fix shows `properties` first, without the
protocol's `metadata` field and without titles. No model is downloaded: the replies below are the model's own
(recorded from the preset, greedy, seed 1000000 at ECI 1, before and after the fix).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from openenv.core.env_server.types import Action
from pydantic import Field

from openadapt.envpkg.loader import load
from openadapt.envpkg.textenv import LocalTextEnv
from openadapt.kit.protocol import json_objects
from openadapt.training.envinfo import schema_from_prompt

SEED = 1_000_000

# What Qwen2.5-Coder-0.5B-Instruct wrote to the old prompt (cut at 128 tokens): the schema, copied
ECHOED = ('{\n  "additionalProperties": false,\n  "description": "Investigate the checkout-service component or submit '
          'the final diagnosis (ends the episode).",\n  "properties": {\n    "metadata": {\n      '
          '"additionalProperties": true,\n      "description": "Additional metadata for the action",\n      '
          '"title": "Metadata",\n      "type": "object"\n    },\n    "tool": {\n      "anyOf": [{"enum": '
          '["inspect_logs", "query_metrics", "check_dependencies", "read_runbook", "diagnose_incident"], "type": '
          '"string"}, {"type": "null"}], "default": null')

# ... and to the new one (170 tokens, EOS included; decoded with skip_special_tokens, as rollout.run_episodes does)
ANSWERED = ('{\n  "tool": "query_metrics",\n  "component": "checkout-service",\n  "fault": "memory_leak",\n  "fix": '
            '"restart_service",\n  "evidence": ["WARN checkout-service container memory at 96% of limit, rising '
            'since deploy", "INFO checkout-service scheduled job completed in 4462ms", "ERROR checkout-service '
            'java.lang.OutOfMemoryError: Java heap space", "WARN checkout-service GC pause 1123ms, heap 92% after '
            'full collection", "DEBUG checkout-service cache hit ratio 97%"],\n  "confidence": 1.0,\n  "reasoning": '
            '"The memory leak is likely due to the excessive use of memory by the checkout-service component. '
            'Restarting the service will help reclaim the memory and resolve the issue."\n}')


@pytest.fixture(scope="module")
def env() -> LocalTextEnv:
    return LocalTextEnv(load("seed:incident_triage"))


def shown_schema(system_prompt: str) -> dict:
    return next(v for v in json_objects(system_prompt) if isinstance(v.get("properties"), dict))


def test_system_prompt_shows_the_fields_first_without_protocol_metadata(env):
    system = env.system_prompt()
    schema_text = system[system.index('{"'):]
    assert schema_text.startswith('{"properties": {"tool": '), schema_text[:80]  # not {"additionalProperties": ...
    schema = shown_schema(system)
    assert "metadata" not in schema["properties"]  # the protocol's own field: parse() drops it anyway
    assert '"title"' not in system  # pydantic's generated titles ("DiagnosisAction", "Tool", "Metadata", ...)
    assert "Additional metadata" not in system
    # still the action's schema, which schema_from_prompt reads back for a package it never imports
    assert list(schema_from_prompt(system)["properties"]) == \
        ["tool", "component", "fault", "fix", "evidence", "confidence", "reasoning"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["fault"]["anyOf"][0]["enum"][0] == "memory_leak"


def test_prompt_schema_keeps_a_field_called_title_and_data():
    from openadapt.kit.protocol import prompt_schema

    class Note(Action):
        title: str = Field(default="", title="Title", description="the note's title")
        kind: str = Field(default="a", json_schema_extra={"examples": [{"title": "kept"}]})

    schema = prompt_schema(Note.model_json_schema())
    assert list(schema["properties"]) == ["title", "kind"]
    assert schema["properties"]["title"] == {"default": "", "description": "the note's title", "type": "string"}
    assert schema["properties"]["kind"]["examples"] == [{"title": "kept"}]
    assert "title" not in schema and "required" not in schema


def test_the_models_replies_through_the_protocol(env):
    env.reset(seed=SEED, eci=1)
    echoed = env.step(ECHOED)
    assert echoed.parse_error is not None  # copying the schema is not an action: still malformed
    env.reset(seed=SEED, eci=1)
    answered = env.step(ANSWERED)
    assert answered.parse_error is None
    assert answered.observation.get("error") in (None, "")


def test_pretrained_turn_budget_fits_a_whole_diagnosis():
    from openadapt.training.modelpolicy import PRETRAINED_TOKENS
    from openadapt.training.pretrained import models_dir

    assert PRETRAINED_TOKENS >= 200  # 128 cut the ~170-token diagnosis above into a malformed reply
    converted = models_dir() / "qwen2.5-coder-0.5b-hf"
    if not (converted / "tokenizer.json").is_file():
        pytest.skip("the qwen2.5-coder-0.5b preset is not converted on this machine")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(Path(converted))
    reply = tokenizer(ANSWERED, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert 128 < len(reply) <= PRETRAINED_TOKENS
    assert tokenizer.decode(reply, skip_special_tokens=True) == ANSWERED
