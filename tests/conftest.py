import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from openadapt.envpkg.loader import SEEDS_DIR, load  # noqa: E402


@pytest.fixture(scope="module")
def validator():
    """A warm bwrap validator shared by a module's tests (6 episodes per check: quick)."""
    from openadapt.validator import Validator

    with Validator("bwrap", episodes=6) as v:
        yield v


@pytest.fixture
def llm():
    """A real chat-completions HTTP server on loopback, replaying the replies a test scripts."""
    from fake_openai import FakeOpenAI

    server = FakeOpenAI()
    yield server
    server.close()


@pytest.fixture(scope="session")
def triage():
    """The incident-triage seed package, loaded once."""
    return load("seed:incident_triage")


@pytest.fixture
def triage_copy(tmp_path) -> Path:
    """A writable copy of the incident-triage package, for manifest-breaking tests."""
    dest = tmp_path / "incident_triage"
    shutil.copytree(SEEDS_DIR / "incident_triage", dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


GUESS = Path(__file__).parent / "fixtures" / "guess_env"


@pytest.fixture
def guess_copy(tmp_path) -> Path:
    """A writable copy of the guess_env fixture: a format-v1 package with its own (untrusted) mechanics code."""
    dest = tmp_path / "guess_env"
    shutil.copytree(GUESS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest
