"""The everyday commands through typer's runner: eval, info, play, and their usage errors."""

import json

import pytest
from typer.testing import CliRunner

from openadapt.cli import app

runner = CliRunner()


def run(*args, input=None):
    result = runner.invoke(app, list(args), input=input)
    assert "Traceback" not in result.output
    return result


def words(text: str) -> str:
    return " ".join(text.split())


def test_eval_prints_solve_rate_apart_from_reward():
    result = run("eval", "seed:incident_triage", "--policy", "oracle", "--eci", "1,5", "--episodes", "10")
    assert result.exit_code == 0, result.output
    assert "solve rate" in result.output and "mean reward" in result.output
    assert "1.000" in result.output


def test_eval_json_report():
    result = run("eval", "seed:incident_triage", "--policy", "heuristic", "--eci", "1", "--episodes", "5", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["policy"] == "heuristic" and report["tiers"][0]["eci"] == 1
    assert report["tiers"][0]["episodes"] == 5 and report["seed_start"] == 1_000_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("eval", "seed:nope"), "unknown seed 'nope'"),
        (("eval", "/no/such/dir"), "no such directory"),
        (("eval", "seed:incident_triage", "--eci", "7"), "ECI tier 7 is outside 1-5"),
        (("eval", "seed:incident_triage", "--eci", "hard"), "'hard' is not an ECI tier"),
        (("eval", "seed:incident_triage", "--policy", "genius", "--episodes", "1"), "unknown policy 'genius'"),
        (("play", "seed:incident_triage", "--eci", "0"), "ECI tier 0 is outside 1-5"),
        (("info", "seed:nope"), "unknown seed"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, message):
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert message in words(result.output)
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_package_without_manifest_is_a_usage_error(tmp_path):
    result = run("eval", str(tmp_path))
    assert result.exit_code == 2 and "has no openenv.yaml" in words(result.output)


def test_untrusted_package_needs_trust(guess_copy):
    result = run("eval", str(guess_copy), "--episodes", "2")
    assert result.exit_code == 2 and "--trust" in result.output
    result = run("eval", str(guess_copy), "--episodes", "2", "--eci", "1", "--trust")
    assert result.exit_code == 0, result.output


def test_family_package_copy_runs_without_trust(triage_copy):
    result = run("eval", str(triage_copy), "--episodes", "2", "--eci", "1")
    assert result.exit_code == 0, result.output


def test_info_shows_the_manifest():
    result = run("info", "seed:incident_triage")
    assert result.exit_code == 0 and "ECI 5: 5" in result.output and "diagnosis@1" in result.output
    as_json = json.loads(run("info", "seed:incident_triage", "--json").stdout)
    assert as_json["family"] == "diagnosis@1" and as_json["eci_tiers"] == [1, 2, 3, 4, 5]


def test_play_uses_the_text_protocol(triage):
    env = triage.make_env()
    env.reset(seed=42, eci=1)
    inc = env.oracle_view()
    answer = json.dumps({"tool": "diagnose_incident", "component": inc.root, "fault": inc.fault.id,
                         "fix": inc.fix, "confidence": 0.9, "reasoning": "looks right"})
    script = "\n".join(["this is not json", '{"tool": "inspect_logs", "component": "mainframe"}', answer]) + "\n"
    result = run("play", "seed:incident_triage", "--seed", "42", "--eci", "1", input=script)
    assert result.exit_code == 0, result.output
    assert "Reply with exactly one JSON object" in result.output  # the system prompt an LLM sees
    assert "not an action" in result.output and "reward -0.100" in result.output
    assert "error: unknown_component" in result.output
    final = result.output.split("episode over")[-1]
    assert "solved" in final and "yes" in final and "{" not in final.split("result")[-1]  # a table, not a dict


def test_play_with_closed_input_exits_cleanly():
    result = run("play", "seed:incident_triage", "--seed", "1", input="")
    assert result.exit_code == 1 and "input closed" in result.output
