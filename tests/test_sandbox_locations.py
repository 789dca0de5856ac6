"""A checkout works wherever it lives: the sandbox sees openadapt's own code at the path the host imported it
from (under /tmp, which the sandbox replaces with its own tmpfs; under /var/tmp; in a path with a space; under a
home reached through a symlink), and its interpreters run with the hash seed the report names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import openadapt

ROOT = Path(openadapt.__file__).resolve().parents[1]
EXAMPLE = ROOT / "generated_envs" / "kubernetes_cluster"


def checkout_at(folder: Path) -> Path:
    """openadapt's code copied to `folder` (as a clone there would hold it), and a package beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "openadapt", folder / "openadapt", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(EXAMPLE, folder / "generated_envs" / EXAMPLE.name)
    return folder


def validate_from(checkout: Path, home: Path | None = None) -> dict:
    """`openadapt validate` run by the host with openadapt imported from `checkout`."""
    env = {**os.environ, "PYTHONPATH": str(checkout), **({"HOME": str(home)} if home else {})}
    done = subprocess.run([sys.executable, "-s", "-m", "openadapt.cli", "validate",
                           f"generated_envs/{EXAMPLE.name}", "--eci", "1,2", "--json"],
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    assert done.returncode == 0, (report["verdict"], [c["evidence"] for c in report["checks"]
                                                      if c["status"] != "pass"], done.stderr[-2000:])
    return report


@pytest.fixture
def var_tmp():
    folder = Path(tempfile.mkdtemp(prefix="openadapt-test-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("where", ["tmp", "var_tmp", "space", "symlinked_home"])
def test_a_checkout_validates_wherever_it_lives(where, tmp_path, var_tmp):
    home = None
    if where == "tmp":
        assert str(tmp_path).startswith("/tmp/")  # the sandbox's own /tmp hides the host's
        checkout = checkout_at(tmp_path / "clone")
    elif where == "var_tmp":
        checkout = checkout_at(var_tmp / "clone")
    elif where == "space":
        checkout = checkout_at(tmp_path / "my projects" / "open adapt")
    else:
        (tmp_path / "disk" / "alice").mkdir(parents=True)
        (tmp_path / "home").symlink_to(tmp_path / "disk")
        home = tmp_path / "home" / "alice"
        checkout = checkout_at(home / "src" / "openadapt")
    report = validate_from(checkout, home)
    assert report["verdict"] == "pass" and report["sandbox"]["backend"] == "bwrap" and report["sandbox"]["isolated"]
    hash_check = next(c for c in report["checks"] if c["check_id"] == "semantic.verifier_determinism")
    assert hash_check["status"] == "pass"  # the twin interpreter found openadapt there too


def test_the_worker_imports_the_hosts_openadapt_with_the_hash_seed_it_names(tmp_path):
    from openadapt.sandbox.base import HASH_SEED
    from openadapt.validator import Validator

    with Validator("bwrap") as validator:
        hello = validator.worker_hello()
    assert hello["openadapt"] == str(Path(openadapt.__file__).absolute().parent)
    expected = subprocess.run([sys.executable, "-c", "print(hash('openadapt'))"], capture_output=True, text=True,
                              env={"PYTHONHASHSEED": HASH_SEED}, check=True).stdout.strip()
    assert hello["hash_probe"] == int(expected)  # PYTHONHASHSEED is in effect, not dropped by -I
