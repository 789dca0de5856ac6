"""The examples committed under generated_envs/: one per family at least, each regenerated here from its own
provenance and compared file by file (provenance's timings aside), so the committed files are what openadapt
produces today. Only tracked packages count: what a user generated locally is not a test."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from openadapt.designer.generate import GenerateRequest, generate
from openadapt.designer.provenance import PROVENANCE_FILE, Provenance, stable
from openadapt.families import family_names

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "generated_envs"


@pytest.fixture(scope="module")
def validator():
    """The CLI's validator (20 episodes per check): tier separation measured on 6 episodes is noise."""
    from openadapt.validator import Validator

    with Validator("bwrap") as v:
        yield v


def committed() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "generated_envs/*/provenance.json"], cwd=REPO, text=True,
                            capture_output=True, check=True).stdout.split()
    return sorted(Path(p).parent.name for p in listed)


def files_of(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def test_every_family_has_a_committed_example():
    families = {Provenance.read(EXAMPLES / name).designer.family.split("@")[0] for name in committed()
                if Provenance.read(EXAMPLES / name).designer.family}
    assert set(family_names()) <= families, f"families without an example in generated_envs/: " \
                                            f"{sorted(set(family_names()) - families)}"


@pytest.mark.parametrize("name", committed())
def test_committed_example_regenerates_from_its_provenance(name, validator, tmp_path):
    provenance = Provenance.read(EXAMPLES / name)
    designer = provenance.designer
    if designer.backend != "example":
        pytest.skip(f"{name} was designed by {designer.backend}:{designer.model}; regenerating it needs that model")
    ref = f"{designer.family.split('@')[0]}:{designer.example}"
    result = generate(GenerateRequest(task=provenance.task, example=ref, name=name, output_root=tmp_path),
                      validator=validator)
    assert result.ok, result.reason
    fresh, expected = files_of(result.path), files_of(EXAMPLES / name)
    assert sorted(fresh) == sorted(expected)
    for path, text in expected.items():
        if path == PROVENANCE_FILE:
            assert stable(json.loads(fresh[path])) == stable(json.loads(text))
        else:
            assert fresh[path] == text, f"{name}/{path} differs from what openadapt renders now"


@pytest.mark.parametrize("name", committed())
def test_committed_example_is_mostly_its_domain(name):
    """What a reviewer reads is the domain: the rest is the same rendered boilerplate in every package."""
    files = files_of(EXAMPLES / name)
    lines = {path: text.count("\n") for path, text in files.items()}
    content = sum(lines.values()) - lines.get(PROVENANCE_FILE, 0)
    assert lines.get("domain.yaml", 0) >= 0.5 * content, lines
    assert not [p for p in files if p.endswith(".py") and p not in ("__init__.py", "client.py", "server/__init__.py",
                                                                     "server/app.py")], sorted(files)
