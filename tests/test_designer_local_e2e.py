"""The README's main command for real: the embedded model designs an environment through llama.cpp, the sandbox
validator judges it, and it is published or kept as a failed run.

- `test_the_embedded_model_designs_end_to_end` runs in CI, with the small 0.5B model, one attempt and a 5-minute
  `--time-limit` (unbounded, its repairs took 14 minutes of a CI run): every stage runs for real, and whatever
  the model wrote by then is either a validated package of the prompt's world or a failed run that keeps its
  attempt and says why.
- `test_generate_with_the_embedded_model_publishes_an_environment_of_the_prompt` is the issue's acceptance run:
  the 1.5B default model, four attempts, publication required. Opt-in (`OPENADAPT_E2E=1`): it takes 10-25
  minutes and the 1.5B model does not yet publish this prompt reliably (README, "The numbers").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from openadapt.designer.local.catalogue import CATALOGUE, DEFAULT_MODEL
from openadapt.designer.local.store import status

PROMPT = "Train an agent to diagnose failing irrigation pumps on a farm"
SMALL = "qwen2.5-coder-0.5b"


def installed(model: str) -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return status(model).state == "installed"


def seed_entities() -> set[str]:
    """Component and fault names of the diagnosis family's shipped domains (the seed and its examples)."""
    from openadapt.families import get_family

    family = get_family("diagnosis")
    names: set[str] = set()
    for example in family.examples():
        domain = family.load_example(example)
        names.update(c.name.lower() for c in domain.components)
        names.update(f.id.lower() for f in domain.faults)
    return names


def generate(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENADAPT_BASE_URL", "OPENAI_"))}
    result = subprocess.run([sys.executable, "-m", "openadapt.cli", "generate", PROMPT, "--output", str(tmp_path),
                             "--json", *args], env=env, capture_output=True, text=True, timeout=2400)
    assert result.returncode in (0, 1), (result.stdout[-3000:], result.stderr[-3000:])
    return result, json.loads(result.stdout)


def assert_of_the_prompts_world(package: Path) -> None:
    provenance = json.loads((package / "provenance.json").read_text())
    assert provenance["validation"]["verdict"] == "pass" and provenance["validation"]["isolated"]
    text = (package / "domain.yaml").read_text()
    assert "pump" in text.lower()  # the prompt's world...
    domain = yaml.safe_load(text)
    names = {c["name"].lower() for c in domain["components"]} | {f["id"].lower() for f in domain["faults"]}
    assert names and not names & seed_entities()  # ...and none of the shipped domains' entities


@pytest.mark.skipif(not installed(SMALL), reason=f"{SMALL} is not installed (bash scripts/fetch_models.sh {SMALL})")
def test_the_embedded_model_designs_end_to_end(tmp_path):
    result, out = generate(tmp_path, "--local-model", SMALL, "--max-attempts", "1", "--time-limit", "5")
    provenance = out["provenance"]
    designer = provenance["designer"]
    assert designer["backend"] == "local" and designer["model_sha256"] == CATALOGUE[SMALL].sha256
    assert designer["family"].startswith("diagnosis@")  # the family the model chose for pumps
    (attempt,) = provenance["attempts"]
    # written in pieces, one request each: the header, the keys, the items (how many fit in the time limit
    # depends on the machine: 14 requests on this 2-core Xeon with two other runs beside it, 30 on an idle one)
    pieces = {c["piece"] for c in attempt["notes"]["completions"] if c.get("piece")}
    assert {"domain", "domain.components.keys"} <= pieces and len(pieces) >= 4, pieces
    assert attempt["usage"]["completion_tokens"] > 500
    assert attempt["notes"]["choice"]["method"].startswith("calibrated next-token")
    if result.returncode == 0:
        assert_of_the_prompts_world(tmp_path / out["name"])
        return
    # Not validated: nothing published, the attempt kept with what the model wrote and why it failed.
    assert not (tmp_path / out["name"]).exists() and out["failed_dir"]
    failed = Path(out["failed_dir"])
    assert json.loads((failed / "FAILED.json").read_text())["reason"] == out["reason"]
    kept = failed / "attempt-1"
    if attempt["verdict"] is None:  # its domain never parsed: the draft, headed by its problems
        draft = (kept / "draft.yaml").read_text()
        assert draft.startswith("# The domain as drafted; it did not parse:") and "components:" in draft
    else:  # it parsed and the validator failed it: the package as validated, and the checks that failed
        assert attempt["failing_checks"] and (kept / out["name"] / "domain.yaml").is_file()


@pytest.mark.skipif(os.environ.get("OPENADAPT_E2E") != "1", reason="opt-in: OPENADAPT_E2E=1")
@pytest.mark.skipif(not installed(DEFAULT_MODEL), reason=f"the embedded model {DEFAULT_MODEL} is not installed")
def test_generate_with_the_embedded_model_publishes_an_environment_of_the_prompt(tmp_path):
    result, out = generate(tmp_path)
    assert result.returncode == 0, out.get("reason")
    assert out["ok"] and out["provenance"]["designer"]["backend"] == "local"
    assert_of_the_prompts_world(tmp_path / out["name"])
