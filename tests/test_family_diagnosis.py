import random
import shutil
import subprocess
import sys

import pytest
from family_checks import broken_rules, metadata_contract, play, rejected, trajectory

from openadapt.envpkg.evaluation import EVAL_SEED_START, evaluate, make_policy, run_episode
from openadapt.envpkg.loader import SEEDS_DIR

COMPONENTS = {"correctness", "efficiency", "quality", "calibration", "penalty"}


@pytest.mark.parametrize("eci", [1, 3, 5])
def test_episode_is_a_function_of_seed_and_tier(triage, eci):
    first = trajectory(triage, "random", 11, eci)
    assert first == trajectory(triage, "random", 11, eci)
    env = triage.make_env()
    openings = {env.reset(seed=s, eci=eci).model_dump_json(exclude={"metadata"}) for s in range(20)}
    assert len(openings) == 20


def test_reset_seed_is_recorded_when_not_given(triage):
    env = triage.make_env()
    obs = env.reset(eci=2)
    seed = obs.metadata["seed"]
    again = env.reset(seed=seed, eci=2)
    assert again.model_dump(exclude={"metadata"}) == obs.model_dump(exclude={"metadata"})


def test_metadata_contract_on_every_final_observation(triage):
    metadata_contract(triage, COMPONENTS, range(1, 6), tier=lambda s: s, rng=lambda s: random.Random(0))


def test_solve_rate_signal_is_the_rolling_solve_rate(triage):
    env = triage.make_env()
    solved = []
    for seed in range(6):
        policy = make_policy(triage, "oracle" if seed % 2 else "random")
        result = run_episode(env, policy, seed, 1)
        solved.append(result.solved)
    assert env._final.metadata["solve_rate_signal"] == pytest.approx(sum(solved) / len(solved), abs=1e-6)


def test_rewards_stay_in_declared_range(triage):
    for _, _, final in play(triage, range(60)):
        assert sum(final.metadata["reward_components"].values()) <= triage.section.reward_range[1] + 1e-9


def test_tiers_are_really_harder(triage):
    """Heuristic solve rate never rises with the tier and falls clearly from ECI 1 to 5; the oracle solves."""
    oracle = evaluate(triage, "oracle", range(1, 6), 100)
    heuristic = evaluate(triage, "heuristic", range(1, 6), 100)
    rates = [heuristic.tier(t).solve_rate for t in range(1, 6)]
    assert all(b <= a for a, b in zip(rates, rates[1:], strict=False)), rates
    assert rates[0] - rates[4] >= 0.5, rates
    rewards = [heuristic.tier(t).mean_return for t in range(1, 6)]
    assert all(b <= a for a, b in zip(rewards, rewards[1:], strict=False)), rewards
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate >= 0.95
        assert oracle.tier(t).mean_return >= triage.section.solved_reward
    assert oracle.seed_start == EVAL_SEED_START


def _diagnose(env, **overrides):
    inc = env.oracle_view()
    fields = dict(tool="diagnose_incident", component=inc.root, fault=inc.fault.id,
                  fix=inc.fix, evidence=[], confidence=0.9,
                  reasoning=f"{inc.root} shows the fault in its own logs and metrics right now.")
    fields.update(overrides)
    return env.step(env.action_type(**fields))


def test_correct_diagnosis_with_observed_evidence_scores_full(triage):
    env = triage.make_env()
    obs = env.reset(seed=4, eci=1)
    line = next(x for x in obs.logs if x in env.oracle_view().supporting)
    final = _diagnose(env, evidence=[line], confidence=1.0)
    assert final.metadata["solved"] and final.reward == pytest.approx(1.0)


def test_keyword_stuffing_is_penalised(triage):
    env = triage.make_env()
    env.reset(seed=4, eci=1)
    final = _diagnose(env, reasoning="memory_leak disk_full bad_deploy cpu_saturation dns_misconfiguration "
                                     "certificate_expired")
    assert final.metadata["reward_components"]["penalty"] <= -0.2


def test_invented_evidence_is_penalised(triage):
    env = triage.make_env()
    env.reset(seed=4, eci=1)
    final = _diagnose(env, evidence=["ERROR kernel panic: the root cause is obvious"])
    assert final.metadata["reward_components"]["penalty"] == pytest.approx(-0.15)


def test_overconfidence_when_wrong_is_penalised(triage):
    env = triage.make_env()
    env.reset(seed=4, eci=1)
    wrong = next(s for s in env.observe()["components"] if s != env.oracle_view().root)
    final = _diagnose(env, component=wrong, confidence=0.99)
    meta = final.metadata
    assert not meta["solved"]
    assert meta["reward_components"]["penalty"] == pytest.approx(-0.15)
    assert meta["reward_components"]["calibration"] < 0.01


def test_efficiency_falls_with_wasted_steps(triage):
    env = triage.make_env()
    env.reset(seed=9, eci=1)
    fast = _diagnose(env).metadata["reward_components"]["efficiency"]
    env.reset(seed=9, eci=1)
    for svc in ("orders-db", "users-db", "event-bus"):
        env.step(triage.action_cls(tool="read_runbook", component=svc))
    slow = _diagnose(env).metadata["reward_components"]["efficiency"]
    assert fast == pytest.approx(0.30) and slow < fast


def test_hidden_constraint_only_revealed_by_the_root_runbook(triage):
    env = triage.make_env()
    seed = next(s for s in range(200) if (env.reset(seed=s, eci=4), env.oracle_view().constrained)[1])
    obs = env.reset(seed=seed, eci=4)
    inc = env.oracle_view()
    assert inc.fix != inc.fault.fix
    assert inc.fix not in obs.model_dump_json()
    obs = env.step(triage.action_cls(tool="read_runbook", component=inc.root))
    assert any(inc.fix in note for note in obs.notes)


def test_malformed_completion_costs_the_declared_penalty(triage):
    env = triage.make_env()
    env.reset(seed=1, eci=1)
    parsed = triage.protocol.parse("I think it is the database")
    obs = env.step(parsed.action)
    assert obs.error == "malformed_completion" and "no JSON object" in obs.feedback
    assert obs.reward == triage.section.malformed_reward
    assert not obs.done and obs.metadata["step"] == 1


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({}, "missing_tool"),
        ({"tool": "inspect_logs"}, "missing_component"),
        ({"tool": "inspect_logs", "component": "mainframe"}, "unknown_component"),
        ({"tool": "diagnose_incident", "component": "orders-db"}, "incomplete_diagnosis"),
    ],
)
def test_invalid_actions_are_rejected_with_a_code_and_penalty(triage, payload, code):
    rejected(triage, payload, code)


def test_wrong_typed_action_is_rejected_by_the_schema(triage):
    with pytest.raises(ValueError):
        triage.action_cls.model_validate({"tool": "inspect_logs", "component": ["a"], "confidence": "high"})


def test_budget_exhaustion_ends_unsolved(triage):
    env = triage.make_env()
    env.reset(seed=2, eci=5)
    budget = triage.section.step_budget[5]
    for i in range(budget):
        obs = env.step(triage.action_cls(tool="read_runbook", component="users-db"))
        assert obs.done == (i == budget - 1)
    assert obs.metadata["termination"] == "budget_exhausted" and not obs.metadata["solved"]


def test_stepping_after_done_is_harmless(triage):
    env = triage.make_env()
    result = run_episode(env, make_policy(triage, "oracle"), 3, 2)
    again = env.step(triage.action_cls(tool="inspect_logs", component="orders-db"))
    assert again.done and again.reward == 0.0 and again.error == "episode_over"
    assert env.state.step_count == result.steps


def test_unsupported_tier_is_refused(triage):
    env = triage.make_env()
    with pytest.raises(ValueError, match="eci=9 is not a supported tier"):
        env.reset(seed=1, eci=9)


def test_state_never_holds_the_answer(triage):
    env = triage.make_env()
    env.reset(seed=8, eci=4)
    state = env.state.model_dump_json()
    inc = env.oracle_view()
    assert inc.fault.id not in state and inc.root not in state
    assert env.state.step_budget == triage.section.step_budget[4]


def test_openenv_static_validation_passes(tmp_path):
    pkg = tmp_path / "incident_triage"
    shutil.copytree(SEEDS_DIR / "incident_triage", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run([sys.executable, "-m", "openenv.cli", "validate", "--level", "static", str(pkg)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  static.manifest" in result.stdout and "Verdict: PASS" in result.stdout


@pytest.mark.parametrize(("kwargs", "message"), [({"eci": True}, "eci=True"), ({"seed": "x"}, "seed='x'")])
def test_bad_reset_arguments_leave_the_episode_alone(triage, kwargs, message):
    env = triage.make_env()
    env.reset(seed=3, eci=2)
    before = env.state.model_dump()
    with pytest.raises(ValueError, match=message):
        env.reset(**{"seed": 1, "eci": 4, **kwargs})
    assert env.state.model_dump() == before and env.tier.eci == 2


def test_a_draft_telltale_listed_twice_is_listed_once():
    from openadapt.families.diagnosis.domain import DiagnosisDomain

    draft = {"faults": [{"id": "leakage", "evidence": ["ERROR {component} water seeping around the seal"],
                         "telltales": ["water seeping", "water seeping", "seal", "water seeping"]}]}
    assert DiagnosisDomain.tidy(draft)["faults"][0]["telltales"] == ["water seeping", "seal"]


def test_a_draft_log_line_without_its_component_gets_one_after_its_level():
    from openadapt.families.diagnosis.domain import DiagnosisDomain

    draft = {"symptom_lines": ["... {dependency} timed out ...", "WARN retries to {dependency} exhausted",
                               "ERROR {component} lost {dependency}"],
             "background_lines": ["pump cycle finished in {n} s"], "noise_lines": [],
             "faults": [{"id": "dry_run", "evidence": ["WARN suction pressure below {n} kPa", "{component} ok"]}]}
    tidy = DiagnosisDomain.tidy(draft)
    assert tidy["faults"][0]["evidence"] == ["WARN {component} suction pressure below {n} kPa", "{component} ok"]
    assert tidy["symptom_lines"] == ["ERROR {component} {dependency} timed out",
                                     "WARN {component} retries to {dependency} exhausted",
                                     "ERROR {component} lost {dependency}"]
    assert tidy["background_lines"] == ["INFO {component} pump cycle finished in {n} s"]


def test_a_draft_log_line_naming_one_component_literally_gets_the_placeholder_in_its_place():
    from openadapt.families.diagnosis.domain import DiagnosisDomain

    draft = {"components": [{"name": "pump-1"}, {"name": "pump-12"}, {"name": "well"}],
             "symptom_lines": ["ERROR pump-1 lost its feed from well", "WARN pump-12 retrying the call"],
             "background_lines": ["INFO pump-12 cycle finished", "INFO pump-1 and well in sync"], "noise_lines": [],
             "faults": [{"id": "dry_run", "evidence": ["ERROR pump-1 suction below {n} kPa"]}]}
    tidy = DiagnosisDomain.tidy(draft)
    assert tidy["faults"][0]["evidence"] == ["ERROR {component} suction below {n} kPa"]
    # 'pump-1' is not a part of 'pump-12'; a line naming two components gets the placeholder after its level
    assert tidy["background_lines"] == ["INFO {component} cycle finished", "INFO {component} pump-1 and well in sync"]
    # a symptom line written with two real names (as the designer asks for it): the printer first, then the
    # dependency; one name alone may be either, so it only gets '{component}' after its level
    assert tidy["symptom_lines"] == ["ERROR {component} lost its feed from {dependency}",
                                     "WARN {component} pump-12 retrying the call"]


def test_a_fault_reading_named_twice_and_json_debris_for_a_log_line_are_problems():
    from openadapt.families import get_family
    from openadapt.families.domain import DomainError

    data = get_family("diagnosis").load_example("kubernetes_cluster").model_dump(mode="json")
    data["faults"][0]["metrics"][1]["name"] = data["faults"][0]["metrics"][0]["name"]
    data["noise_lines"][0] = "INFO {component} ]} ``` ``` }"
    data["noise_lines"][1] = "INFO {component} ,  {"
    with pytest.raises(DomainError) as caught:
        get_family("diagnosis").parse_domain(data)
    problems = {p.path: p.message for p in caught.value.problems}
    assert "is already used by domain.faults[0].metrics[0]" in problems["domain.faults[0].metrics[1].name"]
    assert "JSON or markdown syntax" in problems["domain.noise_lines[0]"]
    assert "JSON or markdown syntax" in problems["domain.noise_lines[1]"]


def test_a_text_that_speaks_of_the_environments_tiers_is_a_problem():
    # the payment service's published package: "On harder tiers, the usual fix may not be effective ..."
    from openadapt.families import get_family
    from openadapt.families.domain import DomainError

    data = get_family("diagnosis").load_example("kubernetes_cluster").model_dump(mode="json")
    fix = data["faults"][0]["constraint"]["fix"]
    data["faults"][0]["constraint"]["note"] = f"On harder tiers, the usual fix may not be effective ({fix})."
    data["faults"][1]["runbook"] = "This episode the fix is different: check the node first."
    with pytest.raises(DomainError) as caught:
        get_family("diagnosis").parse_domain(data)
    problems = {p.path: p.message for p in caught.value.problems}
    assert "speaks of the training environment ('harder tiers')" in problems["domain.faults[0].constraint.note"]
    assert "('This episode')" in problems["domain.faults[1].runbook"]
    assert len(problems) == 2



def test_a_constraint_calling_for_another_faults_usual_fix_is_told_every_usual_fix():
    from openadapt.families import get_family
    from openadapt.families.domain import DomainError

    data = get_family("diagnosis").load_example("kubernetes_cluster").model_dump(mode="json")
    theirs = data["faults"][0]["fix"]
    note = data["faults"][1]["constraint"]["note"].replace(data["faults"][1]["constraint"]["fix"], theirs)
    data["faults"][1]["constraint"] = {"note": note, "fix": theirs}
    with pytest.raises(DomainError) as caught:
        get_family("diagnosis").parse_domain(data)
    message = {p.path: p.message for p in caught.value.problems}["domain.faults[1].constraint.fix"]
    assert "another fault's usual fix" in message
    assert all(repr(f["fix"]) in message for f in data["faults"])  # what it must differ from


def _broken_rules(mutate) -> dict[str, set[str]]:
    from openadapt.families import get_family

    family = get_family("diagnosis")
    data = family.load_example("kubernetes_cluster").model_dump(mode="json")
    mutate(data)
    return broken_rules(family, data)


def test_a_domain_too_small_for_a_tier_breaks_the_rule_it_was_told():
    from openadapt.families import get_family

    def three_fixes(d):  # seven faults sharing three usual fixes
        for i, fault in enumerate(d["faults"]):
            fault["fix"] = d["faults"][i % 3]["fix"]

    def flat_reading(d):
        reading = d["faults"][0]["metrics"][1]
        reading["faulty"] = reading["healthy"]

    cases = [
        (three_fixes, "domain.faults", "usual_fixes"),
        (flat_reading, "domain.faults[0].metrics[1]", "reading_moves"),
        # Nothing depends on the ingress: a fault only it can have never sits upstream of an alert.
        (lambda d: d["faults"][0].update(applies_to=["ingress"]), "domain.faults[0].applies_to", "upstream_kinds"),
    ]
    for mutate, path, code in cases:
        assert code in _broken_rules(mutate).get(path, set()), (path, code)
    assert {r.code for r in get_family("diagnosis").domain.RULES} == {code for _, _, code in cases}


def test_a_draft_fault_id_or_fix_spelled_with_hyphens_becomes_the_identifier_it_means():
    from openadapt.families.diagnosis.domain import DiagnosisDomain

    draft = {"faults": [{"id": "Pump-Failure", "fix": "replace pump", "evidence": [],
                         "constraint": {"note": "do not stop it; use the standby (use-standby)", "fix": "use-standby"}},
                        {"id": "dry-run!", "evidence": []}]}
    tidy = DiagnosisDomain.tidy(draft)
    assert (tidy["faults"][0]["id"], tidy["faults"][0]["fix"]) == ("pump_failure", "replace_pump")
    assert tidy["faults"][0]["constraint"] == {"note": "do not stop it; use the standby (use_standby)",
                                               "fix": "use_standby"}
    assert tidy["faults"][1]["id"] == "dry-run!" and "fix" not in tidy["faults"][1]  # left for the checks


def test_a_draft_constraint_note_and_its_fix_are_made_to_agree_within_the_notes_bound():
    from openadapt.families.diagnosis.domain import NOTE_CHARS, DiagnosisDomain

    ramble = ("runbook note: the pressure is low and the pump may be blocked with debris. If it is blocked it may "
              "need cleaning. If the pressure stays below the setpoint for more than ten minutes it may be a sign "
              "of a serious problem and a sign of a serious problem and a sign of a serious problem and a sign of")
    draft = {"faults": [
        {"id": "blocked_intake", "fix": "replace_pump", "evidence": [], "constraint": {
            "note": "the pump is the only one running; do not stop it. Move its load to the standby unit instead "
                    "(shift_to_standby).", "fix": "replace_pump"}},
        {"id": "low_pressure", "fix": "check_pressure", "evidence": [],
         "constraint": {"note": ramble, "fix": "clean_strainer"}},
        {"id": "worn_seal", "fix": "replace_seal", "evidence": [],  # names the usual fix: not the one it calls for
         "constraint": {"note": "do not run it dry (replace_seal); flush the line first", "fix": "flush_line"}},
    ]}
    faults = DiagnosisDomain.tidy(draft)["faults"]
    assert faults[0]["constraint"]["fix"] == "shift_to_standby"  # the fix the note names, not the usual one
    note = faults[1]["constraint"]["note"]
    assert len(ramble) + len(" (clean_strainer)") > NOTE_CHARS >= len(note)
    assert note == "runbook note: the pressure is low and the pump may be blocked with debris. If it is blocked it " \
                   "may need cleaning. (clean_strainer)"  # cut back to its last full sentence, then the fix
    assert faults[2]["constraint"] == {"note": "do not run it dry (replace_seal); flush the line first (flush_line)",
                                       "fix": "flush_line"}


def test_a_draft_evidence_placeholder_the_engine_does_not_fill_is_read_as_what_it_stands_for():
    from openadapt.families.diagnosis.domain import DiagnosisDomain

    draft = {"faults": [{"id": "worn_seal", "evidence": ["WARN {failing_pump} suction pressure {n} kPa",
                                                         "ERROR {component} {pump_id} seal leak {pct}%"]}]}
    assert DiagnosisDomain.tidy(draft)["faults"][0]["evidence"] == [
        "WARN {component} suction pressure {n} kPa", "ERROR {component} pump id seal leak {pct}%"]
    # the Kubernetes prompt's 1.5B, 2026-12-05: a slot in angle brackets beside the component, in every fault
    slots = {"faults": [{"id": "oom", "evidence": [
        "ERROR {component} <pod-name> memory usage 90% above limit", "WARN <pod name> restarted {n} times",
        "INFO {component} on <node>"]}]}
    assert DiagnosisDomain.tidy(slots)["faults"][0]["evidence"] == [
        "ERROR {component} memory usage 90% above limit", "WARN {component} restarted {n} times",
        "INFO {component} on node"]
    background = {"background_lines": ["INFO pods checked with kubectl describe {component} <pod-name>"]}
    assert DiagnosisDomain.tidy(background)["background_lines"] == [
        "INFO pods checked with kubectl describe {component}"]


def test_a_dependency_listed_twice_is_listed_once_by_the_tidy():
    # the Kubernetes prompt's 1.5B, 2026-12-03: a replica set needing `deployment-config` three times
    from openadapt.families.diagnosis.domain import DiagnosisDomain

    draft = {"components": [{"name": "replica-set", "depends_on": ["deployment-config", "node", "deployment-config"]},
                            {"name": "odd", "depends_on": [{"name": "x"}, {"name": "x"}]}, "not a component"]}
    components = DiagnosisDomain.tidy(draft)["components"]
    assert components[0]["depends_on"] == ["deployment-config", "node"]
    assert components[1:] == draft["components"][1:]  # what is not a list of names is left for the checks
