"""Plots a reader can trust (titles, integer steps, sensible y-ranges, "no data yet"), reports that say how a run
stands, and curriculum events in words (issue 13: items 7 and 8), on run directories written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openadapt.cli import app
from openadapt.curriculum.report import describe_event
from openadapt.training.report import RunData, plot_curves, run_state

runner = CliRunner()
CONFIG = {"package": "seed:incident_triage", "model": "tiny", "eci": [1], "steps": 30, "lr": 0.001,
          "prompts_per_step": 8, "num_generations": 4, "max_turns": 2, "max_completion_length": 48,
          "reward": "return", "beta": 0.1}


def training_run(root: Path, steps: int, summary: dict | None = None, reward: float = 0.42) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(CONFIG))
    rows = [{"step": i, "reward_mean": reward, "reward_std": 0.0, "solve_rate": 0.0, "seconds_per_step": 0.8}
            for i in range(1, steps + 1)]
    (root / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if summary is not None:
        (root / "summary.json").write_text(json.dumps(summary))
    return root


@pytest.fixture
def figures(monkeypatch):
    """The figures the report draws, kept open so a test can read their axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.close("all")
    monkeypatch.setattr(plt, "close", lambda *a, **k: None)
    yield lambda: [plt.figure(n) for n in plt.get_fignums()]
    plt.close("all")


def test_a_flat_reward_is_drawn_on_the_packages_reward_range_with_integer_steps(tmp_path, figures):
    run = training_run(tmp_path / "run", steps=5)
    files = plot_curves(RunData.load(run))
    assert set(files) == {"reward", "solve_rate"} and all(p.is_file() for p in files.values())
    reward, solve = (fig.axes[0] for fig in figures())
    low, high = reward.get_ylim()
    assert low <= -0.5 and high >= 1.0  # incident_triage declares [-0.5, 1.0]: not zoomed to +-0.02
    assert solve.get_ylim() == pytest.approx((-0.02, 1.02))
    for ax in (reward, solve):
        assert ax.get_title().startswith(("Training reward", "Sampled solve rate"))
        assert ax.xaxis.get_major_locator()._integer  # no step 2.5
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert not any("moving average (1 steps)" in label for label in labels)


def test_a_long_run_gets_a_moving_average_named_in_words(tmp_path, figures):
    plot_curves(RunData.load(training_run(tmp_path / "run", steps=50)))
    labels = [t.get_text() for t in figures()[0].axes[0].get_legend().get_texts()]
    assert "moving average over 5 steps" in labels


def test_no_data_yet_is_said_not_drawn(tmp_path):
    run = training_run(tmp_path / "run", steps=1)
    result = runner.invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    text = (run / "report.md").read_text()
    assert "No curves yet: 1 optimizer step(s) recorded" in text and not (run / "plots" / "reward.png").exists()


def test_a_killed_run_says_so_and_shows_the_steps_that_exist(tmp_path):
    run = training_run(tmp_path / "run", steps=5, summary={"stopped": "running", "global_step": 0,
                                                           "seconds_per_step_median": None})
    assert run_state(RunData.load(run)) == "not running: killed or crashed before it finished"
    runner.invoke(app, ["report", str(run)])
    text = (run / "report.md").read_text()
    assert "5 of 30 (not running: killed or crashed before it finished)" in text
    assert "None" not in text and "median 0.80 s/step" in text


def test_a_run_held_by_a_live_process_is_running(tmp_path):
    from openadapt.runlock import DirectoryLock

    run = training_run(tmp_path / "run", steps=3, summary={"stopped": "running", "global_step": 3})
    with DirectoryLock(run):
        assert run_state(RunData.load(run)) == "running"


EVENTS = [
    ({"event": "started", "step": 0, "source": "seed:incident_triage", "tier": 1},
     "started on seed:incident_triage at ECI 1"),
    ({"event": "escalation_triggered", "step": 40, "tier": 1, "target": 2, "windowed_solve_rate": 0.9219,
      "window": 64}, "ECI 1 reached a windowed solve rate of 0.92 over 64 episodes: escalating to ECI 2"),
    ({"event": "heldout_eval", "step": 40, "eci": 1, "when": "escalation", "episodes": 100, "solve_rate": 0.86,
      "solve_rate_ci95": [0.78, 0.91], "mean_return": 0.8},
     "held-out ECI 1 (escalation): solve rate 0.86 [0.78, 0.91]"),
    ({"event": "escalated", "step": 40, "tier": 1, "target": 2, "version": 2, "package": "x"},
     "escalated ECI 1 -> 2 (environment version v2)"),
    ({"event": "collapse", "step": 50, "tier": 1, "current": 2, "replay_solve_rate": 0.59, "step_back": False},
     "collapse: ECI 1 replays at 0.59 while training ECI 2"),
    ({"event": "validation", "step": 0, "target": 1, "verdict": "pass", "summary": {"counts": {"pass": 28}}},
     "ECI 1 version validated: pass (28 pass)"),
    ({"event": "something_new", "step": 3, "detail": 7}, "something new: detail 7"),
]


@pytest.mark.parametrize(("event", "words"), EVENTS, ids=[e["event"] for e, _ in EVENTS])
def test_curriculum_events_read_as_words(event, words):
    text = describe_event(event)
    assert words in text and "{" not in text


def test_the_curriculum_command_prints_events_as_words_not_json():
    from openadapt.cli.curriculum import _listener
    from openadapt.cli.render import Progress

    lines: list[str] = []
    progress = Progress()
    progress.line = lines.append
    listen = _listener(progress)
    listen(EVENTS[3][0])
    listen({"event": "progress", "step": 41, "tier": 2, "windowed": {}, "counts": {}, "train_seconds": 60})
    assert lines == ["step 40: escalated ECI 1 -> 2 (environment version v2)"]


def test_a_curriculum_report_lists_events_in_words_and_says_when_there_is_nothing_to_plot(tmp_path):
    from openadapt.curriculum.config import CONFIG_FILE, EVENTS_FILE, TIERS_FILE, CurriculumConfig
    from openadapt.curriculum.state import CurriculumState

    run = tmp_path / "night"
    run.mkdir()
    config = CurriculumConfig.build(source="seed:incident_triage", output=run)
    (run / CONFIG_FILE).write_text(config.model_dump_json())
    CurriculumState(run_id="abc", source="seed:incident_triage").save(run)
    (run / EVENTS_FILE).write_text("".join(json.dumps({"at": "2026-01-01T00:00:00+00:00", **e}) + "\n"
                                           for e, _ in EVENTS[:4]))
    (run / TIERS_FILE).write_text(json.dumps({"step": 1, "tier": 1, "windowed": {"1": 0.5}, "counts": {"1": 8}})
                                  + "\n")
    result = runner.invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    text = (run / "report.md").read_text()
    assert "escalated ECI 1 -> 2 (environment version v2)" in text and '{"' not in text
    assert "No plots yet" in text
