import random

import pytest

from openadapt.kit import (
    DEFAULT_PROFILES,
    MALFORMED_KEY,
    Perturber,
    RewardComponent,
    RewardComponents,
)


def test_tiers_are_cumulative():
    profiles = [DEFAULT_PROFILES[t] for t in range(1, 6)]
    for lower, higher in zip(profiles, profiles[1:], strict=False):
        assert higher.noise >= lower.noise
        assert higher.drop >= lower.drop
        assert higher.distractors >= lower.distractors
        assert higher.hidden_constraints >= lower.hidden_constraints
    assert profiles[0].noise == profiles[0].drop == profiles[0].distractors == 0
    assert not profiles[0].hidden_constraints


def test_perturber_is_a_function_of_the_seed():
    items = [f"line {i} value {i * 7}" for i in range(40)]

    def run(seed, eci):
        p = Perturber(random.Random(seed), DEFAULT_PROFILES[eci])
        kept = p.withhold(items)
        return [p.blur_numbers(p.truncate(x)) for x in kept], p.inject(kept, ["DISTRACTOR a", "DISTRACTOR b"])

    assert run(7, 5) == run(7, 5)
    assert run(7, 5) != run(8, 5)
    clean, injected = run(7, 1)
    assert clean == items and injected == items  # ECI 1 leaves the context untouched


def test_perturber_protects_and_injects():
    p = Perturber(random.Random(0), DEFAULT_PROFILES[5])
    kept = p.withhold(list(range(200)), protect=lambda x: x % 10 == 0)
    assert all(x in kept for x in range(0, 200, 10))
    assert len(kept) < 200
    out = p.inject(["a", "b"], ["x", "y", "z", "w", "v", "u"])
    assert len(out) == 2 + DEFAULT_PROFILES[5].distractors


def test_misread_garbles_with_the_noise_rate_only():
    text = "Titration of malt vinegar against sodium hydroxide, repeated three times"
    clean = Perturber(random.Random(3), DEFAULT_PROFILES[1])
    assert all(clean.misread(text, errors=4) == text for _ in range(50))  # ECI 1: no noise
    noisy = Perturber(random.Random(3), DEFAULT_PROFILES[5])
    lines = [noisy.misread(text, errors=3) for _ in range(400)]
    garbled = [line for line in lines if line != text]
    assert 0.3 < len(garbled) / len(lines) < 0.5  # the tier's noise rate (0.4)
    assert all(abs(len(line) - len(text)) <= 6 for line in garbled)  # a few characters, not the line


def test_misread_figures_stay_recognisable():
    from openadapt.kit.eci import OCR_DIGITS

    p = Perturber(random.Random(1), DEFAULT_PROFILES[5])
    for _ in range(200):
        shown = p.misread("1,250.80", rate=2.5, chars=OCR_DIGITS, pairs={})  # rate x noise = 1: always
        assert shown != "1,250.80" and sum(a != b for a, b in zip(shown, "1,250.80", strict=True)) == 1
        assert shown.translate(str.maketrans({v: k for k, v in OCR_DIGITS.items()})) == "1,250.80"
    assert p.misread("no figures", rate=2.5, chars=OCR_DIGITS, pairs={}) == "no figures"


def test_reward_components_clip_and_break_down():
    values = {"a": 0.9, "b": -2.0}
    rubric = RewardComponents(
        RewardComponent("a", 0.0, 0.5, lambda act, obs: values["a"]),
        RewardComponent("b", -0.5, 0.0, lambda act, obs: values["b"]),
    )
    assert rubric(None, None) == pytest.approx(0.0)  # 0.5 + (-0.5) after clipping
    assert rubric.breakdown() == {"a": 0.5, "b": -0.5}
    assert dict(rubric.named_children()).keys() == {"a", "b"}
    assert rubric.range == (-0.5, 0.5)
    rubric.reset()
    assert rubric.breakdown() == {"a": 0.0, "b": 0.0}


def test_reward_component_rejects_nan():
    rubric = RewardComponents(RewardComponent("a", 0.0, 1.0, lambda act, obs: float("nan")))
    with pytest.raises(ValueError, match="NaN"):
        rubric(None, None)


@pytest.mark.parametrize(
    "completion",
    [
        '{"tool": "inspect_logs", "component": "orders-db"}',
        'I will look at the logs.\n```json\n{"tool": "inspect_logs", "component": "orders-db"}\n```\nDone.',
        'Thinking {not json} then {"tool": "inspect_logs", "component": "orders-db"} trailing',
    ],
)
def test_protocol_parses_real_completions(triage, completion):
    parsed = triage.protocol.parse(completion)
    assert parsed.ok, parsed.error
    assert parsed.action.tool == "inspect_logs" and parsed.action.component == "orders-db"
    assert not parsed.action.metadata


@pytest.mark.parametrize(
    ("completion", "reason"),
    [
        ("inspect the logs of orders-db please", "no JSON object"),
        ('{"tool": "explode", "component": "orders-db"}', "tool"),
        ('{"tool": "diagnose_incident", "confidence": 7}', "confidence"),
        ('{"tool": "inspect_logs", "colour": "red"}', "colour"),
        ("", "no JSON object"),
    ],
)
def test_protocol_turns_bad_completions_into_malformed_actions(triage, completion, reason):
    parsed = triage.protocol.parse(completion)
    assert not parsed.ok and reason in parsed.error
    assert parsed.action.metadata[MALFORMED_KEY] == parsed.error


def test_agent_cannot_forge_protocol_metadata(triage):
    parsed = triage.protocol.parse('{"tool": "inspect_logs", "component": "orders-db", '
                                   '"metadata": {"openadapt_malformed": "x"}}')
    assert parsed.ok and not parsed.action.metadata


def test_prompts_render(triage):
    env = triage.make_env()
    obs = env.reset(seed=5, eci=3)
    system = triage.protocol.system_prompt()
    assert "diagnose_incident" in system and '"tool"' in system
    prompt = triage.protocol.render(obs)
    assert obs.alert in prompt and "ECI tier 3" in prompt
    assert all(line in prompt for line in obs.logs)


def test_text_checks():
    from openadapt.kit import grounded, is_stuffed, mentions

    assert mentions("Disk full and DNS", ["dns", "disk", "cpu", "dns"]) == ["dns", "disk"]
    assert is_stuffed("a b c", ["a", "b", "c"]) and not is_stuffed("a b", ["a", "b", "c"])
    good, bad = grounded(["ERROR orders-db No space left", "short", "  ", "made up line here"],
                         "ERROR orders-db No space left on device")
    assert good == ["ERROR orders-db No space left"] and bad == ["short", "made up line here"]


def test_the_keyword_stuffing_probe_sends_what_the_action_schema_accepts():
    # a payment service's package failed semantic.exploit_probes on the probe's own ValidationError: its enums
    # and the observation's words ran past the diagnosis reasoning's 4,000 characters
    import typing

    from pydantic import Field

    from openadapt.kit.models import AgentAction, AgentObservation
    from openadapt.validator.checks.policies import ProbePolicy

    names = tuple(f"increase_payment_service_capacity_{i}" for i in range(40))

    class Diagnose(AgentAction):
        fix: typing.Literal[names] = names[0]  # type: ignore[valid-type]
        reasoning: str = Field(default="", max_length=300)
        quotes: list[typing.Annotated[str, Field(max_length=20)]] = Field(default_factory=list, max_length=3)

    from openadapt.validator.checks.remote import Obs

    observation = Obs(AgentObservation(feedback=" ".join(f"word{i}" for i in range(500))).model_dump(mode="json"))
    probe = ProbePolicy(Diagnose.model_json_schema(), "keyword_stuffing")
    probe.begin(None, observation, 0)
    action = Diagnose.model_validate(probe.act(observation))  # what the package's action class reads
    assert len(action.reasoning) == 300 and action.reasoning.startswith(names[0])  # stuffed to the bound
    assert len(action.quotes) == 3 and all(len(q) == 20 for q in action.quotes)
