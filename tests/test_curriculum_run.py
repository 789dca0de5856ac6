"""Real curriculum runs through the CLI (tiny model, seed:incident_triage): escalation through the validator
inside a run, the report, and runs killed with SIGKILL at random moments that --resume must finish with every
step done once and a state that matches its last checkpoint."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openadapt.curriculum.state import CHECKPOINT_STATE, CurriculumState
from openadapt.runfiles import read_jsonl

STEPS = 6
# threshold 0 turns the rule into a fixed schedule (one tier per 8 episodes = every 2 steps here), so a short run
# escalates through the designer and validator whatever the tiny model has learnt.
FAST = ["--model", "tiny", "--num-generations", "2", "--prompts-per-step", "2", "--warmup-steps", "4",
        "--no-warm-start", "--window", "8", "--threshold", "0", "--replay-share", "0.5", "--eval-episodes", "0",
        "--save-steps", "1", "--wandb", "disabled"]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "openadapt.cli", "curriculum", *args]


def env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("OPENADAPT_", "OPENAI_", "WANDB_"))}
    return {**keep, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cli(*args), env=env(), capture_output=True, text=True, timeout=timeout)


def check_consistent(folder: Path, steps: int) -> CurriculumState:
    state = CurriculumState.load(folder / "state.json")
    assert state.global_step == steps and state.status == "max_steps", state.reason
    metric_steps = [r["step"] for r in read_jsonl(folder / "train" / "metrics.jsonl")]
    assert metric_steps == list(range(1, steps + 1))  # every step once: none lost, none doubled
    assert [r["step"] for r in read_jsonl(folder / "tiers.jsonl")] == list(range(1, steps + 1))
    last = folder / "train" / "checkpoints" / f"checkpoint-{steps}"
    saved = CurriculumState.load(last / CHECKPOINT_STATE)
    assert (saved.global_step, saved.tier, saved.versions, saved.windows) == (
        state.global_step, state.tier, state.versions, state.windows)
    for version in state.versions:
        report = json.loads((folder / version.folder / "validation.json").read_text())
        assert report["verdict"] == "pass" and (folder / version.folder / "package" / "openenv.yaml").exists()
    tiers = [v.eci for v in state.versions]
    assert tiers == sorted(tiers) and tiers[0] == 1
    return state


def test_a_run_escalates_through_the_validator_and_reports(tmp_path):
    folder = tmp_path / "run"
    result = run("seed:incident_triage", *FAST, "--max-steps", "4", "--output", str(folder))
    assert result.returncode == 0, result.stderr[-3000:]
    state = check_consistent(folder, 4)
    assert state.tier >= 2 and len(state.versions) == state.tier
    assert json.loads((folder / "curriculum.json").read_text())["warm_start"] == "off"  # --no-warm-start
    events = [e["event"] for e in read_jsonl(folder / "events.jsonl")]
    assert events[0] == "started" and events[-1] == "stopped"
    assert events.count("escalated") == state.tier - 1 and events.count("escalation_triggered") == state.tier - 1
    replayed = [r["counts"] for r in read_jsonl(folder / "tiers.jsonl") if r["tier"] >= 2]
    assert any("1" in counts for counts in replayed)  # earlier tiers are replayed after escalating

    report = subprocess.run([sys.executable, "-m", "openadapt.cli", "report", str(folder)], env=env(),
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    markdown = (folder / "report.md").read_text()
    assert "escalated" in markdown and "ECI 2" in markdown
    for plot in ("solve_rate_per_tier", "eci_timeline", "reward_components"):
        assert (folder / "plots" / f"{plot}.png").stat().st_size > 1000
    assert "<table>" in (folder / "report.html").read_text()


def wait_for_lock(folder: Path, pid: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        lock = folder / ".lock"
        if lock.exists() and lock.read_text().strip() == f"pid {pid}":
            return
        time.sleep(0.2)
    raise AssertionError("the run never took its directory")


def test_kill_9_at_random_points_then_resume(tmp_path):
    rng = random.Random(int(os.environ.get("OPENADAPT_KILL_SEED", "20261130")))
    for round_ in range(2):
        folder = tmp_path / f"run{round_}"
        victim = subprocess.Popen(cli("seed:incident_triage", *FAST, "--max-steps", str(STEPS), "--output",
                                      str(folder)), env=env(), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        started = time.monotonic()
        if round_ == 0:  # while it runs, nobody else may use the directory
            wait_for_lock(folder, victim.pid)
            second = run("--resume", str(folder), timeout=300)
            assert second.returncode == 1 and "in use" in second.stderr
        time.sleep(max(0.0, rng.uniform(3, 20) - (time.monotonic() - started)))
        os.killpg(victim.pid, signal.SIGKILL)  # the whole tree, like a power cut
        victim.wait()
        resumed = run("--resume", str(folder))
        if resumed.returncode != 0 and "not a curriculum run directory" in resumed.stderr:
            continue  # killed before it wrote anything: nothing to resume, nothing corrupted
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        check_consistent(folder, STEPS)


def test_resume_refuses_another_source_and_a_corrupted_state(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    config = {"source": "seed:daily_report", "output": str(folder)}
    (folder / "curriculum.json").write_text(json.dumps(config))
    other = run("seed:incident_triage", "--resume", str(folder), timeout=300)
    assert other.returncode == 2 and "holds a curriculum on 'seed:daily_report'" in other.stderr
    (folder / "state.json").write_text('{"run_id": "x", "sour')  # torn write, no checkpoint to fall back on
    corrupted = run("--resume", str(folder), timeout=300)
    assert corrupted.returncode == 1 and "corrupted" in corrupted.stderr
    assert (folder / "state.json").read_text() == '{"run_id": "x", "sour'  # evidence left as it was


def test_a_copied_run_directory_resumes_in_the_copy(tmp_path):
    # a copy resumed to try other settings wrote into the original (its recorded output) and overwrote it
    from openadapt.curriculum.config import resume_config

    first, copy = tmp_path / "first", tmp_path / "copy"
    for folder in (first, copy):
        folder.mkdir()
        (folder / "curriculum.json").write_text(json.dumps({"source": "seed:incident_triage", "output": str(first)}))
    assert resume_config(copy).output == copy and resume_config(first).output == first


@pytest.mark.parametrize("source", ["runs/does-not-exist", "seed:nope"])
def test_bad_sources_are_clear(tmp_path, source):
    result = run(source, "--output", str(tmp_path / "run"), timeout=300)
    assert result.returncode == 2 and ("no such package directory" in result.stderr or "unknown seed" in
                                       result.stderr)


def test_a_tier_the_designer_cannot_make_blocks_the_run_with_its_reports(tmp_path):
    """guess_env (an untrusted package, stepped in the sandbox) declares ECI 1-2 only: the offline designer
    certifies ECI 2, cannot make ECI 3, and the run stops as blocked instead of skipping the tier. A resume
    trains on the escalated version (a different package) and tries again."""
    fixture = Path(__file__).parent / "fixtures" / "guess_env"
    folder = tmp_path / "run"
    result = run(str(fixture), *FAST, "--window", "4", "--max-steps", "6", "--output", str(folder))
    assert result.returncode == 1, result.stderr[-3000:]
    state = CurriculumState.load(folder / "state.json")
    assert state.status == "blocked" and state.tier == 2 and state.rejected_escalations == 2
    assert state.versions[-1].ref == str((folder / "envs" / "v2-eci2" / "package").resolve())
    rejected = sorted((folder / "envs" / "rejected").iterdir())
    assert len(rejected) == 2 and all("not 3" in (r / "REJECTED.json").read_text() for r in rejected)
    again = run("--resume", str(folder), "--max-steps", "8")
    assert again.returncode == 1 and "rejected 2 time(s)" in again.stderr, again.stderr[-3000:]
    assert [e["event"] for e in read_jsonl(folder / "events.jsonl")].count("resumed") == 1
