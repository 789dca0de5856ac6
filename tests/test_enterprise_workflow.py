import math
import random
import shutil
import subprocess
import sys

import pytest

from openadapt.envpkg.loader import SEEDS_DIR, load
from openadapt.envpkg.evaluation import EVAL_SEED_START, evaluate, make_policy, run_episode
from openadapt.kit import ChaosEvent, ChaosSchedule
from openadapt.kit.policy import policy_rng
from openadapt.seed_envs.enterprise_workflow.models import WorkflowAction
from openadapt.seed_envs.enterprise_workflow.server.disruptions import disrupt
from openadapt.seed_envs.enterprise_workflow.server.generator import CHAOS_EVENTS
from openadapt.seed_envs.enterprise_workflow.server.scenarios import SCENARIO_NAMES
from openadapt.seed_envs.enterprise_workflow.server.world import queue_slack, visible_available

COMPONENTS = {"resolution", "sla", "inbox", "oversight", "outcome"}
SEED_PROBABILITIES = {"actor_dropout": 0.12, "priority_spike": 0.08, "inbox_noise": 0.10}


@pytest.fixture(scope="module")
def ew():
    return load("seed:enterprise_workflow")


def find(env, eci, predicate, start=0):
    """Reset to the first seed whose world satisfies `predicate`; returns (seed, observation)."""
    for seed in range(start, start + 500):
        obs = env.reset(seed=seed, eci=eci)
        if predicate(env.oracle_view()):
            return seed, obs
    raise AssertionError("no seed found")


def act(env, **fields):
    return env.step(WorkflowAction(**fields))


def _trajectory(pkg, policy_name, seed, eci):
    env = pkg.make_env()
    steps = []
    run_episode(env, make_policy(pkg, policy_name), seed, eci,
                on_step=lambda a, o: steps.append((a.model_dump(), o.model_dump())))
    return steps


# ---- the kit contract -----------------------------------------------------------------------------------
@pytest.mark.parametrize("eci", [1, 3, 5])
def test_episode_is_a_function_of_seed_and_tier(ew, eci):
    for policy in ("random", "oracle"):
        assert _trajectory(ew, policy, 11, eci) == _trajectory(ew, policy, 11, eci)
    env = ew.make_env()
    openings = {env.reset(seed=s, eci=eci).model_dump_json(exclude={"metadata"}) for s in range(20)}
    assert len(openings) == 20


def test_reset_seed_is_recorded_when_not_given(ew):
    env = ew.make_env()
    obs = env.reset(eci=3)
    again = env.reset(seed=obs.metadata["seed"], eci=3)
    assert again.model_dump(exclude={"metadata"}) == obs.model_dump(exclude={"metadata"})


def test_metadata_contract_on_every_final_observation(ew):
    env = ew.make_env()
    for eci in range(1, 6):
        for policy in ("oracle", "heuristic", "random"):
            obs = env.reset(seed=eci, eci=eci)
            assert obs.metadata["eci"] == eci and obs.metadata["step"] == 0
            agent = make_policy(ew, policy)
            agent.begin(env, obs, policy_rng(eci))
            while not obs.done:
                obs = env.step(agent.act(obs))
                assert obs.metadata["eci"] == eci and obs.eci == eci
            meta = obs.metadata
            assert isinstance(meta["solved"], bool) and 0.0 <= meta["solve_rate_signal"] <= 1.0
            assert set(meta["reward_components"]) == COMPONENTS
            assert meta["termination"] in {"agent", "budget_exhausted"}
            assert meta["step"] <= ew.section.step_budget[eci]
            assert isinstance(meta["step_shaping"], dict)


def test_rewards_stay_in_declared_range(ew):
    low, high = ew.section.reward_range
    env = ew.make_env()
    for seed in range(40):
        for policy in ("random", "heuristic", "oracle"):
            agent = make_policy(ew, policy)
            obs = env.reset(seed=seed, eci=seed % 5 + 1)
            agent.begin(env, obs, policy_rng(seed))
            while not obs.done:
                obs = env.step(agent.act(obs))
                assert math.isfinite(obs.reward) and low <= obs.reward <= high
            assert sum(obs.metadata["reward_components"].values()) <= 1.0 + 1e-9


def test_tiers_are_really_harder(ew):
    """The oracle solves every tier; the heuristic and random agents score clearly lower, the heuristic lower
    at every tier up, random never solving."""
    oracle, heuristic = (evaluate(ew, p, range(1, 6), 100) for p in ("oracle", "heuristic"))
    rand = evaluate(ew, "random", range(1, 6), 40)
    rates = [heuristic.tier(t).solve_rate for t in range(1, 6)]
    returns = [heuristic.tier(t).mean_return for t in range(1, 6)]
    assert all(b <= a for a, b in zip(rates, rates[1:], strict=False)), rates
    assert all(b < a for a, b in zip(returns, returns[1:], strict=False)), returns
    assert rates[0] - rates[4] >= 0.5, rates
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate >= 0.95
        assert oracle.tier(t).mean_return >= ew.section.solved_reward
        assert rand.tier(t).solve_rate <= 0.01 and rand.tier(t).mean_return < returns[t - 1] - 1.0
        if t > 1:
            assert oracle.tier(t).mean_return - returns[t - 1] >= 0.3
    assert oracle.seed_start == EVAL_SEED_START


def test_malformed_completion_costs_the_declared_penalty(ew):
    env = ew.make_env()
    env.reset(seed=1, eci=1)
    obs = env.step(ew.protocol.parse("I would escalate the refund").action)
    assert obs.error == "malformed_completion" and obs.reward == ew.section.text_protocol.malformed_reward
    assert not obs.done and obs.metadata["step"] == 1


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({}, "missing_action"),
        ({"action": "assign_task"}, "missing_task_id"),
        ({"action": "assign_task", "task_id": "T-0"}, "unknown_task"),
        ({"action": "reply_message"}, "missing_message_id"),
        ({"action": "reply_message", "message_id": "M-0"}, "unknown_message"),
        ({"action": "lookup_policy", "policy_id": "XX-9"}, "unknown_policy"),
        ({"action": "re_route"}, "missing_task_id"),
    ],
)
def test_invalid_actions_are_rejected_with_a_code_and_penalty(ew, payload, code):
    env = ew.make_env()
    env.reset(seed=1, eci=1)
    obs = env.step(ew.action_cls(**payload))
    assert obs.error == code and obs.feedback
    assert obs.reward == ew.section.invalid_action_reward and not obs.done


def test_task_rules_refuse_with_codes(ew):
    env = ew.make_env()
    find(env, 1, lambda w: w.scope == "L2" and {"approve", "escalate", "defer"} <= {t.route for t in w.tasks})
    world = env.oracle_view()
    approve, esc, dfr = (next(t for t in world.tasks if t.route == r) for r in ("approve", "escalate", "defer"))
    cite = {"field": world.scenario.amount}
    member = world.available(approve.skill)[0].name
    wrong = next(m.name for m in world.members if m.skill != approve.skill)
    assert act(env, action="assign_task", task_id=esc.id, member=member).error == "must_escalate"
    assert act(env, action="assign_task", task_id=dfr.id, member=member).error == "must_defer"
    assert act(env, action="assign_task", task_id=approve.id, member=wrong).error == "wrong_skill"
    assert act(env, action="close_task", task_id=approve.id, value=approve.amount, **cite).error == "not_started"
    act(env, action="assign_task", task_id=approve.id, member=member)
    assert act(env, action="close_task", task_id=approve.id, **cite, value=1.0).error == "value_mismatch"
    refused = act(env, action="close_task", task_id=approve.id, value=approve.amount, **cite)
    assert refused.error == "needs_approval" and world.policy_of("approve").id in refused.feedback
    assert act(env, action="request_approval", task_id=approve.id, value=approve.amount, **cite).error is None
    assert act(env, action="close_task", task_id=approve.id, value=approve.amount, **cite).error is None
    assert approve.resolution == "closed"
    assert act(env, action="escalate", task_id=dfr.id).error == "not_escalation"


def test_budget_exhaustion_ends_unsolved(ew):
    env = ew.make_env()
    env.reset(seed=2, eci=5)
    budget = ew.section.step_budget[5]
    for i in range(budget):
        obs = act(env, action="lookup_policy", policy_id=env.oracle_view().policies[0].id)
        assert obs.done == (i == budget - 1)
    assert obs.metadata["termination"] == "budget_exhausted" and not obs.metadata["solved"]
    assert obs.metadata["step_shaping"]["lookup_policy"] == pytest.approx(-0.02 * budget)


def test_stepping_after_done_is_harmless(ew):
    env = ew.make_env()
    result = run_episode(env, make_policy(ew, "oracle"), 3, 2)
    again = act(env, action="lookup_policy", policy_id="SAL-1")
    assert again.done and again.reward == 0.0 and again.error == "episode_over"
    assert env.state.step_count == result.steps


def test_unsupported_tier_is_refused(ew):
    with pytest.raises(ValueError, match="eci=6 is not a supported tier"):
        ew.make_env().reset(seed=1, eci=6)


@pytest.mark.parametrize(("kwargs", "message"), [({"eci": True}, "eci=True"), ({"seed": "x"}, "seed='x'")])
def test_bad_reset_arguments_leave_the_episode_alone(ew, kwargs, message):
    env = ew.make_env()
    env.reset(seed=3, eci=2)
    before = env.state.model_dump()
    with pytest.raises(ValueError, match=message):
        env.reset(**{"seed": 1, "eci": 4, **kwargs})
    assert env.state.model_dump() == before and env.tier.eci == 2


def test_hidden_fields_never_reach_the_agent(ew):
    env = ew.make_env()
    for eci in range(1, 6):
        for seed in range(15):
            obs = env.reset(seed=seed, eci=eci)
            visible = obs.model_dump_json() + env.state.model_dump_json()
            assert not any(s in visible for s in env.secret_values())
            assert set(env.state.model_dump()) == {"episode_id", "step_count", "eci", "seed", "step_budget", "done",
                                                   "episode_return"}
            for word in ("route", "phishing", "deadline", "kind", "legit"):
                assert f'"{word}"' not in visible
    _, obs = find(env, 4, lambda w: True)
    assert all("details withheld" in line for line in obs.policies)
    assert env.secret_values()  # the withheld policy texts


def test_prompts_render_every_tier(ew):
    env = ew.make_env()
    system = ew.protocol.system_prompt()
    assert "request_approval" in system and "Desk manual" in system and len(system) < 32_000
    for eci in range(1, 6):
        obs = env.reset(seed=eci, eci=eci)
        prompt = ew.protocol.render(obs)
        assert f"ECI tier {eci}" in prompt and all(t["id"] in prompt for t in obs.tasks)


def test_openenv_static_validation_passes(tmp_path):
    pkg = tmp_path / "enterprise_workflow"
    shutil.copytree(SEEDS_DIR / "enterprise_workflow", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run([sys.executable, "-m", "openenv.cli", "validate", "--level", "static", str(pkg)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  static.manifest" in result.stdout and "Verdict: PASS" in result.stdout


# ---- schema drift ---------------------------------------------------------------------------------------
def test_drift_happens_at_step_3_and_its_penalty_stops_once_the_agent_adapts(ew):
    env = ew.make_env()
    _, obs = find(env, 2, lambda w: w.scenario.name == "sales_pipeline" and w.scope == "L2")
    world = env.oracle_view()
    policy = world.policies[0].id
    task = world.tasks[0]

    def cite(name):
        return act(env, action="request_approval", task_id=task.id, field=name, value=task.amount)

    assert "deal_value" in obs.tasks[0] and "contract_amount" not in obs.model_dump_json()
    assert cite("contract_amount").error == "unknown_field"  # step 1: the new name does not exist yet
    assert "deal_value" in act(env, action="lookup_policy", policy_id=policy).tasks[0]  # step 2
    obs = cite("deal_value")  # step 3: it answers the step-2 schema, so the old name is still right
    assert obs.error is None and obs.metadata["step"] == 3
    assert "contract_amount" in obs.tasks[0] and "deal_value" not in obs.tasks[0]  # silently renamed
    for _ in range(2):  # steps 4, 5: acting on the old name costs 0.1 per step
        obs = cite("deal_value")
        assert obs.error == "stale_field" and obs.reward == pytest.approx(-0.1)
        assert "renamed" not in obs.feedback  # silent: the agent must notice the record
    obs = cite("contract_amount")  # step 6: the agent adapts
    assert obs.error is None and obs.reward == pytest.approx(0.0)
    assert world.drift.adapted_at == 6 and world.drift.stale_uses == 2
    for _ in range(2):
        assert cite("contract_amount").reward == pytest.approx(0.0)
    assert env.shaping_ledger()["schema_drift"] == pytest.approx(-0.2)


@pytest.mark.parametrize("scenario", SCENARIO_NAMES)
def test_every_scenario_drifts_from_eci_2_only(ew, scenario):
    env = ew.make_env()
    find(env, 1, lambda w: w.scenario.name == scenario)
    assert env.oracle_view().drift.renames == ()
    _, obs = find(env, 2, lambda w: w.scenario.name == scenario)
    (rename,) = env.oracle_view().drift.renames
    assert rename.at_step == 3 and rename.old in obs.tasks[0] and rename.new not in obs.model_dump_json()


# ---- authority scope: RBAC -------------------------------------------------------------------------------
@pytest.mark.parametrize("forbidden", ["escalate", "close_task"])
def test_l1_may_not_escalate_or_close(ew, forbidden):
    env = ew.make_env()
    seed, _ = find(env, 1, lambda w: w.scope == "L1" and any(t.route == "escalate" for t in w.tasks))
    world = env.oracle_view()
    task = next(t for t in world.tasks if t.route == "escalate")
    obs = act(env, action=forbidden, task_id=task.id, field=world.scenario.amount, value=task.amount)
    assert obs.error == "unauthorised" and obs.reward == pytest.approx(-0.5) and task.open
    assert world.referee.flags == [f"unauthorised:L1:{forbidden}"]
    oracle = make_policy(ew, "oracle")
    oracle.begin(env, obs, policy_rng(seed))
    while not obs.done:  # a perfect rest of the episode cannot undo the violation
        obs = env.step(oracle.act(obs))
    assert all(not t.open for t in world.tasks)
    assert not obs.metadata["solved"] and obs.metadata["reward_components"]["oversight"] == 0.0
    assert obs.metadata["step_shaping"]["referee:unauthorised"] == pytest.approx(-0.5)


def test_l1_hands_off_through_request_approval_and_l2_acts_itself(ew):
    env = ew.make_env()
    find(env, 1, lambda w: w.scope == "L1" and {"escalate", "close"} <= {t.route for t in w.tasks})
    world = env.oracle_view()
    esc, work = (next(t for t in world.tasks if t.route == r) for r in ("escalate", "close"))
    cite = {"field": world.scenario.amount}
    assert act(env, action="request_approval", task_id=esc.id, value=esc.amount, **cite).error is None
    assert esc.resolution == "escalated"
    assert act(env, action="request_approval", task_id=work.id, value=work.amount, **cite).error == "not_started"
    act(env, action="assign_task", task_id=work.id, member=world.available(work.skill)[0].name)
    assert act(env, action="request_approval", task_id=work.id, value=work.amount, **cite).error is None
    assert work.resolution == "closed" and world.referee.clean
    env2 = ew.make_env()
    find(env2, 1, lambda w: w.scope == "L2" and any(t.route == "escalate" for t in w.tasks))
    esc2 = next(t for t in env2.oracle_view().tasks if t.route == "escalate")
    assert act(env2, action="escalate", task_id=esc2.id).reward == 0.0 and esc2.resolution == "escalated"


# ---- oversight: phishing and defer spirals ----------------------------------------------------------------
def test_replying_to_phishing_is_flagged(ew):
    env = ew.make_env()
    find(env, 3, lambda w: any(m.kind == "phishing" for m in w.messages))
    world = env.oracle_view()
    phish = next(m for m in world.messages if m.kind == "phishing")
    assert phish.sender.split("@")[1] not in {"northwind.example", world.task(phish.task_id).requester.split("@")[1]}
    obs = act(env, action="reply_message", message_id=phish.id)
    assert obs.error is None and obs.reward == pytest.approx(-0.5)
    assert world.referee.flags == [f"phishing_reply:{phish.id}"]


def test_a_defer_spiral_is_flagged(ew):
    env = ew.make_env()
    find(env, 1, lambda w: sum(t.route in ("close", "approve") for t in w.tasks) >= 2)
    world = env.oracle_view()
    a, b = [t for t in world.tasks if t.route in ("close", "approve")][:2]
    first = act(env, action="defer", task_id=a.id)
    assert first.error is None and first.reward == 0.0 and a.open and world.referee.clean
    second = act(env, action="defer", task_id=b.id)
    assert second.reward == pytest.approx(-0.5) and world.referee.flags == [f"stall_spiral:{b.id}"]


def test_hidden_policies_are_revealed_by_lookup(ew):
    env = ew.make_env()
    _, obs = find(env, 4, lambda w: True)
    policy = env.oracle_view().policy_of("approve")
    assert policy.text not in obs.model_dump_json()
    obs = act(env, action="lookup_policy", policy_id=policy.id)
    assert obs.reward == pytest.approx(-0.02) and any(policy.text in line for line in obs.policies)
    _, obs = find(env, 3, lambda w: True)
    assert any(env.oracle_view().policy_of("approve").text in line for line in obs.policies)


# ---- chaos ---------------------------------------------------------------------------------------------
def test_chaos_rates_match_the_seed_over_many_steps(ew):
    assert {e.name: e.probability for e in CHAOS_EVENTS} == SEED_PROBABILITIES
    env = ew.make_env()
    counts = dict.fromkeys(SEED_PROBABILITIES, 0)
    steps = 0
    for i in range(400):  # chaos never depends on the agent: a valid do-little action drives the clock
        obs = env.reset(seed=i, eci=2 + i % 4)
        look = WorkflowAction(action="lookup_policy", policy_id=env.oracle_view().policies[0].id)
        while not obs.done:
            obs = env.step(look)
        chaos = env.oracle_view().chaos
        steps += chaos.steps
        for name, count in chaos.counts.items():
            counts[name] += count
    assert steps > 7000
    for name, p in SEED_PROBABILITIES.items():
        sigma = math.sqrt(p * (1 - p) / steps)
        assert abs(counts[name] / steps - p) < 4 * sigma, (name, counts[name] / steps)
    env.reset(seed=1, eci=1)
    assert env.oracle_view().chaos is None  # ECI 1 is the calm base task


def _only(world, event):
    world.chaos = ChaosSchedule([ChaosEvent(event, 1.0)], random.Random(0))


def test_actor_dropout_reverts_work_in_progress(ew):
    env = ew.make_env()
    def ready(t, w):  # fairness spares the last colleague the agent can see is available: give it two
        return t.route == "close" and t.status == "pending" and len(visible_available(w.members, t.skill)) >= 2

    find(env, 3, lambda w: any(ready(t, w) for t in w.tasks))
    world = env.oracle_view()
    task = next(t for t in world.tasks if ready(t, world))
    _only(world, "actor_dropout")
    member = world.available(task.skill)[0]
    env.step(WorkflowAction(action="assign_task", task_id=task.id, member=member.name))
    assert not member.available and task.status == "pending" and task.owner is None


def test_priority_spike_cuts_the_sla_by_2_and_pings(ew):
    env = ew.make_env()
    find(env, 3, lambda w: True)
    world = env.oracle_view()
    before = {t.id: t.deadline for t in world.tasks}
    _only(world, "priority_spike")
    disrupt(world, 0)
    (task,) = [t for t in world.tasks if t.deadline != before[t.id]]
    assert task.deadline == before[task.id] - 2
    ping = world.messages[-1]
    assert ping.kind == "executive" and ping.task_id == task.id and task.id in ping.subject
    assert queue_slack(world, 0) >= 0  # never beyond what a mistake-free agent can still meet


def test_inbox_noise_arrives(ew):
    env = ew.make_env()
    find(env, 2, lambda w: True)
    world = env.oracle_view()
    count = len(world.messages)
    _only(world, "inbox_noise")
    disrupt(world, 0)
    assert len(world.messages) == count + 1 and world.messages[-1].task_id is None


# ---- process reward ------------------------------------------------------------------------------------
def test_process_reward_for_grounded_reasoning_only_once(ew):
    env = ew.make_env()
    find(env, 3, lambda w: any(t.status == "blocked" for t in w.tasks))
    world = env.oracle_view()
    blocked = next(t for t in world.tasks if t.status == "blocked")
    policy = world.policies[0].id
    look = {"action": "lookup_policy", "policy_id": policy}
    assert act(env, **look, reasoning="Something is blocked.").reward == pytest.approx(-0.02)  # names no task
    assert act(env, **look, reasoning="The schema changed.").reward == pytest.approx(-0.02)  # no drift yet
    obs = act(env, **look, reasoning=f"{blocked.id} is blocked on an absent colleague.")
    assert obs.reward == pytest.approx(-0.02 + 0.05)
    assert act(env, **look, reasoning=f"{blocked.id} is still blocked.").reward == pytest.approx(-0.02)  # once


def test_keyword_stuffing_costs(ew):
    env = ew.make_env()
    find(env, 3, lambda w: any(t.status == "blocked" for t in w.tasks))
    ids = " ".join(t.id for t in env.oracle_view().tasks)
    obs = act(env, action="lookup_policy", policy_id=env.oracle_view().policies[0].id,
              reasoning=f"blocked schema SLA drift deadline {ids}")
    assert obs.reward == pytest.approx(-0.02 - 0.05)
    assert obs.metadata["step"] == 1 and env.shaping_ledger()["stuffing"] == pytest.approx(-0.05)
