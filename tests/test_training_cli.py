"""`openadapt train`, `openadapt eval --policy model:RUN_DIR [--log-format openenv]` and `openadapt report`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("trl")

from typer.testing import CliRunner  # noqa: E402

from openadapt.cli import app  # noqa: E402

GUESS = str(Path(__file__).parent / "fixtures" / "guess_env")
runner = CliRunner()
STEP = re.compile(r"^\[STEP\] step=\d+ action=\S.* reward=-?\d+\.\d\d done=(true|false) error=\S+$")
END = re.compile(r"^\[END\] success=(true|false) steps=\d+ rewards=(-?\d+\.\d\d)(,-?\d+\.\d\d)*$")


def run(*args):
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    return result


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "run"
    result = run("train", GUESS, "--steps", "2", "--warmup-steps", "5", "--eval-episodes", "2",
                 "--num-generations", "2", "--prompts-per-step", "1", "--max-turns", "1", "--output", str(path),
                 "--wandb", "offline", "--scale-rewards", "batch")
    assert result.exit_code == 0, result.output
    return path, result.output


def test_train_writes_the_run_and_prints_before_and_after(cli_run):
    path, output = cli_run
    assert "before" in output and "after" in output and "openadapt report" in output
    assert [json.loads(line)["step"] for line in (path / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    summary = json.loads((path / "summary.json").read_text())
    assert summary["global_step"] == 2 and summary["wandb"] == "offline"
    assert list((path / "wandb").glob("offline-run-*")), "W&B offline run missing"
    config = json.loads((path / "config.json").read_text())
    assert config["package"] == GUESS and config["scale_rewards"] == "batch"


def test_eval_a_trained_run_in_openenv_log_format(cli_run):
    path, _ = cli_run
    result = run("eval", GUESS, "--policy", f"model:{path}", "--eci", "1", "--episodes", "2",
                 "--log-format", "openenv")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("[")]
    starts = [line for line in lines if line.startswith("[START]")]
    assert starts == [f"[START] task=guess_env-eci1-seed{s} env=guess_env model={path}"
                      for s in (1_000_000, 1_000_001)]
    assert all(STEP.match(line) for line in lines if line.startswith("[STEP]"))
    assert sum(bool(END.match(line)) for line in lines) == 2


def test_eval_a_trained_run_as_json(cli_run):
    path, _ = cli_run
    result = run("eval", GUESS, "--policy", f"model:{path}", "--eci", "1,2", "--episodes", "2", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["policy"] == f"model:{path}" and [t["eci"] for t in report["tiers"]] == [1, 2]
    assert report["seed_start"] == 1_000_000 and report["tiers"][0]["solve_rate_ci95"][1] <= 1.0


def test_reference_policies_log_in_openenv_format_too():
    result = run("eval", "seed:incident_triage", "--policy", "oracle", "--eci", "1", "--episodes", "2",
                 "--log-format", "openenv")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "[START] task=incident_triage-eci1-seed1000000 env=incident_triage model=oracle"
    assert STEP.match(lines[1]) and "diagnose_incident" in lines[1]
    assert lines[2].startswith("[END] success=true steps=1 rewards=")


def test_report_command(cli_run):
    path, _ = cli_run
    result = run("report", str(path))
    assert result.exit_code == 0, result.output
    assert (path / "report.md").exists() and (path / "report.html").exists()
    assert (path / "plots" / "reward.png").exists()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("train", "seed:incident_triage", "--model", "/no/such/model"), 1, "model path /no/such/model does not exist"),
        (("train", "seed:incident_triage", "--wandb", "sometimes"), 2, "unknown W&B mode 'sometimes'"),
        (("train", "seed:incident_triage", "--eci", "9"), 2, "ECI tier 9 is outside 1-5"),
        (("train", "seed:incident_triage", "--scale-rewards", "std"), 2, "unknown advantage scaling 'std'"),
        (("train", "seed:incident_triage", "--resume"), 2, "--resume needs the run directory"),
        (("eval", "seed:incident_triage", "--policy", "model:/no/such/run", "--episodes", "1"), 2,
         "not a training run directory"),
        (("report", "/no/such/run"), 2, "no such run directory"),
    ],
)
def test_bad_input_is_one_clear_line(args, code, message, tmp_path):
    result = run(*args, *(("--output", str(tmp_path / "run")) if args[0] == "train" and "--resume" not in args
                          else ()))
    assert result.exit_code == code, result.output
    assert message in " ".join(result.output.split())
