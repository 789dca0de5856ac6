"""The escalation rule on synthetic episode streams: the threshold edge, the minimum episodes, the window,
replay of earlier tiers, collapse detection, and the state file's crash safety."""

from __future__ import annotations

import random

import pytest

from openadapt.curriculum.rule import Decision, RuleConfig, TierWindows, decide, episode_tier
from openadapt.curriculum.state import CurriculumError, CurriculumState, EventLog
from openadapt.envpkg.evaluation import CHECK_SEED_START, EVAL_SEED_START


def stream(windows: TierWindows, tier: int, solved: int, total: int) -> None:
    """`solved` successes spread through `total` episodes (order does not matter to a full window)."""
    for i in range(total):
        windows.record(tier, i < solved)


@pytest.mark.parametrize(("solved", "expected"), [
    (90, Decision.ESCALATE),   # exactly 0.90
    (89, Decision.HOLD),       # just below
    (91, Decision.ESCALATE),   # just above
    (100, Decision.ESCALATE),
])
def test_threshold_edge(solved, expected):
    config = RuleConfig(window=100, min_episodes=100)
    windows = TierWindows(config.window)
    stream(windows, 1, solved, 100)
    assert decide(config, windows, tier=1, escalated_from=None) == expected


def test_minimum_episodes_hold_even_a_perfect_record():
    config = RuleConfig(window=64, min_episodes=40)
    windows = TierWindows(config.window)
    stream(windows, 2, 39, 39)
    assert decide(config, windows, 2, None) == Decision.HOLD
    windows.record(2, True)
    assert decide(config, windows, 2, None) == Decision.ESCALATE


def test_only_the_window_counts():
    config = RuleConfig(window=50, min_episodes=50)
    windows = TierWindows(config.window)
    stream(windows, 1, 0, 200)  # a long failing past...
    stream(windows, 1, 46, 46)  # ...then 46 solves and 4 more failures in the last 50
    for _ in range(4):
        windows.record(1, False)
    assert windows.count(1) == 50 and windows.rate(1) == pytest.approx(0.92)
    assert decide(config, windows, 1, None) == Decision.ESCALATE


def test_other_tiers_do_not_count_toward_the_current_one():
    config = RuleConfig(window=20, min_episodes=20)
    windows = TierWindows(config.window)
    stream(windows, 1, 20, 20)
    stream(windows, 2, 10, 20)
    assert decide(config, windows, 2, None) == Decision.HOLD
    assert decide(config, windows, 1, None) == Decision.ESCALATE


def test_top_tier_is_mastery_not_escalation():
    config = RuleConfig(window=10, min_episodes=10)
    windows = TierWindows(config.window)
    stream(windows, 5, 10, 10)
    assert decide(config, windows, 5, None) == Decision.MASTERED
    capped = RuleConfig(window=10, min_episodes=10, max_tier=3)
    stream(windows, 3, 10, 10)
    assert decide(capped, windows, 3, None) == Decision.MASTERED


def test_replay_share():
    config = RuleConfig(replay_share=0.2)
    rng = random.Random(7)
    tiers = [episode_tier(config, 4, rng) for _ in range(10_000)]
    replayed = [t for t in tiers if t < 4]
    assert 0.18 < len(replayed) / len(tiers) < 0.22
    assert set(replayed) == {1, 2, 3}  # every earlier tier is replayed
    assert all(episode_tier(config, 1, rng) == 1 for _ in range(100))  # nothing to replay at ECI 1
    none = RuleConfig(replay_share=0.0)
    assert all(episode_tier(none, 4, rng) == 4 for _ in range(1000))


def test_collapse_needs_enough_replays_and_a_real_drop():
    config = RuleConfig(window=64, min_episodes=64, collapse_drop=0.3, collapse_min=16)
    windows = TierWindows(config.window)
    stream(windows, 1, 8, 15)  # 0.53 < 0.60, but only 15 replays
    assert decide(config, windows, 2, escalated_from=1) == Decision.HOLD
    windows.record(1, False)
    assert decide(config, windows, 2, escalated_from=1) == Decision.COLLAPSE
    healthy = TierWindows(config.window)
    stream(healthy, 1, 11, 16)  # 0.69 >= 0.60: forgetting, but not a collapse
    assert decide(config, healthy, 2, escalated_from=1) == Decision.HOLD


def test_window_must_cover_the_minimum():
    with pytest.raises(ValueError, match="cannot exceed window"):
        RuleConfig(window=10, min_episodes=20)


def test_windows_round_trip_through_the_state_file(tmp_path):
    windows = TierWindows(8)
    stream(windows, 1, 5, 12)
    state = CurriculumState(run_id="r", source="seed:incident_triage", windows=windows.to_dict())
    state.save(tmp_path)
    loaded = CurriculumState.load(tmp_path / "state.json")
    again = TierWindows(8, loaded.windows)
    assert again.count(1) == 8 and again.rate(1) == windows.rate(1)


def test_corrupted_state_is_a_clear_error(tmp_path):
    (tmp_path / "state.json").write_text('{"run_id": "r", "source": ')  # torn
    with pytest.raises(CurriculumError, match="corrupted"):
        CurriculumState.load(tmp_path / "state.json")
    with pytest.raises(CurriculumError, match="missing"):
        CurriculumState.load(tmp_path / "nothing.json")


def test_event_log_skips_a_torn_last_line(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    log.append("started", 0, source="x")
    log.append("escalated", 5, tier=1, target=2)
    with (tmp_path / "events.jsonl").open("a") as handle:
        handle.write('{"event": "valid')  # kill -9 mid-write
    assert [e["event"] for e in log.read()] == ["started", "escalated"]


def test_explored_episodes_do_not_count_toward_the_rule(tmp_path):
    """An episode whose first turn an exploration draw opened is not the policy's own solve: the windows the
    rule reads skip it (with `explore: 0.9` such episodes filled the window and escalated a tier whose own
    held-out rate was 0.80)."""
    from openadapt.curriculum.config import CurriculumConfig
    from openadapt.curriculum.controller import Curriculum
    from openadapt.training.episodes import EpisodeOutcome

    curriculum = Curriculum(CurriculumConfig(source="seed:incident_triage", output=tmp_path / "run"))
    curriculum.state = CurriculumState(run_id="t", source="seed:incident_triage", tier=3)
    curriculum.windows = TierWindows(8)

    def outcome(explored: bool, solved: bool) -> EpisodeOutcome:
        return EpisodeOutcome(global_step=1, group=0, package="seed:incident_triage", seed=0, eci=3, solved=solved,
                              episode_return=1.0, final_reward=1.0, turns=2, finished=True, explored=explored)

    for _ in range(6):
        curriculum.on_episode(outcome(explored=True, solved=True))
    curriculum.on_episode(outcome(explored=False, solved=False))
    curriculum.on_episode(outcome(explored=False, solved=True))
    assert curriculum.windows.count(3) == 2 and curriculum.windows.rate(3) == 0.5
    assert curriculum.state.episodes == 8  # every episode is still counted as played


def test_a_check_floor_lowers_the_windowed_trigger_only_with_checks():
    windows = TierWindows(10)
    stream(windows, 1, 7, 10)
    assert decide(RuleConfig(window=10, min_episodes=10), windows, 1, None) == Decision.HOLD
    with pytest.raises(ValueError, match="set check_episodes too"):
        RuleConfig(check_floor=0.7)
    with_checks = RuleConfig(window=10, min_episodes=10, check_episodes=8, check_floor=0.7)
    assert decide(with_checks, windows, 1, None) == Decision.ESCALATE
    assert decide(with_checks.model_copy(update={"check_floor": 0.8}), windows, 1, None) == Decision.HOLD



def test_the_check_floor_applies_from_its_first_tier_on_and_to_collapses_of_those_tiers_only():
    """`check_floor_from`: below it a tier escalates only at the threshold (its check then confirms), from it on
    at the floor; a replayed tier's collapse line follows its own trigger."""
    rule = RuleConfig(window=10, min_episodes=10, check_episodes=8, check_floor=0.7, check_floor_from=5)
    windows = TierWindows(10)
    stream(windows, 4, 7, 10)
    assert decide(rule, windows, 4, None) == Decision.HOLD  # 0.7 < the threshold below ECI 5
    stream(windows, 5, 7, 10)
    assert decide(rule, windows, 5, None) == Decision.MASTERED  # the floor from ECI 5 on
    replayed = TierWindows(20)
    stream(replayed, 4, 11, 20)  # 0.55: under 0.90 - 0.3, over 0.7 - 0.3
    stream(replayed, 5, 1, 10)
    assert decide(rule, replayed, 5, 4) == Decision.COLLAPSE
    assert decide(rule.model_copy(update={"check_floor_from": 1}), replayed, 5, 4) == Decision.HOLD
    with pytest.raises(ValueError, match="set check_floor too"):
        RuleConfig(check_episodes=8, check_floor_from=5)


class _Report:
    def __init__(self, rate: float, episodes: int):
        self.solve_rate, self.episodes = rate, episodes
        self.solve_rate_ci95, self.mean_return = (max(rate - 0.1, 0.0), min(rate + 0.1, 1.0)), rate

    def tier(self, tier: int) -> _Report:
        return self


class _ScriptedSolver:
    """Stands in for the solver's greedy evaluation: the rates it returns are scripted, the calls recorded."""

    def __init__(self, rates: list[float]):
        self.rates, self.calls = rates, []

    def evaluate(self, tiers, episodes, seed_start=EVAL_SEED_START):  # the solver's default: the held-out set
        self.calls.append((tuple(tiers), episodes, seed_start))
        return _Report(self.rates.pop(0), episodes)


def test_a_windowed_pass_must_be_confirmed_by_a_greedy_check_on_fresh_seeds(tmp_path):
    """With `check_episodes`, the windowed rate at the floor only calls for a greedy check; the tier is mastered
    when a check reaches the threshold, checks are at least `check_every` steps apart, each draws fresh seeds
    (not the held-out set reported at the escalation), and every check is in the state and the event log."""
    from types import SimpleNamespace

    from openadapt.curriculum.config import CurriculumConfig
    from openadapt.curriculum.controller import Curriculum

    rule = RuleConfig(window=8, min_episodes=8, max_tier=1, check_episodes=16, check_floor=0.7, check_every=10)
    (tmp_path / "run").mkdir()
    curriculum = Curriculum(CurriculumConfig(source="seed:incident_triage", output=tmp_path / "run", rule=rule,
                                             eval_episodes=40))
    curriculum.state = CurriculumState(run_id="t", source="seed:incident_triage", tier=1)
    curriculum.windows = TierWindows(8)
    curriculum.solver = solver = _ScriptedSolver([0.8, 0.95, 0.9])
    control = SimpleNamespace(should_training_stop=False, should_save=False)

    stream(curriculum.windows, 1, 5, 8)  # 0.625: under the floor, no check
    curriculum.after_step(5, control)
    assert solver.calls == []
    stream(curriculum.windows, 1, 6, 8)  # 0.75: a check, which fails
    curriculum.after_step(10, control)
    assert solver.calls == [((1,), 16, CHECK_SEED_START)] and curriculum.state.status == "running"
    curriculum.after_step(19, control)  # too soon for another
    assert len(solver.calls) == 1
    curriculum.after_step(20, control)  # a check on fresh seeds passes: mastered, then the held-out evaluation
    assert solver.calls[1:] == [((1,), 16, CHECK_SEED_START + 16), ((1,), 40, EVAL_SEED_START)]
    assert curriculum.state.status == "mastered" and control.should_training_stop
    assert "greedy check 0.95 on 16 seeds" in curriculum.state.reason
    assert [(c.step, c.passed) for c in curriculum.state.checks] == [(10, False), (20, True)]
    events = [e for e in curriculum.events.read() if e["event"] == "check"]
    assert [(e["passed"], e["windowed_solve_rate"]) for e in events] == [(False, 0.75), (True, 0.75)]

    curriculum._finish("mastered", curriculum.state.reason)  # the final rate is the one just measured, not rerun
    assert len(solver.calls) == 3
    assert [(e.when, e.solve_rate) for e in curriculum.state.evaluations] == [("escalation", 0.9), ("final", 0.9)]


def test_with_checks_a_collapse_is_measured_from_the_floor():
    """The sampled rate of a tier passed by a check sits near the check floor, not the threshold: replays at
    0.55 are a collapse against 0.90 - 0.30, not against 0.70 - 0.30."""
    windows = TierWindows(20)
    stream(windows, 1, 11, 20)
    plain = RuleConfig(window=20, min_episodes=20)
    checked = RuleConfig(window=20, min_episodes=20, check_episodes=50, check_floor=0.7)
    assert decide(plain, windows, tier=2, escalated_from=1) == Decision.COLLAPSE
    assert decide(checked, windows, tier=2, escalated_from=1) == Decision.HOLD
    stream(windows, 1, 7, 20)  # 0.35
    assert decide(checked, windows, tier=2, escalated_from=1) == Decision.COLLAPSE
