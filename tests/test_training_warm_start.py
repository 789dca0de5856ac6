"""The warm start from demonstrations: solved episodes of a policy that reads only its observations, played
through the text protocol (in this process for a seed, inside the sandbox for a generated package), imitated by
the tiny model before GRPO. The oracle is never a source."""

from __future__ import annotations

import json
import os

os.environ.setdefault("WANDB_MODE", "disabled")

import pytest  # noqa: E402

from openadapt.envpkg.examples import write_example_package  # noqa: E402
from openadapt.sandbox.remote import RemoteEnvError, SandboxedTextEnvs  # noqa: E402
from openadapt.training.config import TrainConfig  # noqa: E402
from openadapt.training.demonstrations import collect, load_file, play  # noqa: E402
from openadapt.training.envinfo import TrainingError  # noqa: E402
from openadapt.training.pool import TextEnvPool  # noqa: E402
from openadapt.training.solver import Solver  # noqa: E402


def test_the_oracle_is_never_a_demonstration_source():
    with TextEnvPool("seed:incident_triage", 1) as pool:
        env = pool.envs[0]
        env.reset(seed=1, eci=1)
        with pytest.raises(ValueError, match="reads hidden state"):
            env.suggest("oracle")
        with pytest.raises(TrainingError, match="'oracle' is not one"):
            collect(env, [1], range(10), 2, policy="oracle")


def test_demonstrations_are_solved_heuristic_episodes_whose_completions_replay_to_a_solve():
    with TextEnvPool("seed:enterprise_workflow", 1) as pool:
        env = pool.envs[0]
        demos, source = collect(env, [1, 2], range(600_000, 600_100), 5)
        assert source.policy == "heuristic" and source.per_tier == {1: 5, 2: 5} and source.solved == 10
        assert source.played >= 10 and all(d.solved for d in demos)
        for demo in demos[:3]:  # what was recorded is what the agent saw and sent: replayed, it solves again
            step = env.reset(seed=demo.seed, eci=demo.eci)
            for turn in demo.turns:
                assert step.prompt == turn.prompt
                step = env.step(turn.completion)
                assert step.parse_error is None
            assert step.done and step.metadata["solved"]


def test_a_generated_package_demonstrates_from_inside_the_sandbox(tmp_path):
    root = write_example_package("diagnosis", "kubernetes_cluster", tmp_path, "pods")
    with SandboxedTextEnvs(root, 1) as remote:
        env = remote.envs[0]
        demo = play(env, "heuristic", seed=600_000, eci=1)
        assert demo.turns and json.loads(demo.turns[-1].completion)
        env.reset(seed=1, eci=1)
        with pytest.raises(RemoteEnvError, match="reads hidden state"):
            env.suggest("oracle")


def test_a_users_demonstrations_file_keeps_the_solved_episodes_and_names_a_bad_line(tmp_path):
    good = {"eci": 1, "solved": True, "turns": [{"prompt": "the alert", "completion": "{\"tool\": \"x\"}"}]}
    path = tmp_path / "demos.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [good, {**good, "solved": False}, good]) + "\n")
    demos, source = load_file(path)
    assert len(demos) == 2 and source.policy == "file" and source.played == 3 and source.per_tier == {1: 2}
    path.write_text(json.dumps(good) + "\n" + json.dumps({"eci": 1, "turns": []}) + "\n")
    with pytest.raises(TrainingError, match="line 2: not an episode"):
        load_file(path)
    path.write_text(json.dumps({**good, "solved": False}) + "\n")
    with pytest.raises(TrainingError, match="none of its 1 episodes is solved"):
        load_file(path)


def test_the_warm_start_is_refused_where_it_cannot_run(tmp_path):
    with pytest.raises(ValueError, match="needs context 'last'"):  # a real model's context is 'full' by default
        TrainConfig(package="seed:incident_triage", output=tmp_path, model="some/model", warm_start="heuristic")
    with pytest.raises(ValueError, match="needs context 'last'"):
        TrainConfig(package="seed:incident_triage", output=tmp_path, context="full", warm_start="heuristic")
    assert TrainConfig(package="seed:incident_triage", output=tmp_path).warm_start == "off"


def test_a_curriculum_warm_starts_where_it_can_and_auto_never_fails_a_run(tmp_path):
    from types import SimpleNamespace

    from openadapt.curriculum.config import CurriculumConfig
    from openadapt.training.loading import demonstrations_for

    curriculum = CurriculumConfig(source="seed:incident_triage", output=tmp_path / "c")
    assert curriculum.warm_start == "auto" and curriculum.train_config("seed:incident_triage", 1, False).warm_start \
        == "auto"
    # auto asks nothing of a model whose warm start is not built: resolved to off, not refused
    assert TrainConfig(package="seed:incident_triage", output=tmp_path, model="some/model",
                       warm_start="auto").warm_start == "off"
    no_heuristic = SimpleNamespace(family=None, mechanics=SimpleNamespace(policies=SimpleNamespace(heuristic=None)))
    auto = TrainConfig(package="seed:incident_triage", output=tmp_path, warm_start="auto")
    assert demonstrations_for(auto, None, no_heuristic) == ([], None)  # starts without one
    asked = TrainConfig(package="seed:incident_triage", output=tmp_path, warm_start="heuristic")
    with pytest.raises(TrainingError, match="ships no heuristic policy"):
        demonstrations_for(asked, None, no_heuristic)


def test_a_warm_started_run_records_its_source_and_solves_before_any_grpo_step(tmp_path):
    config = TrainConfig(package="seed:incident_triage", output=tmp_path / "run", steps=1, warm_start="heuristic",
                         warm_start_episodes=128, warm_start_steps=500, warmup_steps=0, vocab_seeds=20,
                         eval_episodes=20, num_generations=2, prompts_per_step=2, wandb="disabled")
    with Solver.create(config) as solver:
        summary = solver.train()
    recorded = json.loads((tmp_path / "run" / "summary.json").read_text())["warm_start"]
    assert recorded["source"]["policy"] == "heuristic" and recorded["source"]["per_tier"] == {"1": 128}
    assert recorded["turns"] == 128 and recorded["final_loss"] < recorded["first_loss"] / 10
    # 'before' is after the warm start: the imitated model already solves held-out episodes
    assert summary.before.tier(1).solve_rate >= 0.2


WARM = """
import sys
from openadapt.training.config import TrainConfig
from openadapt.training.solver import Solver
config = TrainConfig(package="seed:incident_triage", output=sys.argv[1], steps=2, warm_start="heuristic",
                     warm_start_episodes=32, warm_start_steps=int(sys.argv[2]), warmup_steps=0, vocab_seeds=3,
                     eval_episodes=0, num_generations=2, prompts_per_step=2, save_steps=1, wandb="disabled",
                     max_turns=1, resume=sys.argv[3] == "resume")
with Solver.create(config, warm_start_progress=lambda n, loss: print(f"warm {n}", flush=True)) as solver:
    solver.train()
"""


def test_a_run_killed_during_its_warm_start_starts_again_with_the_same_command(tmp_path):
    import signal
    import subprocess
    import sys

    from openadapt.training.rundir import RunDir

    folder = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    victim = subprocess.Popen([sys.executable, "-c", WARM, str(folder), "80", "new"], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    for line in victim.stdout:  # mid warm start: its steps are being taken
        if line.startswith("warm 20"):
            break
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    assert not (folder / "init" / "config.json").exists()  # killed before the model was saved
    resumed = subprocess.run([sys.executable, "-c", WARM, str(folder), "80", "resume"], env=env, text=True,
                             capture_output=True, timeout=600)
    assert resumed.returncode == 1 and "starts again with the same command, without --resume" in resumed.stderr
    again = subprocess.run([sys.executable, "-c", WARM, str(folder), "80", "new"], env=env, text=True,
                           capture_output=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    summary = RunDir(folder).summary()
    assert summary["global_step"] == 2 and summary["warm_start"]["steps"] == 80
