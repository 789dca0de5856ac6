"""Multi-turn episodes with `context="last"`: what each turn is generated from, the per-tier turn budget, and
the turn-level GRPO batch (`TurnGRPOTrainer`): one row per turn, each with its episode's group-relative advantage,
the loss over generated tokens only. Completions are scripted; the environment is the real incident_triage."""

from __future__ import annotations

import json
from collections import Counter

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from test_training import make_config, scripted  # noqa: E402

from openadapt.envpkg.loader import load  # noqa: E402
from openadapt.training.chat import first_messages, prompt_ids  # noqa: E402
from openadapt.training.envinfo import action_text  # noqa: E402
from openadapt.training.errors import TrainingError  # noqa: E402
from openadapt.training.grpo import choice_openings, field_values, quantize  # noqa: E402
from openadapt.training.pool import TextEnvPool  # noqa: E402
from openadapt.training.rollout import EpisodeSpec, Opening, run_episodes  # noqa: E402
from openadapt.training.rundir import RunDir  # noqa: E402
from openadapt.training.solver import Solver  # noqa: E402


def incident(seed: int, eci: int):
    env = load("seed:incident_triage").make_env()
    env.reset(seed=seed, eci=eci)
    return env.oracle_view()


def investigate(seed: int, eci: int) -> str:
    return json.dumps({"tool": "inspect_logs", "component": incident(seed, eci).root})


def diagnose(seed: int, eci: int, right: bool = True) -> str:
    inc = incident(seed, eci)
    fault = inc.fault.id if right else ("disk_full" if inc.fault.id != "disk_full" else "memory_leak")
    return json.dumps({"tool": "diagnose_incident", "component": inc.root, "fault": fault, "fix": inc.fix,
                       "confidence": 0.9 if right else 0.1})


def train_capturing(solver: Solver, replies: list[str]) -> dict:
    """Train `solver` on scripted `replies` and return the batch TurnGRPOTrainer assembled for its last step."""
    solver.rollout.generator_factory = lambda trainer: scripted(solver.loaded.tokenizer, replies)
    captured: dict = {}
    build = solver.trainer._generate_and_score_completions
    solver.trainer._generate_and_score_completions = lambda inputs: captured.update(build(inputs)) or captured
    solver.train()
    return captured


@pytest.fixture(scope="module")
def tokenizer():
    from openadapt.envpkg.loader import resolve
    from openadapt.training import tiny
    from openadapt.training.envinfo import action_schema, sample_env

    with TextEnvPool("seed:incident_triage", 1) as pool:
        env = pool.envs[0]
        schema = action_schema(resolve("seed:incident_triage"), env.system_prompt())
        sample = sample_env(env, schema, [1, 3], range(5))
        vocab = tiny.build_vocabulary([env.system_prompt(), *tiny.schema_words(schema), *sample.completions],
                                      sample.prompts)
    return tiny.build_tokenizer(vocab)


def test_each_turn_is_generated_from_the_latest_observation_alone(tokenizer):
    seed, eci = 21, 3
    contexts: list = []
    replies = [investigate(seed, eci), diagnose(seed, eci)]
    with TextEnvPool("seed:incident_triage", 1) as pool:
        env = pool.envs[0]
        (trace,) = run_episodes(pool.envs, [EpisodeSpec(seed=seed, eci=eci)],
                                scripted(tokenizer, replies, contexts), tokenizer, system_prompt=None, max_turns=4,
                                context="last")
        first = env.reset(seed=seed, eci=eci)
        second = env.step(replies[0])
    assert trace.solved and [t.done for t in trace.turns] == [False, True]
    expected = [prompt_ids(tokenizer, first_messages(None, step.prompt, tokenizer)) for step in (first, second)]
    assert contexts == expected  # not the conversation: the case file as it stands at each turn
    assert [row.prompt_ids for row in trace.rows] == expected
    assert "LASTACTION:inspect_logson" in tokenizer.decode(expected[1])  # tiny reads it without its spaces
    for row, reply in zip(trace.rows, replies, strict=True):
        assert row.completion_ids == tokenizer(reply, add_special_tokens=False)["input_ids"] + \
            [tokenizer.eos_token_id]
    assert trace.generated_tokens == sum(len(r.completion_ids) for r in trace.rows)


def test_the_turn_budget_is_per_tier_and_capped_by_the_environment(tmp_path):
    config = make_config(tmp_path / "run", max_turns={1: 1, 3: 3}, context="last")
    assert config.turns_at(1, 10) == 1 and config.turns_at(3, 10) == 3 and config.turns_at(5, 2) == 2
    assert config.turns_at(4, 10) == 3  # a tier without its own budget gets the largest one
    default = make_config(tmp_path / "run", max_turns=None)
    assert default.turns_at(1, 10) == 10 and default.turns_at(5, 5) == 5  # the environment's budget


def test_episodes_stop_at_their_own_turn_limit(tokenizer):
    seed = 5
    never_done = [json.dumps({"tool": "query_metrics", "component": c}) for c in
                  ("api-gateway", "orders-db", "users-db", "event-bus", "search-index", "auth-service")]
    with TextEnvPool("seed:incident_triage", 2) as pool:
        traces = run_episodes(pool.envs, [EpisodeSpec(seed=seed, eci=1, max_turns=1),
                                          EpisodeSpec(seed=seed, eci=1, max_turns=3)],
                              scripted(tokenizer, never_done), tokenizer, system_prompt=None, context="last")
    assert [len(t.turns) for t in traces] == [1, 3] and not any(t.finished for t in traces)


@pytest.mark.parametrize("scale_rewards", ["group", "none"])
def test_the_turn_batch_gives_every_turn_its_episodes_advantage(tmp_path, scale_rewards):
    """One group of 4 episodes at ECI 3: investigate then diagnose right (2 turns, solved), diagnose right at once
    (1 turn, solved, but the cause upstream of the alert was never looked at), diagnose wrong at once, and
    investigate then diagnose wrong. The batch TRL trains on has 6 rows (one per turn), each row's prompt is the
    context that turn saw, its completion is exactly what was generated, and its advantage is its episode's
    (divided by the group's std with `scale_rewards="group"`, not with "none")."""
    config = make_config(tmp_path / "run", steps=1, prompts_per_step=1, num_generations=4, eci=[3],
                         max_turns=3, context="last", beta=0.05, scale_rewards=scale_rewards)
    with Solver.create(config) as solver:
        assert type(solver.trainer).__name__ == "TurnGRPOTrainer"
        _, (spec,) = solver.rollout.specs(0, 1)
        s, e = spec.seed, spec.eci
        # replies are consumed per turn, in episode order among the episodes still running
        replies = [investigate(s, e), diagnose(s, e), diagnose(s, e, right=False), investigate(s, e),
                   diagnose(s, e), diagnose(s, e, right=False)]
        contexts: list = []
        solver.rollout.generator_factory = lambda trainer: scripted(solver.loaded.tokenizer, replies, contexts)
        captured: dict = {}
        build = solver.trainer._generate_and_score_completions

        def spy(inputs):
            captured.update(build(inputs))
            return captured

        solver.trainer._generate_and_score_completions = spy
        solver.train()
        traces = solver.rollout.last_traces
    assert [len(t.turns) for t in traces] == [2, 1, 1, 2]
    assert [t.solved for t in traces] == [True, True, False, False]
    rewards = torch.tensor([quantize(t.episode_return) for t in traces])
    expected = rewards - rewards.mean()
    if scale_rewards == "group":
        expected = expected / (rewards.std() + 1e-4)
    rows = [(i, row) for i, t in enumerate(traces) for row in t.rows]
    assert captured["prompt_ids"].shape[0] == len(rows) == 6
    assert torch.allclose(captured["advantages"], torch.stack([expected[i] for i, _ in rows]), atol=1e-5)
    tokenizer = solver.loaded.tokenizer
    for k, (_, row) in enumerate(rows):
        prompt = captured["prompt_ids"][k][captured["prompt_mask"][k].bool()].tolist()
        completion = captured["completion_ids"][k][captured["completion_mask"][k].bool()].tolist()
        assert prompt == row.prompt_ids and completion == row.completion_ids
        assert prompt in contexts
        assert "LASTACTION" in tokenizer.decode(prompt)
    generated = sum(t.generated_tokens for t in traces)
    assert int(captured["num_items_in_batch"]) == generated  # the loss covers generated tokens only
    assert "ref_per_token_logps" in captured  # beta > 0: KL to the initial model per generated token
    row = RunDir(tmp_path / "run").metrics()[0]
    assert row["solve_rate"] == 0.5 and row["turns_mean"] == 1.5 and "kl" in row
    assert row["completion_tokens_mean"] == pytest.approx(generated / 4)


def test_held_out_evaluation_uses_the_context_the_run_trained_with(tmp_path):
    config = make_config(tmp_path / "run", steps=1, context="last")
    with Solver.create(config) as solver:
        solver.train()
    from openadapt.training.modelpolicy import ModelPolicy

    policy = ModelPolicy.from_run(tmp_path / "run")
    assert policy.context == "last"


def test_train_turns_trains_on_a_seeded_subset_of_a_long_episodes_turns(tmp_path):
    from openadapt.training.grpo import EnvironmentRollout
    from openadapt.training.rollout import EpisodeTrace, TurnRow

    trace = EpisodeTrace(seed=1, eci=1, prompt_ids=[1], rows=[TurnRow(prompt_ids=[k], completion_ids=[k])
                                                               for k in range(6)])
    rollout = EnvironmentRollout(make_config(tmp_path, train_turns=2, context="last"), None, None)
    picked = rollout._trained_turns(trace, step=3, index=0)
    assert len(picked) == 2 and picked == rollout._trained_turns(trace, step=3, index=0)  # same draw on a resume
    assert picked == sorted(picked)  # in turn order
    assert {k for s in range(20) for k in rollout._trained_turns(trace, s, 0)} == set(range(6))  # each gets a turn
    everything = EnvironmentRollout(make_config(tmp_path, context="last"), None, None)
    assert everything._trained_turns(trace, 3, 0) == list(range(6))


def test_tiny_fits_its_tokens_per_turn_to_the_packages_actions(tmp_path):
    from openadapt.training.loading import fit_completion_length

    config = make_config(tmp_path / "run", steps=1, max_completion_length=None)
    assert config.max_completion_length is None
    with Solver.create(config) as solver:
        fitted = solver.config.max_completion_length
    assert fitted >= 48 and fitted % 8 == 0
    assert json.loads((tmp_path / "run" / "config.json").read_text())["max_completion_length"] == fitted
    tokenizer = solver.loaded.tokenizer
    long = json.dumps({"tool": "diagnose_incident", "component": "orders-db", "fault": "disk_full",
                       "fix": "expand_volume", "evidence": ["a", "b", "c", "d", "e", "f", "g", "h"] * 4,
                       "confidence": 0.5, "reasoning": "orders-db " * 40})
    need = len(tokenizer(long, add_special_tokens=False)["input_ids"]) + 1
    assert fit_completion_length(tokenizer, [long]) >= need * 1.15 and fit_completion_length(tokenizer, []) == 48


def test_a_curriculums_turn_budget_follows_its_current_tier_on_replays_too(tmp_path):
    """A replayed ECI 1 episode, while the curriculum is at ECI 3, gets ECI 3's turns (its own budget still caps
    them): the policy cannot tell the tiers apart, so fewer turns on replays would punish what ECI 3 teaches."""

    class Replay:
        turn_tier = 3

        def next_tier(self, rng):
            return 1

    config = make_config(tmp_path / "run", steps=1, eci=[1, 3], max_turns={1: 1, 3: 2}, context="last")
    with Solver.create(config, tier_plan=Replay()) as solver:
        _, (spec,) = solver.rollout.specs(0, 1)
        assert spec.eci == 1 and spec.max_turns == 2
        Replay.turn_tier = None  # a plan without a current tier: each episode gets its own tier's turns
        _, (spec,) = solver.rollout.specs(0, 1)
        assert spec.max_turns == 1


def test_the_curriculum_offers_its_current_tier_as_the_turn_tier():
    from types import SimpleNamespace

    from openadapt.curriculum.controller import Curriculum

    curriculum = Curriculum.__new__(Curriculum)  # only its state matters here
    curriculum.state = SimpleNamespace(tier=3)
    assert curriculum.turn_tier == 3
    curriculum.state.tier = 4  # escalated: replays now get ECI 4's turns
    assert curriculum.turn_tier == 4


def test_an_exploration_opening_starts_the_first_reply_and_is_trained_as_the_models_own(tokenizer):
    """`EpisodeSpec.opening`: the first turn is generated from the context plus the opening, the reply the
    environment gets (and the row the loss trains on) is the opening plus what the model wrote; later turns are
    the model's alone."""
    seed, eci = 21, 3
    root = incident(seed, eci).root
    opening = tokenizer('{"tool":"inspect_logs"', add_special_tokens=False)["input_ids"]
    contexts: list = []
    rest = [f',"component":"{root}"}}', diagnose(seed, eci)]
    with TextEnvPool("seed:incident_triage", 1) as pool:
        spec = EpisodeSpec(seed=seed, eci=eci, opening=Opening(fields={"tool": "inspect_logs"}))
        (trace,) = run_episodes(pool.envs, [spec],
                                scripted(tokenizer, rest, contexts), tokenizer, system_prompt=None, max_turns=2,
                                context="last")
    assert trace.solved and json.loads(trace.turns[0].action) == {"tool": "inspect_logs", "component": root}
    assert contexts[0] == trace.rows[0].prompt_ids + opening  # the model continued the opening
    assert trace.rows[0].completion_ids[:len(opening)] == opening
    assert contexts[1] == trace.rows[1].prompt_ids  # the second turn opens with nothing forced
    assert trace.generated_tokens == sum(len(r.completion_ids) for r in trace.rows)


def test_explore_draws_first_turn_openings_only_where_a_second_turn_can_follow(tmp_path):
    config = make_config(tmp_path / "run", steps=1, prompts_per_step=8, num_generations=4, eci=[3],
                         max_turns={1: 1, 3: 2}, context="last", explore=0.5)
    with Solver.create(config) as solver:
        rollout = solver.rollout
        tokenizer = solver.loaded.tokenizer
        tools = choice_openings(solver.pool.envs[0].system_prompt(), "triage")
        assert tools[0] == {"tool": "inspect_logs"} and len(tools) == 5
        _, groups = rollout.specs(0, 8)
        specs = [s for s in groups for _ in range(4)]
        drawn = rollout.explore(specs, step=0)
        assert drawn == rollout.explore(specs, step=0)  # seeded: a resumed run draws the same
        opened = [s.opening.text({}) for s in drawn if s.opening]
        assert 6 <= len(opened) <= 26 and set(opened) <= {action_text(t)[:-1] for t in tools}
        assert len(set(opened)) > 1  # every choice can be drawn, the final one included
        text = tokenizer.decode(tokenizer(opened[0], add_special_tokens=False)["input_ids"])
        assert text == opened[0]  # the opening is tokens of the tiny model's vocabulary, decoded exactly
        single = [s.model_copy(update={"max_turns": 1}) for s in specs]
        assert not any(s.opening for s in rollout.explore(single, step=0))  # nothing can follow a forced read


def test_explore_choices_narrow_the_draw_and_name_an_unknown_value(tmp_path):
    config = make_config(tmp_path / "run", steps=1, prompts_per_step=8, num_generations=4, eci=[3],
                         max_turns=2, context="last", explore=1.0,
                         explore_choices=["inspect_logs", "query_metrics"])
    with Solver.create(config) as solver:
        rollout = solver.rollout
        _, groups = rollout.specs(0, 8)
        opened = {s.opening.text({}) for s in rollout.explore(groups * 4, step=0)}
        assert opened == {'{"tool":"inspect_logs"', '{"tool":"query_metrics"'}
        with pytest.raises(TrainingError, match="explore_choices read_logs not among the action's `tool` values"):
            choice_openings(solver.pool.envs[0].system_prompt(), "triage", ["inspect_logs", "read_logs"])


def test_explore_targets_draw_what_the_opening_acts_on_from_the_first_observation(tokenizer, tmp_path):
    """`explore_targets`: the opening names the tool *and* its component, drawn from the components the first
    observation lists, in proportion to how often the rest of it mentions each (not from the incident: the draw
    knows nothing of the answer); the model writes the rest."""
    seed, eci = 21, 3
    first = load("seed:incident_triage").make_env()
    observation = first.reset(seed=seed, eci=eci)
    listed = observation.components
    shown = observation.model_dump_json(exclude={"components"})
    mentioned = {c for c in listed if c in shown}
    contexts: list = []
    specs = [EpisodeSpec(seed=seed, eci=eci, opening=Opening(fields={"tool": "inspect_logs"},
                                                             draw_from={"component": "components"}, seed=str(i)))
             for i in range(24)]
    with TextEnvPool("seed:incident_triage", 24) as pool:
        traces = run_episodes(pool.envs, specs, scripted(tokenizer, ["}"] * 24, contexts), tokenizer,
                              system_prompt=None, max_turns=1, context="last")
        actions = [json.loads(t.turns[0].action) for t in traces]
        assert all(set(a) == {"tool", "component"} and a["tool"] == "inspect_logs" for a in actions)
        drawn = [a["component"] for a in actions]
        assert set(drawn) <= mentioned < set(listed) and len(set(drawn)) >= 3  # what the agent is shown
        assert Counter(drawn).most_common(1)[0][0] in (first.oracle_view().path[0], first.oracle_view().root)
        assert all(t.turns[0].error is None for t in traces)  # a well-formed read the environment accepted
        again = run_episodes(pool.envs, specs, scripted(tokenizer, ["}"] * 24, []), tokenizer, system_prompt=None,
                             max_turns=1, context="last")
        system_prompt = pool.envs[0].system_prompt()
    assert drawn == [json.loads(t.turns[0].action)["component"] for t in again]  # seeded: a resume draws the same
    nothing = Opening(fields={"tool": "t"}, draw_from={"component": "components"}, seed="1")
    assert json.loads(nothing.text({"components": ["a", "b"], "alert": "x"}) + "}")["component"] in ("a", "b")
    with pytest.raises(TrainingError, match="no list `services` to draw `component` from"):
        Opening(fields={"tool": "inspect_logs"}, draw_from={"component": "services"}).text({"alert": "x"})
    with pytest.raises(TrainingError, match="explore_targets service not among the action's other fields"):
        choice_openings(system_prompt, "triage", targets={"service": "components"})


def test_explore_turn_and_choices_per_tier_open_a_later_turn_with_its_own_tools(tmp_path):
    """`explore_turn`/`explore_choices`/`explore_fields` per tier: ECI 3 opens its first turn with a log read, ECI 4
    its second with a runbook read and a fix drawn where the diagnosis writes one; an ECI 4 episode of two turns
    has no room after its second and is not explored."""
    config = make_config(tmp_path / "run", steps=1, prompts_per_step=8, num_generations=4, eci=[3, 4],
                         max_turns={3: 2, 4: 3}, context="last", explore=1.0, explore_turn={1: 1, 4: 2},
                         explore_choices={1: ["inspect_logs"], 4: ["read_runbook"]},
                         explore_fields={1: [], 4: ["fix"]}, explore_field_chance=1.0)
    with Solver.create(config) as solver:
        rollout = solver.rollout
        specs = [EpisodeSpec(seed=1, eci=3, max_turns=2), EpisodeSpec(seed=1, eci=4, max_turns=3),
                 EpisodeSpec(seed=1, eci=4, max_turns=2)]
        at3, at4, short = rollout.explore(specs, step=0)
        assert (at3.opening.turn, at3.opening.text({}), at3.opening.fills) == (1, '{"tool":"inspect_logs"', {})
        assert (at4.opening.turn, at4.opening.text({})) == (2, '{"tool":"read_runbook"')
        assert "kill_idle_connections" in at4.opening.fills["fix"] and len(at4.opening.fills["fix"]) == 14
        assert short.opening is None
        with pytest.raises(TrainingError, match="explore_fields evidence is not an enum field of the action"):
            field_values(solver.pool.envs[0].system_prompt(), "triage", ["evidence"])


def test_a_drawn_fix_replaces_the_models_where_its_diagnosis_writes_one(tokenizer):
    """`Opening.fills`: the second turn opens with a runbook read (the model names the component); at the third
    the model's diagnosis is cut before its fix, a fix the observation mentions is put there, and the model writes
    the rest given it. The row records both drawn spans; the fix drawn is one the agent was shown, never another,
    and over draws the runbook note's own fix is among them."""
    seed, eci = 1, 4
    inc = incident(seed, eci)
    assert inc.constrained and inc.fix == "kill_idle_connections" and inc.fault.fix != inc.fix
    n = 12
    usual = json.dumps({"tool": "diagnose_incident", "component": inc.root, "fault": inc.fault.id,
                        "fix": inc.fault.fix, "confidence": 0.9})
    # the read writes a fix as well (the tiny model does): not the answer, so not where the draw goes
    replies = [investigate(seed, eci)] * n + [f', "component": "{inc.root}", "fix": "scale_out"}}'] * n \
        + [usual] * n + ['", "confidence": 0.9}'] * n
    contexts: list = []
    with TextEnvPool("seed:incident_triage", n) as pool:
        fixes = field_values(pool.envs[0].system_prompt(), "triage", ["fix"])["fix"]
        specs = [EpisodeSpec(seed=seed, eci=eci, opening=Opening(fields={"tool": "read_runbook"}, turn=2,
                                                                 fills={"fix": fixes}, seed=str(i)))
                 for i in range(n)]
        traces = run_episodes(pool.envs, specs, scripted(tokenizer, replies, contexts), tokenizer,
                              system_prompt=None, max_turns=3, context="last")
        env = pool.envs[0]
        env.reset(seed=seed, eci=eci)
        env.step(investigate(seed, eci))
        shown = json.dumps(env.step(json.dumps({"tool": "read_runbook", "component": inc.root})).observation)
    mentioned = {f for f in fixes if f in shown}
    assert inc.fix in mentioned and len(mentioned) < len(fixes)
    drawn = []
    for i, trace in enumerate(traces):
        read, diagnosis = json.loads(trace.turns[1].action), json.loads(trace.turns[2].action)
        assert read == {"tool": "read_runbook", "component": inc.root, "fix": "scale_out"}
        assert diagnosis["fault"] == inc.fault.id and diagnosis["confidence"] == 0.9
        drawn.append(diagnosis["fix"])
        first, second, third = trace.rows
        assert first.drawn == [] and second.drawn == [(0, len(contexts[n + i]) - len(second.prompt_ids))]
        (start, end), = third.drawn
        assert tokenizer.decode(third.completion_ids[start:end], skip_special_tokens=True) == diagnosis["fix"]
        assert contexts[3 * n + i] == third.prompt_ids + third.completion_ids[:end]  # the rest written given it
        assert trace.solved == (diagnosis["fix"] == inc.fix)
    assert set(drawn) <= mentioned and inc.fix in drawn and len(set(drawn)) > 1


def test_explore_credit_positive_trains_a_drawn_opening_only_where_its_episode_beat_its_group(tmp_path):
    """Self-imitation: four episodes open with a drawn read; two then diagnose right and two wrong. The model's
    own tokens train in every row; the drawn opening's tokens only in the two rows whose advantage is positive,
    and in every row they stay in the attention: what the model wrote after them was written given them."""
    config = make_config(tmp_path / "run", steps=1, prompts_per_step=1, num_generations=4, eci=[3], max_turns=2,
                         context="last", explore=1.0, explore_choices=["inspect_logs"],
                         explore_targets={"component": "components"}, explore_credit="positive")
    with Solver.create(config) as solver:
        _, (spec,) = solver.rollout.specs(0, 1)
        s, e = spec.seed, spec.eci
        replies = ["}"] * 4 + [diagnose(s, e), diagnose(s, e, right=False)] * 2
        captured = train_capturing(solver, replies)
        traces = solver.rollout.last_traces
    assert [t.solved for t in traces] == [True, False, True, False]
    rows = [row for t in traces for row in t.rows]
    assert [bool(row.drawn) for row in rows] == [True, False] * 4  # the first turn of each opened with a draw
    attended, advantages = captured["completion_mask"], captured["advantages"]
    trained = attended * captured["tool_mask"]  # TRL's loss mask
    for k, row in enumerate(rows):
        n, opening = len(row.completion_ids), row.drawn[0][1] if row.drawn else 0
        assert row.drawn in ([], [(0, opening)])
        kept = 1 if advantages[k] > 0 or not opening else 0
        assert trained[k][:n].tolist() == [kept] * opening + [1] * (n - opening), k
        assert attended[k][:n].tolist() == [1] * n, k
    assert (advantages[[0, 4]] > 0).all() and (advantages[[2, 6]] < 0).all()
    masked = sum(row.drawn[0][1] for k, row in enumerate(rows) if row.drawn and advantages[k] <= 0)
    assert int(captured["num_items_in_batch"]) == sum(t.generated_tokens for t in traces) - masked > 0


def test_explore_credit_positive_needs_the_turn_trainer():
    from openadapt.training.config import SolverSettings

    with pytest.raises(ValueError, match="explore_credit 'positive' .* needs context 'last'"):
        SolverSettings(model="tiny", context="full", explore=0.5, explore_credit="positive")


def play(seed: int, eci: int, actions: list[str]) -> float:
    """The return of `actions` played on a fresh incident_triage episode."""
    pkg = load("seed:incident_triage")
    env = pkg.make_env()
    env.reset(seed=seed, eci=eci)
    return sum(float(env.step(pkg.protocol.parse(a).action).reward) for a in actions)


def test_turn_credit_values_each_turn_by_the_policys_continuations_from_the_state_it_left(tmp_path):
    """credit="turn": a group of four at ECI 3 (two turns at most): read the root then diagnose right; read the
    root then diagnose wrong; read a bystander then diagnose wrong; diagnose right at once. Each read's state is
    valued by two scripted continuations. The read of the root followed by a wrong diagnosis is credited (its
    state's value beats the group's mean) and the wrong diagnosis blamed; the bystander read is blamed; each
    episode's advantages still sum to its own return minus the group's mean."""
    config = make_config(tmp_path / "run", steps=1, prompts_per_step=1, num_generations=4, eci=[3], max_turns=2,
                         context="last", scale_rewards="none", credit="turn", value_samples=2)
    with Solver.create(config) as solver:
        _, (spec,) = solver.rollout.specs(0, 1)
        s, e = spec.seed, spec.eci
        inc = incident(s, e)
        other = json.dumps({"tool": "inspect_logs", "component": next(c for c in inc.logs if c not in inc.path)})
        read, right, wrong = investigate(s, e), diagnose(s, e), diagnose(s, e, right=False)
        replies = [read, read, other, right, right, wrong, wrong,  # the episodes' two turns
                   right, wrong, right, right, wrong, wrong]  # two continuations after each read
        captured = train_capturing(solver, replies)
        traces = solver.rollout.last_traces
    assert [t.solved for t in traces] == [True, False, False, True]
    good, bad, stray, guess = (quantize(play(s, e, a)) for a in ([read, right], [read, wrong], [other, wrong],
                                                                   [right]))
    assert [quantize(t.episode_return) for t in traces] == [good, bad, stray, guess]
    mean = (good + bad + stray + guess) / 4
    after_read = (good + bad) / 2, (good + good) / 2, stray
    expected = [after_read[0] - mean, good - after_read[0], after_read[1] - mean, bad - after_read[1],
                after_read[2] - mean, stray - after_read[2], guess - mean]
    advantages = captured["advantages"].tolist()
    assert advantages == pytest.approx(expected, abs=3e-4)  # values are quantized like rewards
    assert advantages[2] > 0 > advantages[3]  # the root read credited, the wrong diagnosis after it blamed
    assert advantages[4] < 0  # reading a bystander: nothing to diagnose from
    assert advantages[0] + advantages[1] == pytest.approx(good - mean, abs=3e-4)
    assert RunDir(tmp_path / "run").metrics()[0]["value_continuations"] == 6


def test_turn_credit_scales_by_the_spread_of_the_turns_changes_not_of_the_returns(tmp_path):
    """Four episodes of a group read the root and diagnose right: equal returns, zero spread. One read's state is
    valued lower (one of its two continuations diagnoses wrong), so its read is blamed and its answer credited;
    divided by the returns' zero spread those two would be 10,000-fold, scaled by the turns' own spread they
    stay of unit size, and the other turns stay exactly zero."""
    config = make_config(tmp_path / "run", steps=1, prompts_per_step=1, num_generations=4, eci=[3], max_turns=2,
                         context="last", scale_rewards="group", credit="turn", value_samples=2)
    with Solver.create(config) as solver:
        _, (spec,) = solver.rollout.specs(0, 1)
        s, e = spec.seed, spec.eci
        read, right, wrong = investigate(s, e), diagnose(s, e), diagnose(s, e, right=False)
        replies = [read] * 4 + [right] * 4 + [right, wrong] + [right] * 6
        captured = train_capturing(solver, replies)
    advantages = captured["advantages"].tolist()
    assert advantages[0] < 0 < advantages[1] and max(abs(a) for a in advantages) < 5
    assert advantages[2:] == [0.0] * 6


def test_turn_credit_needs_the_turn_trainer():
    from openadapt.training.config import SolverSettings

    with pytest.raises(ValueError, match="credit 'turn' .* needs context 'last'"):
        SolverSettings(model="tiny", context="full", credit="turn")


def test_explore_refuses_a_package_whose_action_has_no_choice_field():
    with pytest.raises(TrainingError, match="explore needs an action with a choice field"):
        choice_openings('Reply with JSON: {"properties": {"text": {"type": "string"}}, "type": "object"}', "free")


def test_imitate_adds_the_nll_of_solved_turns_to_grpos_loss(tmp_path):
    """Self-imitation: a group at ECI 3 where two episodes solve (read the root then diagnose; diagnose at once)
    and two do not. The term samples turns of the solved episodes only, and compute_loss adds `imitate` x their
    mean per-token negative log-likelihood (computed here independently from the model's logits) to GRPO's."""
    config = make_config(tmp_path / "run", steps=1, prompts_per_step=1, num_generations=4, eci=[3], max_turns=2,
                         context="last", imitate=0.5, imitate_batch=3)
    with Solver.create(config) as solver:
        _, (spec,) = solver.rollout.specs(0, 1)
        s, e = spec.seed, spec.eci
        read, right, wrong = investigate(s, e), diagnose(s, e), diagnose(s, e, right=False)
        replies = [read, right, wrong, read, right, wrong]
        captured = train_capturing(solver, replies)
        traces = solver.rollout.last_traces
        trainer, model = solver.trainer, solver.model
        assert [t.solved for t in traces] == [True, True, False, False]
        solved = {(tuple(r.prompt_ids), tuple(r.completion_ids)) for t in traces if t.solved for r in t.rows}
        batch = trainer._imitation
        rows = []
        for ids, attention, mask in zip(batch["input_ids"], batch["attention_mask"], batch["completion_mask"],
                                        strict=True):
            completion = ids[-batch["keep"]:][mask.bool()].tolist()
            prompt = ids[:-batch["keep"]][attention[:-batch["keep"]].bool()].tolist()
            rows.append((tuple(prompt), tuple(completion)))
        assert rows and set(rows) <= solved  # three solved episodes drawn: only solved turns
        model.train()
        with torch.no_grad():
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            logps = torch.log_softmax(logits[:, -batch["keep"] - 1:-1].float(), dim=-1)
            token = logps.gather(-1, batch["input_ids"][:, -batch["keep"]:].unsqueeze(-1)).squeeze(-1)
            nll = -(token * batch["completion_mask"]).sum() / batch["completion_mask"].sum()
            with_term = trainer.compute_loss(model, captured)
            trainer.imitation_weight = 0.0
            without = trainer.compute_loss(model, captured)
        assert float(nll) > 0
        assert float(with_term - without) == pytest.approx(0.5 * float(nll), rel=1e-3)
    row = RunDir(tmp_path / "run").metrics()[0]
    assert row["imitated"] == 2 and row["imitation_pool"] == 2 and row["imitation_nll"] > 0


def test_solved_episodes_are_kept_per_tier_and_sampled_evenly_over_tiers():
    import random

    from openadapt.training.imitation import SolvedEpisodes
    from openadapt.training.rollout import EpisodeTrace, TurnRow

    def trace(eci: int, tag: int, solved: bool = True) -> EpisodeTrace:
        return EpisodeTrace(seed=tag, eci=eci, prompt_ids=[], solved=solved,
                            rows=[TurnRow(prompt_ids=[eci], completion_ids=[tag])])

    kept = SolvedEpisodes(per_tier=3)
    assert kept.add([trace(1, k) for k in range(10)] + [trace(3, 100), trace(3, 101, solved=False)]) == 11
    assert len(kept) == 4  # the newest three of ECI 1, the one solved episode of ECI 3
    rows = kept.sample(6, random.Random(0))
    assert [p[0] for p, _ in rows] == [1, 3] * 3  # evenly over the tiers held, however many each holds
    assert {c[0] for p, c in rows if p[0] == 1} <= {7, 8, 9}
    assert SolvedEpisodes(per_tier=3).sample(4, random.Random(0)) == []

    kept.add([trace(2, 50)])
    focused = [p[0] for p, _ in kept.sample(16, random.Random(0), focus=0.75)]
    assert focused.count(3) == 12 and focused.count(1) == 2 and focused.count(2) == 2  # the highest tier held
    alone = SolvedEpisodes(per_tier=3)
    alone.add([trace(1, 0)])
    assert [p[0] for p, _ in alone.sample(4, random.Random(0), focus=0.75)] == [1] * 4  # nothing lower to draw


def test_imitate_needs_the_turn_trainer():
    from openadapt.training.config import SolverSettings

    with pytest.raises(ValueError, match="imitate .* needs context 'last'"):
        SolverSettings(model="tiny", context="full", imitate=0.5)
    with pytest.raises(ValueError, match="imitate .* needs context 'last'"):
        SolverSettings(model="tiny", context="full", imitate={1: 0.0, 3: 0.5})
    with pytest.raises(ValueError, match="imitate must be a weight >= 0"):
        SolverSettings(model="tiny", imitate={2: -1.0})


def test_imitate_per_tier_uses_the_weight_of_the_steps_highest_tier(tmp_path):
    """`imitate={1: 0.5, 3: 0.0}` at ECI 3: the solved episodes are kept, none is drawn and the term is off;
    a tier without a weight takes the nearest lower tier's."""
    from openadapt.training.config import SolverSettings

    per_tier = SolverSettings(model="tiny", imitate={"1": 0.0, "2": 3.0, "4": 1.0})
    assert [per_tier.imitate_at(t) for t in (1, 2, 3, 4, 5)] == [0.0, 3.0, 3.0, 1.0, 1.0] and per_tier.imitates
    config = make_config(tmp_path / "run", steps=1, prompts_per_step=1, num_generations=4, eci=[3], max_turns=2,
                         context="last", imitate={1: 0.5, 3: 0.0}, imitate_batch=3)
    with Solver.create(config) as solver:
        _, (spec,) = solver.rollout.specs(0, 1)
        s, e = spec.seed, spec.eci
        read, right, wrong = investigate(s, e), diagnose(s, e), diagnose(s, e, right=False)
        train_capturing(solver, [read, right, wrong, read, right, wrong])
        assert solver.trainer.imitation_weight == 0.0 and solver.trainer._imitation is None
    row = RunDir(tmp_path / "run").metrics()[0]
    assert row["imitated"] == 0 and row["imitation_pool"] == 2 and "imitation_nll" not in row


def test_beta_per_tier_uses_the_coefficient_of_the_steps_highest_tier(tmp_path):
    """`beta={1: 0.1, 3: 0.0}`: a tier without one takes the nearest lower tier's; at ECI 3 the step trains
    without the KL term (no reference log-probabilities are computed), while TRL keeps the reference model the
    lower tiers need."""
    from openadapt.training.config import SolverSettings

    per_tier = SolverSettings(model="tiny", beta={"2": 0.05, "4": 0.0})
    assert [per_tier.beta_at(t) for t in (1, 2, 3, 4, 5)] == [0.05, 0.05, 0.05, 0.0, 0.0]
    assert per_tier.beta_max == 0.05 and per_tier.reference == "tier"
    with pytest.raises(ValueError, match="beta per tier .* needs context 'last'"):
        SolverSettings(model="tiny", context="full", beta={1: 0.1, 3: 0.0})
    with pytest.raises(ValueError, match="beta must be a weight >= 0"):
        SolverSettings(model="tiny", beta={1: -0.1})
    for eci, coefficient in ((3, 0.0), (1, 0.1)):
        config = make_config(tmp_path / f"run{eci}", steps=1, prompts_per_step=1, num_generations=4, eci=[eci],
                             max_turns=2, context="last", beta={1: 0.1, 3: 0.0})
        with Solver.create(config) as solver:
            _, (spec,) = solver.rollout.specs(0, 1)
            s, e = spec.seed, spec.eci
            batch = train_capturing(solver, [investigate(s, e), diagnose(s, e), diagnose(s, e, right=False)] * 2)
            assert solver.trainer.ref_model is not None and solver.trainer.beta == coefficient
            assert ("ref_per_token_logps" in batch) == (coefficient > 0)
