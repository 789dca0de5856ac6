import math
import random

import pytest

from openadapt.kit import ChaosEvent, ChaosSchedule

EVENTS = (ChaosEvent("dropout", 0.12), ChaosEvent("spike", 0.08), ChaosEvent("noise", 0.10))


def test_rates_match_the_probabilities_within_sampling_error():
    schedule = ChaosSchedule(EVENTS, random.Random(1))
    steps = 50_000
    for _ in range(steps):
        schedule.draw()
    assert schedule.steps == steps
    for event in EVENTS:
        sigma = math.sqrt(event.probability * (1 - event.probability) / steps)
        assert abs(schedule.rates()[event.name] - event.probability) < 4 * sigma, event


def test_events_are_independent():
    schedule = ChaosSchedule(EVENTS[:2], random.Random(2))
    both = sum(len(schedule.draw()) == 2 for _ in range(50_000))
    assert abs(both / 50_000 - 0.12 * 0.08) < 0.003


def test_the_stream_is_a_function_of_the_seed_alone():
    def run(seed):
        schedule = ChaosSchedule(EVENTS, random.Random(seed))
        return [schedule.draw() for _ in range(300)]

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_every_draw_consumes_the_same_randomness():
    """What fires never shifts the rng: a schedule with certain events stays in step with an impossible one."""
    sure = ChaosSchedule([ChaosEvent("a", 1.0), ChaosEvent("b", 1.0)], random.Random(3))
    never = ChaosSchedule([ChaosEvent("a", 0.0), ChaosEvent("b", 0.0)], random.Random(3))
    for _ in range(10):
        assert sure.draw() == ["a", "b"] and never.draw() == []
    assert sure.rng.random() == never.rng.random()


def test_bad_events_are_refused():
    with pytest.raises(ValueError, match="outside"):
        ChaosEvent("x", 1.5)
    with pytest.raises(ValueError, match="duplicate"):
        ChaosSchedule([ChaosEvent("x", 0.1), ChaosEvent("x", 0.2)], random.Random(0))
    assert ChaosSchedule(EVENTS, random.Random(0)).rates() == {"dropout": 0.0, "spike": 0.0, "noise": 0.0}
