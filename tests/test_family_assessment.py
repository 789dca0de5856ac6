"""The assessment family: rewards on hand-made submissions, what each tier's mechanic does, rejected actions,
domain validation naming the field, and a third, unrelated world run through the same engine."""

import copy
import random

import pytest
from family_checks import rejected

from openadapt.envpkg.evaluation import evaluate, make_policy, run_episode
from openadapt.envpkg.examples import write_example_package
from openadapt.envpkg.loader import load, resolve
from openadapt.families import get_family
from openadapt.families.assessment.engine import MIN_QUOTE_CHARS
from openadapt.families.assessment.policies import AssessmentOracle, CueHeuristic
from openadapt.families.domain import DomainError, fill, template_pattern
from openadapt.families.yamlio import read_domain_file

FAMILY = get_family("assessment")
COMPONENTS = {"accuracy", "evidence", "feedback", "efficiency", "penalty"}


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    root = tmp_path_factory.mktemp("assessment")
    return {name: load(resolve(str(write_example_package("assessment", name, root))))
            for name in ("lab_reports", "security_questionnaire")}


@pytest.fixture(scope="module")
def lab(packages):
    return packages["lab_reports"]


def _read_like_the_oracle(env, seed, eci):
    """Reset and walk the oracle's honest reading path; returns (observation before submitting, its grades)."""
    obs = env.reset(seed=seed, eci=eci)
    oracle = AssessmentOracle()
    oracle.begin(env, obs, random.Random(0))
    while True:
        action = oracle.act(obs)
        if action.tool == env.domain.tools.submit:
            return obs, [g.model_dump() for g in action.grades]
        obs = env.step(action)


def _submit(env, grades):
    return env.step(env.action_type(tool=env.domain.tools.submit, grades=grades))


def _seed_where(env, eci, test, limit=400):
    for seed in range(limit):
        env.reset(seed=seed, eci=eci)
        if test(env.oracle_view()):
            return seed
    raise AssertionError("no such episode in the first seeds")


def _template_patterns(domain):
    """Every text the engine may place in a section, as a regex over its clean (un-garbled) fill."""
    texts = [t for s in domain.sections for t in s.filler]
    for c in domain.criteria:
        texts += [t for f in c.features for t in f.snippets] + [t for lk in c.lookalikes for t in lk.snippets]
    texts += [t for r in domain.rules for t in r.triggers]
    return [template_pattern(t, matches=".+?") for t in texts]


# ---- the family and its examples ----------------------------------------------------------------------------
def test_family_is_registered_with_both_examples():
    assert FAMILY.ref == "assessment@1"
    assert {"lab_reports", "security_questionnaire"} <= set(FAMILY.examples())
    assert FAMILY.step_budget[5] < FAMILY.step_budget[4]
    for name in ("lab_reports", "security_questionnaire"):
        domain = FAMILY.load_example(name)
        assert len(domain.criteria) >= 3 and len(domain.rules) >= 2


def test_rendered_examples_pass_the_sandbox_validator(packages):
    # The CLI's default episode count: with fewer, the heuristic's mean return per tier is too noisy to compare.
    from openadapt.validator import Validator

    with Validator("bwrap", episodes=20) as validator:
        reports = [validator.validate(pkg.ref.root) for pkg in packages.values()]
    for report in reports:
        failing = [(c.check_id, c.evidence) for c in report.checks if c.status.value != "pass"]
        assert report.verdict.value == "pass" and not failing, failing


@pytest.mark.parametrize("example", ["lab_reports", "security_questionnaire"])
def test_oracle_solves_every_tier_heuristic_falls_random_fails(packages, example):
    pkg = packages[example]
    oracle = evaluate(pkg, "oracle", range(1, 6), 60)
    heuristic = evaluate(pkg, "heuristic", range(1, 6), 60)
    rand = evaluate(pkg, "random", range(1, 6), 20)
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate == 1.0 and oracle.tier(t).mean_return >= FAMILY.solved_reward
        assert rand.tier(t).solve_rate == 0.0
    rates = [heuristic.tier(t).solve_rate for t in range(1, 6)]
    assert rates[0] >= 0.9 and rates[4] <= 0.15, rates
    assert all(b <= a + 0.05 for a, b in zip(rates, rates[1:], strict=False)), rates


def test_episode_is_a_function_of_seed_and_tier(lab):
    def trace(seed, eci):
        steps = []
        run_episode(lab.make_env(), make_policy(lab, "random"), seed, eci,
                    on_step=lambda a, o: steps.append((a.model_dump(), o.model_dump())))
        return steps

    assert trace(5, 4) == trace(5, 4)
    env = lab.make_env()
    truths = set()
    for seed in range(30):
        env.reset(seed=seed, eci=1)
        truths.add(tuple(t.level for t in env.oracle_view().truth.values()))
    assert len(truths) >= 20


# ---- rewards on hand-made submissions -----------------------------------------------------------------------
def test_perfect_grades_score_full_and_solve(lab):
    env = lab.make_env()
    _, grades = _read_like_the_oracle(env, 3, 1)
    final = _submit(env, grades)
    assert final.done and final.metadata["solved"]
    assert final.metadata["reward_components"] == {"accuracy": 0.5, "evidence": 0.25, "feedback": 0.1,
                                                   "efficiency": 0.15, "penalty": 0.0}
    assert final.reward == pytest.approx(1.0)


def test_off_by_one_earns_partial_credit_and_does_not_solve(lab):
    env = lab.make_env()
    _, grades = _read_like_the_oracle(env, 3, 1)
    top = len(env.domain.scale)
    grades[0]["level"] += 1 if grades[0]["level"] < top else -1
    far = grades[1]["level"]
    grades[1]["level"] = 1 if far >= 3 else top
    meta = _submit(env, grades).metadata
    assert not meta["solved"]
    assert meta["reward_components"]["accuracy"] == pytest.approx(0.5 * (3 + 0.3 + 0.0) / 5)


def test_evidence_must_quote_the_deciding_passage_as_shown(lab):
    env = lab.make_env()
    obs, grades = _read_like_the_oracle(env, 8, 2)
    case = env.oracle_view()
    cid = grades[0]["criterion"]
    section = next(c.section for c in env.domain.criteria if c.id == cid)
    deciding = case.truth[cid].evidence[0]
    filler = next(line for line in obs.sections[section] if line not in case.truth[cid].evidence
                  and line not in case.truth[cid].allowed)
    cases = {
        "filler": ([filler], 0.0),  # real text, but not the evidence for this criterion
        "mixed": ([deciding, filler], 0.5),  # the evidence plus an off-target quote
        "fragment": ([deciding[:MIN_QUOTE_CHARS + 5]], 1.0),  # a long-enough piece of it
        "too_short": ([deciding[:8]], 0.0),  # too short to identify the passage
    }
    for name, (quotes, credit) in cases.items():
        env2 = lab.make_env()
        _, fresh = _read_like_the_oracle(env2, 8, 2)
        fresh[0]["evidence"] = quotes
        meta = _submit(env2, fresh).metadata
        assert meta["reward_components"]["evidence"] == pytest.approx(0.25 * (4 + credit) / 5), name
        assert meta["solved"] == (credit == 1.0), name
        assert meta["reward_components"]["penalty"] == 0.0, name


def test_invented_quotes_are_penalised(lab):
    env = lab.make_env()
    _, grades = _read_like_the_oracle(env, 4, 1)
    grades[2]["evidence"] = ["The student clearly understood the whole experiment perfectly."]
    meta = _submit(env, grades).metadata
    assert meta["reward_components"]["penalty"] == pytest.approx(-0.15) and not meta["solved"]


def test_quoting_unread_sections_counts_as_invented(lab):
    env = lab.make_env()
    env.reset(seed=4, eci=1)
    grades = [{"criterion": c, "level": t.level, "evidence": t.evidence[:1], "feedback": "Graded against the rubric "
               "on the decisive passage."} for c, t in env.oracle_view().truth.items()]
    for i, g in enumerate(grades):
        g["feedback"] += f" Row {i}."
    meta = _submit(env, grades).metadata
    assert not meta["solved"] and meta["reward_components"]["penalty"] == pytest.approx(-0.15)
    assert meta["reward_components"]["evidence"] == 0.0


def test_stuffing_defect_names_or_quotes_is_penalised(lab):
    env = lab.make_env()
    _, grades = _read_like_the_oracle(env, 5, 1)
    labels = [f.label for c in env.domain.criteria for f in c.features]
    grades[0]["feedback"] = "Possible issues: " + "; ".join(labels[:6]) + "."
    meta = _submit(env, grades).metadata
    assert meta["reward_components"]["penalty"] == pytest.approx(-0.20) and not meta["solved"]

    env = lab.make_env()
    obs, grades = _read_like_the_oracle(env, 5, 1)
    section = env.domain.criteria[0].section
    grades[0]["evidence"] = obs.sections[section][:3] + grades[0]["evidence"]
    meta = _submit(env, grades).metadata
    assert meta["reward_components"]["penalty"] == pytest.approx(-0.20) and not meta["solved"]


def test_one_level_for_every_criterion_is_penalised(lab):
    env = lab.make_env()
    _, grades = _read_like_the_oracle(env, 6, 1)
    assert len({g["level"] for g in grades}) > 1  # the engine never makes one level for all the right answer
    for g in grades:
        g["level"] = 2
    meta = _submit(env, grades).metadata
    assert meta["reward_components"]["penalty"] == pytest.approx(-0.15) and not meta["solved"]


def test_feedback_must_be_written_and_its_own(lab):
    env = lab.make_env()
    _, grades = _read_like_the_oracle(env, 7, 1)
    grades[0]["feedback"] = "Good."
    grades[1]["feedback"] = grades[2]["feedback"]
    meta = _submit(env, grades).metadata
    assert meta["reward_components"]["feedback"] == pytest.approx(0.10 * 2 / 5) and not meta["solved"]


def test_efficiency_falls_with_wasted_steps(lab):
    env = lab.make_env()
    _, grades = _read_like_the_oracle(env, 9, 1)
    fast = _submit(env, grades).metadata["reward_components"]["efficiency"]
    env = lab.make_env()
    _, grades = _read_like_the_oracle(env, 9, 1)
    env.step(env.action_type(tool="read_guide"))
    env.step(env.action_type(tool="read_section", section="abstract"))
    slow = _submit(env, grades).metadata["reward_components"]["efficiency"]
    assert fast == pytest.approx(0.15) and 0.0 < slow < fast


# ---- what each tier changes ---------------------------------------------------------------------------------
def test_noise_garbles_lines_only_from_eci_2(lab):
    env = lab.make_env()
    patterns = _template_patterns(env.domain)

    def garbled_share(eci):
        lines = []
        for seed in range(40):
            env.reset(seed=seed, eci=eci)
            lines += [x.text for items in env.oracle_view().lines.values() for x in items]
        return sum(not any(p.fullmatch(line) for p in patterns) for line in lines) / len(lines)

    assert garbled_share(1) == 0.0
    assert 0.15 <= garbled_share(2) <= 0.45
    assert garbled_share(5) > garbled_share(2)


def test_missing_sections_must_be_requested_and_may_be_absent(lab):
    env = lab.make_env()
    for seed in range(60):
        env.reset(seed=seed, eci=1)
        assert not env.oracle_view().missing
    d = env.domain
    titles = {s.id: s.title for s in d.sections}
    for absent in (False, True):
        seed = _seed_where(env, 2, lambda case, a=absent: a in case.missing.values())
        env.reset(seed=seed, eci=2)
        case = env.oracle_view()
        section = next(s for s, a in case.missing.items() if a == absent)
        obs = env.step(env.action_type(tool="read_section", section=section))
        assert obs.sections[section] == [fill(d.notices.missing, section=titles[section])]
        obs = env.step(env.action_type(tool="request_original", section=section))
        graded = [c for c in d.criteria if c.section == section]
        if absent:
            assert obs.sections[section] == [fill(d.notices.absent, section=titles[section])]
            assert all(case.truth[c.id].level == c.absent_level for c in graded)
        else:
            assert all(case.truth[c.id].evidence[0] in obs.sections[section] for c in graded)
    complete = next(s for s in d.graded_sections() if s not in case.missing)
    obs = env.step(env.action_type(tool="request_original", section=complete))
    assert obs.error == "not_missing" and obs.reward == FAMILY.invalid_action_reward


def test_distractors_appear_from_eci_3_and_fool_a_cue_matcher(lab):
    env = lab.make_env()
    kinds = {eci: set() for eci in (1, 2, 3, 5)}
    for eci in kinds:
        for seed in range(30):
            env.reset(seed=seed, eci=eci)
            kinds[eci] |= {x.kind for items in env.oracle_view().lines.values() for x in items}
    assert not {"lookalike", "extra"} & (kinds[1] | kinds[2])
    assert {"lookalike", "extra"} <= kinds[3]
    criteria = {c.id: c for c in env.domain.criteria}
    features = {f.id: f for c in env.domain.criteria for f in c.features}

    def biting(x, case):  # a lookalike of a defect below the true level, its cue readable
        return (x.kind == "lookalike" and features[x.ref].level < case.truth[x.criterion].level
                and any(cue.lower() in x.text.lower() for cue in features[x.ref].cues))

    seed = _seed_where(env, 3, lambda case: not case.missing and any(
        biting(x, case) for items in case.lines.values() for x in items))
    env.reset(seed=seed, eci=3)
    case = env.oracle_view()
    look = next(x for items in case.lines.values() for x in items if biting(x, case))
    criterion = criteria[look.criterion]
    shown = [x.text for x in case.lines[criterion.section]]
    level, quote, _ = CueHeuristic._grade(criterion, shown, len(env.domain.scale))
    assert level < case.truth[criterion.id].level and quote == look.text
    # ... while the extra strengths never move the true level
    extras = 0
    for seed in range(30):
        env.reset(seed=seed, eci=3)
        case = env.oracle_view()
        for x in (x for items in case.lines.values() for x in items if x.kind == "extra"
                  and not case.truth[x.criterion].absent):
            deciding, level = case.truth[x.criterion].feature, features[x.ref].level
            assert features[x.ref].kind == "strength" and deciding.level == case.truth[x.criterion].level
            assert (level > deciding.level) if deciding.kind == "defect" else (level < deciding.level)
            extras += 1
    assert extras >= 30


def test_hidden_rule_is_revealed_only_by_the_guide_and_caps_the_grade(lab):
    env = lab.make_env()
    for eci in (1, 2, 3):
        for seed in range(30):
            env.reset(seed=seed, eci=eci)
            assert env.oracle_view().rule is None
    seed = _seed_where(env, 4, lambda case: case.constrained)
    obs = env.reset(seed=seed, eci=4)
    case = env.oracle_view()
    capped = next(c for c, t in case.truth.items() if t.capped_by)
    truth = case.truth[capped]
    assert truth.level == case.rule.cap < truth.feature.level
    assert case.rule_note not in obs.model_dump_json()
    obs, grades = _read_like_the_oracle(env, seed, 4)
    assert case.rule_note in obs.guide
    trigger = next(x.text for x in case.lines[case.rule.section] if x.kind == "trigger")
    assert truth.evidence == [trigger]
    # grading the capped criterion at the level its features earn (as a grader who skipped the guide would)
    for g in grades:
        if g["criterion"] == capped:
            g["level"] = truth.feature.level
    assert not _submit(env, grades).metadata["solved"]
    # a rule in force does not always bind, and another rule's trigger may be a decoy
    cases = []
    for s in range(120):
        env.reset(seed=s, eci=4)
        cases.append(env.oracle_view())
    assert any(c.rule and not c.constrained for c in cases)
    assert any(c.decoy and any(x.kind == "decoy" for items in c.lines.values() for x in items) for c in cases)


def test_eci_5_has_the_smaller_budget_and_the_oracle_fits_it(lab):
    env = lab.make_env()
    assert lab.section.step_budget[5] < lab.section.step_budget[4]
    for seed in range(60):
        env.reset(seed=seed, eci=5)
        assert env.oracle_view().min_steps <= lab.section.step_budget[5]
    env.reset(seed=1, eci=5)
    for _ in range(lab.section.step_budget[5]):
        obs = env.step(env.action_type(tool="read_guide"))
    assert obs.done and obs.metadata["termination"] == "budget_exhausted" and not obs.metadata["solved"]


# ---- rejected actions ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({}, "missing_tool"),
        ({"tool": "read_section"}, "missing_section"),
        ({"tool": "submit_grades"}, "no_grades"),
        ({"tool": "submit_grades", "grades": [{"criterion": "background"}]}, "incomplete_grade"),
        ({"tool": "submit_grades", "grades": ["background is level 3"]}, "incomplete_grade"),
        ({"tool": "submit_grades", "grades": [{"criterion": "background", "level": 2},
                                              {"criterion": "background", "level": 3}]}, "duplicate_grade"),
        ({"tool": "submit_grades", "grades": [{"criterion": "background", "level": 2}]}, "missing_criteria"),
    ],
)
def test_invalid_actions_are_rejected_with_a_code(lab, payload, code):
    rejected(lab, payload, code)
    assert lab.section.invalid_action_reward == FAMILY.invalid_action_reward


def test_out_of_range_level_or_unknown_section_is_a_malformed_completion(lab):
    env = lab.make_env()
    env.reset(seed=1, eci=1)
    for text in ('{"tool": "read_section", "section": "appendix"}',
                 '{"tool": "submit_grades", "grades": [{"criterion": "background", "level": 9}]}'):
        parsed = lab.protocol.parse(text)
        assert not parsed.ok
        obs = env.step(parsed.action)
        assert obs.error == "malformed_completion" and obs.reward == FAMILY.malformed_reward


def test_no_observation_names_the_planted_features(lab):
    env = lab.make_env()
    for eci in range(1, 6):
        obs = env.reset(seed=eci, eci=eci)
        secrets = env.secret_values()
        assert secrets and not any(s in obs.model_dump_json() + env.state.model_dump_json() for s in secrets)
        observations = []
        run_episode(env, AssessmentOracle(), eci, eci, on_step=lambda a, o, seen=observations: seen.append(o))
        assert not any(s in o.model_dump_json() for o in observations[:-1] for s in secrets)


# ---- bad domains name the field -----------------------------------------------------------------------------
def _problems(data):
    with pytest.raises(DomainError) as err:
        FAMILY.parse_domain(data)
    return {p.path: p.message for p in err.value.problems}


@pytest.fixture(scope="module")
def lab_data():
    return read_domain_file(FAMILY.examples()["lab_reports"])


def test_broken_references_name_the_field(lab_data):
    data = copy.deepcopy(lab_data)
    data["criteria"][2]["section"] = "appendix"
    data["criteria"][1]["lookalikes"][0]["resembles"] = "no_such_defect"
    data["rules"][0]["criterion"] = "spelling"
    found = _problems(data)
    assert "domain.criteria[2].section" in found and "appendix" in found["domain.criteria[2].section"]
    assert "domain.criteria[1].lookalikes[0].resembles" in found
    assert "domain.rules[0].criterion" in found


def test_duplicates_name_the_field(lab_data):
    data = copy.deepcopy(lab_data)
    data["criteria"][3]["id"] = data["criteria"][0]["id"]
    data["criteria"][1]["features"][1]["id"] = data["criteria"][0]["features"][0]["id"]
    found = _problems(data)
    assert "domain.criteria[3].id" in found and "unique" in found["domain.criteria[3].id"]
    assert "domain.criteria[1].features[1].id" in found


def test_too_small_for_the_tiers_names_the_field(lab_data):
    data = copy.deepcopy(lab_data)
    for c in data["criteria"]:
        c["lookalikes"] = []
    data["criteria"][0]["lookalikes"] = lab_data["criteria"][0]["lookalikes"][:2]
    data["criteria"][1]["features"][1]["level"] = 1
    data["criteria"][1]["features"][2]["level"] = 4
    found = _problems(data)
    assert found["domain.criteria"].startswith(FAMILY.domain.rule("lookalikes").says)
    assert "distinct level" in found["domain.criteria[1].features"]

    data = copy.deepcopy(lab_data)
    data["rules"] = data["rules"][:1]  # ECI 4 needs a rule in force and another as a decoy
    assert "domain.rules" in _problems(data)

    data = copy.deepcopy(lab_data)
    data["criteria"][2]["features"][3]["level"] = 3  # nothing earns the top level any more
    assert "strength at the top level" in _problems(data)["domain.criteria[2].features"]


def test_too_many_sections_for_the_eci_5_budget(lab_data):
    data = copy.deepcopy(lab_data)
    data["criteria"][3]["section"] = "abstract"  # six sections to read while the references rule is in force
    found = _problems(data)
    assert found["domain.criteria"].startswith(FAMILY.domain.rule("sections_to_read").says)
    assert "ECI 5" in FAMILY.domain.rule("sections_to_read").why  # the reason, for people


def test_bad_placeholders_and_levels_name_the_field(lab_data):
    data = copy.deepcopy(lab_data)
    data["criteria"][0]["features"][0]["snippets"][0] += " Seen by {examiner}."
    data["rules"][1]["note"] = "The 2019 manual is withdrawn; such reports are capped for this criterion."
    data["criteria"][2]["features"][0]["level"] = 7 - 2  # above a 4-level scale
    data["criteria"][4]["descriptors"] = data["criteria"][4]["descriptors"][:3]
    found = _problems(data)
    assert "{examiner}" in found["domain.criteria[0].features[0].snippets[0]"]
    assert "{cap}" in found["domain.rules[1].note"]
    assert "domain.criteria[2].features[0].level" in found
    assert "domain.criteria[4].descriptors" in found


def test_cues_must_single_out_their_feature(lab_data):
    data = copy.deepcopy(lab_data)
    data["sections"][4]["filler"].append("No human error was made in this experiment at all, we think.")
    found = _problems(data)
    assert any(path.startswith("domain.criteria[4].features[0].cues") for path in found)


# ---- a third world through the same engine ------------------------------------------------------------------
def _feature(fid, kind, level, cue, *snippets):
    return {"id": fid, "label": fid.replace("_", " "), "kind": kind, "level": level, "cues": [cue],
            "snippets": list(snippets)}


LOANS = {
    "title": "Small-business loan applications",
    "summary": "A regional bank receives loan applications from small businesses. The agent is the credit analyst "
               "who scores each application against the bank's credit policy and explains the decision.",
    "agent_role": "the credit analyst", "document_noun": "loan application", "author_noun": "applicant",
    "header": "Loan application {ref}: {business}, asking for {amount}",
    "scale": ["decline", "refer", "approve"],
    "sections": [
        {"id": "business", "title": "A. The business", "filler": [
            "{business} has traded from the same premises for several years.",
            "The owners run the business day to day."]},
        {"id": "finances", "title": "B. Financial statements", "filler": [
            "Accounts are prepared by an external bookkeeper.", "Figures are in pounds sterling."]},
        {"id": "security", "title": "C. Security offered", "filler": [
            "The applicant is willing to discuss the security offered.", "Valuations are dated this year."]},
        {"id": "declarations", "title": "D. Declarations", "filler": [
            "The applicant confirms the information is correct.", "Signed by both directors."]},
    ],
    "criteria": [
        {"id": "affordability", "name": "Affordability", "section": "finances",
         "descriptors": ["Repayments exceed the free cash flow.", "Repayments are covered only in good months.",
                         "Cash flow covers repayments 1.5 times or more."],
         "features": [
             _feature("repayments_exceed_cash", "defect", 1, "more than we earn",
                      "Some months the repayment will be more than we earn, but sales should grow.",
                      "The loan costs more than we earn in a quiet month, so we would use the overdraft."),
             _feature("seasonal_cover", "defect", 2, "busy season",
                      "Repayments are easily covered in the busy season, less so in winter.",
                      "In the busy season we make three times the repayment; the rest of the year about even."),
             _feature("strong_cover", "strength", 3, "times the monthly repayment",
                      "Free cash flow has averaged 1.8 times the monthly repayment over three years.",
                      "Audited accounts show operating cash of 1.6 times the monthly repayment in every month."),
         ],
         "lookalikes": [{"resembles": "seasonal_cover", "snippets": [
             "Stock is built up before the busy season from our own cash, not from the loan."]}]},
        {"id": "credit_history", "name": "Credit history", "section": "business",
         "descriptors": ["Recent defaults.", "Late payments in the last two years.", "A clean record."],
         "features": [
             _feature("recent_default", "defect", 1, "county court judgment",
                      "A county court judgment was registered against the business last year.",
                      "We settled a county court judgment from a supplier dispute in March."),
             _feature("late_payments", "defect", 2, "paid late",
                      "Two supplier invoices were paid late during the move to new premises.",
                      "The VAT bill was paid late once, in the first year."),
             _feature("clean_record", "strength", 3, "never missed a payment",
                      "The business has never missed a payment on its existing van finance.",
                      "Our bank confirms we have never missed a payment in six years."),
         ],
         "lookalikes": [{"resembles": "late_payments", "snippets": [
             "Customers who paid late are chased by our accounts team within a week."]}]},
        {"id": "documentation", "name": "Documentation", "section": "security",
         "descriptors": ["Key documents missing.", "Documents out of date.", "Complete and current documents."],
         "features": [
             _feature("no_valuation", "defect", 1, "to follow",
                      "The valuation of the premises is to follow once the surveyor visits.",
                      "Title deeds to follow; the solicitor has them."),
             _feature("old_valuation", "defect", 2, "valued in 2019",
                      "The unit was valued in 2019 at the purchase price.",
                      "Our equipment was valued in 2019 by the supplier."),
             _feature("current_documents", "strength", 3, "independent valuation",
                      "An independent valuation from last month is attached, with the title register.",
                      "We enclose an independent valuation and the current title register."),
         ],
         "lookalikes": [{"resembles": "no_valuation", "snippets": [
             "Copies of the directors' passports are attached; originals to follow by post as the bank asked."]}]},
    ],
    "rules": [
        {"id": "director_guarantee", "criterion": "documentation", "cap": 1, "section": "declarations",
         "triggers": ["Only one of the two directors will sign a personal guarantee.",
                      "The second director declines to give a personal guarantee."],
         "note": "Credit committee rule this quarter: without guarantees from all directors, {criterion} is "
                 "capped at {cap}."},
        {"id": "hospitality_sector", "criterion": "affordability", "cap": 2, "section": "business",
         "triggers": ["{business} is a restaurant with forty covers.", "The business runs a café and bar."],
         "note": "Sector rule in force: hospitality applicants are capped at {cap} for {criterion} while the "
                 "sector review is open."},
    ],
    "guide_notes": ["Score each criterion on its weakest point.", "Refer rather than decline when in doubt."],
    "slots": [{"name": "business", "values": ["Harbour Bakes Ltd", "Kestrel Joinery", "Moss & Vine"]},
              {"name": "amount", "values": ["£40,000", "£75,000", "£120,000"]},
              {"name": "ref", "values": ["LA-3391", "LA-4410", "LA-5127", "LA-6003"]}],
    "tools": {"read": "open_section", "request": "ask_applicant", "guide": "credit_policy", "submit": "decide"},
}


def test_a_third_world_runs_through_the_same_engine():
    domain = FAMILY.parse_domain(copy.deepcopy(LOANS))
    bound = FAMILY.bind(domain, FAMILY.section(task="Score small-business loan applications against policy"))
    env = bound.env_cls()
    assert "open_section" in str(bound.action_cls.model_json_schema())
    for eci in range(1, 6):
        solved = []
        for seed in range(40):
            result = run_episode(env, FAMILY.oracle(), 2_000 + seed, eci)
            solved.append(result.solved and result.episode_return >= FAMILY.solved_reward)
        assert all(solved), eci
    first = sum(run_episode(env, FAMILY.heuristic(), s, 1).solved for s in range(40))
    last = sum(run_episode(env, FAMILY.heuristic(), s, 5).solved for s in range(40))
    assert first >= 36 and last <= 6, (first, last)
    obs = env.reset(seed=3, eci=4)
    assert obs.document.startswith("Loan application LA-")
    assert obs.criteria == ["affordability", "credit_history", "documentation"]
    obs = env.step(bound.action_cls(tool="credit_policy"))
    assert env.oracle_view().rule_note in obs.guide


def test_oversized_texts_are_refused_with_their_path(lab_data):
    data = copy.deepcopy(lab_data)
    data["criteria"][1]["features"][0]["snippets"][1] = "A very long passage. " * 40
    data["slots"][0]["values"] = [f"student {i}" for i in range(20)]
    found = _problems(data)
    assert "domain.criteria[1].features[0].snippets[1]" in found and "domain.slots[0].values" in found
