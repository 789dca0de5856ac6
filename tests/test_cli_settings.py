"""`--settings FILE`: every solver setting (self-imitation, exploration, the KL term per tier) from a YAML or JSON
file, for `train` and `curriculum`; a flag given beside it wins; a bad file is one usage line, before any heavy
library loads."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from openadapt.cli import app

runner = CliRunner()
RECIPE = """\
max_turns: {1: 1, 2: 1, 3: 2, 4: 3, 5: 4}
scale_rewards: batch
imitate: {1: 0.0, 2: 3.0}
explore: 0.9
explore_choices: [inspect_logs]
explore_credit: positive
beta: {1: 0.1, 4: 0.0}
"""


def parsed(command: str, args: list[str]) -> dict:
    """The parameters `command` receives for `args`, option callbacks run (nothing trained)."""
    click_command = typer.main.get_command(app).commands[command]
    return click_command.make_context(command, args).params


def test_a_settings_file_reaches_the_curriculum_config_and_a_flag_wins(tmp_path):
    from openadapt.cli.curriculum import _config

    recipe = tmp_path / "climb.yaml"
    recipe.write_text(RECIPE + "lr: 0.002\n")
    config = _config(parsed("curriculum", ["seed:incident_triage", "--settings", str(recipe), "--lr", "0.0005",
                                           "--output", str(tmp_path / "run")]))
    assert config.imitate_at(1) == 0.0 and config.imitate_at(3) == 3.0 and config.explore == 0.9
    assert [config.beta_at(t) for t in (1, 3, 4, 5)] == [0.1, 0.1, 0.0, 0.0] and config.turns_at(3) == 2
    assert config.lr == 0.0005  # the flag, not the file's 0.002


def test_a_json_settings_file_reaches_the_train_config(tmp_path):
    from openadapt.training.config import TrainConfig

    recipe = tmp_path / "s.json"
    recipe.write_text('{"max_turns": 1, "imitate": 0.5}')
    params = parsed("train", ["seed:incident_triage", "--settings", str(recipe), "--output", str(tmp_path / "r")])
    config = TrainConfig.build(**params["settings"] | {"package": params["package"], "output": params["output"]})
    assert (config.max_turns, config.imitate) == (1, 0.5)


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read"),
    ("- a list\n", "must hold a mapping of solver settings"),
    ("imitate: 1\nbogus: 2\n", "no such solver setting bogus"),
    ("key: [unclosed\n", "is not YAML or JSON"),
    ("context: full\nimitate: 1.0\n", "needs context 'last'"),
    ("beta: {1: -0.5}\n", "beta must be a weight >= 0"),
])
@pytest.mark.parametrize("command", ["train", "curriculum"])
def test_a_bad_settings_file_is_one_usage_line(command, content, message, tmp_path):
    path = tmp_path / "settings.yaml"
    if content is not None:
        path.write_text(content)
    result = runner.invoke(app, [command, "seed:incident_triage", "--settings", str(path),
                                 "--output", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in " ".join(result.output.split())


@pytest.mark.parametrize("args", [["train", "seed:incident_triage", "--output", "RUN", "--resume"],
                                  ["curriculum", "--resume", "RUN"]])
def test_resume_keeps_the_recorded_settings_and_refuses_a_settings_file(args, tmp_path):
    recipe = tmp_path / "s.yaml"
    recipe.write_text("imitate: 1.0\n")
    args = [str(tmp_path / "run") if a == "RUN" else a for a in args]
    result = runner.invoke(app, [*args, "--settings", str(recipe)])
    assert result.exit_code == 2 and "leave out --settings" in result.output, result.output


def test_a_bad_settings_file_loads_no_heavy_library(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("bogus: 1\n")
    probe = ("import sys\nfrom openadapt.cli import app\ncode = app(['train', 'seed:incident_triage', '--settings', "
             f"{str(path)!r}], standalone_mode=False)\nheavy = [m for m in ('torch', 'transformers', 'trl', "
             "'openenv') if m in sys.modules]\nprint('HEAVY', heavy, code)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert "HEAVY [] 2" in done.stdout, done.stdout + done.stderr


def test_the_committed_settings_files_are_valid_settings():
    from pathlib import Path

    from openadapt.training.config import SolverSettings, read_settings_file

    files = sorted((Path(__file__).resolve().parents[1] / "benchmarks" / "settings").glob("*.yaml"))
    assert files
    for path in files:
        SolverSettings(model="tiny", **read_settings_file(path))
