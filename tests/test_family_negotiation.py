"""The negotiation family: reward components on hand-made moves, each tier's mechanic, rejected moves, domain
validation with field paths, a third world (a salary offer, written here) through the same engine, and the
measured separation of the reference policies."""

import copy
import random
import re

import pytest
from family_checks import broken_rules, package, play, rejected, trajectory

from openadapt.envpkg.evaluation import evaluate, make_policy
from openadapt.envpkg.examples import write_example_package
from openadapt.envpkg.loader import load, resolve
from openadapt.families import get_family
from openadapt.families.domain import DomainError, template_pattern
from openadapt.families.negotiation.engine import CONCESSION_EXPONENT, TOUGHNESS
from openadapt.families.yamlio import read_domain_file

COMPONENTS = {"deal", "conduct", "penalty"}
FAMILY = get_family("negotiation")

# A third world, unrelated to the examples: a candidate negotiates a job offer with a hiring manager.
SALARY = {
    "title": "Job offer negotiation",
    "summary": "A senior data engineer has an offer from a logistics scale-up in Hamburg and negotiates the "
               "package with the hiring manager over video calls: base salary, signing bonus, remote days and "
               "holidays, within what the candidate needs to accept.",
    "agent_role": "a senior data engineer weighing an offer",
    "counterpart_role": "the hiring manager",
    "medium": "video call",
    "counterparts": ["Katrin Vogel (FrachtWerk GmbH)", "Daniel Osei (Containa Logistics)"],
    "subjects": ["the senior data engineer offer in the routing team", "the staff data engineer offer in the "
                 "pricing platform team"],
    "issues": [
        {"id": "base_salary", "label": "base salary", "phrase": "a base salary of {value} EUR a year",
         "low": 62000, "high": 98000, "step": 500, "agent_prefers": "high", "agent_weight": 6,
         "limit": [74000, 80000],
         "priority_tells": ["Our salary bands are reviewed by the works council every year."],
         "constraint": {"reveal": "The band for this grade tops out at {value}; I cannot go above it.",
                        "hint": "That salary is above anything I can get approved for this grade."}},
        {"id": "signing_bonus", "label": "signing bonus", "phrase": "a signing bonus of {value} EUR",
         "low": 0, "high": 20000, "step": 500, "agent_prefers": "high", "agent_weight": 2,
         "limit": [2000, 6000],
         "priority_tells": ["One-off payments come straight out of my team budget this year."],
         "constraint": {"reveal": "Finance caps signing bonuses at {value} this year.",
                        "hint": "A bonus that size would need a board approval I will not get."}},
        {"id": "remote_days", "label": "remote days", "phrase": "{value} remote days a month",
         "low": 0, "high": 22, "step": 1, "agent_prefers": "high", "agent_weight": 2,
         "limit": [6, 10],
         "priority_tells": ["I really want the team together in the office for most of the week."]},
        {"id": "holiday_days", "label": "holidays", "phrase": "{value} days of holiday",
         "low": 24, "high": 36, "step": 0.5, "agent_prefers": "high", "agent_weight": 1,
         "limit": [26, 28],
         "priority_tells": ["Cover during the summer is a constant headache for us."]},
    ],
    "personas": [
        {"id": "band_keeper", "description": "a manager bound by salary bands; flexible on perks",
         "weights": {"base_salary": 6, "signing_bonus": 2, "remote_days": 1, "holiday_days": 1},
         "reservation": [0.3, 0.4], "concession": "boulware", "patience": [4, 7], "insult_margin": 0.15,
         "style_tells": ["I have to justify every offer to HR line by line."]},
        {"id": "office_first", "description": "a manager who wants the team on site; money is easier",
         "weights": {"base_salary": 2, "signing_bonus": 1, "remote_days": 6, "holiday_days": 1},
         "reservation": [0.3, 0.42], "concession": "linear", "patience": [3, 6], "insult_margin": 0.2,
         "style_tells": ["I would like to have you start soon, we have a lot planned."]},
        {"id": "cash_tight", "description": "a scale-up manager short of cash this year; gives time, not money",
         "weights": {"base_salary": 3, "signing_bonus": 5, "remote_days": 1, "holiday_days": 2},
         "reservation": [0.3, 0.42], "concession": "conceder", "patience": [3, 5], "insult_margin": 0.12,
         "style_tells": ["We just closed our round, but every euro is accounted for."]},
    ],
    "messages": {
        "opening": ["Thanks for taking the time. For {subject} we would like to offer {offer}.",
                    "We are excited about you. Our offer for {subject} is {offer}."],
        "counter": ["I talked to HR. We can improve to {offer}.", "Let me come towards you: {offer}."],
        "final": ["This is the best I can do: {offer}.", "I am at the end of my mandate with {offer}."],
        "accept": ["Wonderful, we agree on {offer}. HR will send the contract tomorrow."],
        "confirm": ["Great, welcome on board. The contract follows tomorrow."],
        "insulted": ["That is far outside what we pay anyone in this team."],
        "walk_away": ["I think we should stop here; we will keep looking."],
        "anchors": ["Candidates at your level usually accept {value}.",
                    "The market survey we use puts {issue} at {value}."],
        "priorities": ["For us {top} is the hard part; {least} is much easier."],
        "no_constraints": ["Nothing is fixed, it is about the overall package."],
        "timeline": ["I need an answer within {rounds} more conversations."],
    },
}


def _package(root, name, domain_data):
    return package(FAMILY, root, name, domain_data, task="{title}: negotiate the package",
                   readme="# {name}\n\n{summary}\n")


@pytest.fixture(scope="module")
def supplier(tmp_path_factory):
    return load(resolve(str(write_example_package("negotiation", "supplier_email", tmp_path_factory.mktemp("n")))))


@pytest.fixture(scope="module")
def salary(tmp_path_factory):
    return _package(tmp_path_factory.mktemp("s"), "salary_offer", SALARY)


def _example_data(name="supplier_email"):
    return copy.deepcopy(read_domain_file(FAMILY.examples()[name]))


def _seed(env, eci, predicate, seeds=range(400)):
    """The first seed whose episode has the property (`predicate(counterpart, env)`)."""
    for seed in seeds:
        env.reset(seed=seed, eci=eci)
        if predicate(env.oracle_view(), env):
            return seed
    raise AssertionError("no seed with that property")


def _offer(env, terms, message="Our proposal."):
    return env.step(env.action_type(move=env.domain.moves.offer, message=message, **terms))


def _limits(env):
    return env.observe()["limits"]


# ---- registration and examples --------------------------------------------------------------------------------
def test_family_is_registered_with_its_examples():
    assert FAMILY.ref == "negotiation@1"
    assert {"supplier_email", "freight_rate"} <= set(FAMILY.examples())
    for name in FAMILY.examples():
        assert FAMILY.load_example(name).issues
    assert FAMILY.step_budget[5] < FAMILY.step_budget[4]


# ---- determinism -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("eci", [1, 3, 5])
def test_episode_is_a_function_of_seed_and_tier(supplier, eci):
    assert trajectory(supplier, "random", 11, eci) == trajectory(supplier, "random", 11, eci)
    env = supplier.make_env()
    openings = {env.reset(seed=s, eci=eci).model_dump_json(exclude={"metadata"}) for s in range(20)}
    assert len(openings) == 20


# ---- reward components on hand-made moves ----------------------------------------------------------------------
def test_holding_the_best_deal_until_accepted_scores_full(supplier):
    env = supplier.make_env()
    env.reset(seed=4, eci=1)
    cp = env.oracle_view()
    for t in range(1, cp.floor_round + 1):
        obs = _offer(env, cp.best_offer)
        assert obs.done == (t == cp.floor_round)  # it accepts exactly when its aspiration reaches its reservation
    meta = obs.metadata
    assert meta["solved"] and obs.reward == pytest.approx(1.0)
    assert meta["reward_components"] == {"deal": 0.8, "conduct": 0.2, "penalty": 0.0}


def test_accepting_the_list_terms_breaks_the_limits(supplier):
    env = supplier.make_env()
    env.reset(seed=4, eci=1)
    obs = env.step(env.action_type(move=env.domain.moves.accept))
    assert obs.done and not obs.metadata["solved"]
    assert obs.metadata["reward_components"] == {"deal": 0.0, "conduct": 0.0, "penalty": -0.5}


def test_a_deal_at_your_own_limits_captures_nothing(supplier):
    env = supplier.make_env()
    env.reset(seed=6, eci=1)
    limits = _limits(env)
    while not (obs := _offer(env, limits)).done:
        pass
    meta = obs.metadata
    assert env._talk.deal == limits and not meta["solved"]
    assert meta["reward_components"] == {"deal": 0.0, "conduct": 0.0, "penalty": 0.0}  # within limits, no gain


def test_share_of_the_gain_scales_the_deal_component(supplier):
    env = supplier.make_env()
    env.reset(seed=6, eci=1)
    cp, limits = env.oracle_view(), _limits(env)
    halfway = {i: env._snap(i, (cp.best_offer[i] + limits[i]) / 2) for i in limits}
    while not (obs := _offer(env, halfway)).done:
        pass
    share = env._verdict.share
    assert 0.3 < share < 0.7 and not obs.metadata["solved"]
    assert obs.metadata["reward_components"]["deal"] == pytest.approx(0.8 * share, abs=1e-6)
    assert obs.metadata["reward_components"]["conduct"] == 0.0  # the 0.20 is for meeting the bar


def test_insulting_offers_cost_patience_and_conduct(supplier):
    env = supplier.make_env()
    env.reset(seed=4, eci=1)
    cp, d = env.oracle_view(), env.domain
    dream = {i.id: (i.low if i.agent_prefers == "low" else i.high) for i in d.issues}
    before = env._talk.walk_round
    obs = _offer(env, dream)
    assert env._talk.insults == 1 and env._talk.walk_round == before - 1
    assert obs.their_offer == env._opening  # no counter to an insult
    assert any(line in obs.thread[-1] for line in d.messages.insulted)
    while not (obs := _offer(env, cp.best_offer)).done:
        pass
    assert obs.metadata["solved"] and obs.metadata["reward_components"]["conduct"] == pytest.approx(0.15)


def test_walking_away_from_a_possible_deal_earns_nothing(supplier):
    env = supplier.make_env()
    env.reset(seed=4, eci=1)
    obs = env.step(env.action_type(move=env.domain.moves.walk_away))
    assert obs.done and not obs.metadata["solved"] and obs.reward == 0.0 and obs.status == "you walked away"


def test_the_counterpart_walks_away_when_its_patience_runs_out(supplier):
    env = supplier.make_env()
    env.reset(seed=4, eci=1)
    ask = env.action_type(move=env.domain.moves.ask, question=env.domain.questions.timeline.name)
    obs = env.step(ask)
    rounds = int(next(w for w in obs.thread[-1].split() if w.isdigit()))
    assert rounds == env._talk.walk_round - 1
    for _ in range(rounds):
        assert not obs.done
        obs = env.step(ask)  # asking again wastes turns
    assert obs.done and obs.status == "they walked away" and obs.reward == 0.0
    assert obs.thread[-1].split(": ", 1)[1] in env.domain.messages.walk_away


# ---- what each tier changes -------------------------------------------------------------------------------------
def test_clean_tier_has_no_noise_distractors_or_constraints(supplier):
    env = supplier.make_env()
    for seed in range(60):
        obs = env.reset(seed=seed, eci=1)
        cp = env.oracle_view()
        assert None not in obs.targets.values()
        assert not cp.omitted and not cp.bluff_rounds and not cp.anchor_rounds
        assert cp.decoy is None and cp.constraint is None and cp.deal_possible


def test_noisy_tier_leaves_terms_out_and_they_stay_at_the_opening(supplier):
    env = supplier.make_env()
    seed = _seed(env, 2, lambda cp, env: 1 in cp.omitted)
    env.reset(seed=seed, eci=2)
    cp = env.oracle_view()
    obs = _offer(env, cp.best_offer)  # worth its reservation: countered in round 1, never accepted
    left_out = cp.omitted[1]
    assert not obs.done and obs.their_offer[left_out] is None
    assert env.phrase(left_out, env._talk.standing[left_out]) not in obs.thread[-1]
    final = env.step(env.action_type(move=env.domain.moves.accept))
    assert env._talk.deal[left_out] == env._opening[left_out]  # the list term applies
    assert final.metadata["reward_components"]["penalty"] == -0.5  # beyond the agent's limit
    missing = sum(None in env.reset(seed=s, eci=2).targets.values() for s in range(100))
    assert 15 <= missing <= 45  # the briefing loses a target at the tier's drop rate (0.3)


def test_bluffed_final_offers_come_before_the_real_floor(supplier):
    env = supplier.make_env()
    seed = _seed(env, 3, lambda cp, env: 1 in cp.bluff_rounds and cp.floor_round >= 3)
    env.reset(seed=seed, eci=3)
    cp = env.oracle_view()
    first = _offer(env, cp.best_offer)
    finals = [template_pattern(t, matches=".*?", flags=re.DOTALL) for t in env.domain.messages.final]
    assert any(p.search(first.thread[-1]) for p in finals)
    called_final = env._their_utility(env._talk.standing)
    assert called_final > cp.reservation + 0.01  # it said "final" but was not at its floor...
    while not (obs := _offer(env, cp.best_offer)).done:
        pass
    assert obs.status == "agreed" and obs.metadata["step"] == cp.floor_round
    assert env._their_utility(env._talk.deal) < called_final  # ...and later took less than its "final" offer
    env.reset(seed=seed, eci=1)
    assert not env.oracle_view().bluff_rounds  # the same negotiation on the clean tier: no bluff


def test_red_herring_is_claimed_but_worth_nothing_to_the_counterpart(supplier):
    env = supplier.make_env()
    seed = _seed(env, 3, lambda cp, env: cp.decoy is not None)
    obs = env.reset(seed=seed, eci=3)
    cp = env.oracle_view()
    decoy = env._index()["issues"][cp.decoy]
    assert cp.weights[cp.decoy] == 0.0
    assert any(tell in obs.thread[0] for tell in decoy.priority_tells)  # it claims the decoy matters
    assert cp.best_offer[cp.decoy] == (decoy.low if decoy.agent_prefers == "low" else decoy.high)
    obs = env.step(env.action_type(move=env.domain.moves.ask, question=env.domain.questions.priorities.name))
    top = max(cp.weights, key=cp.weights.get)
    answer = obs.thread[-1]
    assert env._index()["issues"][top].label in answer and decoy.label in answer  # asked, it tells the truth
    assert answer.index(env._index()["issues"][top].label) < answer.index(decoy.label)


def test_anchoring_claims_appear_on_adversarial_tiers(supplier):
    env = supplier.make_env()
    seed = _seed(env, 3, lambda cp, env: 1 in cp.anchor_rounds)
    env.reset(seed=seed, eci=3)
    cp = env.oracle_view()
    issue, claim = cp.anchor_rounds[1]
    obs = _offer(env, cp.best_offer)
    assert env.phrase(issue, claim) in obs.thread[-1]
    limit = obs.limits[issue]
    assert env._v(issue, claim) < env._v(issue, limit)  # the claim sits beyond the agent's limit


def test_hidden_constraint_is_only_revealed_by_asking(supplier):
    env = supplier.make_env()

    def crossing(cp, env):  # a constrained episode whose targets cross the hard limit without insulting
        targets = env.observe()["targets"]
        if cp.constraint is None or not cp.deal_possible or None in targets.values():
            return False
        return env._breaks_constraint(targets) and env._their_utility(targets) > cp.reservation - 0.1

    obs = env.reset(seed=_seed(env, 4, crossing), eci=4)
    cp = env.oracle_view()
    k, bound = cp.constraint
    assert cp.reveal and cp.reveal not in obs.model_dump_json() and env.secret_values() == [cp.reveal]
    target = obs.targets  # the briefing's targets do not know the hard limit
    walk = env._talk.walk_round
    obs = _offer(env, target)
    hint = env._index()["issues"][k].constraint.hint
    assert obs.thread[-1].split(": ", 1)[1].startswith(hint)  # why it cannot, without the number...
    assert not obs.done and not env._breaks_constraint(env._talk.standing)  # ...and a counter within its limit
    assert cp.reveal not in obs.model_dump_json() and env._talk.walk_round == walk
    _offer(env, target)
    assert env._talk.walk_round == walk - 1  # crossing it again costs patience
    obs = env.step(env.action_type(move=env.domain.moves.ask, question=env.domain.questions.constraints.name))
    assert cp.reveal in obs.thread[-1] and env.phrase(k, bound) in cp.reveal
    assert not env._breaks_constraint(cp.best_offer)
    for eci in (1, 2, 3):
        for s in range(40):
            env.reset(seed=s, eci=eci)
            assert env.oracle_view().constraint is None
    crossed = 0
    for s in range(200):
        env.reset(seed=s, eci=4)
        crossed += env.oracle_view().constraint is not None
    assert 100 <= crossed <= 150  # 70% of hidden-constraint episodes (a few fall back when nothing can be cut)


def test_no_deal_episodes_reward_a_walk_away_only_after_asking(supplier):
    env = supplier.make_env()
    seed = _seed(env, 4, lambda cp, env: not cp.deal_possible)
    moves, questions = supplier.action_cls, env.domain.questions
    env.reset(seed=seed, eci=4)
    blind = env.step(moves(move=env.domain.moves.walk_away))
    assert not blind.metadata["solved"] and blind.reward == 0.0
    env.reset(seed=seed, eci=4)
    k, bound = env.oracle_view().constraint
    assert env._v(k, bound) < env._v(k, _limits(env)[k])  # its hard limit lies beyond the agent's
    env.step(moves(move=env.domain.moves.ask, question=questions.constraints.name))
    final = env.step(moves(move=env.domain.moves.walk_away))
    assert final.metadata["solved"] and final.reward == pytest.approx(1.0)


def test_top_tier_is_tougher_and_has_the_smaller_budget(supplier):
    env = supplier.make_env()
    for seed in range(40):
        obs = env.reset(seed=seed, eci=5)
        cp = env.oracle_view()
        assert obs.steps_remaining == 6 and cp.floor_round <= 5
        assert cp.exponent == pytest.approx(CONCESSION_EXPONENT[cp.persona.concession] * TOUGHNESS ** 2)
    env.reset(seed=2, eci=5)
    obs = env.observe()
    while not (obs := env.step(supplier.action_cls(move=env.domain.moves.ask,
                                                   question=env.domain.questions.timeline.name))).done:
        pass
    assert obs.metadata["step"] <= 6 and not obs.metadata["solved"] and obs.reward == 0.0


# ---- rejected moves ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({}, "missing_move"),
        ({"move": "send_offer", "unit_price": 12.0}, "incomplete_offer"),
        ({"move": "ask_question"}, "missing_question"),
    ],
)
def test_invalid_moves_are_rejected_with_a_code(supplier, payload, code):
    rejected(supplier, payload, code)


def test_out_of_range_terms_and_unknown_moves_fail_the_schema(supplier):
    with pytest.raises(ValueError):
        supplier.action_cls.model_validate({"move": "send_offer", "unit_price": 99.0})
    with pytest.raises(ValueError):
        supplier.action_cls.model_validate({"move": "bribe"})
    assert supplier.protocol.parse("I accept.").error


def test_rewards_stay_in_range_and_the_state_holds_no_secret(supplier):
    def no_secret(env, obs):
        assert all(s not in env.state.model_dump_json() for s in env.secret_values())

    for _, _, final in play(supplier, range(40), on_reset=no_secret):
        assert set(final.metadata["reward_components"]) == COMPONENTS


def test_prompts_render_and_actions_round_trip(supplier):
    protocol, env = supplier.protocol, supplier.make_env()
    system = protocol.system_prompt()
    assert "send_offer" in system and "ask_constraints" in system and "unit_price: unit price, 9.80 to 15.60" in system
    obs = env.reset(seed=3, eci=4)
    agent = make_policy(supplier, "oracle")
    agent.begin(env, obs, random.Random(0))
    while not obs.done:
        action = agent.act(obs)
        assert protocol.parse(protocol.format_action(action)).action.model_dump() == action.model_dump()
        obs = env.step(action)
        assert "THREAD:" in protocol.render(obs)


# ---- domain validation ------------------------------------------------------------------------------------------
def _semantic_problems(data):
    """The problems of a domain that parses, by path."""
    return {p.path: p.message for p in FAMILY.domain.model_validate(data).problems()}


def _problems(data):
    with pytest.raises(DomainError) as err:
        FAMILY.parse_domain(data)
    return {p.path: p.message for p in err.value.problems}


def test_a_broken_reference_names_the_field():
    data = _example_data()
    data["personas"][1]["weights"]["unit_cost"] = data["personas"][1]["weights"].pop("unit_price")
    problems = _problems(data)
    assert "domain.personas[1].weights.unit_cost" in problems
    assert "not a defined issue" in problems["domain.personas[1].weights.unit_cost"]
    assert "unit_price" in problems["domain.personas[1].weights"]  # and the issue left without a weight


def test_a_duplicate_names_the_field():
    data = _example_data()
    data["issues"][2]["id"] = data["issues"][0]["id"]
    data["personas"][3]["id"] = data["personas"][0]["id"]
    problems = _problems(data)
    assert "already used" in problems["domain.issues[2].id"]
    assert "already used" in problems["domain.personas[3].id"]


def _broken_rules(mutate) -> dict[str, set[str]]:
    """The declared rules the example breaks once `mutate`d, by path; each problem in the words the designer was
    told before it wrote the fields."""
    data = _example_data()
    mutate(data)
    return broken_rules(FAMILY, data)


def _same_weights(data):
    for persona in data["personas"]:
        persona["weights"] = dict(data["personas"][0]["weights"])


def test_a_domain_too_small_for_a_tier_breaks_the_rule_it_was_told():
    # One constraint left: ECI 4-5 would always hide the same limit.
    assert _broken_rules(lambda d: [i.pop("constraint", None) for i in d["issues"][1:]])["domain.issues"] == {
        "constrained_issues"}
    # 10..56 in steps of 23: a whole number of steps, but two of them leave nothing to bargain over.
    assert _broken_rules(lambda d: d["issues"][1].update(step=23))["domain.issues[1].step"] == {"grid_steps"}
    # A limit outside the range 12..48: the list terms could not lie beyond it.
    assert _broken_rules(lambda d: d["issues"][3].update(limit=[10, 20]))["domain.issues[3].limit"] == {
        "limit_inside_range"}
    # Every persona puts the same term first: the counterpart's priorities would not vary with the seed.
    assert "top_priorities" in _broken_rules(_same_weights)["domain.personas"]
    # A reservation above what the agent's strictest limits leave the counterpart: no deal possible.
    assert _broken_rules(lambda d: d["personas"][0].update(reservation=[0.6, 0.7]))[
        "domain.personas[0].reservation"] == {"room_for_a_deal"}


def test_a_domain_too_small_for_the_tiers_names_the_field():
    data = _example_data()
    data["messages"]["final"] = data["messages"]["final"][:1]
    assert "domain.messages.final" in _problems(data)
    data = _example_data()
    data["issues"][1]["step"] = 0.3  # 10..56 in steps of 0.3: not a whole number of steps
    assert "whole number of steps" in _problems(data)["domain.issues[1].step"]


def test_a_bad_placeholder_names_the_field():
    data = _example_data()
    data["messages"]["counter"][0] = "We can do {price} and {offer}."
    data["issues"][0]["phrase"] = "a unit price of EUR"
    data["issues"][1]["constraint"]["reveal"] = "Our line is fully booked for another customer this month."
    data["issues"][2]["constraint"]["hint"] = "Our credit insurer stops at 45 days."
    problems = _problems(data)
    assert "{price}" in problems["domain.messages.counter[0]"]
    assert "{value}" in problems["domain.issues[0].phrase"]
    assert "{value}" in problems["domain.issues[1].constraint.reveal"]
    assert "must not contain a number" in problems["domain.issues[2].constraint.hint"]  # it would give the bound away


def test_an_issue_named_like_an_action_field_is_refused():
    data = _example_data()
    data["issues"][3]["id"] = "message"  # an action field of the family's own
    for persona in data["personas"]:
        persona["weights"]["message"] = persona["weights"].pop("warranty_months")
    assert "reserved" in _problems(data)["domain.issues[3].id"]


# ---- a different world through the same engine -------------------------------------------------------------------
def test_a_salary_negotiation_runs_through_the_same_engine(salary):
    env = salary.make_env()
    obs = env.reset(seed=5, eci=1)
    assert "base_salary" in obs.limits and "hiring manager" in obs.briefing[0]
    oracle = evaluate(salary, "oracle", range(1, 6), 40)
    heuristic = evaluate(salary, "heuristic", range(1, 6), 40)
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate == 1.0
        assert oracle.tier(t).mean_return >= FAMILY.solved_reward
    rates = [heuristic.tier(t).solve_rate for t in range(1, 6)]
    assert rates[0] >= 0.8 and rates[0] - rates[4] >= 0.6, rates


# ---- the measured separation ------------------------------------------------------------------------------------
@pytest.mark.parametrize("example", ["supplier_email", "freight_rate"])
def test_oracle_solves_every_tier_and_the_heuristic_falls(tmp_path, example):
    pkg = load(resolve(str(write_example_package("negotiation", example, tmp_path))))
    oracle = evaluate(pkg, "oracle", range(1, 6), 100)
    heuristic = evaluate(pkg, "heuristic", range(1, 6), 100)
    rand = evaluate(pkg, "random", range(1, 6), 100)
    rates = [heuristic.tier(t).solve_rate for t in range(1, 6)]
    returns = [heuristic.tier(t).mean_return for t in range(1, 6)]
    assert all(b <= a + 0.05 for a, b in zip(rates, rates[1:], strict=False)), rates
    assert all(b <= a + 0.05 for a, b in zip(returns, returns[1:], strict=False)), returns
    assert rates[0] >= 0.9 and rates[4] <= 0.1, rates
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate == 1.0 and oracle.tier(t).mean_return >= FAMILY.solved_reward
        assert rand.tier(t).solve_rate <= 0.05


def test_the_sandbox_validator_passes_an_example(tmp_path, validator):
    report = validator.validate(write_example_package("negotiation", "supplier_email", tmp_path))
    failing = [c.check_id for c in report.checks if c.status.value not in ("pass", "skip")]
    assert report.verdict.value == "pass", (failing, report.designer_feedback())


def test_the_draft_tidy_gives_a_coarse_grid_a_round_step_and_moves_a_limit_off_the_ranges_end():
    # the packaging supplier's 1.5B: delivery days 1..10 in steps of 1, its limit [5, 10]
    from openadapt.families.negotiation.domain import NegotiationDomain

    issue = {"id": "delivery_days", "low": 1, "high": 10, "step": 1, "limit": [5, 10]}
    (tidied,) = NegotiationDomain.tidy({"issues": [issue]})["issues"]
    assert tidied["step"] == 0.2 and tidied["limit"] == [5, 9.8] and issue["step"] == 1  # the draft is not edited
    fine = {"id": "unit_price", "low": 9.8, "high": 15.6, "step": 0.05, "limit": [13.2, 14.0]}
    assert NegotiationDomain.tidy({"issues": [fine]})["issues"] == [fine]  # a sound issue stays as written
    point = {"id": "packaging_quality", "low": 0.8, "high": 1.0, "step": 0.05, "limit": [1.0, 1.0]}
    assert NegotiationDomain.tidy({"issues": [point]})["issues"][0]["limit"] == [0.99, 0.99]  # a point at the end


def test_the_draft_tidy_lowers_a_reservation_that_leaves_no_room_for_a_deal_keeping_its_width():
    # all three of the packaging supplier's personas wanted 0.5 where the agent's limits left them 0.34-0.40
    from openadapt.families.negotiation.domain import NegotiationDomain

    family = get_family("negotiation")
    data = family.load_example("freight_rate").model_dump(mode="json")
    data["personas"][0]["reservation"] = [0.7, 0.8]
    problems = [p.path for p in NegotiationDomain.model_validate(data).family_problems()]
    assert "domain.personas[0].reservation" in problems
    tidied = NegotiationDomain.tidy(data)
    lo, hi = tidied["personas"][0]["reservation"]
    assert hi < 0.8 and round(hi - lo, 2) == 0.1 and data["personas"][0]["reservation"] == [0.7, 0.8]
    domain = NegotiationDomain.model_validate(tidied)
    assert not [p for p in domain.family_problems() if p.path.startswith("domain.personas[0]")]
    room = domain.counterpart_utility_at_strictest_limits(domain.personas[0]) - hi
    assert 0.1 < room <= 0.12  # moved just clear of the margin, not further
    assert tidied["personas"][1:] == data["personas"][1:]  # sound personas stay as written


def test_the_draft_tidy_gives_the_last_persona_another_top_priority_where_all_share_one():
    # the supplier's 1.5B gave all three personas the same weights
    from openadapt.families.negotiation.domain import NegotiationDomain

    family = get_family("negotiation")
    data = family.load_example("freight_rate").model_dump(mode="json")
    same = dict(data["personas"][0]["weights"])
    for persona in data["personas"]:
        persona["weights"] = dict(same)
    assert "domain.personas" in [p.path for p in NegotiationDomain.model_validate(data).family_problems()]
    tidied = NegotiationDomain.tidy(data)
    top, second = sorted(same, key=same.get, reverse=True)[:2]
    last = tidied["personas"][-1]["weights"]
    assert (last[top], last[second]) == (same[second], same[top])
    assert [p["weights"] for p in tidied["personas"][:-1]] == [same] * (len(data["personas"]) - 1)
    assert "domain.personas" not in [p.path for p in NegotiationDomain.model_validate(tidied).family_problems()]
    example = family.load_example("freight_rate").model_dump(mode="json")
    assert NegotiationDomain.tidy(example)["personas"] == example["personas"]  # varied already: as written
    # the last persona weighs every term alike (no top two to swap; the check reads the first issue as its top:
    # the supplier's `price`, which all put first): the one before it is swapped
    ids = [issue["id"] for issue in data["issues"]]
    same = {k: 6.0 if i == 0 else 3.0 if i == 1 else 1.0 for i, k in enumerate(ids)}
    top, second = ids[:2]
    for persona in data["personas"]:
        persona["weights"] = dict(same)
    data["personas"][-1]["weights"] = dict.fromkeys(same, 1.0)
    assert "domain.personas" in [p.path for p in NegotiationDomain.model_validate(data).family_problems()]
    tidied = NegotiationDomain.tidy(data)
    assert tidied["personas"][-1]["weights"] == dict.fromkeys(same, 1.0)
    assert tidied["personas"][-2]["weights"][second] == same[top]
    # and its reservation fitted to the swapped weights (fitted before the swap, the supplier's was left "within
    # 0.1 of its reservation": no room for a deal)
    assert not [p for p in NegotiationDomain.model_validate(tidied).family_problems()
                if p.path.startswith("domain.personas")]


def test_the_draft_tidy_moves_a_limit_that_leaves_the_counterpart_almost_nothing():
    # the packaging supplier's 1.5B, 2026-12-05: a fuel cost's limit drawn from [1, 99] in 0..100; at the agent's
    # strictest limits its personas were left 0.06-0.12, too little for any reservation
    from openadapt.families.negotiation.domain import NegotiationDomain

    issues = [{"id": "unit_price", "low": 10, "high": 20, "step": 0.05, "limit": [12, 16], "agent_prefers": "low"},
              {"id": "fuel_cost", "low": 0, "high": 100, "step": 1, "limit": [1, 99], "agent_prefers": "low"},
              {"id": "delivery", "low": 0, "high": 10, "step": 0.5, "limit": [5, 9.5], "agent_prefers": "high"}]
    tidied = NegotiationDomain.tidy({"issues": issues})["issues"]
    assert [i["limit"] for i in tidied] == [[13.0, 16], [30.0, 99], [5, 7.0]]
    family = get_family("negotiation")
    for name in family.examples():  # the examples leave 0.39-0.67 of every term: as written
        example = family.load_example(name).model_dump(mode="json")
        assert NegotiationDomain.tidy(example)["issues"] == example["issues"]


def test_a_text_restating_the_task_about_an_ai_agent_is_a_problem_outside_a_role():
    # the packaging supplier's 1.5B, 2026-12-05: subjects 'An AI agent is tasked with negotiating the price ...'
    from openadapt.families.negotiation.domain import NegotiationDomain

    data = get_family("negotiation").load_example("supplier_email").model_dump(mode="json")
    summary = data["summary"]
    data["summary"] = "An AI agent is tasked with negotiating price and delivery terms with a packaging supplier."
    data["agent_role"] = "an AI agent buying packaging for a bakery"
    problems = _semantic_problems(data)
    assert "speaks of the agent being trained" in problems["domain.summary"]
    assert "domain.agent_role" not in problems  # the agent's role may say what the agent is
    data["summary"] = "The buyer is an AI that orders boxes for a bakery from its packaging supplier."
    problems = _semantic_problems(data)
    assert "('an AI')" in problems["domain.summary"]
    data["summary"] = summary
    assert not NegotiationDomain.model_validate(data).problems()


def test_a_role_that_is_only_the_agent_and_a_note_about_the_json_are_problems():
    # the packaging supplier's 1.5B at 5ce1c28: agent_role 'an AI agent', and replies going on with
    # '**Note:** {offer} is a placeholder for the actual offer ... The above JSON is a template'
    from openadapt.families.negotiation.domain import NegotiationDomain

    data = get_family("negotiation").load_example("supplier_email").model_dump(mode="json")
    data["agent_role"] = "an AI agent"
    data["title"] = "Negotiation Environment AI"
    data["messages"]["counter"][1] = "**Note:** {offer} is a placeholder for the actual offer of the supplier."
    data["messages"]["opening"][2] = "For {subject} we can offer {offer}. The above JSON is a template."
    problems = _semantic_problems(data)
    assert "names the agent being trained" in problems["domain.agent_role"]
    assert "names the package being built ('Environment')" in problems["domain.title"]
    assert "('**')" in problems["domain.messages.counter[1]"]
    assert "('above JSON')" in problems["domain.messages.opening[2]"]
    data["agent_role"] = "the agent buying cartons for a bakery"  # a role the agent may have, with its job
    data["title"] = "Bakery packaging purchases"
    data["messages"]["counter"][1] = "Your config has invalid JSON in it; we can still offer {offer}."
    del data["messages"]["opening"][2]
    assert not NegotiationDomain.model_validate(data).problems()


def test_a_subject_is_a_noun_phrase_said_mid_sentence_and_a_capital_article_is_tidied():
    # the same run's subjects restated the task as a sentence; the messages say a subject mid-sentence
    # ('your enquiry about {subject}'), so it starts with a lower-case article, which the grammar then enforces
    from pydantic import ValidationError

    from openadapt.families.negotiation.domain import NegotiationDomain

    data = get_family("negotiation").load_example("supplier_email").model_dump(mode="json")
    data["subjects"][1] = "An AI agent is tasked with negotiating price and delivery terms with a packaging supplier"
    with pytest.raises(ValidationError, match="subjects.1"):
        NegotiationDomain.model_validate(data)
    data["subjects"][1] = "An order of 20,000 corrugated cartons (double wall) for the spring range"
    tidied = NegotiationDomain.tidy(data)
    assert tidied["subjects"][1] == "an order of 20,000 corrugated cartons (double wall) for the spring range"
    assert not NegotiationDomain.model_validate(tidied).problems()


def test_a_counterpart_is_one_person_with_a_name_and_a_subject_is_three_words_or_more():
    # the packaging supplier's 1.5B at 8b5b03c: 'John Doe (Supplier's Representative), Jane Smith (Customer's
    # Representative)' as one counterpart, and subjects 'a negotiation', 'a delivery term'
    from pydantic import ValidationError

    from openadapt.families.negotiation.domain import NegotiationDomain

    data = get_family("negotiation").load_example("supplier_email").model_dump(mode="json")
    data["counterparts"][0] = "John Doe (Supplier's Representative), Jane Smith (Customer's Representative)"
    data["counterparts"][1] = "John Doe (Kartonwerk Lenz)"
    problems = _semantic_problems(data)
    assert "names more than one person" in problems["domain.counterparts[0]"]
    assert "'John Doe' is a stand-in" in problems["domain.counterparts[1]"]
    for vague in ("a negotiation", "a delivery term"):
        with pytest.raises(ValidationError):
            NegotiationDomain.model_validate({**data, "subjects": [vague, *data["subjects"][1:]]})
    data["counterparts"][:2] = ["Petra Lenz (Kartonwerk Lenz)", "Ole Brandt (Brandt Verpackung GmbH)"]
    data["subjects"][0] = "the spring order of shipping cartons"
    assert not NegotiationDomain.model_validate(data).problems()


def test_a_reply_that_reads_as_code_or_stops_mid_sentence_is_a_problem():
    # the packaging supplier's 1.5B at 91559cc: 'timeouts[0] = {rounds} emails.', '... of transparency. We,'

    data = get_family("negotiation").load_example("supplier_email").model_dump(mode="json")
    data["messages"]["timeline"][0] = "timeouts[0] = {rounds} emails."
    data["messages"]["insulted"][0] = "One of the most frustrating aspects is the lack of transparency. We,"
    data["messages"]["counter"][0] = "time: '10:00 AM', subject: 'Price{offer}', message: 'We can'"
    problems = _semantic_problems(data)
    assert "reads as code or fields ('s[0]')" in problems["domain.messages.timeline[0]"]
    assert "stops mid-sentence" in problems["domain.messages.insulted[0]"]
    assert "reads as code or fields" in problems["domain.messages.counter[0]"]
    data["messages"]["final"][0] = "We would like to discuss this further. Please{offer}."
    problems = _semantic_problems(data)
    assert "glues a placeholder to the word before it ('Please{offer}')" in problems["domain.messages.final[0]"]


def test_the_tidy_cuts_a_reply_stopped_mid_sentence_back_to_its_whole_sentences():
    # the supplier's 1.5B at cf10fa9, asked for its 'insulted' line three times: '... of transparency. We,'
    from openadapt.families.negotiation.domain import NegotiationDomain

    data = get_family("negotiation").load_example("supplier_email").model_dump(mode="json")
    data["messages"]["insulted"][0] = "That is far below our costs. We,"
    data["messages"]["insulted"][1] = "We cannot go anywhere near 1.5 EUR and"  # no whole sentence: left, a problem
    tidied = NegotiationDomain.tidy(data)["messages"]["insulted"]
    assert tidied == ["That is far below our costs.", "We cannot go anywhere near 1.5 EUR and"]
    problems = {p.path for p in NegotiationDomain.model_validate(NegotiationDomain.tidy(data)).problems()}
    assert problems == {"domain.messages.insulted[1]"}
