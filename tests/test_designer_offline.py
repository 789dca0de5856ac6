"""The offline designer: family choice, domain words, packages that pass every validator check, and committed
examples that reproduce byte-for-byte from their recorded prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openadapt.designer import offline
from openadapt.designer.generate import GenerateRequest, generate
from openadapt.designer.provenance import PROVENANCE_FILE, stable
from openadapt.validator import Status, Validator

EXAMPLES = Path(__file__).resolve().parent.parent / "generated_envs"
PROMPTS = [
    "Train an agent to diagnose failing irrigation pumps on a farm",
    "Teach an agent to triage outages in a hospital patient monitoring network",
    "An agent that finds the root cause of slow checkout pages in an online bookshop",
    "Debug degraded telemetry in a wind turbine fleet",
    "Route and approve procurement tickets in a university finance office",
    "Handle HR escalation workflows where the ticket schema changes mid-shift",
    "Process customer refund requests with role-based approval and SLAs",
    "Assemble the weekly sales report PDF for regional managers",
    "Write the daily KPI summary document for a logistics warehouse",
    "Prepare the monthly invoice statement for subscription customers",
]


@pytest.fixture(scope="module")
def validator():
    with Validator("bwrap", episodes=10) as v:
        yield v


def test_family_choice_and_domain_words():
    assert offline.choose_blueprint(PROMPTS[0]).seed == "incident_triage"
    assert offline.choose_blueprint(PROMPTS[5]).seed == "enterprise_workflow"
    assert offline.choose_blueprint(PROMPTS[7]).seed == "daily_report"
    desk = "Train an agent to run a hospital admissions desk where record fields get renamed and staff go off shift"
    assert offline.choose_blueprint(desk).seed == "enterprise_workflow"
    assert offline.package_name(desk, offline.choose_blueprint(desk)) == "hospital_admissions_workflow"
    assert offline.choose_blueprint("something completely unrelated").family == "diagnosis/triage"
    assert offline.domain_words("Train an agent to diagnose failing irrigation pumps on a farm",
                                offline.BLUEPRINTS[0].keywords) == ["irrigation", "pumps", "farm"]


def test_domain_words_reach_names_and_texts():
    design = offline.design(PROMPTS[0])
    assert design.name == "irrigation_pumps_triage"
    assert design.spec.environment_class == "IrrigationPumpsTriageEnvironment"
    assert "irrigation-api-gateway" in design.files["server/catalogue.py"]
    assert "irrigation pumps farm system" in design.files["prompts/system.j2"]
    code = "".join(t for p, t in design.files.items() if p.endswith((".py", ".j2")))
    assert "incident_triage" not in code and "IncidentTriage" not in code


@pytest.mark.parametrize("prompt", PROMPTS)
def test_offline_design_passes_every_check(prompt, validator, tmp_path):
    result = generate(GenerateRequest(task=prompt, output_root=tmp_path), validator=validator)
    assert result.ok, result.reason
    provenance = json.loads((result.path / PROVENANCE_FILE).read_text())
    assert provenance["designer"]["backend"] == "offline" and provenance["validation"]["verdict"] == "pass"
    assert provenance["validation"]["counts"] == {"pass": provenance["validation"]["counts"]["pass"]}
    report = validator.validate(result.path)  # the published package, README and provenance included
    assert all(c.status == Status.PASS for c in report.checks), report.designer_feedback()


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir() if (p / PROVENANCE_FILE).is_file())
                         if EXAMPLES.is_dir() else [])
def test_committed_examples_reproduce_byte_for_byte(example, validator, tmp_path):
    committed = EXAMPLES / example
    recorded = json.loads((committed / PROVENANCE_FILE).read_text())
    result = generate(GenerateRequest(task=recorded["task"], output_root=tmp_path, name=example), validator=validator)
    assert result.ok, result.reason
    fresh = _tree(result.path)
    expected = _tree(committed)
    assert fresh.keys() == expected.keys()
    for path in expected:
        if path == PROVENANCE_FILE:
            assert stable(json.loads(fresh[path])) == stable(json.loads(expected[path]))
        else:
            assert fresh[path] == expected[path], f"{example}/{path} differs"


def test_existing_output_needs_force(validator, tmp_path):
    first = generate(GenerateRequest(task=PROMPTS[3], output_root=tmp_path), validator=validator)
    marker = first.path / "server" / "catalogue.py"
    original = marker.read_text()
    from openadapt.errors import UsageError

    with pytest.raises(UsageError, match="already exists: pass --force"):
        generate(GenerateRequest(task=PROMPTS[3], output_root=tmp_path), validator=validator)
    assert marker.read_text() == original
    again = generate(GenerateRequest(task=PROMPTS[3], output_root=tmp_path, force=True), validator=validator)
    assert again.ok and not [p for p in tmp_path.iterdir() if ".replaced-" in p.name]


@pytest.mark.parametrize("task", ["", "   \n\t"])
def test_empty_prompt_is_refused(task, tmp_path):
    from openadapt.errors import UsageError

    with pytest.raises(UsageError, match="empty"):
        generate(GenerateRequest(task=task, output_root=tmp_path))
    assert not tmp_path.joinpath(".staging").exists()
