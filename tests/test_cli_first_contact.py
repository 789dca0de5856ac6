"""A fresh clone, as a new user gets it: the README's main command publishes a package next to the committed
examples without touching a tracked file, and a package the user generates adds no test to the suite (issue 13:
items 1 and 9). The designer here is a scripted model behind a real chat-completions endpoint on loopback (the
embedded model takes minutes on a CPU); everything else is the command's own path: the CLI, the designer loop,
the sandboxed validator, publishing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_designer_family import ScriptedModel
from typer.testing import CliRunner

from openadapt.cli import app
from openadapt.designer.naming import package_name
from openadapt.families import get_family

REPO = Path(__file__).resolve().parents[1]
WIND_FIRST = ["wt-01", "pitch-01", "converter-01", "feeder-a", "scada-server", "fibre-ring"]  # a chain 4 deep
runner = CliRunner()


def readme_main_task(readme: Path) -> str:
    """The task of the README's first `openadapt generate "..."` command."""
    match = re.search(r'openadapt generate "([^"]+)"', readme.read_text(encoding="utf-8"))
    assert match, "the README has no `openadapt generate \"TASK\"` command"
    return match.group(1)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    dest = tmp_path_factory.mktemp("fresh") / "openadapt"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(dest)], check=True, timeout=300)
    return dest


def test_the_main_command_names_a_package_no_committed_example_takes(clone):
    name = package_name(readme_main_task(clone / "README.md"))
    committed = {Path(p).parts[1] for p in git("ls-files", "generated_envs", cwd=clone).split()}
    assert committed, "the repository ships example packages"
    assert name not in committed


def test_the_main_command_publishes_on_a_fresh_clone_and_changes_no_tracked_file(clone, llm, monkeypatch):
    task = readme_main_task(clone / "README.md")
    # The scripted model writes the wind park (the pumps task's worked example is another world, so nothing it
    # writes is a copy), ordered so that any first components and faults it is asked for make a valid world.
    world = get_family("diagnosis").load_example("wind_park").model_dump(mode="json")
    world["components"].sort(key=lambda c: WIND_FIRST.index(c["name"]) if c["name"] in WIND_FIRST else 99)
    world["faults"].sort(key=lambda f: f["applies_to"] == ["transformer"])  # no transformer among the first
    llm.responder = ScriptedModel(world)
    monkeypatch.chdir(clone)
    monkeypatch.setenv("OPENADAPT_API_KEY", "sk-test-first-contact")
    result = runner.invoke(app, ["generate", task, "--base-url", llm.base_url, "--model", "designer-1",
                                 "--sandbox", "bwrap"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    name = package_name(task)
    assert (clone / "generated_envs" / name / "provenance.json").is_file()
    assert git("status", "--porcelain", cwd=clone).splitlines() == [f"?? generated_envs/{name}/"]
    again = runner.invoke(app, ["generate", task, "--base-url", llm.base_url, "--model", "designer-1"])
    assert again.exit_code == 2 and "already exists" in again.output  # the user's own package, never a tracked one


def test_a_package_the_user_generates_adds_no_test(clone):
    mine = clone / "generated_envs" / "my_own_package"
    shutil.copytree(clone / "generated_envs" / "kubernetes_cluster", mine)
    (mine / "domain.yaml").write_text("broken: [")  # even a broken one of the user's
    command = [sys.executable, "-m", "pytest", "-o", "addopts=", "--collect-only", "-q", "tests/test_env_contract.py"]
    done = subprocess.run(command, cwd=clone, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "package:kubernetes_cluster" in done.stdout and "my_own_package" not in done.stdout
