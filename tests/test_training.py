"""The GRPO solver: real TRL runs with the tiny model, the reward wiring, held-out seeds, multi-turn masking,
resume, the curriculum hooks, and clear errors for bad input."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
from pathlib import Path

import pytest

pytest.importorskip("trl")

from transformers import TrainerCallback  # noqa: E402

from openadapt.envpkg.evaluation import EVAL_SEED_START  # noqa: E402
from openadapt.envpkg.loader import load  # noqa: E402
from openadapt.training.config import TrainConfig  # noqa: E402
from openadapt.training.envinfo import TrainingError  # noqa: E402
from openadapt.training.episodes import EpisodeOutcome, training_seed  # noqa: E402
from openadapt.training.pool import TextEnvPool  # noqa: E402
from openadapt.training.rollout import EpisodeSpec, run_episodes  # noqa: E402
from openadapt.training.rundir import RunDir  # noqa: E402
from openadapt.training.solver import Solver  # noqa: E402
from openadapt.training.tiny import TinySize  # noqa: E402

SMALL = TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1)
GUESS = Path(__file__).parent / "fixtures" / "guess_env"
REAL = dict(package=str(GUESS), steps=3, warmup_steps=30, warmup_lr=1e-2, num_generations=8, eval_episodes=2,
            max_completion_length=16, eci=[1])


def make_config(path: Path, **overrides) -> TrainConfig:
    base = dict(package="seed:incident_triage", output=path, steps=2, num_generations=4, prompts_per_step=2,
                max_completion_length=48, max_turns=1, warmup_steps=0, vocab_seeds=5, eval_episodes=0,
                save_steps=1, tiny_size=SMALL, wandb="disabled", validate_package=False, beta=0.0)
    base.update(overrides)
    return TrainConfig(**base)


def answer(seed: int, eci: int) -> tuple[str, str]:
    """(the solving diagnosis, a valid investigation) for a triage episode, from the privileged oracle view:
    scripted completions for the wiring tests, never training targets."""
    env = load("seed:incident_triage").make_env()
    env.reset(seed=seed, eci=eci)
    inc = env.oracle_view()
    diagnosis = json.dumps({"tool": "diagnose_incident", "component": inc.root, "fault": inc.fault.id,
                            "fix": inc.fix, "confidence": 0.9})
    return diagnosis, json.dumps({"tool": "query_metrics", "component": inc.root})


def scripted(tokenizer, replies: list[str], contexts: list | None = None, eos: bool = True):
    """A generator that answers each context with the next scripted reply (tokenized, EOS appended)."""
    queue = list(replies)

    def generate(batch):
        if contexts is not None:
            contexts.extend(batch)
        out = []
        for _ in batch:
            ids = list(tokenizer(queue.pop(0), add_special_tokens=False)["input_ids"])
            out.append(ids + [tokenizer.eos_token_id] if eos else ids)
        return out

    return generate


def replay(completion: str, seed: int, eci: int) -> float:
    pkg = load("seed:incident_triage")
    env = pkg.make_env()
    env.reset(seed=seed, eci=eci)
    return float(env.step(pkg.protocol.parse(completion).action).reward)


# ---- a real run -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """Three real GRPO steps on the guessing game (an untrusted package, stepped in the sandbox): the tiny model,
    after a short format warm-up, samples its own completions; a well-formed guess earns 0 and a malformed one
    -0.1, so the groups have reward variance to learn from."""
    path = tmp_path_factory.mktemp("real") / "run"
    outcomes: list[EpisodeOutcome] = []
    config = make_config(path, **REAL)
    with Solver.create(config, on_episode=outcomes.append) as solver:
        summary = solver.train()
    return path, summary, outcomes


def test_a_real_run_writes_coherent_metrics_and_changes_the_weights(real_run):
    from safetensors.torch import load_file

    path, summary, outcomes = real_run
    run = RunDir(path)
    rows = run.metrics()
    assert [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:
        assert row["episodes"] == 16 and row["tier_mix"] == {"1": 16}
        assert 0.0 <= row["solve_rate"] <= 1.0 and row["reward_std"] >= 0.0
        assert -1.0 <= row["reward_mean"] <= 1.0
        assert row["seconds_per_step"] > 0 and row["tokens_per_s"] > 0
        assert {"loss", "grad_norm", "lr", "entropy"} <= row.keys()
        assert "kl" not in row  # beta = 0
    # the rows agree with the episodes the curriculum hook heard about
    for row in rows:
        step = [o for o in outcomes if o.global_step == row["step"]]
        assert len(step) == 16
        assert row["reward_mean"] == pytest.approx(sum(o.episode_return for o in step) / 16, abs=1e-5)
        assert row["solve_rate"] == pytest.approx(sum(o.solved for o in step) / 16)
    assert any(r["reward_std"] > 0 for r in rows), "no reward variance: the run could not learn anything"
    init, final = load_file(path / "init" / "model.safetensors"), load_file(path / "final" / "model.safetensors")
    assert max(float((init[k] - final[k]).abs().max()) for k in init) > 1e-4
    assert summary.global_step == 3 and summary.stopped == "completed"
    assert summary.before is not None and summary.after is not None
    assert summary.before.seed_start == EVAL_SEED_START and summary.before.tiers[0].episodes == 2
    assert run.checkpoint_steps()[-1] == 3
    assert json.loads((path / "summary.json").read_text())["global_step"] == 3
    assert summary.warmup is not None and summary.warmup.steps == 30


def test_held_out_seeds_are_disjoint_from_training_seeds(real_run):
    _, summary, outcomes = real_run
    assert outcomes and all(o.seed < EVAL_SEED_START for o in outcomes)
    assert all(training_seed(s, i) < EVAL_SEED_START for s in range(5) for i in range(2000))
    assert summary.warmup.seeds[1] < EVAL_SEED_START  # the format warm-up's prompts too
    assert summary.after.seed_start == EVAL_SEED_START
    # a group's completions share a seed; groups differ
    by_group: dict[int, set[int]] = {}
    for o in outcomes:
        by_group.setdefault(o.group, set()).add(o.seed)
    assert all(len(seeds) == 1 for seeds in by_group.values()) and len(by_group) == 6


def test_report_renders_markdown_html_and_plots(real_run):
    from openadapt.training.report import render_report

    path, _, _ = real_run
    (path / "events.jsonl").write_text(json.dumps({"step": 2, "kind": "escalate", "eci": 2}) + "\n")
    try:
        md = render_report(path)
    finally:
        (path / "events.jsonl").unlink()
    text = md.read_text()
    assert "Held-out evaluation" in text and "![reward](plots/reward.png)" in text and "escalate" in text
    assert (path / "report.html").read_text().startswith("<!doctype html>")
    for png in ("reward.png", "solve_rate.png"):
        assert (path / "plots" / png).read_bytes()[:4] == b"\x89PNG"


def test_resume_continues_the_step_count(real_run, tmp_path):
    path, _, _ = real_run
    copy = tmp_path / "run"
    shutil.copytree(path, copy)
    # steps 2-3 as if the run had stopped after checkpoint 2 (its metrics went on to step 3)
    shutil.rmtree(copy / "checkpoints" / "checkpoint-3")
    with Solver.create(make_config(copy, **(REAL | {"steps": 5, "resume": True}))) as solver:
        summary = solver.train()
        assert solver.trainer.state.global_step == 5
    assert summary.resumed_from_step == 2 and summary.global_step == 5
    assert [r["step"] for r in RunDir(copy).metrics()] == [1, 2, 3, 4, 5]
    assert RunDir(copy).checkpoint_steps()[-1] == 5
    assert summary.before is not None  # carried over from the first segment


def test_a_local_model_directory_trains_a_lora_adapter(real_run, tmp_path):
    """The path a real model takes (transformers + peft LoRA, its own chat template, the system prompt in the
    conversation, gradient checkpointing), exercised on CPU with the tiny run's saved model as the 'local model'."""
    from openadapt.training.modelpolicy import ModelPolicy, evaluate_model

    path, _, _ = real_run
    config = make_config(tmp_path / "run", package=str(GUESS), model=str(path / "init"), steps=1,
                         num_generations=2, prompts_per_step=1, max_completion_length=16, lr=1e-3)
    assert config.system_prompt and config.gradient_checkpointing and config.lora is not None
    with Solver.create(config) as solver:
        assert solver.loaded.kind == "lora"
        summary = solver.train()
        assert type(solver.trainer.model).__name__.startswith("Peft")
    assert summary.global_step == 1 and summary.model_kind == "lora"
    assert (tmp_path / "run" / "final" / "adapter_config.json").exists()
    policy = ModelPolicy.from_run(tmp_path / "run")
    assert policy.system_prompt
    with TextEnvPool(str(GUESS), 1) as pool:
        report = evaluate_model(policy, pool, [1], 1)
    assert report.tiers[0].episodes == 1


def test_a_real_model_warm_starts_by_fine_tuning_a_lora_adapter_on_the_heuristics_turns(real_run, tmp_path):
    """A real model's warm start: TRL's SFTTrainer on the turns of the heuristic's solved episodes, on a new LoRA
    adapter, which GRPO then goes on training (the tiny run's saved model stands in as the 'local model')."""
    path, _, _ = real_run
    config = make_config(tmp_path / "run", package=str(GUESS), model=str(path / "init"), steps=1, num_generations=2,
                         prompts_per_step=1, max_completion_length=16, context="last", warm_start="heuristic",
                         warm_start_episodes=4, warm_start_steps=6, warm_start_lr=1e-3, eci=[1])
    with Solver.create(config) as solver:
        record = solver.loaded.warm_start
        assert record.source.policy == "heuristic" and record.source.per_tier == {1: 4}
        assert record.steps == 6 and record.turns >= 4 and record.final_loss < record.first_loss
        assert solver.loaded.peft_config is None  # the adapter is on the model already: GRPO trains that one
        trained = {n: p.detach().clone() for n, p in solver.model.named_parameters() if "lora_B" in n}
        assert trained and any(p.abs().sum() > 0 for p in trained.values())  # a new adapter's B starts at zero
        summary = solver.train()
        assert type(solver.trainer.model).__name__.startswith("Peft")
    assert summary.warm_start.source.policy == "heuristic"
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["warm_start"]["steps"] == 6
    assert (tmp_path / "run" / "final" / "adapter_config.json").exists()


# ---- the reward wiring ----------------------------------------------------------------------------------
def test_each_completion_gets_the_reward_of_its_own_episode(tmp_path):
    config = make_config(tmp_path / "run", steps=1)
    with Solver.create(config) as solver:
        _, specs = solver.rollout.specs(0, config.prompts_per_step)
        replies = []
        for spec in specs:
            diagnosis, investigation = answer(spec.seed, spec.eci)
            wrong = json.loads(diagnosis) | {"fault": "disk_full" if "disk" not in diagnosis else "memory_leak"}
            replies += [diagnosis, json.dumps(wrong), "I think the database is down", investigation]
        solver.rollout.generator_factory = lambda trainer: scripted(solver.loaded.tokenizer, replies)
        seen: dict = {}
        reward_func = solver.trainer.reward_funcs[0]

        def spy(**kwargs):
            rewards = reward_func(**kwargs)
            seen.update(kwargs, rewards=rewards)
            return rewards

        spy.__name__ = reward_func.__name__
        solver.trainer.reward_funcs[0] = spy
        solver.train()
    assert len(seen["rewards"]) == 8
    for i, completion in enumerate(seen["completions"]):  # TRL's own decoding of completion i
        assert seen["env_seed"][i] == specs[i // 4].seed and seen["eci"][i] == 1
        assert seen["rewards"][i] == pytest.approx(replay(completion, seen["env_seed"][i], 1), abs=2 ** -12)
    assert seen["solved"] == [True, False, False, False] * 2
    assert all(seen["rewards"][i] > 0.8 for i in (0, 4))
    assert all(seen["rewards"][i] == pytest.approx(-0.1, abs=2 ** -12) for i in (2, 6))  # malformed
    assert all(seen["rewards"][i] == 0.0 for i in (3, 7))  # an investigation earns 0 and does not end it
    row = RunDir(tmp_path / "run").metrics()[0]
    assert row["solve_rate"] == 0.25 and row["finished_rate"] == 0.5


# ---- multi-turn -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer():
    from openadapt.envpkg.loader import resolve
    from openadapt.training import tiny
    from openadapt.training.envinfo import action_schema, sample_env

    with TextEnvPool("seed:incident_triage", 1) as pool:
        env = pool.envs[0]
        schema = action_schema(resolve("seed:incident_triage"), env.system_prompt())
        sample = sample_env(env, schema, [1], range(5))
        vocab = tiny.build_vocabulary([env.system_prompt(), *tiny.schema_words(schema), *sample.completions],
                                      sample.prompts)
    return tiny.build_tokenizer(vocab)


@pytest.mark.parametrize("eos", [True, False])
def test_a_multi_turn_rollout_masks_the_environment_tokens(tokenizer, eos):
    seed = 17
    diagnosis, investigation = answer(seed, 1)
    contexts: list = []
    with TextEnvPool("seed:incident_triage", 1) as pool:
        (trace,) = run_episodes(pool.envs, [EpisodeSpec(seed=seed, eci=1)],
                                scripted(tokenizer, [investigation, diagnosis], contexts, eos=eos), tokenizer,
                                system_prompt=None, max_turns=3)
    assert [t.done for t in trace.turns] == [False, True] and trace.finished and trace.solved
    first = len(tokenizer(investigation, add_special_tokens=False)["input_ids"]) + eos
    second = len(tokenizer(diagnosis, add_special_tokens=False)["input_ids"]) + eos
    mask, ids = trace.env_mask, trace.completion_ids
    env_len = len(ids) - first - second
    assert mask == [1] * first + [0] * env_len + [1] * second
    assert sum(mask) == trace.generated_tokens
    env_text = tokenizer.decode(ids[first:first + env_len])
    # tiny reads an observation without its spaces
    assert "LASTACTION" in env_text and "query_metrics" in env_text and env_text.rstrip().endswith("<|assistant|>")
    assert env_text.lstrip().startswith("<|end|>") != eos  # a reply cut short gets its end-of-turn from the template
    # the second turn was generated from exactly the recorded tokens
    assert contexts[1] == trace.prompt_ids + ids[:first + env_len]
    assert trace.episode_return == pytest.approx(sum(t.reward for t in trace.turns))


def test_trl_trains_only_on_the_model_tokens_of_a_multi_turn_episode(tmp_path):
    config = make_config(tmp_path / "run", steps=1, max_turns=2, prompts_per_step=1, beta=0.05, context="full")
    with Solver.create(config) as solver:
        _, (spec,) = solver.rollout.specs(0, 1)
        diagnosis, investigation = answer(spec.seed, spec.eci)
        replies = [investigation] * 4 + [diagnosis] * 4
        solver.rollout.generator_factory = lambda trainer: scripted(solver.loaded.tokenizer, replies)
        solver.train()
        traces = solver.rollout.last_traces
    row = RunDir(tmp_path / "run").metrics()[0]
    assert all(len(t.turns) == 2 for t in traces) and row["solve_rate"] == 1.0
    assert "kl" in row  # beta > 0: the KL to the initial model is logged
    generated = sum(t.generated_tokens for t in traces) / 4
    assert row["completion_tokens_mean"] == pytest.approx(generated)  # TRL counted env_mask=1 tokens only
    assert generated < sum(len(t.completion_ids) for t in traces) / 4


# ---- the curriculum hooks -------------------------------------------------------------------------------
class Alternate:
    def __init__(self):
        self.calls = 0

    def next_tier(self, rng: random.Random) -> int:
        self.calls += 1
        return 1 if self.calls % 2 else 2


class Curriculum(TrainerCallback):
    """What the curriculum controller does with the hooks: watch steps, swap the package between steps, and
    write its own state into every checkpoint."""

    def __init__(self):
        self.solver = None
        self.steps, self.saved = [], []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)
        if state.global_step == 1:
            self.solver.use_package("seed:daily_report")

    def on_save(self, args, state, control, **kwargs):
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        (checkpoint / "curriculum_state.json").write_text(json.dumps({"step": state.global_step}))
        self.saved.append(state.global_step)


def test_tier_plan_callbacks_on_episode_use_package_and_evaluate(tmp_path):
    plan, curriculum, outcomes = Alternate(), Curriculum(), []
    config = make_config(tmp_path / "run", steps=2, eci=[1, 2], num_generations=2)
    with Solver.create(config, tier_plan=plan, callbacks=[curriculum], on_episode=outcomes.append) as solver:
        curriculum.solver = solver
        solver.train()
        report = solver.evaluate([1], 2)
    assert plan.calls == 4 and curriculum.steps == [1, 2] and curriculum.saved == [1, 2]
    assert [o.eci for o in outcomes] == [1, 1, 2, 2, 1, 1, 2, 2]
    assert [o.global_step for o in outcomes] == [1] * 4 + [2] * 4
    assert [o.package for o in outcomes] == ["seed:incident_triage"] * 4 + ["seed:daily_report"] * 4
    assert all(o.seed < EVAL_SEED_START for o in outcomes)
    assert (tmp_path / "run" / "checkpoints" / "checkpoint-2" / "curriculum_state.json").exists()
    rows = RunDir(tmp_path / "run").metrics()
    assert [r["package"] for r in rows] == ["seed:incident_triage", "seed:daily_report"]
    assert rows[0]["tier_mix"] == {"1": 2, "2": 2}
    assert report.package == "seed:daily_report" and report.seed_start == EVAL_SEED_START
    assert report.tiers[0].episodes == 2


def test_a_plan_choosing_an_unsupported_tier_stops_with_a_clear_error(tmp_path):
    class Seven:
        def next_tier(self, rng):
            return 7

    with (Solver.create(make_config(tmp_path / "run", steps=1), tier_plan=Seven()) as solver,
          pytest.raises(TrainingError, match="ECI 7")):
        solver.train()


def test_ctrl_c_checkpoints_the_current_step_and_stops(tmp_path):
    class Interrupt(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 1:
                os.kill(os.getpid(), signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    config = make_config(tmp_path / "run", steps=4, save_steps=10)
    with Solver.create(config, callbacks=[Interrupt()]) as solver:
        summary = solver.train()
    assert summary.stopped == "interrupted" and summary.global_step == 2 and summary.after is None
    assert RunDir(tmp_path / "run").checkpoint_steps() == [2]  # the step that was running, checkpointed
    assert signal.getsignal(signal.SIGINT) is before


def test_an_untrusted_package_trains_through_the_sandbox(tmp_path):
    import sys

    def imported() -> set[str]:  # other tests may load the fixture in-process on purpose (trust=True)
        return {name for name in sys.modules if name.startswith("openadapt_pkg_guess_env")}

    before = imported()
    config = make_config(tmp_path / "run", package=str(GUESS), steps=1, num_generations=2)
    with Solver.create(config) as solver:
        assert solver.pool.isolated and not solver.pool.in_process
        solver.train()
    assert imported() == before  # its code never ran in this process
    assert RunDir(tmp_path / "run").metrics()[0]["episodes"] == 4


# ---- bad input ------------------------------------------------------------------------------------------
def test_a_missing_model_path_fails_before_anything_is_written(tmp_path):
    with pytest.raises(TrainingError, match="does not exist"):
        Solver.create(make_config(tmp_path / "run", model=str(tmp_path / "no-such-model")))
    assert not (tmp_path / "run").exists()


def test_a_hub_id_without_network_fails_fast_and_clearly(tmp_path, monkeypatch):
    from openadapt.training import loading

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TrainingError, match="HF_HUB_OFFLINE"):
        Solver.create(make_config(tmp_path / "run", model="someorg/some-model-7b"))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(loading, "hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(TrainingError, match="unreachable"):
        Solver.create(make_config(tmp_path / "run", model="someorg/some-model-7b"))


def test_a_package_that_fails_validation_is_refused(tmp_path):
    broken = tmp_path / "guess_env"
    shutil.copytree(GUESS, broken, ignore=shutil.ignore_patterns("__pycache__"))
    policies = broken / "policies.py"
    policies.write_text(policies.read_text().replace("guess=self.env.oracle_view()", "guess=0"))
    with pytest.raises(TrainingError, match="fails validation .*semantic.oracle"):
        Solver.create(make_config(tmp_path / "run", package=str(broken), validate_package=True))
    assert not (tmp_path / "run").exists()


def test_out_of_memory_becomes_a_clear_message(tmp_path):
    class Boom(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 1:
                raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

    with (Solver.create(make_config(tmp_path / "run", steps=3), callbacks=[Boom()]) as solver,
          pytest.raises(TrainingError, match="out of GPU memory .*lower --num-generations.*checkpoint-1")):
        solver.train()


def test_a_run_directory_in_use_is_refused(tmp_path):
    holder = RunDir(tmp_path / "run")
    holder.lock()
    try:
        with pytest.raises(TrainingError, match=f"in use by another run \\(pid {os.getpid()}\\)"):
            Solver.create(make_config(tmp_path / "run"))
    finally:
        holder.unlock()


def test_resume_refuses_another_package_and_a_fresh_run_refuses_a_used_directory(real_run, tmp_path):
    path, _, _ = real_run
    with pytest.raises(TrainingError, match=f"holds a run on {GUESS}, not seed:daily_report"):
        Solver.create(make_config(path, package="seed:daily_report", resume=True))
    copy = tmp_path / "run"
    shutil.copytree(path, copy)
    with (Solver.create(make_config(copy, **REAL)) as solver,
          pytest.raises(TrainingError, match="already holds a run; pass --resume")):
        solver.train()
    with (Solver.create(make_config(tmp_path / "empty")) as solver,
          pytest.raises(TrainingError, match="nothing to resume")):
        solver.train(resume=True)


def test_config_rejects_bad_values(tmp_path):
    with pytest.raises(ValueError, match="outside 1-5"):
        make_config(tmp_path, eci=[6])
    with pytest.raises(ValueError):
        make_config(tmp_path, num_generations=1)
    tiny = TrainConfig(package="seed:incident_triage", output=tmp_path, steps=1000)
    real = TrainConfig(package="seed:incident_triage", output=tmp_path, model="some/model")
    assert (tiny.lr, tiny.system_prompt, tiny.gradient_checkpointing) == (1e-3, False, False)
    assert tiny.warmup_prompt_lm and tiny.warmup_steps == 400 and tiny.context == "last" and tiny.beta == 0.1
    assert (tiny.num_generations, tiny.prompts_per_step, tiny.max_completion_length) == (4, 8, None)  # fitted later
    assert (real.lr, real.warmup_steps, real.system_prompt, real.warmup_prompt_lm) == (2e-5, 0, True, False)
    assert (real.context, real.beta, real.num_generations, real.prompts_per_step) == ("full", 0.0, 8, 4)
    assert TrainConfig(package="seed:incident_triage", output=tmp_path, steps=30).warmup_steps == 100  # scales
    assert TrainConfig(package="seed:incident_triage", output=tmp_path, steps=250).warmup_steps == 250
    assert tiny.save_steps == 10 and tiny.sandbox == "auto"
    with pytest.raises(ValueError, match="auto.*docker.*bwrap.*process"):
        make_config(tmp_path, sandbox="nope")
