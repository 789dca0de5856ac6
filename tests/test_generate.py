"""`generate` without a model: a family example labelled as such, or a plain refusal; never a renamed seed."""

from __future__ import annotations

import json

import pytest

from openadapt.designer.generate import NO_DESIGNER, GenerateRequest, generate
from openadapt.errors import UsageError


def test_without_a_designer_nothing_is_made_and_the_message_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENADAPT_MODELS_DIR", str(tmp_path / "no-models"))  # as on a machine without the model
    monkeypatch.delenv("OPENADAPT_BASE_URL", raising=False)
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    with pytest.raises(UsageError) as info:
        generate(GenerateRequest(task="Train an agent to diagnose failing irrigation pumps", output_root=tmp_path))
    assert str(info.value) == NO_DESIGNER and "--example" in NO_DESIGNER
    assert not list(tmp_path.iterdir())


def test_example_is_published_labelled_as_the_family_example(tmp_path, validator):
    result = generate(GenerateRequest(example="diagnosis:kubernetes_cluster", output_root=tmp_path),
                      validator=validator)
    assert result.ok and result.path == tmp_path / "kubernetes_cluster"
    readme = (result.path / "README.md").read_text()
    assert "example domain" in readme and "Verdict **pass**" in readme
    provenance = json.loads((result.path / "provenance.json").read_text())
    assert provenance["designer"] == {**provenance["designer"], "backend": "example", "family": "diagnosis@1",
                                      "example": "kubernetes_cluster"}
    domain = (result.path / "domain.yaml").read_text()
    assert "family's own example (not designed for a task)" in domain and "kubectl_logs" in domain


@pytest.mark.parametrize(("ref", "message"), [
    ("diagnosis", "use FAMILY:EXAMPLE"),
    ("telepathy:x", "unknown family 'telepathy'"),
    ("diagnosis:nope", "has no example 'nope'; its examples: .*kubernetes_cluster"),
])
def test_bad_example_reference_is_refused_before_anything_is_written(ref, message, tmp_path):
    with pytest.raises(UsageError, match=message):
        generate(GenerateRequest(example=ref, output_root=tmp_path))
    assert not list(tmp_path.iterdir())


def test_existing_output_needs_force(tmp_path, validator):
    first = generate(GenerateRequest(example="diagnosis:kubernetes_cluster", output_root=tmp_path),
                     validator=validator)
    marker = first.path / "domain.yaml"
    marker.write_text(marker.read_text() + "# a reviewer's note\n")
    with pytest.raises(UsageError, match="already exists: pass --force"):
        generate(GenerateRequest(example="diagnosis:kubernetes_cluster", output_root=tmp_path), validator=validator)
    assert marker.read_text().endswith("# a reviewer's note\n")
    again = generate(GenerateRequest(example="diagnosis:kubernetes_cluster", output_root=tmp_path, force=True),
                     validator=validator)
    assert again.ok and not [p for p in tmp_path.iterdir() if ".replaced-" in p.name]
    assert not marker.read_text().endswith("# a reviewer's note\n")


def test_output_that_is_a_file_is_a_usage_error(tmp_path):
    (tmp_path / "kubernetes_cluster").write_text("not a package")
    with pytest.raises(UsageError, match="not a package directory"):
        generate(GenerateRequest(example="diagnosis:kubernetes_cluster", output_root=tmp_path, force=True))


@pytest.mark.parametrize("task", ["", "   \n\t"])
def test_empty_prompt_is_refused(task, tmp_path):
    with pytest.raises(UsageError, match="empty"):
        generate(GenerateRequest(task=task, output_root=tmp_path))
    assert not tmp_path.joinpath(".staging").exists()


def test_overlong_prompt_is_refused(tmp_path):
    with pytest.raises(UsageError, match="at most 4000"):
        generate(GenerateRequest(task="pumps " * 1000, output_root=tmp_path))


def test_max_tokens_bounds_the_endpoints_replies():
    request = GenerateRequest.from_options(base_url="http://127.0.0.1:9/v1", model="m", max_tokens=3000,
                                           task="Diagnose failing pumps")
    assert request.llm.max_tokens == 3000
    assert GenerateRequest.from_options(base_url="http://127.0.0.1:9/v1", model="m",
                                        task="Diagnose failing pumps").llm.max_tokens == 8192
