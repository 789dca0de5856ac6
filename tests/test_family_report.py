"""The report family: its engine on the daily_report seed (ported from the v1 seed's tests), each tier's mechanics,
the domain checks, and two more worlds - the family's weekly warehouse example and a clinic census written here -
run by the same engine (it holds no domain knowledge)."""

import copy
import datetime as dt
import random
import shutil
import subprocess
import sys
from decimal import Decimal

import pytest
import yaml
from family_checks import act, broken_rules, metadata_contract, package, play, rejected, trajectory

from openadapt.envpkg.evaluation import EVAL_SEED_START, evaluate, make_policy, run_episode
from openadapt.envpkg.examples import write_example_package
from openadapt.envpkg.loader import SEEDS_DIR, load, resolve
from openadapt.families import get_family
from openadapt.families.domain import DomainError
from openadapt.families.report import downloads
from openadapt.families.report.formats import Formats, HouseStyle
from openadapt.families.report.mail import PERMANENT, TRANSIENT
from openadapt.families.report.pdf import extract_lines
from openadapt.families.yamlio import dump_domain, parse_domain_yaml, read_domain_file
from openadapt.kit import MALFORMED_KEY, Policy

COMPONENTS = {"grade", "penalty"}
FAMILY = get_family("report")

# A second world, written here: a healthcare group's daily billing census of its outpatient clinics.
CLINIC = """
title: Outpatient clinic daily billing census
summary: A regional healthcare group runs twelve outpatient clinics. Each evening its revenue-cycle office sends
  every clinic's practice manager a census of the day's billed encounters - consultations, procedures and lab
  panels - taken from the billing system.
agent_role: the revenue-cycle analyst of a healthcare group
subject_noun: clinic
records_noun: encounters
first_date: '2026-03-02'
periods: 200
task_names: {header: census_header, summary: census_summary, full: census_full}
header: {title_field: census_title, subject_field: clinic_name, subject_label: Clinic, date_field: census_date,
         date_label: Census date}
subject_table:
  table: clinics
  id_column: clinic_id
  name_column: clinic_name
  id_prefix: CL-
  attributes: [{column: specialty, values: [family_medicine, paediatrics, dermatology, cardiology]}]
subject_names: [Harbourside Family Practice, Elm Street Paediatrics, Northgate Skin Clinic, Riverside Heart Centre,
                Meadowbank Medical, St. Aidan's Outpatients, Kingsway Health Hub, Larchfield Surgery, Old Mill Clinic,
                Westbrook Cardiology, Parkview Children's Clinic, Quarry Lane Practice]
lookalike_name: '{name} Annex'
subject_name_example: Acme Health
contacts_table: recipients
mailboxes: [practice-manager, billing, clinical-lead, frontdesk]
report_types:
- {code: encounter_census, title: Daily Encounter Census}
- {code: payer_mix, title: Daily Payer Mix Sheet}
- {code: revenue_flash, title: Daily Revenue Flash}
categories:
- {name: consultation, amount: [45.00, 180.00], per_period: [4, 9]}
- {name: procedure, amount: [120.00, 950.00], per_period: [1, 4]}
- {name: lab_panel, amount: [18.50, 240.00], per_period: [2, 6]}
record_table:
  table: encounters
  id_column: encounter_id
  id_prefix: EN-
  date_column: service_date
  category_column: encounter_type
  status_column: claim_status
  measure: {column: billed_eur, decimals: 2, unit: EUR, symbol: "\u20ac", placement: suffix, unit_word: currency code}
statuses: {counted: billed, excluded: [voided]}
metrics:
- {field: consultation_revenue, label: Consultation revenue, description: sums the billed consultations, op: sum,
   of: [consultation]}
- {field: encounters_billed, label: Encounters billed, description: counts the billed encounters of every type,
   op: count}
kpi_rows: 1
kpis:
- {code: procedure_revenue, label: Procedure revenue, formula: sum of the billed procedure amounts of the day,
   op: sum, of: [procedure]}
- {code: lab_share, label: Lab share of revenue, formula: '100 * lab_panel amounts / all billed amounts, one decimal',
   op: percent, of: [lab_panel], against: [consultation, procedure, lab_panel]}
- {code: average_charge, label: Average charge, formula: all billed amounts / encounters_billed, op: average}
"""


def _package(root, name, domain_text, tags=("openadapt", "test")):
    return package(FAMILY, root, name, parse_domain_yaml(domain_text), tags=tags)


@pytest.fixture(scope="module")
def report():
    return load("seed:daily_report")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    return load(resolve(str(write_example_package("report", "weekly_warehouse_report", tmp_path_factory.mktemp("ex")))))


@pytest.fixture(scope="module")
def clinic(tmp_path_factory):
    return _package(tmp_path_factory.mktemp("clinic"), "clinic_census", CLINIC)


def _episode_where(env, predicate, eci=1, task="daily_full", seeds=range(400)):
    """Reset `env` to the first seed whose hidden episode satisfies `predicate`; returns the reset observation."""
    for seed in seeds:
        obs = env.reset(seed=seed, eci=eci, task=task)
        if predicate(env.oracle_view()):
            return obs
    raise AssertionError("no seed matched")


def _fill(env, upto_pdf=True):
    """Write the whole report exactly (oracle values) and, optionally, finalise the PDF."""
    ep = env.oracle_view()
    for name in ep.task.fields:
        obs = act(env, command="set_field", field=name, value=ep.expected[name])
    for row in ep.rows if ep.task.kpi_rows else []:
        obs = act(env, command="add_kpi_row", label=row.label, value=row.value)
    if upto_pdf and ep.task.kpi_rows:
        obs = act(env, command="finalize_pdf")
    return obs


# ---- a careful agent that sees only observations: every tier must be solvable without privilege -----------
def _rows(obs):
    return [line.split(" | ") for line in obs.query_result[1:] if not line.startswith("... (")]


class CarefulAgent(Policy):
    """Cleans the data in SQL, keeps only live rows, asks the grader once for the house style, retries a flaky
    network and falls back to the backup contact after a permanent failure. It knows what the system prompt and
    the database tell any agent (tables, columns, the KPI catalogue's formulas), never the episode's answer."""

    name = "careful"

    def begin(self, env, observation, rng):
        super().begin(env, observation, rng)
        self.d, self.formats = env.domain, Formats(env.domain)
        self._plan = self._script(observation)
        self._first = next(self._plan)

    def act(self, observation):
        if self._first is not None:
            action, self._first = self._first, None
            return action
        try:
            return self._plan.send(observation)
        except StopIteration:
            return self.env.action_type(command="submit_report")

    def _value(self, comp, sums, counts, style):
        d, f = self.d, self.formats
        of = sum(sums.get(c, 0) for c in d.categories_of(comp.of))
        against = sum(sums.get(c, 0) for c in d.categories_of(comp.against))
        n = sum(counts.get(c, 0) for c in d.categories_of(comp.of))
        if comp.op == "count":
            return str(n)
        if comp.op == "percent":
            return f.percent(Decimal(100 * of) / Decimal(against))
        if comp.op == "average":
            return f.amount(f.round_minor(f.to_decimal(of) / n), style)
        return f.amount(of - against if comp.op == "difference" else of, style)

    def _learn(self, obs):
        """The house-style rules the grader's feedback spells out."""
        return {kind: variant for line in obs.grade_report if "house style" in line
                for kind, variants in self.formats.variants.items()
                for variant, words in variants.items() if words in line}

    def _script(self, obs):
        d, make = self.d, self.env.action_type
        s, r, h, m = d.subject_table, d.record_table, d.header, d.record_table.measure
        sid = s.id_column
        obs = yield make(command="query", sql=(
            f"SELECT t.{sid}, t.report_date, t.report_type, c.{s.name_column}, r.title FROM report_tasks t "
            f"JOIN {s.table} c ON c.{sid} = t.{sid} JOIN report_types r ON r.code = t.report_type "
            f"WHERE t.task_id = '{obs.task_id}'"))
        subject, day, report_type, name, title = _rows(obs)[0]
        day = dt.date.fromisoformat(day)
        sums, counts, labels, contacts = {}, {}, [], {}
        if obs.task != d.task_names.header:
            clean = m.column
            for junk in (",", m.symbol, m.unit, " "):
                clean = f"REPLACE({clean}, '{junk}', '')" if junk else clean
            minor = f"CAST(ROUND(CAST({clean} AS REAL) * {10 ** m.decimals}) AS INTEGER)"
            obs = yield make(command="query", sql=(
                f"SELECT {r.category_column}, COUNT(*), SUM({minor}) FROM {r.table} WHERE {sid} = '{subject}' "
                f"AND {r.date_column} = '{day}' AND LOWER(TRIM({r.status_column})) = '{d.statuses.counted}' "
                f"GROUP BY {r.category_column}"))
            counts = {kind: int(n) for kind, n, _ in _rows(obs)}
            sums = {kind: int(total) for kind, _, total in _rows(obs)}
        if obs.task == d.task_names.full:
            obs = yield make(command="query", sql=(
                f"SELECT label FROM report_kpis WHERE report_type = '{report_type}' AND active = 1 ORDER BY position"))
            labels = [row[0] for row in _rows(obs)]
            obs = yield make(command="query", sql=(
                f"SELECT email, role FROM {d.contacts_table} WHERE {sid} = '{subject}' AND active = 1"))
            contacts = {role: email for email, role in _rows(obs)}
        # One value of each kind a house style can touch, then ask the grader how this subject writes them.
        plain = HouseStyle()
        probe = {h.date_field: self.formats.date(day, plain), h.subject_field: name}
        amounts = [x for x in d.metrics if x.kind == "amount"]
        if sums and amounts:  # the largest amount: thousands separators only show from 1,000 up
            amount = max(amounts, key=lambda x: abs(Decimal(self._value(x, sums, counts, plain))))
            probe[amount.field] = self._value(amount, sums, counts, plain)
        for field, value in probe.items():
            obs = yield make(command="set_field", field=field, value=value)
        obs = yield make(command="check_report")
        learned = self._learn(obs)
        style = HouseStyle(**learned)
        values = {h.title_field: title, h.subject_field: self.formats.name(name, style),
                  h.date_field: self.formats.date(day, style)}
        if sums:
            values.update({x.field: self._value(x, sums, counts, style) for x in d.metrics})
        for field, value in values.items():
            if obs.draft.get(field) != value:
                obs = yield make(command="set_field", field=field, value=value)
        if obs.task != d.task_names.full:
            return
        kpis = {k.label: k for k in d.kpis}
        for label in labels:
            obs = yield make(command="add_kpi_row", label=label, value=self._value(kpis[label], sums, counts, style))
        big = [k for k in labels if kpis[k].kind == "amount" and abs(Decimal(self._value(kpis[k], sums, counts,
                                                                                         plain))) >= 1000]
        if "amount" not in learned and big:  # an amount house style the probe could not show: ask again
            obs = yield make(command="check_report")
            learned = self._learn(obs)
            if "amount" in learned:
                style = HouseStyle(**learned)
                obs = yield make(command="clear_kpi_rows")
                for label in labels:
                    obs = yield make(command="add_kpi_row", label=label,
                                     value=self._value(kpis[label], sums, counts, style))
        obs = yield make(command="finalize_pdf")
        recipient = contacts["primary"]
        while obs.delivery_status != "delivered":
            obs = yield make(command="send_email", recipient=recipient)
            if obs.delivery_status == "failed_permanent":
                recipient = contacts["backup"]


@pytest.mark.parametrize(("which", "seeds"), [("report", 40), ("warehouse", 20), ("clinic", 20)])
def test_a_careful_unprivileged_agent_solves_every_tier_within_its_budget(request, which, seeds):
    pkg = request.getfixturevalue(which)
    env = pkg.make_env()
    for eci in range(1, 6):
        held_out = range(EVAL_SEED_START, EVAL_SEED_START + seeds)
        results = [run_episode(env, CarefulAgent(), seed, eci) for seed in held_out]
        assert all(r.solved for r in results), [(r.seed, r.components) for r in results if not r.solved][:3]
        assert max(r.steps for r in results) <= pkg.section.step_budget[eci] - 5


# ---- the family and its worlds -------------------------------------------------------------------------
def test_the_family_is_registered_with_its_examples():
    assert get_family("report") is FAMILY and FAMILY.ref == "report@1"
    assert {"weekly_warehouse_report", "daily_report"} <= set(FAMILY.examples())
    for name in FAMILY.examples():
        assert FAMILY.load_example(name).title
    assert load("seed:daily_report").family.family is FAMILY


@pytest.mark.parametrize("which", ["warehouse", "clinic"])
def test_other_worlds_run_through_the_same_engine(request, which):
    """A second and third world: the oracle solves every tier, the heuristic falls with it, random gets nothing."""
    pkg = request.getfixturevalue(which)
    oracle = evaluate(pkg, "oracle", range(1, 6), 30)
    heuristic = evaluate(pkg, "heuristic", range(1, 6), 30)
    randomly = evaluate(pkg, "random", range(1, 6), 15)
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate == 1.0 and oracle.tier(t).mean_return >= pkg.section.solved_reward
        assert randomly.tier(t).solve_rate == 0.0 and randomly.tier(t).mean_return < 0.1
    rates = [heuristic.tier(t).solve_rate for t in range(1, 6)]
    assert rates[0] >= 0.8 and rates[4] <= 0.15 and rates[1] < rates[0] and rates[3] < rates[2], rates


def test_other_worlds_bring_their_own_tables_fields_and_words(clinic):
    env = clinic.make_env()
    obs = env.reset(seed=5, eci=3, task="census_full")
    assert obs.tables[0] == "clinics (clinic_id, clinic_name, specialty)"
    assert obs.tables[-1] == ("encounters (encounter_id, clinic_id, service_date, encounter_type, billed_eur, "
                              "claim_status)")
    assert "for clinic CL-" in obs.instructions and "customer" not in obs.model_dump_json()
    assert set(clinic.action_cls.model_json_schema()["properties"]["field"]["anyOf"][0]["enum"]) == {
        "census_title", "clinic_name", "census_date", "consultation_revenue", "encounters_billed"}
    ep = env.oracle_view()
    assert len(ep.rows) == 1 and ep.expected["census_title"] in {"Daily Encounter Census", "Daily Payer Mix Sheet",
                                                                  "Daily Revenue Flash"}
    final = _fill(env)
    assert "Census date: " + ep.expected["census_date"] in extract_lines(downloads.REGISTRY.get(env.state.episode_id))
    assert final.pdf_status == "current"


def test_weekly_periods_and_whole_unit_amounts(warehouse):
    env = warehouse.make_env()
    for seed in range(10):
        env.reset(seed=seed, eci=2)
        ep = env.oracle_view()
        assert (ep.report_date - dt.date(2026, 1, 5)).days % 7 == 0
        dates = {row[2] for row in ep.tables["stock_movements"]}
        assert all((dt.date.fromisoformat(x) - dt.date(2026, 1, 5)).days % 7 == 0 for x in dates)
        assert all(isinstance(row[4], (int, str)) for row in ep.tables["stock_movements"])
        amounts = [v for k, v in ep.expected.items() if k.startswith("cases_")]
        assert all(v.lstrip("-").isdigit() for v in amounts)


# ---- the contract ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("eci", [1, 3, 5])
def test_episode_is_a_function_of_seed_and_tier(report, eci):
    for policy in ("random", "heuristic", "oracle"):
        assert trajectory(report, policy, 11, eci) == trajectory(report, policy, 11, eci)
    full = []
    for env in (report.make_env(), report.make_env()):  # through the PDF too: its feedback, its graded text
        env.reset(seed=11, eci=eci, task="daily_full")
        full.append([_fill(env).model_dump(), act(env, command="check_report").model_dump()])
    assert full[0] == full[1]
    env = report.make_env()
    openings = {env.reset(seed=s, eci=eci).model_dump_json(exclude={"metadata"}) for s in range(20)}
    assert len(openings) == 20


def test_the_task_comes_from_the_seed_unless_reset_names_it(report):
    env = report.make_env()
    tasks = {env.reset(seed=s, eci=2).task for s in range(30)}
    assert tasks == {"daily_header", "daily_summary", "daily_full"}
    drawn = env.reset(seed=5, eci=3)
    truth = env.oracle_view().expected
    forced = env.reset(seed=5, eci=3, task="daily_full")
    assert forced.task == "daily_full" and env.oracle_view().expected == truth  # same data, other task
    assert forced.queue == drawn.queue
    with pytest.raises(ValueError, match="task='weekly'"):
        env.reset(seed=5, eci=3, task="weekly")


def test_metadata_contract_on_every_final_observation(report):
    metadata_contract(report, COMPONENTS, range(1, 6), tier=lambda s: s, rng=lambda s: random.Random(0))


def test_rewards_stay_in_declared_range(report):
    for _, _, final in play(report, range(30)):
        assert sum(final.metadata["reward_components"].values()) <= report.section.reward_range[1] + 1e-9


def test_tiers_are_really_harder(report):
    """The oracle solves every tier; the heuristic never gets better with the tier and falls clearly from ECI 1
    to 5; random stays far below both. (The seed's README has the 200-episode table.)"""
    oracle = evaluate(report, "oracle", range(1, 6), 100)
    heuristic = evaluate(report, "heuristic", range(1, 6), 100)
    randomly = evaluate(report, "random", range(1, 6), 60)
    rates = [heuristic.tier(t).solve_rate for t in range(1, 6)]
    rewards = [heuristic.tier(t).mean_return for t in range(1, 6)]
    assert all(b <= a for a, b in zip(rates, rates[1:], strict=False)), rates
    assert all(b <= a for a, b in zip(rewards, rewards[1:], strict=False)), rewards
    assert rates[0] >= 0.8 and rates[0] - rates[4] >= 0.7, rates
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate == 1.0
        assert oracle.tier(t).mean_return >= report.section.solved_reward
        assert randomly.tier(t).solve_rate == 0.0 and randomly.tier(t).mean_return < rewards[4] - 0.2


# ---- each tier's mechanic does what it says -----------------------------------------------------------------
def _worlds(pkg, eci, seeds=range(30)):
    env = pkg.make_env()
    for seed in seeds:
        obs = env.reset(seed=seed, eci=eci, task="daily_full")
        yield obs, env.oracle_view()


def test_noise_tier_dirties_amounts_and_statuses_and_withholds_details(report):
    clean = [ep.tables["transactions"] for _, ep in _worlds(report, 1)]
    assert all(isinstance(row[4], float) and row[5] in ("settled", "reversed", "pending") for t in clean for row in t)
    noisy = [(obs, ep) for obs, ep in _worlds(report, 2)]
    rows = [row for _, ep in noisy for row in ep.tables["transactions"]]
    texts = [row[4] for row in rows if isinstance(row[4], str)]
    assert texts and all(any(mark in t for mark in (",", "$", " USD")) or t.replace(".", "").isdigit() for t in texts)
    assert {"Settled", "SETTLED", " settled"} & {row[5] for row in rows}
    assert any("n/a" in obs.instructions for obs, _ in noisy)
    assert not any("n/a," in obs.instructions.split(": ")[0] for obs, _ in _worlds(report, 1))


def test_distractor_tier_plants_lookalikes_retired_rows_and_mailboxes(report):
    for eci, planted in ((2, False), (3, True)):
        for _, ep in _worlds(report, eci, range(15)):
            subjects = {name for _, name, *_ in ep.tables["customers"]}
            day = ep.report_date.isoformat()
            excluded = [row for row in ep.tables["transactions"] if row[1] == ep.subject_id and row[2] == day
                        and row[5].strip().lower() in ("reversed", "pending")]
            retired_kpis = [row for row in ep.tables["report_kpis"] if row[0] == ep.report_type and row[4] == 0]
            retired_boxes = [row for row in ep.tables["contacts"] if row[0] == ep.subject_id and row[3] == 0]
            assert (f"{ep.subject_name} Holdings" in subjects) is planted
            assert bool(excluded) is planted and bool(retired_kpis) is planted and bool(retired_boxes) is planted
            assert (len(ep.queue) > 4) is planted
            if planted:
                assert set(ep.unroutable) >= {row[1] for row in retired_boxes}


def test_hidden_constraint_tier_sets_a_house_style_only_check_report_reveals(report):
    assert all(ep.style == HouseStyle() for _, ep in _worlds(report, 3))
    styled = [ep.style for _, ep in _worlds(report, 4)]
    assert all(1 <= len(s.custom_kinds) <= 2 for s in styled)
    assert max(len(ep.style.custom_kinds) for _, ep in _worlds(report, 5, range(60))) == 3
    env = report.make_env()
    obs = _episode_where(env, lambda ep: ep.style.date == "dmy_slash", eci=4, task="daily_header")
    ep = env.oracle_view()
    assert "DD/MM/YYYY" not in obs.model_dump_json() and "house style" not in obs.instructions
    iso = ep.report_date.isoformat()
    stored = act(env, command="set_field", field="report_date", value=iso)
    assert 0 < stored.reward < 0.2 / 3 and "DD/MM/YYYY" not in stored.model_dump_json()  # partial credit only
    assert "this customer's house style writes dates as DD/MM/YYYY (e.g. 05/01/2026)" in env.secret_values()
    checked = act(env, command="check_report")
    assert "report_date: right value, wrong format: this customer's house style writes dates as DD/MM/YYYY " \
           "(e.g. 05/01/2026)" in checked.grade_report
    fixed = act(env, command="set_field", field="report_date", value=ep.expected["report_date"])
    assert fixed.reward == pytest.approx(0.2 / 3 * 0.75, abs=1e-6)


def test_the_last_tier_has_the_smaller_budget(report):
    budget = report.section.step_budget
    assert budget[5] < min(budget[t] for t in range(1, 5))
    env = report.make_env()
    env.reset(seed=2, eci=5, task="daily_header")
    _fill(env)
    for i in range(budget[5] - 3):
        obs = act(env, command="query", sql=f"SELECT {i}")
    assert obs.done and obs.metadata["termination"] == "budget_exhausted" and not obs.metadata["solved"]
    assert obs.metadata["reward_components"] == {"grade": 0.5, "penalty": 0.0}  # half the draft's grade
    assert obs.reward == pytest.approx(0.5) and obs.graded_score == 1.0


# ---- the mechanics -----------------------------------------------------------------------------------------
def test_pdf_text_matches_the_submitted_report(report):
    env = report.make_env()
    env.reset(seed=7, eci=4, task="daily_full")
    obs = _fill(env)
    ep = env.oracle_view()
    assert obs.pdf_status == "current" and obs.error is None
    data = downloads.REGISTRY.get(env.state.episode_id)
    assert data is not None and data.startswith(b"%PDF")
    printed = extract_lines(data)
    assert printed == env.desk().layout.lines(obs.draft, [(r.label, r.value) for r in ep.rows])
    assert f"Total repaid: {ep.expected['total_repaid']}" in printed
    while obs.delivery_status != "delivered":  # the oracle's recipient: retries only flaky-network failures
        obs = act(env, command="send_email", recipient=ep.designated)
    final = act(env, command="submit_report")
    assert final.metadata["solved"] and final.graded_score == 1.0
    assert final.metadata["reward_components"] == {"grade": 1.0, "penalty": 0.0}
    assert any("8 of 8 expected lines found" in line for line in final.grade_report)


def test_grader_parts_of_the_full_report(report):
    env = report.make_env()
    _episode_where(env, lambda ep: ep.flaps == 0 and ep.designated == ep.primary)
    ep = env.oracle_view()
    for name in ep.task.fields:
        act(env, command="set_field", field=name, value=ep.expected[name])
    checked = act(env, command="check_report")  # summary right, no rows, no PDF, no delivery
    assert checked.graded_score == pytest.approx(0.35)
    act(env, command="add_kpi_row", label=ep.rows[0].label, value=ep.rows[0].value)
    act(env, command="add_kpi_row", label=ep.rows[1].label, value="0.00")
    assert act(env, command="check_report").graded_score == pytest.approx(0.35 + 0.20 / 2)
    assert "kpi row 2: wrong value" in env.observe()["grade_report"]


def test_a_pdf_that_does_not_show_the_draft_is_graded_down(report):
    env = report.make_env()
    env.reset(seed=7, eci=1, task="daily_full")
    ep = env.oracle_view()
    _fill(env, upto_pdf=False)
    act(env, command="set_field", field="total_repaid", value="1.00")
    act(env, command="finalize_pdf")
    obs = act(env, command="set_field", field="total_repaid", value=ep.expected["total_repaid"])
    assert obs.pdf_status == "stale"
    refused = act(env, command="send_email", recipient=ep.designated)
    assert refused.error == "pdf_stale" and refused.reward == 0.0
    checked = act(env, command="check_report")
    assert any("7 of 8 expected lines" in line and "stale" in line for line in checked.grade_report)
    assert checked.graded_score < 0.8


def test_a_transient_network_failure_is_retried_to_success(report):
    env = report.make_env()
    _episode_where(env, lambda ep: ep.flaps == 2 and ep.designated == ep.primary)
    _fill(env)
    ep = env.oracle_view()
    send = env.action_type(command="send_email", recipient=ep.primary)
    statuses = [env.step(send) for _ in range(3)]
    assert [o.delivery_status for o in statuses] == ["failed_transient", "failed_transient", "delivered"]
    assert TRANSIENT in statuses[0].outbox[0] and all(o.reward == 0.0 for o in statuses)  # two retries are free
    assert env.step(send).error == "already_delivered"
    final = act(env, command="submit_report")
    assert final.metadata["solved"] and final.metadata["reward_components"] == {"grade": 1.0, "penalty": 0.0}


def test_a_permanent_failure_needs_the_backup_and_looping_on_it_is_penalised(report):
    env = report.make_env()
    _episode_where(env, lambda ep: ep.flaps == 0 and ep.designated == ep.backup)
    _fill(env)
    ep = env.oracle_view()
    send = env.action_type(command="send_email", recipient=ep.primary)
    first = env.step(send)
    assert first.delivery_status == "failed_permanent" and PERMANENT in first.outbox[-1]
    loops = [env.step(send) for _ in range(4)]  # a loop: retries 1-2 free of the streak penalty, then charged
    assert [o.reward for o in loops] == pytest.approx([0.0, 0.0, -0.05, -0.10])
    delivered = act(env, command="send_email", recipient=ep.backup)
    assert delivered.delivery_status == "delivered"
    final = act(env, command="submit_report")
    assert final.graded_score == 1.0 and not final.metadata["solved"]  # delivered, but after a loop
    assert final.metadata["reward_components"]["penalty"] == pytest.approx(-0.4)


def test_the_right_fallback_without_a_loop_solves(report):
    env = report.make_env()
    _episode_where(env, lambda ep: ep.designated == ep.backup, eci=3)
    _fill(env)
    ep = env.oracle_view()
    obs = act(env, command="send_email", recipient=ep.primary)
    while obs.delivery_status != "failed_permanent":  # flaps first, then the 550
        obs = act(env, command="send_email", recipient=ep.primary)
    act(env, command="send_email", recipient=ep.backup)
    final = act(env, command="submit_report")
    assert final.metadata["solved"] and final.reward == pytest.approx(1.0)


def test_invented_and_misdirected_recipients_are_penalised(report):
    env = report.make_env()
    _episode_where(env, lambda ep: ep.flaps == 0 and ep.designated == ep.primary)
    _fill(env)
    ep = env.oracle_view()
    invented = act(env, command="send_email", recipient="ceo@bank.example")
    assert invented.error == "unknown_recipient" and invented.reward == 0.0
    act(env, command="send_email", recipient=ep.backup)  # delivered, to the wrong person
    locked = act(env, command="set_field", field="title", value="x")
    assert locked.error == "wrong_phase"
    act(env, command="send_email", recipient=ep.primary)
    final = act(env, command="submit_report")
    assert final.graded_score == 1.0 and not final.metadata["solved"]
    assert final.metadata["reward_components"]["penalty"] == pytest.approx(-0.2)


def test_repeating_the_same_action_costs_a_growing_penalty(report):
    env = report.make_env()
    env.reset(seed=3, eci=1, task="daily_summary")
    same = env.action_type(command="query", sql="SELECT COUNT(*) FROM customers")
    rewards = [env.step(same).reward for _ in range(9)]
    assert rewards == pytest.approx([0, 0, 0, -0.05, -0.10, -0.15, -0.20, -0.25, -0.25])
    assert act(env, command="check_report").reward == 0.0  # a new action: the streak is broken
    malformed = env.action_type.model_validate({"metadata": {MALFORMED_KEY: "no JSON object found"}})
    assert [env.step(malformed).reward for _ in range(4)] == pytest.approx([0, 0, 0, -0.05])


def test_progress_credit_for_right_values_partial_for_wrong_and_never_twice(report):
    env = report.make_env()
    env.reset(seed=3, eci=1, task="daily_header")  # three fields share the 0.2 pool
    ep = env.oracle_view()
    wrong = act(env, command="set_field", field="title", value="Weekly Report")
    right = act(env, command="set_field", field="title", value=ep.expected["title"])
    again = act(env, command="set_field", field="title", value=ep.expected["title"] + " ")
    assert wrong.reward == pytest.approx(0.2 / 3 * 0.25, abs=1e-6)
    assert right.reward == pytest.approx(0.2 / 3 * 0.75, abs=1e-6)
    assert again.reward == 0.0 and again.draft["title"] == ep.expected["title"]
    for name in ("customer_name", "report_date"):
        act(env, command="set_field", field=name, value=ep.expected[name])
    final = act(env, command="submit_report")
    assert final.metadata["solved"] and final.metadata["episode_return"] == pytest.approx(1.2)


def test_malformed_completion_costs_the_declared_reward(report):
    env = report.make_env()
    env.reset(seed=1, eci=1)
    obs = env.step(report.protocol.parse("I would query the database").action)
    assert obs.error == "malformed_completion" and "no JSON object" in obs.feedback
    assert obs.reward == report.section.malformed_reward == 0.0
    assert not obs.done and obs.metadata["step"] == 1


@pytest.mark.parametrize(
    ("task", "payload", "code"),
    [
        ("daily_full", {}, "missing_command"),
        ("daily_full", {"command": "query"}, "missing_sql"),
        ("daily_full", {"command": "query", "sql": "DELETE FROM customers"}, "sql_forbidden"),
        ("daily_full", {"command": "query", "sql": "SELECT COUNT(*) FROM transactions a, transactions b, "
                                                   "transactions c, transactions d"}, "sql_too_slow"),
        ("daily_full", {"command": "query", "sql": "SELECT nothing FROM nowhere"}, "sql_error"),
        ("daily_full", {"command": "set_field", "value": "x"}, "missing_field"),
        ("daily_full", {"command": "set_field", "field": "title"}, "missing_value"),
        ("daily_full", {"command": "set_field", "field": "title", "value": "x" * 201}, "value_too_long"),
        ("daily_header", {"command": "set_field", "field": "total_repaid", "value": "1.00"}, "not_in_task"),
        ("daily_summary", {"command": "add_kpi_row", "label": "Fee income", "value": "1.00"}, "not_in_task"),
        ("daily_summary", {"command": "finalize_pdf"}, "not_in_task"),
        ("daily_header", {"command": "send_email", "recipient": "a@b.example"}, "not_in_task"),
        ("daily_full", {"command": "finalize_pdf"}, "draft_incomplete"),
        ("daily_full", {"command": "send_email", "recipient": "a@b.example"}, "wrong_phase"),
        ("daily_full", {"command": "send_email"}, "missing_recipient"),
        ("daily_full", {"command": "add_kpi_row", "label": "Fee income"}, "missing_value"),
    ],
)
def test_invalid_and_wrong_phase_commands_earn_zero_with_a_code(report, task, payload, code):
    rejected(report, payload, code, task=task)
    assert report.section.invalid_action_reward == 0.0


def test_too_many_kpi_rows_are_refused(report):
    env = report.make_env()
    env.reset(seed=1, eci=1, task="daily_full")
    for _ in range(6):
        assert act(env, command="add_kpi_row", label="Fee income", value=f"{random.random():.2f}").error is None
    assert act(env, command="add_kpi_row", label="Fee income", value="1.00").error == "too_many_rows"


def test_the_schema_refuses_what_the_domain_does_not_define(report, clinic):
    with pytest.raises(ValueError):
        report.action_cls.model_validate({"command": "delete_everything"})
    with pytest.raises(ValueError):
        report.action_cls.model_validate({"command": "set_field", "field": "clinic_name"})
    assert clinic.action_cls.model_validate({"command": "set_field", "field": "clinic_name"}).field == "clinic_name"


def test_stepping_after_done_is_harmless(report):
    env = report.make_env()
    result = run_episode(env, make_policy(report, "oracle"), 3, 2)
    again = act(env, command="submit_report")
    assert again.done and again.reward == 0.0 and again.error == "episode_over"
    assert env.state.step_count == result.steps


def test_state_and_first_observation_never_hold_the_answer(report):
    env = report.make_env()
    for eci in range(1, 6):
        for seed in range(30):
            obs = env.reset(seed=seed, eci=eci)
            answers, secrets = env.answer_values(), env.secret_values()
            assert answers, "every task has something to find"
            assert bool(secrets) == (eci >= 4)  # the house style's rules, from ECI 4
            visible = obs.model_dump_json() + env.state.model_dump_json()
            assert not [s for s in answers + secrets if s in visible]
    ep = env.oracle_view()
    state = env.state.model_dump_json()
    assert ep.subject_name not in state and ep.designated not in state
    assert set(env.state.model_dump()) == {"episode_id", "step_count", "eci", "seed", "step_budget", "done",
                                           "episode_return"}


def test_the_seed_is_the_family_plus_its_domain_and_passes_openenv_static_validation(tmp_path):
    root = SEEDS_DIR / "daily_report"
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert files == {"README.md", "domain.yaml", "openenv.yaml", "pyproject.toml", "__init__.py", "client.py",
                     "server/__init__.py", "server/app.py", "server/Dockerfile", "server/requirements.txt",
                     "validation/runtime.json"}
    assert "family: report@1" in (root / "openenv.yaml").read_text()
    pkg = tmp_path / "daily_report"
    shutil.copytree(root, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run([sys.executable, "-m", "openenv.cli", "validate", "--level", "static", str(pkg)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  static.manifest" in result.stdout and "Verdict: PASS" in result.stdout


# ---- the domain schema and its checks ------------------------------------------------------------------------
def _seed_data():
    return read_domain_file(SEEDS_DIR / "daily_report" / "domain.yaml")


def _problems(data):
    with pytest.raises(DomainError) as err:
        FAMILY.parse_domain(data)
    return {p.path: p.message for p in err.value.problems}


def _edit(change):
    data = copy.deepcopy(_seed_data())
    change(data)
    return _problems(data)


def _broken_rules(change) -> dict[str, set[str]]:
    """The declared rules (`ReportDomain.RULES`) the changed seed domain breaks, by path."""
    data = copy.deepcopy(_seed_data())
    change(data)
    return broken_rules(FAMILY, data)


def test_a_broken_reference_names_the_field():
    problems = _edit(lambda d: d["metrics"][0].update(of=["loan_advance"]))
    assert "is not a defined category" in problems["domain.metrics[0].of[0]"]
    problems = _edit(lambda d: d["kpis"][1].update(against=["chargeback"]))
    assert "chargeback" in problems["domain.kpis[1].against[0]"]


def test_a_duplicate_names_the_field():
    problems = _edit(lambda d: d["subject_names"].__setitem__(5, "aldergrove capital"))
    assert "repeats domain.subject_names[0]" in problems["domain.subject_names[5]"]
    problems = _edit(lambda d: d["kpis"][2].update(label="Net cash flow"))
    assert "already used" in problems["domain.kpis[2].label"]
    problems = _edit(lambda d: d["metrics"][1].update(field="report_date"))
    assert "used twice" in problems["domain.metrics[1].field"]


def test_a_domain_too_small_for_a_tiers_mechanics_names_the_field():
    # ECI 3 lists spare KPI definitions as retired rows: kpi_rows + 2 at least, a count a designer can top up to
    assert _broken_rules(lambda d: d.update(kpis=d["kpis"][:3])) == {"domain.kpis": {"spare_kpis"}}
    problems = _edit(lambda d: d.update(mailboxes=["reports", "finance"]))
    assert "retired primary" in problems["domain.mailboxes"]
    problems = _edit(lambda d: d.update(subject_names=d["subject_names"][:9]))
    assert "at least 10" in problems["domain.subject_names"]
    problems = _edit(lambda d: d["statuses"].update(excluded=[]))
    assert "domain.statuses.excluded" in problems  # ECI 3's excluded-status distractors


def test_a_domain_that_breaks_a_declared_rule_names_it():
    # Only a count among the metrics: ECI 4's house style for amounts would change nothing in the summary task.
    assert _broken_rules(lambda d: d.update(metrics=[d["metrics"][2]]))["domain.metrics"] == {"amount_metric"}
    # An amount finer than the measure's decimals, or too large for whole minor units.
    assert _broken_rules(lambda d: d["categories"][0].update(amount=[5000.001, 9000]))[
        "domain.categories[0].amount[0]"] == {"amount_decimals"}
    assert _broken_rules(lambda d: d["categories"][1].update(amount=[200.0, 2e10]))[
        "domain.categories[1].amount[1]"] == {"amount_decimals"}
    # The same amounts break the rule once the measure counts whole units: it reads both fields.
    whole = _broken_rules(lambda d: d["record_table"]["measure"].update(decimals=0) or d["categories"][2].update(
        amount=[10.5, 500.0]))
    assert whole == {"domain.categories[2].amount[0]": {"amount_decimals"}}


def test_a_bad_placeholder_names_the_field():
    data = copy.deepcopy(_seed_data())
    data["lookalike_name"] = "{nme} Holdings"
    with pytest.raises(DomainError) as err:
        FAMILY.parse_domain(data)
    said = [p.message for p in err.value.problems if p.path == "domain.lookalike_name"]
    assert said == ["unknown placeholder(s) {nme}; allowed here: {name}", "must contain {name}"]  # each once
    problems = _edit(lambda d: d["kpis"][0].update(formula="total_repaid - {total_disbursed}"))
    assert "domain.kpis[0].formula" in problems


def test_other_domain_errors_name_the_field():
    problems = _edit(lambda d: d["record_table"].update(table="order"))
    assert "SQL keyword" in problems["domain.record_table.table"]
    problems = _edit(lambda d: d["subject_names"].__setitem__(2, "Kraków Credit \u0141odz"))
    assert "Latin-1" in problems["domain.subject_names[2]"]
    problems = _edit(lambda d: d["categories"][2].update(per_period=[0, 3]))
    assert "greater than or equal to 1" in problems["domain.categories[2].per_period[0]"]  # the schema's bound
    problems = _edit(lambda d: d.update(kpi_rows=7))
    assert "domain.kpi_rows" in problems  # a schema error, with its path too
    problems = _edit(lambda d: d["kpis"][0].update(against=[]))
    assert "second operand" in problems["domain.kpis[0].against"]


def test_the_report_itself_as_its_subject_names_the_field():
    # the daily sales report's 1.5B: subject noun 'daily sales report', a subject and a category named so too
    def edit(d):
        d.update(subject_noun="daily sales report")
        d["subject_names"][3] = "Daily Sales Report"
        d["categories"][1]["name"] = "daily_sales_report"
    problems = _edit(edit)
    assert "is the report itself" in problems["domain.subject_noun"]
    assert "names a report, not a subject" in problems["domain.subject_names[3]"]
    assert "names a report" in problems["domain.categories[1].name"]
    assert not any(path.startswith("domain.subject_names[") and path != "domain.subject_names[3]"
                   for path in problems)
    title = _seed_data()["report_types"][0]["title"]
    problems = _edit(lambda d: d["subject_names"].__setitem__(0, title))  # a report type's title as a subject
    assert "names a report" in problems["domain.subject_names[0]"]


def test_every_schema_field_is_described_and_bounded():
    from pydantic import BaseModel

    seen, todo = set(), [FAMILY.domain]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            assert info.description and len(info.description) >= 15, f"{model.__name__}.{name} has no description"
            text = str(info.annotation)
            if "list[" in text or (info.annotation is str and name not in ("symbol",)):
                bounded = [m for m in info.metadata if getattr(m, "max_length", None)]
                assert bounded or "tuple" in text, f"{model.__name__}.{name} is unbounded"
            for arg in getattr(info.annotation, "__args__", ()) + (info.annotation,):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    todo.append(arg)
    assert len(seen) >= 10


def test_the_example_domains_round_trip_through_yaml():
    for name, path in FAMILY.examples().items():
        domain = FAMILY.load_example(name)
        assert FAMILY.parse_domain(yaml.safe_load(dump_domain(domain))) == domain, name
        assert FAMILY.parse_domain(read_domain_file(path)) == domain


def test_the_tidy_empties_a_second_operand_that_the_op_does_not_read():
    # the daily sales report's 1.5B gave a 'sum' metric and two 'sum' KPIs an `against`: 3 of its 13 problems
    data = copy.deepcopy(_seed_data())
    summed = next(i for i, m in enumerate(data["metrics"]) if m["op"] == "sum")
    two = next(i for i, k in enumerate(data["kpis"]) if k["op"] in ("difference", "percent"))
    category = data["categories"][0]["name"]
    data["metrics"][summed]["against"] = [category]
    assert "second operand" in _problems(data)[f"domain.metrics[{summed}].against"]
    tidied = FAMILY.domain.tidy(data)
    assert tidied["metrics"][summed]["against"] == [] and data["metrics"][summed]["against"] == [category]
    assert tidied["kpis"][two]["against"] == data["kpis"][two]["against"] != []  # read by its op: kept
    assert not FAMILY.domain.model_validate(tidied).problems()


def test_the_metrics_are_named_before_they_are_written():
    # one after another, the daily sales report's 1.5B named three metrics 'total_sales'
    from openadapt.designer.pieces import plan_pieces

    paths = [p.path for p in plan_pieces(FAMILY.domain, FAMILY.load_example(sorted(FAMILY.examples())[0]))]
    assert paths.index("domain.metrics.keys") < paths.index("domain.metrics[0]")


def test_a_record_key_that_is_the_subjects_key_is_named_at_the_records_own_column():
    # the daily sales report at 91559cc: subjects keyed 'sale_id' and records keyed 'sale_id', said at the
    # record table's '(subject id)', and the record table rewritten whole kept it
    def clash(d):
        d["record_table"]["id_column"] = d["subject_table"]["id_column"]

    problems = _edit(clash)
    assert "the subjects' key" in problems["domain.record_table.id_column"]
    assert not any("(subject id)" in path for path in problems)
