import pytest

from openadapt.families.report.models import ReportAction
from openadapt.kit import MALFORMED_KEY, ProgressLedger, RepeatRule, RepeatStreak, action_key


def test_first_repeats_are_free_then_the_penalty_grows_to_its_cap():
    streak = RepeatStreak(RepeatRule(free=3, step=0.05, cap=0.12))
    penalties = [streak.observe("same") for _ in range(7)]
    assert penalties == pytest.approx([0.0, 0.0, 0.0, -0.05, -0.10, -0.12, -0.12])
    assert streak.streak == 7


def test_a_different_action_breaks_the_streak():
    streak = RepeatStreak(RepeatRule(free=1, step=0.1, cap=1.0))
    assert [streak.observe(k) for k in ("a", "a", "b", "b", "b", "a")] == pytest.approx(
        [0.0, -0.1, 0.0, -0.1, -0.2, 0.0])
    assert streak.streak == 1


def test_reset_forgets_the_last_action():
    streak = RepeatStreak(RepeatRule(free=1))
    streak.observe("a")
    streak.reset()
    assert streak.observe("a") == 0.0 and streak.streak == 1


def test_rule_rejects_nonsense():
    with pytest.raises(ValueError):
        RepeatRule(free=0)
    with pytest.raises(ValueError):
        RepeatRule(step=-0.1)


def test_action_key_ignores_defaults_but_not_content_or_metadata():
    assert action_key(ReportAction()) == action_key(ReportAction(command=None))
    assert action_key(ReportAction(command="query", sql="SELECT 1")) != action_key(
        ReportAction(command="query", sql="SELECT 2"))
    bad_a = ReportAction.model_validate({"metadata": {MALFORMED_KEY: "no JSON object"}})
    bad_b = ReportAction.model_validate({"metadata": {MALFORMED_KEY: "not a valid action"}})
    assert action_key(bad_a) != action_key(bad_b) and action_key(bad_a) != action_key(ReportAction())


def test_progress_ledger_pays_each_items_best_once():
    ledger = ProgressLedger(0.2, ["a", "b"])
    assert ledger.update("a", 0.25) == pytest.approx(0.025)  # stored but wrong: partial credit
    assert ledger.update("a", 0.25) == 0.0  # the same again earns nothing
    assert ledger.update("a", 1.0) == pytest.approx(0.075)  # right now: the rest of its share
    assert ledger.update("a", 0.0) == 0.0 and ledger.update("a", 1.0) == 0.0  # undo and redo: nothing
    assert ledger.update("b", 7.0) == pytest.approx(0.1)  # clipped to full credit
    assert ledger.earned == pytest.approx(0.2)
    with pytest.raises(KeyError):
        ledger.update("c", 1.0)
