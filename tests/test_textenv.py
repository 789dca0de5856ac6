"""Text environments: in-process for trusted seeds, inside the sandbox for untrusted packages, and the two give
the same episodes."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from openadapt.sandbox.remote import RemoteEnvError
from openadapt.training.pool import TextEnvPool

FIXTURE = Path(__file__).parent / "fixtures" / "guess_env"
SCRIPT = ['{"guess": 50}', "no idea", '{"guess": 25}', '```json\n{"guess": 75}\n```', '{"guess": 12}']


def play(env, seed, eci):
    steps = [env.reset(seed, eci)]
    for completion in SCRIPT:
        if steps[-1].done:
            break
        steps.append(env.step(completion))
    return [s.model_dump() for s in steps]


def test_untrusted_package_runs_in_the_sandbox_and_matches_in_process():
    before = set(sys.modules)
    with TextEnvPool(str(FIXTURE), 2) as pool:
        assert pool.isolated and not pool.in_process
        remote = [play(pool.envs[i % 2], seed, 1 + seed % 2) for i, seed in enumerate(range(6))]
        assert "Reply with one JSON object" in pool.envs[0].system_prompt()
    assert not any(name.startswith("openadapt_pkg_guess_env") for name in set(sys.modules) - before)  # not here
    with TextEnvPool(str(FIXTURE), 1, trust=True) as local:
        assert local.in_process
        assert remote == [play(local.envs[0], seed, 1 + seed % 2) for seed in range(6)]
    malformed = remote[0][2]
    assert malformed["parse_error"] and malformed["reward"] == -0.1


def test_seed_packages_run_in_process():
    with TextEnvPool("seed:incident_triage", 1) as pool:
        assert pool.in_process
        first = pool.envs[0].reset(7, 3)
        assert first.metadata["eci"] == 3 and "ALERT" in first.prompt


def test_package_that_cannot_load_is_a_clear_error(tmp_path):
    root = tmp_path / "guess_env"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "models.py").write_text("raise RuntimeError('broken models')\n")
    with pytest.raises(RemoteEnvError, match="did not load in the sandbox.*broken models"):
        TextEnvPool(str(root), 1)
