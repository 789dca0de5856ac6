"""Run hygiene: a resume keeps the run's recorded settings, a kill -9 during training loses at most `save_steps`
steps and resumes to the end with every step once, summary.json says how far a killed run got, and progress is
plain lines when the output is not a terminal."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")

from test_training import SMALL, make_config  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from openadapt.training.config import TrainConfig, resumed_config  # noqa: E402
from openadapt.training.errors import TrainingError  # noqa: E402
from openadapt.training.progress import StepProgress, WarmupProgress, duration  # noqa: E402
from openadapt.training.rundir import RunDir  # noqa: E402
from openadapt.training.solver import Solver  # noqa: E402


def stored(path: Path, **overrides) -> TrainConfig:
    config = make_config(path, **overrides)
    return TrainConfig.model_validate_json(config.model_dump_json())  # as config.json gives it back


# ---- resume keeps settings ------------------------------------------------------------------------------
def test_resume_keeps_every_recorded_setting_the_request_did_not_give(tmp_path):
    run = stored(tmp_path, max_turns=1, warmup_steps=5, eval_episodes=5, lr=3e-4, steps=30)
    asked = TrainConfig(package="seed:incident_triage", output=tmp_path, steps=60, resume=True)
    merged, notes = resumed_config(run, asked)
    assert (merged.max_turns, merged.warmup_steps, merged.eval_episodes, merged.lr) == (1, 5, 5, 3e-4)
    assert merged.steps == 60 and merged.resume and merged.tiny_size == SMALL
    assert notes == ["resume changes steps from 30 to 60"]


def test_resume_takes_a_setting_given_again_and_refuses_one_the_checkpoint_depends_on(tmp_path):
    run = stored(tmp_path, max_turns=1, warmup_steps=5)
    merged, notes = resumed_config(run, TrainConfig(package="seed:incident_triage", output=tmp_path, steps=2,
                                                    max_turns=3, resume=True))
    assert merged.max_turns == 3 and "resume changes max_turns from 1 to 3" in notes
    with pytest.raises(TrainingError, match="warmup_steps=5; a resume cannot change it"):
        resumed_config(run, TrainConfig(package="seed:incident_triage", output=tmp_path, warmup_steps=400,
                                        resume=True))


def test_a_resumed_solver_trains_with_the_recorded_settings(tmp_path):
    path = tmp_path / "run"
    with Solver.create(make_config(path, steps=2, max_turns=1, warmup_steps=3, eval_episodes=0,
                                   save_steps=1)) as solver:
        solver.train()
    # a plain `--resume --steps 3`: every other setting left to its default (max_turns 2 at ECI 1, warm-up 400...)
    asked = TrainConfig(package="seed:incident_triage", output=path, steps=3, resume=True)
    final_seen: list[bool] = []

    class SeesFinal(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            final_seen.append((path / "final" / "config.json").exists())

    assert (path / "final" / "config.json").exists()
    with Solver.create(asked, callbacks=[SeesFinal()]) as solver:
        assert solver.config.max_turns == 1 and solver.config.warmup_steps == 3
        assert solver.config.tiny_size == SMALL and solver.config.eval_episodes == 0
        summary = solver.train()
    assert summary.global_step == 3 and summary.resumed_from_step == 2
    # the previous final model is gone while the resumed segment trains (a kill then leaves only newer
    # checkpoints for `eval --policy model:RUN`), and the segment writes its own at the end
    assert final_seen == [False] and (path / "final" / "config.json").exists()
    assert "resume changes steps from 2 to 3" in summary.notes
    recorded = json.loads((path / "config.json").read_text())
    assert recorded["max_turns"] == 1 and recorded["warmup_steps"] == 3 and recorded["steps"] == 3


# ---- kill -9 during training ----------------------------------------------------------------------------
TRAIN = textwrap.dedent("""
    import sys
    from openadapt.training.config import TrainConfig
    from openadapt.training.solver import Solver
    from openadapt.training.tiny import TinySize
    small = TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=1)
    config = TrainConfig(package="seed:incident_triage", output=sys.argv[1], steps=int(sys.argv[2]),
                         num_generations=2, prompts_per_step=2, max_completion_length=24, warmup_steps=2,
                         vocab_seeds=3, eval_episodes=0, save_steps=int(sys.argv[3]), tiny_size=small,
                         wandb="disabled", resume=sys.argv[4] == "resume")
    with Solver.create(config) as solver:
        solver.train()
""")


def train_process(folder: Path, steps: int, save_steps: int, resume: bool) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen([sys.executable, "-c", TRAIN, str(folder), str(steps), str(save_steps),
                             "resume" if resume else "new"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_kill_9_during_training_loses_at_most_save_steps_steps_and_resumes(tmp_path):
    rng = random.Random(int(os.environ.get("OPENADAPT_KILL_SEED", "20261201")))
    steps, save_steps = 14, 3
    folder = tmp_path / "run"
    run = RunDir(folder)
    victim = train_process(folder, steps, save_steps, resume=False)
    deadline = time.monotonic() + 600
    target = rng.randint(save_steps + 1, steps - 2)
    while len(run.metrics()) < target:  # kill it mid-run, at a random step
        assert victim.poll() is None, victim.stderr.read()[-2000:]
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 1.0))
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    trained = max(r["step"] for r in run.metrics())
    kept = run.checkpoint_steps()[-1]
    assert trained - kept <= save_steps, f"{trained} steps trained, the last checkpoint is {kept}"
    assert run.status() == "killed"
    summary = run.summary()
    assert summary["stopped"] == "running" and summary["global_step"] == kept  # how far it got
    assert summary["checkpoint"].endswith(f"checkpoint-{kept}")

    resumed = train_process(folder, steps, save_steps, resume=True)
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    assert [r["step"] for r in run.metrics()] == list(range(1, steps + 1))  # every step once
    assert run.status() == "completed" and run.summary()["resumed_from_step"] == kept


def test_status_says_running_while_a_process_holds_the_run(tmp_path):
    run = RunDir(tmp_path / "run")
    assert run.status() is None
    run.lock()
    try:
        assert RunDir(tmp_path / "run").status() == "running"
    finally:
        run.unlock()


# ---- plain progress -------------------------------------------------------------------------------------
def test_progress_is_one_plain_line_per_step_with_an_eta():
    buffer = io.StringIO()
    assert not buffer.isatty()
    progress = StepProgress(10, write=lambda line: buffer.write(line + "\n"))
    for step in range(1, 4):
        progress({"step": step, "reward_mean": 0.25 * step, "solve_rate": 0.5, "turns_mean": 1.5,
                  "seconds_per_step": 2.0})
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "step 1/10  reward +0.250  solved 0.50  turns 1.5  2.00 s/step  ETA 0m18s"
    assert lines[2].endswith("ETA 0m14s") and len(lines) == 3
    assert "\x1b" not in buffer.getvalue() and "\r" not in buffer.getvalue()  # no bar, no colour
    warm: list[str] = []
    WarmupProgress(120, write=warm.append, every=50)(50, 1.23456)
    assert warm == ["format warm-up 50/120  loss 1.235"]
    assert duration(3725) == "1h02m" and duration(59.6) == "1m00s"


def test_a_training_run_prints_progress_lines_to_a_pipe(tmp_path):
    script = textwrap.dedent("""
        import sys
        from openadapt.training.progress import StepProgress
        from openadapt.training.solver import Solver
        sys.path.insert(0, sys.argv[2])
        from test_training import make_config
        with Solver.create(make_config(sys.argv[1], steps=2)) as solver:
            solver.metrics.listeners.append(StepProgress(2))
            solver.train()
    """)
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run"), str(Path(__file__).parent)],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in lines] == ["1/2", "2/2"] and lines[-1].endswith("ETA done")
    noise = [line for line in result.stderr.splitlines() if not line.startswith("step ") and line.strip()]
    assert not [line for line in noise if "Warning" in line or "it/s]" in line], noise
