"""The designer against a real HTTP chat-completions server on loopback with scripted replies."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml
from fake_openai import FakeOpenAI, Scripted
from scripted_designs import ENV_FILE, NAME, as_reply, design_files, design_reply

from openadapt.designer.generate import FAILED_DIR, GenerateRequest, generate
from openadapt.designer.reply import parse_reply
from openadapt.llm.endpoint import LLMConfig, LLMError

KEY = "sk-test-SECRET-3f9a1c"


def request(llm: FakeOpenAI, tmp_path: Path, **kw) -> GenerateRequest:
    config = LLMConfig(base_url=llm.base_url, model=kw.pop("model", "designer-1"), api_key=KEY, backoff_s=0.01,
                       max_retries=kw.pop("max_retries", 3))
    return GenerateRequest(task="A lock opened by a code found from higher/lower hints",
                           output_root=tmp_path / "generated_envs",
                           name=kw.pop("name", NAME), llm=config, custom=True, **kw)


def all_text(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def test_broken_then_fixed_is_accepted_on_attempt_two(llm, tmp_path, validator):
    llm.replies = [Scripted(design_reply(bug=True)), Scripted(design_reply())]
    result = generate(request(llm, tmp_path), validator=validator)
    assert result.ok and len(result.provenance.attempts) == 2, result.reason
    first = result.provenance.attempts[0]
    assert "runtime.api_contract" in first.failing_checks
    repair_prompt = llm.requests[1]["messages"][-1]["content"]
    assert "runtime.api_contract" in repair_prompt and "KeyError: 'targets'" in repair_prompt
    assert f'File "{ENV_FILE}"' in repair_prompt  # the trimmed traceback
    assert "raise KeyError('targets')" in repair_prompt  # the previous files are shown
    package = tmp_path / "generated_envs" / NAME
    assert (package / "provenance.json").is_file() and (package / "openenv.yaml").is_file()
    assert "raise KeyError" not in (package / ENV_FILE).read_text()
    provenance = json.loads((package / "provenance.json").read_text())
    assert provenance["designer"]["model"] == "designer-1" and provenance["usage"]["total_tokens"] > 0
    assert provenance["attempts"][0]["feedback_sent"] and provenance["validation"]["verdict"] == "pass"
    assert not list((tmp_path / "generated_envs" / ".staging").iterdir())
    # RFC 008: the manifest pins the model that wrote it, and OpenEnv's own validator accepts the package
    from openenv.validation.runner import run_validation
    from openenv.validation.types import Level

    pin = yaml.safe_load((package / "openenv.yaml").read_text())["validation"]["task_distribution"]
    assert pin == {"generator_model": "designer-1"}  # no seed was set for this endpoint
    assert run_validation(package, max_level=Level.STATIC).verdict.value == "pass"


def test_always_broken_stops_after_max_attempts(llm, tmp_path, validator):
    llm.replies = [Scripted(design_reply(bug=True)) for _ in range(3)]
    result = generate(request(llm, tmp_path, max_attempts=2), validator=validator)
    assert not result.ok and "validation failed after 2 attempt(s)" in result.reason
    root = tmp_path / "generated_envs"
    assert not (root / NAME).exists()
    failed = list((root / FAILED_DIR).iterdir())
    assert len(failed) == 1 and {p.name for p in failed[0].iterdir()} >= {"attempt-1", "attempt-2", "FAILED.json"}
    assert len(llm.requests) == 2


def test_a_repair_may_send_only_the_file_it_fixes(llm, tmp_path, validator):
    fixed = {ENV_FILE: design_files()[ENV_FILE]}
    llm.replies = [Scripted(design_reply(bug=True)), Scripted(as_reply(fixed, prose="Fixed the environment."))]
    result = generate(request(llm, tmp_path), validator=validator)
    assert result.ok and len(result.provenance.attempts) == 2, result.reason
    assert (tmp_path / "generated_envs" / NAME / "custom/policies.py").is_file()  # kept from attempt 1


def test_unusable_reply_then_repair_shows_the_last_usable_files(llm, tmp_path, validator):
    llm.replies = [Scripted(design_reply(bug=True)), Scripted("Sorry, I cannot."), Scripted(design_reply())]
    result = generate(request(llm, tmp_path), validator=validator)
    assert result.ok and len(result.provenance.attempts) == 3
    third_prompt = llm.requests[2]["messages"][-1]["content"]
    assert "custom/policies.py" in third_prompt and "no files in fenced blocks" in third_prompt


def test_429_then_500_then_success_is_retried(llm, tmp_path, validator):
    llm.replies = [Scripted(status=429, error="slow down"), Scripted(status=500), Scripted(design_reply())]
    result = generate(request(llm, tmp_path), validator=validator)
    assert result.ok
    assert result.provenance.attempts[0].retries == ["HTTP 429", "HTTP 500"]


def test_prose_only_then_truncated_then_good(llm, tmp_path, validator):
    truncated = design_reply()[: len(design_reply()) // 2]
    llm.replies = [Scripted("I would build a guessing game with a hidden number."),
                   Scripted(truncated, finish_reason="length"), Scripted(design_reply())]
    result = generate(request(llm, tmp_path), validator=validator)
    assert result.ok and len(result.provenance.attempts) == 3
    first, second = result.provenance.attempts[:2]
    assert any("no files" in p for p in first.parse_problems)
    assert any("cut off" in p or "token limit" in p for p in second.parse_problems)
    assert "token limit" in llm.requests[2]["messages"][-1]["content"]


def test_path_traversal_is_refused(tmp_path):
    parsed = parse_reply(design_reply() + "\n```python path=../../evil.py\nprint('x')\n```\n"
                         "```python path=/etc/passwd\nx\n```")
    assert "../../evil.py" not in parsed.files and "/etc/passwd" not in parsed.files
    assert sum("must stay inside the package" in p for p in parsed.problems) == 2
    assert "custom/models.py" in parsed.files  # the rest of the reply is still used


@pytest.mark.parametrize("style", ["heading", "title", "bold"])
def test_path_conventions_llms_use(style):
    head = {"heading": "### models.py\n```python", "title": '```python title="models.py"',
            "bold": "**models.py**\n```py"}[style]
    parsed = parse_reply(f"Sure!\n{head}\nX = 1\n```\n")
    assert parsed.files == {"models.py": "X = 1\n"}


def test_missing_closing_fence_is_tolerated_when_the_reply_ended():
    parsed = parse_reply("```python path=models.py\nX = 1\n", finish_reason="stop")
    assert parsed.files == {"models.py": "X = 1\n"} and not parsed.truncated
    assert any("no closing fence" in p for p in parsed.problems)


def test_api_key_is_written_nowhere(llm, tmp_path, validator):
    llm.replies = [Scripted(design_reply(bug=True)), Scripted(design_reply(bug=True))]
    generate(request(llm, tmp_path, max_attempts=2), validator=validator)
    llm.replies = [Scripted(design_reply())]
    generate(request(llm, tmp_path), validator=validator)
    assert {k.lower(): v for k, v in llm.headers[0].items()}["authorization"] == f"Bearer {KEY}"  # it was used...
    assert KEY not in all_text(tmp_path)  # ...and written nowhere (packages, provenance, failed runs, reports)


def test_wrong_key_unknown_model_and_dead_endpoint(llm, tmp_path, validator):
    llm.replies = [Scripted(status=401, error="bad key")]
    with pytest.raises(LLMError, match="refused the API key"):
        generate(request(llm, tmp_path), validator=validator)
    with pytest.raises(LLMError, match="does not know model 'nope'"):
        generate(request(llm, tmp_path, model="nope"), validator=validator)
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()
    config = LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", model="designer-1", api_key=KEY, backoff_s=0.01,
                       max_retries=1, timeout_s=2)
    with pytest.raises(LLMError, match="did not answer after 2 tries"):
        generate(GenerateRequest(task="x y z", output_root=tmp_path / "generated_envs", name=NAME, llm=config,
                                 custom=True),
                 validator=validator)
    assert not (tmp_path / "generated_envs" / NAME).exists()
    assert LLMError.exit_code == 4


def test_a_task_in_another_language_is_published_under_its_english_name(llm, tmp_path, validator):
    """No --name: the endpoint translates the task, the package is named from the translation's words, and the
    task itself reaches the designer, the provenance and the README as written."""
    german = "Ein Zahlenschloss, das sich mit einem Code öffnet, den man aus Hinweisen höher/niedriger findet"
    english = "A combination lock that opens with a code found from higher/lower hints."
    llm.replies = [Scripted(english), Scripted(design_reply())]
    result = generate(request(llm, tmp_path, name=None).model_copy(update={"task": german}), validator=validator)
    assert result.ok, result.reason
    assert result.name == "combination_lock_opens"
    translation, design = (r["messages"] for r in llm.requests)
    assert translation[-1]["content"] == german and german in design[-1]["content"]
    package = tmp_path / "generated_envs" / "combination_lock_opens"
    provenance = json.loads((package / "provenance.json").read_text())
    assert (provenance["task"], provenance["task_english"], provenance["name_source"]) == (german, english,
                                                                                            "designer")
    assert german in (package / "README.md").read_text()
