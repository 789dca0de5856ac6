"""Escalation goes through the validator: a harder tier that fails a check is refused with its reports kept,
one that passes is certified into the run's folder; without a designer rewrite (family packages, or no LLM) the
package's own tier is re-certified, and a tier the package does not have is refused. The LLM is the loopback
chat-completions server."""

from __future__ import annotations

import json

import pytest
from fake_openai import FakeOpenAI, Scripted
from scripted_designs import NAME, design_reply

from openadapt.curriculum.escalation import EscalationRequest, Recertifier
from openadapt.designer.escalate import DesignerEscalator
from openadapt.designer.generate import GenerateRequest, generate
from openadapt.envpkg.loader import resolve
from openadapt.llm.endpoint import LLMConfig

KEY = "sk-test-ESCALATE-77d1"


def llm_config(server: FakeOpenAI) -> LLMConfig:
    return LLMConfig(base_url=server.base_url, model="designer-1", api_key=KEY, backoff_s=0.01)


@pytest.fixture
def package(llm, tmp_path, validator):
    """A generated package with custom mechanics (the code-lock game) to escalate from."""
    llm.replies = [Scripted(design_reply())]
    result = generate(GenerateRequest(task="A code lock", output_root=tmp_path / "generated", name=NAME,
                                      llm=llm_config(llm), custom=True), validator=validator)
    assert result.ok, result.reason
    llm.requests.clear()
    return result.path


def request(tmp_path, package, target=2, **kw) -> EscalationRequest:
    return EscalationRequest(package=package, task="A code lock", current=target - 1, target=target,
                             solve_rate=0.93, dest=tmp_path / "run" / "envs" / f"v2-eci{target}",
                             rejected_root=tmp_path / "run" / "envs" / "rejected", **kw)


def test_a_failing_harder_tier_is_rejected_with_its_reports_kept(llm, tmp_path, validator, package):
    llm.replies = [Scripted(design_reply(bug=True))] * 2
    result = DesignerEscalator(llm_config(llm)).escalate(request(tmp_path, package, max_attempts=2), validator)
    assert not result.ok and "runtime.api_contract" in result.failing_checks
    assert not (tmp_path / "run" / "envs" / "v2-eci2").exists()  # nothing half-certified appears
    rejected = result.rejected_dir
    assert json.loads((rejected / "REJECTED.json").read_text())["target_eci"] == 2
    for attempt in (1, 2):
        report = json.loads((rejected / f"attempt-{attempt}" / "validation.json").read_text())
        assert report["verdict"] == "fail" and "runtime.api_contract" in [
            c["check_id"] for c in report["checks"] if c["status"] in ("fail", "error")]
    prompt = llm.requests[0]["messages"][-1]["content"]
    assert "Make ECI 2" in prompt and "0.93" in prompt  # the escalation prompt, with the trigger
    assert "runtime.api_contract" in llm.requests[1]["messages"][-1]["content"]  # then the repair prompt
    assert KEY not in "".join(p.read_text(errors="replace") for p in rejected.rglob("*") if p.is_file())


def test_a_passing_harder_tier_is_certified(llm, tmp_path, validator, package):
    llm.replies = [Scripted(design_reply())]
    result = DesignerEscalator(llm_config(llm)).escalate(request(tmp_path, package), validator)
    assert result.ok, result.reason
    dest = tmp_path / "run" / "envs" / "v2-eci2"
    report = json.loads((dest / "validation.json").read_text())
    assert report["verdict"] == "pass" and 2 in report["tiers"]
    assert resolve(str(dest / "package")).manifest.openadapt.eci_tiers == [1, 2, 3, 4, 5]
    assert "Make ECI 2" in llm.requests[0]["messages"][-1]["content"]
    provenance = json.loads((dest / "provenance.json").read_text())
    assert "escalation: ECI 1 -> 2" in provenance["task"] and provenance["validation"]["verdict"] == "pass"


def test_a_tier_the_package_does_not_have_is_refused_without_a_rewrite(tmp_path, validator, guess_copy):
    result = Recertifier().escalate(request(tmp_path, guess_copy, target=3), validator)  # guess_env: ECI 1-2
    assert not result.ok and "only an LLM designer can write a new tier" in result.reason
    assert (result.rejected_dir / "REJECTED.json").exists()


def test_a_family_package_is_recertified_even_with_an_llm(llm, tmp_path, validator):
    seed = resolve("seed:incident_triage").root
    result = DesignerEscalator(llm_config(llm)).escalate(request(tmp_path, seed, target=3), validator)
    assert not llm.requests  # the family engine already has every tier: nothing to rewrite
    assert result.ok, result.reason
    report = json.loads((tmp_path / "run" / "envs" / "v2-eci3" / "validation.json").read_text())
    assert {1, 2, 3} <= set(report["tiers"])
    checks = {c["check_id"]: c["status"] for c in report["checks"]}
    assert checks["semantic.tier_separation"] == "pass" and checks["semantic.oracle_max"] == "pass"
