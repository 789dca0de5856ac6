"""The manifests openadapt renders speak OpenEnv's RFC 008: OpenEnv's own validator (0.10, schema 2) accepts every
shipped package, with its runtime execution declared and its runtime plan rendered; a package a designer model
wrote pins that model and seed (`validation.task_distribution`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from openenv.validation.runner import run_validation
from openenv.validation.types import Level

from openadapt.envpkg.loader import SEEDS_DIR

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted([*REPO.glob("generated_envs/*/openenv.yaml"), *SEEDS_DIR.glob("*/openenv.yaml"),
                  REPO / "openadapt/designer/exemplar/code_lock/openenv.yaml"])


@pytest.mark.parametrize("manifest", SHIPPED, ids=lambda p: p.parent.name)
def test_openenv_accepts_every_shipped_package_under_schema_2(manifest):
    report = run_validation(manifest.parent, max_level=Level.STATIC)
    assert report.verdict.value == "pass", [(c.check_id, c.evidence) for c in report.results]
    assert report.report_schema_version == "2"  # OpenEnv read the manifest as schema 2: runtime execution declared
    plan = json.loads((manifest.parent / "validation" / "runtime.json").read_text())
    assert plan["plan_schema_version"] == "1" and plan["actions"]


def test_the_openenv_command_validates_a_package():
    done = subprocess.run([sys.executable, "-m", "openenv.cli", "validate",
                           str(REPO / "generated_envs/kubernetes_cluster"),
                           "--level", "static", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout)["verdict"] == "pass"
