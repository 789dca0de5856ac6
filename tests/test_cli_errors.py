"""Every usage error is one line and exit 2, raised before any heavy library loads; `--json` always prints JSON;
Ctrl-C is exit 130; one wording per error (issue 13: first contact)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openadapt.cli import app
from openadapt.cli.shell import exit_code_of

runner = CliRunner()
HEAVY = ("openenv", "torch", "transformers", "trl", "llama_cpp", "matplotlib", "uvicorn")
GERMAN = "Trainiere einen Agenten, der ausfallende Bewässerungspumpen auf einem Bauernhof diagnostiziert"
CHINESE = "训练一个诊断农场灌溉泵故障的智能体"

# A usage error of every command (and the group), with a piece of its one-line message.
USAGE_ERRORS = [
    (("generate", ""), "the task prompt is empty"),
    (("generate", "pumps " * 700), "at most 4000"),
    (("generate", "Diagnose failing pumps", "--name", "Bad-Name"), "must be a lowercase identifier"),
    (("generate", "--example", "diagnosis"), "use FAMILY:EXAMPLE"),
    (("generate", "Diagnose failing pumps", "--custom"), "--custom needs an OpenAI-compatible endpoint"),
    (("generate", "Diagnose failing pumps", "--model", "gpt-x"), "give --base-url too"),
    (("generate", "Diagnose failing pumps", "--max-tokens", "4096"), "--max-tokens bounds an endpoint's replies"),
    (("generate", "Diagnose failing pumps", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--max-tokens",
      "500"), "cannot hold a custom-mechanics package"),
    (("generate", "Diagnose failing pumps", "--sandbox", "jail"), "unknown sandbox 'jail'"),
    (("validate", "no/such/pkg"), "no/such/pkg: no such directory"),
    (("validate", "seed:nope"), "unknown seed 'nope'"),
    (("validate", "seed:incident_triage", "--eci", "6"), "ECI tier 6 is outside 1-5"),
    (("eval", "seed:incident_triage", "--policy", "genius"), "unknown policy 'genius'"),
    (("eval", "seed:incident_triage", "--log-format", "xml"), "--log-format"),
    (("train", "seed:nosuch"), "unknown seed 'nosuch'"),
    (("train", "seed:incident_triage", "--eci", "7"), "ECI tier 7 is outside 1-5"),
    (("train", "seed:incident_triage", "--wandb", "sometimes"), "unknown W&B mode 'sometimes'"),
    (("train", "seed:incident_triage", "--resume"), "--resume needs the run directory"),
    (("train", "seed:incident_triage", "--lr", "-1"), "invalid training settings: lr"),
    (("curriculum",), "give a SOURCE"),
    (("curriculum", "seed:incident_triage", "--start-eci", "6"), "ECI tier 6 is outside 1-5"),
    (("curriculum", "seed:incident_triage", "--lr", "-1"), "invalid curriculum settings: lr"),
    (("curriculum", "seed:incident_triage", "--sandbox", "jail"), "unknown sandbox 'jail'"),
    (("curriculum", "seed:incident_triage", "--reference", "warmup"), "unknown KL reference 'warmup'"),
    (("curriculum", "seed:incident_triage", "--reference", "tier", "--model", "qwen2.5-coder-0.5b"),
     "reference 'tier' moves the KL reference model"),
    (("curriculum", "--resume", "/no/such/run"), "not a curriculum run directory"),
    (("curriculum", "seed:incident_triage", "--check-floor", "0.7"), "set check_episodes too"),
    (("curriculum", "seed:incident_triage", "--check-episodes", "50", "--check-floor-from", "5"),
     "set check_floor too"),
    (("report", "/no/such/run"), "no such run directory"),
    (("serve", "seed:nope"), "unknown seed 'nope'"),
    (("play", "seed:incident_triage", "--eci", "9"), "ECI tier 9 is outside 1-5"),
    (("info", "/no/such/dir"), "no such directory"),
    (("list", "--root", "/no/such/root"), "does not exist"),
    (("show", "nosuch", "--root", "generated_envs"), "no generated package 'nosuch'"),
    (("render", "seed:nope"), "unknown seed 'nope'"),
    (("models", "pull", "nosuch"), "unknown local model 'nosuch'"),
    (("models", "verify", "nosuch"), "unknown local model 'nosuch'"),
    (("eval", "seed:incident_triage", "--bogus"), "No such option: --bogus"),
    (("frobnicate",), "No such command 'frobnicate'"),
]


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS, ids=[" ".join(a)[:40] for a, _ in USAGE_ERRORS])
def test_usage_errors_are_one_line_and_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # `show` reads the repository's generated_envs
    monkeypatch.setenv("OPENADAPT_MODELS_DIR", str(tmp_path / "models"))
    for name in ("OPENADAPT_BASE_URL", "OPENAI_BASE_URL", "OPENADAPT_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = runner.invoke(app, list(args))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert message in words(result.output)


@pytest.mark.parametrize("args", [("train", "seed:nosuch"), ("eval", "seed:incident_triage", "--eci", "7"),
                                  ("curriculum", "seed:incident_triage", "--lr", "-1"), ("generate", ""),
                                  ("validate", "no/such/pkg"), ("render", "seed:nope")])
def test_usage_errors_load_no_heavy_library(args):
    """What makes a usage error answer in well under a second: nothing heavy is imported before it."""
    probe = ("import sys\nfrom openadapt.cli import app\ncode = app(" + repr(list(args)) + ", standalone_mode=False)\n"
             f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\nprint('HEAVY', heavy, code)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert "HEAVY [] 2" in done.stdout, done.stdout + done.stderr


def test_train_does_not_name_a_run_directory_for_a_package_that_does_not_exist():
    result = runner.invoke(app, ["train", "seed:nosuch"])
    assert "run directory" not in result.output


@pytest.mark.parametrize("command", ["train", "curriculum", "generate"])
def test_an_output_that_is_a_file_is_one_line(command, tmp_path):
    target = tmp_path / "taken"
    target.write_text("a file")
    first = {"train": "seed:incident_triage", "curriculum": "seed:incident_triage",
             "generate": "Diagnose failing irrigation pumps on a farm"}[command]
    result = runner.invoke(app, [command, first, "--output", str(target)])
    assert result.exit_code == 2, result.output
    assert "is a file" in words(result.output) and len(result.output.strip().splitlines()) == 1
    assert target.read_text() == "a file"


def test_an_output_under_a_file_is_one_line(tmp_path):
    (tmp_path / "taken").write_text("a file")
    result = runner.invoke(app, ["train", "seed:incident_triage", "--output", str(tmp_path / "taken" / "run")])
    assert result.exit_code == 2 and "which is a file" in words(result.output)


@pytest.mark.parametrize("args", [("list", "--root", "/no/such/root", "--json"),
                                  ("eval", "seed:incident_triage", "--eci", "7", "--json"),
                                  ("generate", "", "--json"), ("validate", "no/such/pkg", "--json")])
def test_json_is_json_even_for_errors(args):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["exit_code"] == 2 and error["error"]


FRENCH = "Entraîne un agent à diagnostiquer les pompes d'irrigation en panne dans une ferme"


@pytest.mark.parametrize("prompt", [GERMAN, CHINESE, FRENCH])
def test_a_prompt_not_in_english_is_named_by_the_designers_translation(prompt):
    from openadapt.designer.naming import NAME, name_package

    backend = Translator("Train an agent to diagnose failing irrigation pumps on a farm.")
    named = name_package(prompt, backend)
    assert (named.name, named.source) == ("diagnose_failing_irrigation", "designer")
    assert named.english == "Train an agent to diagnose failing irrigation pumps on a farm."
    assert backend.asked == [prompt]  # the prompt as written, nothing else
    assert NAME.fullmatch(named.name)


@pytest.mark.parametrize(("prompt", "name"), [(GERMAN, "trainiere_agenten_ausfallende"),
                                              (CHINESE, "xun_lian_zhen"),
                                              (FRENCH, "entraine_diagnostiquer_pompes")])
def test_without_a_usable_translation_the_name_is_transliterated(prompt, name):
    """No model, or a reply that is no English (here the prompt echoed back): the prompt's words in ASCII."""
    from openadapt.designer.naming import name_package

    assert name_package(prompt, None) == name_package(prompt, Translator(prompt))
    named = name_package(prompt, None)
    assert (named.name, named.source, named.english) == (name, "transliteration", None)


def test_an_english_prompt_never_asks_the_model():
    from openadapt.designer.naming import name_package

    backend = Translator("unused")
    named = name_package("Kubernetes pod crash triage", backend)
    assert (named.name, named.source, backend.asked) == ("kubernetes_pod_crash", "task", [])


class Translator:
    """A chat backend that answers every request with one text, recording the user messages it was sent."""

    def __init__(self, text: str):
        self.text, self.asked = text, []

    def complete(self, messages, **_):
        from openadapt.llm.chat import Completion

        self.asked.append(messages[-1]["content"])
        return Completion(text=self.text, finish_reason="stop")


def test_a_named_non_english_prompt_goes_on_to_the_designer(tmp_path, monkeypatch):
    """With --name the prompt is accepted as written, and no model is asked for a name."""
    import openadapt.designer.generate as generate

    seen = {}

    def backend(request, *_):
        seen["task"], seen["name"] = request.task, request.name
        raise KeyboardInterrupt  # stop before any model loads

    monkeypatch.setattr(generate, "chat_backend", backend)
    result = runner.invoke(app, ["generate", GERMAN, "--name", "bewaesserung", "--output", str(tmp_path)])
    assert seen == {"task": GERMAN, "name": "bewaesserung"}
    assert result.exit_code == 130 and "interrupted" in result.output


def test_english_prompts_are_named_from_their_words():
    from openadapt.designer.naming import package_name

    assert package_name("Train an agent to diagnose failing irrigation pumps on a farm") == \
        "diagnose_failing_irrigation"
    assert package_name("Kubernetes pod crash triage") == "kubernetes_pod_crash"


def test_ctrl_c_exits_130_with_one_line(monkeypatch):
    import openadapt.envpkg.evaluation as evaluation

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluation, "evaluate", interrupted)
    result = runner.invoke(app, ["eval", "seed:incident_triage", "--episodes", "1", "--eci", "1"])
    assert result.exit_code == 130 and result.output.strip() == "interrupted"


def test_a_full_disk_is_one_line_and_exit_1():
    import errno

    code, message = exit_code_of(OSError(errno.ENOSPC, "No space left on device", "runs/x/metrics.jsonl"))
    assert (code, message) == (1, "No space left on device: runs/x/metrics.jsonl")
    with pytest.raises(ZeroDivisionError):  # a bug keeps its traceback
        exit_code_of(ZeroDivisionError("bug"))


def test_validate_of_a_file_is_one_line_not_a_table(tmp_path):
    path = tmp_path / "file.txt"
    path.write_text("x")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and result.output.startswith("error: ") and "not a directory" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_tier_has_one_wording_everywhere():
    from openadapt.errors import UsageError
    from openadapt.kit.eci import parse_tiers, tier_problem
    from openadapt.training.config import TrainConfig

    assert tier_problem(7) == "ECI tier 7 is outside 1-5"
    with pytest.raises(ValueError, match="ECI tier 7 is outside 1-5"):
        parse_tiers("1,7")
    with pytest.raises(UsageError, match="ECI tier 7 is outside 1-5"):
        TrainConfig.build(package="seed:incident_triage", eci=[7], output="runs/x")
    for args in (("eval", "seed:incident_triage", "--eci", "7"), ("train", "seed:incident_triage", "--eci", "7"),
                 ("play", "seed:incident_triage", "--eci", "7"),
                 ("curriculum", "seed:incident_triage", "--start-eci", "7")):
        assert "ECI tier 7 is outside 1-5" in words(runner.invoke(app, list(args)).output)


@pytest.mark.parametrize("broken", ["[" * 100_000, '{"name": 3}', "\xff\xfe not json"])
def test_one_malformed_provenance_is_named_and_hides_no_other_package(broken, tmp_path):
    shutil.copytree(Path(__file__).parents[1] / "generated_envs/kubernetes_cluster", tmp_path / "kubernetes_cluster")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "provenance.json").write_text(broken, encoding="latin-1")
    listed = runner.invoke(app, ["list", "--root", str(tmp_path), "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["bad"]["verdict"] == "unreadable" and rows["kubernetes_cluster"]["verdict"] == "pass"
    shown = runner.invoke(app, ["show", "bad", "--root", str(tmp_path)])
    assert shown.exit_code == 2 and len(shown.output.strip().splitlines()) == 1
    assert "provenance.json is unreadable" in shown.output and "Traceback" not in shown.output
