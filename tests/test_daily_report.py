import datetime as dt
import math
import random
import shutil
import subprocess
import sys
from decimal import Decimal

import pytest

from openadapt.envpkg.loader import SEEDS_DIR, load
from openadapt.envpkg.evaluation import EVAL_SEED_START, evaluate, make_policy, run_episode
from openadapt.kit import MALFORMED_KEY, Policy
from openadapt.seed_envs.daily_report.models import ReportAction
from openadapt.seed_envs.daily_report.server import downloads
from openadapt.seed_envs.daily_report.server.formats import (
    HouseStyle,
    format_amount,
    format_date,
    format_name,
    format_percent,
    round_cents,
)
from openadapt.seed_envs.daily_report.server.mail import PERMANENT, TRANSIENT
from openadapt.seed_envs.daily_report.server.pdf import extract_lines, report_lines

COMPONENTS = {"grade", "penalty"}


@pytest.fixture(scope="module")
def report():
    return load("seed:daily_report")


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
        obs = env.step(ReportAction(command="set_field", field=name, value=ep.expected[name]))
    for row in ep.rows if ep.task.kpi_rows else []:
        obs = env.step(ReportAction(command="add_kpi_row", label=row.label, value=row.value))
    if upto_pdf and ep.task.kpi_rows:
        obs = env.step(ReportAction(command="finalize_pdf"))
    return obs


# ---- a careful agent that sees only observations: every tier must be solvable without privilege -----------
CLEAN_CENTS = ("CAST(ROUND(CAST(REPLACE(REPLACE(REPLACE(REPLACE(amount, ',', ''), '$', ''), 'USD', ''), ' ', '') "
               "AS REAL) * 100) AS INTEGER)")
STYLE_WORDS = {"DD/MM/YYYY": ("date", "dmy_slash"), "DD Mon YYYY": ("date", "dmy_text"),
               "thousands separators": ("amount", "separators"), "currency code": ("amount", "currency"),
               "upper case": ("name", "upper")}


def _rows(obs):
    return [line.split(" | ") for line in obs.query_result[1:] if not line.startswith("... (")]


class CarefulAgent(Policy):
    """Cleans the data in SQL, keeps only live rows, asks the grader once for the house style, retries a flaky
    network and falls back to the backup contact after a permanent failure."""

    name = "careful"

    def begin(self, env, observation, rng):
        super().begin(env, observation, rng)
        self._plan = self._script(observation)
        self._first = next(self._plan)

    def act(self, observation):
        if self._first is not None:
            action, self._first = self._first, None
            return action
        try:
            return self._plan.send(observation)
        except StopIteration:
            return ReportAction(command="submit_report")

    def _script(self, obs):
        obs = yield ReportAction(command="query", sql=(
            "SELECT t.customer_id, t.report_date, t.report_type, c.name, r.title FROM report_tasks t "
            "JOIN customers c ON c.customer_id = t.customer_id JOIN report_types r ON r.code = t.report_type "
            f"WHERE t.task_id = '{obs.task_id}'"))
        customer, day, report_type, name, title = _rows(obs)[0]
        day = dt.date.fromisoformat(day)
        sums, count, labels, contacts = {}, 0, [], {}
        if obs.task != "daily_header":
            obs = yield ReportAction(command="query", sql=(
                f"SELECT kind, COUNT(*), SUM({CLEAN_CENTS}) FROM transactions WHERE customer_id = '{customer}' "
                f"AND txn_date = '{day}' AND LOWER(TRIM(status)) = 'settled' GROUP BY kind"))
            sums = {kind: int(total) for kind, _, total in _rows(obs)}
            count = sum(int(n) for _, n, _ in _rows(obs))
        if obs.task == "daily_full":
            obs = yield ReportAction(command="query", sql=(
                f"SELECT label FROM report_kpis WHERE report_type = '{report_type}' AND active = 1 "
                "ORDER BY position"))
            labels = [r[0] for r in _rows(obs)]
            obs = yield ReportAction(command="query", sql=(
                f"SELECT email, role FROM contacts WHERE customer_id = '{customer}' AND active = 1"))
            contacts = {role: email for email, role in _rows(obs)}
        # One value of each kind a house style can touch, then ask the grader how this customer writes them.
        probe = {"report_date": format_date(day, HouseStyle()), "customer_name": name}
        if sums:
            probe["total_disbursed"] = format_amount(sums.get("disbursement", 0), HouseStyle())
        for field, value in probe.items():
            obs = yield ReportAction(command="set_field", field=field, value=value)
        obs = yield ReportAction(command="check_report")
        learned = {kind: variant for line in obs.grade_report if "house style" in line
                   for words, (kind, variant) in STYLE_WORDS.items() if words in line}
        style = HouseStyle(**learned)
        d, r, f = (sums.get(k, 0) for k in ("disbursement", "repayment", "fee"))
        values = {"title": title, "customer_name": format_name(name, style), "report_date": format_date(day, style)}
        if sums:
            values.update(total_disbursed=format_amount(d, style), total_repaid=format_amount(r, style),
                          transaction_count=str(count))
        for field, value in values.items():
            if obs.draft.get(field) != value:
                obs = yield ReportAction(command="set_field", field=field, value=value)
        if obs.task != "daily_full":
            return
        kpi = {"Net cash flow": format_amount(r - d, style),
               "Repayment ratio": format_percent(Decimal(100 * r) / Decimal(d)),
               "Fee income": format_amount(f, style),
               "Average transaction": format_amount(round_cents(Decimal(d + r + f) / 100 / count), style)}
        for label in labels:
            obs = yield ReportAction(command="add_kpi_row", label=label, value=kpi[label])
        obs = yield ReportAction(command="finalize_pdf")
        recipient = contacts["primary"]
        while obs.delivery_status != "delivered":
            obs = yield ReportAction(command="send_email", recipient=recipient)
            if obs.delivery_status == "failed_permanent":
                recipient = contacts["backup"]


def test_a_careful_unprivileged_agent_solves_every_tier_within_its_budget(report):
    env = report.make_env()
    for eci in range(1, 6):
        results = [run_episode(env, CarefulAgent(), seed, eci) for seed in range(EVAL_SEED_START, EVAL_SEED_START + 60)]
        assert all(r.solved for r in results), [(r.seed, r.components) for r in results if not r.solved][:3]
        assert max(r.steps for r in results) <= report.section.step_budget[eci] - 5


# ---- the contract ------------------------------------------------------------------------------------------
def _trajectory(pkg, policy_name, seed, eci):
    env = pkg.make_env()
    steps = []
    run_episode(env, make_policy(pkg, policy_name), seed, eci,
                on_step=lambda a, o: steps.append((a.model_dump(), o.model_dump())))
    return steps


@pytest.mark.parametrize("eci", [1, 3, 5])
def test_episode_is_a_function_of_seed_and_tier(report, eci):
    for policy in ("random", "heuristic", "oracle"):
        assert _trajectory(report, policy, 11, eci) == _trajectory(report, policy, 11, eci)
    full = []
    for env in (report.make_env(), report.make_env()):  # through the PDF too: its feedback, its graded text
        env.reset(seed=11, eci=eci, task="daily_full")
        full.append([_fill(env).model_dump(), env.step(ReportAction(command="check_report")).model_dump()])
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
    env = report.make_env()
    for eci in range(1, 6):
        for policy in ("oracle", "heuristic", "random"):
            obs = env.reset(seed=eci, eci=eci)
            assert obs.metadata["eci"] == eci and obs.metadata["step"] == 0
            agent = make_policy(report, policy)
            agent.begin(env, obs, random.Random(0))
            while not obs.done:
                obs = env.step(agent.act(obs))
                assert obs.metadata["eci"] == eci and obs.eci == eci
            meta = obs.metadata
            assert isinstance(meta["solved"], bool) and 0.0 <= meta["solve_rate_signal"] <= 1.0
            assert set(meta["reward_components"]) == COMPONENTS
            assert meta["termination"] in {"agent", "budget_exhausted"}
            assert meta["step"] <= report.section.step_budget[eci]


def test_rewards_stay_in_declared_range(report):
    low, high = report.section.reward_range
    env = report.make_env()
    for seed in range(40):
        for policy in ("random", "heuristic", "oracle"):
            agent = make_policy(report, policy)
            obs = env.reset(seed=seed, eci=seed % 5 + 1)
            agent.begin(env, obs, random.Random(seed))
            while not obs.done:
                obs = env.step(agent.act(obs))
                assert math.isfinite(obs.reward) and low <= obs.reward <= high
            assert sum(obs.metadata["reward_components"].values()) <= high + 1e-9


def test_tiers_are_really_harder(report):
    """The oracle solves every tier; the heuristic never gets better with the tier and falls clearly from ECI 1
    to 5; random stays far below both."""
    oracle = evaluate(report, "oracle", range(1, 6), 100)
    heuristic = evaluate(report, "heuristic", range(1, 6), 100)
    randomly = evaluate(report, "random", range(1, 6), 100)
    rates = [heuristic.tier(t).solve_rate for t in range(1, 6)]
    rewards = [heuristic.tier(t).mean_return for t in range(1, 6)]
    assert all(b <= a for a, b in zip(rates, rates[1:], strict=False)), rates
    assert all(b <= a for a, b in zip(rewards, rewards[1:], strict=False)), rewards
    assert rates[0] >= 0.8 and rates[0] - rates[4] >= 0.7, rates
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate >= 0.95
        assert oracle.tier(t).mean_return >= report.section.solved_reward
        assert randomly.tier(t).solve_rate == 0.0 and randomly.tier(t).mean_return < rewards[4] - 0.2


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
    assert printed == report_lines(obs.draft, [(r.label, r.value) for r in ep.rows])
    assert f"Total repaid: {ep.expected['total_repaid']}" in printed
    while obs.delivery_status != "delivered":  # the oracle's recipient: retries only flaky-network failures
        obs = env.step(ReportAction(command="send_email", recipient=ep.designated))
    final = env.step(ReportAction(command="submit_report"))
    assert final.metadata["solved"] and final.graded_score == 1.0
    assert any("8 of 8 expected lines found" in line for line in final.grade_report)


def test_a_pdf_that_does_not_show_the_draft_is_graded_down(report):
    env = report.make_env()
    env.reset(seed=7, eci=1, task="daily_full")
    ep = env.oracle_view()
    env.step(ReportAction(command="set_field", field="total_repaid", value="1.00"))  # wrong in the PDF
    _fill(env, upto_pdf=False)
    env.step(ReportAction(command="set_field", field="total_repaid", value="1.00"))
    env.step(ReportAction(command="finalize_pdf"))
    obs = env.step(ReportAction(command="set_field", field="total_repaid", value=ep.expected["total_repaid"]))
    assert obs.pdf_status == "stale"
    refused = env.step(ReportAction(command="send_email", recipient=ep.designated))
    assert refused.error == "pdf_stale" and refused.reward == 0.0
    checked = env.step(ReportAction(command="check_report"))
    assert any("7 of 8 expected lines" in line and "stale" in line for line in checked.grade_report)
    assert checked.graded_score < 0.8


def test_a_transient_network_failure_is_retried_to_success(report):
    env = report.make_env()
    _episode_where(env, lambda ep: ep.flaps == 2 and ep.designated == ep.primary)
    _fill(env)
    ep = env.oracle_view()
    send = ReportAction(command="send_email", recipient=ep.primary)
    statuses = [env.step(send) for _ in range(3)]
    assert [o.delivery_status for o in statuses] == ["failed_transient", "failed_transient", "delivered"]
    assert TRANSIENT in statuses[0].outbox[0] and all(o.reward == 0.0 for o in statuses)  # two retries are free
    assert env.step(send).error == "already_delivered"
    final = env.step(ReportAction(command="submit_report"))
    assert final.metadata["solved"] and final.metadata["reward_components"] == {"grade": 1.0, "penalty": 0.0}


def test_a_permanent_failure_needs_the_backup_and_looping_on_it_is_penalised(report):
    env = report.make_env()
    _episode_where(env, lambda ep: ep.flaps == 0 and ep.designated == ep.backup)
    _fill(env)
    ep = env.oracle_view()
    send = ReportAction(command="send_email", recipient=ep.primary)
    first = env.step(send)
    assert first.delivery_status == "failed_permanent" and PERMANENT in first.outbox[-1]
    loops = [env.step(send) for _ in range(4)]  # a loop: retries 1-2 free of the streak penalty, then charged
    assert [o.reward for o in loops] == pytest.approx([0.0, 0.0, -0.05, -0.10])
    delivered = env.step(ReportAction(command="send_email", recipient=ep.backup))
    assert delivered.delivery_status == "delivered"
    final = env.step(ReportAction(command="submit_report"))
    assert final.graded_score == 1.0 and not final.metadata["solved"]  # delivered, but after a loop
    assert final.metadata["reward_components"]["penalty"] == pytest.approx(-0.4)


def test_the_right_fallback_without_a_loop_solves(report):
    env = report.make_env()
    _episode_where(env, lambda ep: ep.designated == ep.backup, eci=3)
    _fill(env)
    ep = env.oracle_view()
    obs = env.step(ReportAction(command="send_email", recipient=ep.primary))
    while obs.delivery_status != "failed_permanent":  # flaps first, then the 550
        obs = env.step(ReportAction(command="send_email", recipient=ep.primary))
    env.step(ReportAction(command="send_email", recipient=ep.backup))
    final = env.step(ReportAction(command="submit_report"))
    assert final.metadata["solved"] and final.reward == pytest.approx(1.0)


def test_invented_and_misdirected_recipients_are_penalised(report):
    env = report.make_env()
    _episode_where(env, lambda ep: ep.flaps == 0 and ep.designated == ep.primary)
    _fill(env)
    ep = env.oracle_view()
    invented = env.step(ReportAction(command="send_email", recipient="ceo@bank.example"))
    assert invented.error == "unknown_recipient" and invented.reward == 0.0
    env.step(ReportAction(command="send_email", recipient=ep.backup))  # delivered, to the wrong person
    locked = env.step(ReportAction(command="set_field", field="title", value="x"))
    assert locked.error == "wrong_phase"
    env.step(ReportAction(command="send_email", recipient=ep.primary))
    final = env.step(ReportAction(command="submit_report"))
    assert final.graded_score == 1.0 and not final.metadata["solved"]
    assert final.metadata["reward_components"]["penalty"] == pytest.approx(-0.2)


def test_repeating_the_same_action_costs_a_growing_penalty(report):
    env = report.make_env()
    env.reset(seed=3, eci=1, task="daily_summary")
    same = ReportAction(command="query", sql="SELECT COUNT(*) FROM customers")
    rewards = [env.step(same).reward for _ in range(9)]
    assert rewards == pytest.approx([0, 0, 0, -0.05, -0.10, -0.15, -0.20, -0.25, -0.25])
    assert env.step(ReportAction(command="check_report")).reward == 0.0  # a new action: the streak is broken
    malformed = ReportAction.model_validate({"metadata": {MALFORMED_KEY: "no JSON object found"}})
    assert [env.step(malformed).reward for _ in range(4)] == pytest.approx([0, 0, 0, -0.05])


def test_progress_credit_for_right_values_partial_for_wrong_and_never_twice(report):
    env = report.make_env()
    env.reset(seed=3, eci=1, task="daily_header")  # three fields share the 0.2 pool
    ep = env.oracle_view()
    wrong = env.step(ReportAction(command="set_field", field="title", value="Weekly Report"))
    right = env.step(ReportAction(command="set_field", field="title", value=ep.expected["title"]))
    again = env.step(ReportAction(command="set_field", field="title", value=ep.expected["title"] + " "))
    assert wrong.reward == pytest.approx(0.2 / 3 * 0.25, abs=1e-6)
    assert right.reward == pytest.approx(0.2 / 3 * 0.75, abs=1e-6)
    assert again.reward == 0.0 and again.draft["title"] == ep.expected["title"]


def test_a_hidden_house_style_is_revealed_only_by_grader_feedback(report):
    env = report.make_env()
    obs = _episode_where(env, lambda ep: ep.style.date == "dmy_slash", eci=4, task="daily_header")
    ep = env.oracle_view()
    assert "DD/MM/YYYY" not in obs.model_dump_json() and "house style" not in obs.instructions
    iso = ep.report_date.isoformat()
    stored = env.step(ReportAction(command="set_field", field="report_date", value=iso))
    assert 0 < stored.reward < 0.2 / 3 and "DD/MM/YYYY" not in stored.model_dump_json()  # partial credit only
    checked = env.step(ReportAction(command="check_report"))
    assert "report_date: right value, wrong format: this customer's house style writes dates as DD/MM/YYYY " \
           "(e.g. 05/01/2026)" in checked.grade_report
    fixed = env.step(ReportAction(command="set_field", field="report_date", value=ep.expected["report_date"]))
    assert fixed.reward == pytest.approx(0.2 / 3 * 0.75, abs=1e-6)


def test_running_out_of_budget_earns_half_the_drafts_grade(report):
    env = report.make_env()
    env.reset(seed=2, eci=5, task="daily_header")
    _fill(env)
    budget = report.section.step_budget[5]
    for i in range(budget - 3):
        obs = env.step(ReportAction(command="query", sql=f"SELECT {i}"))
    assert obs.done and obs.metadata["termination"] == "budget_exhausted" and not obs.metadata["solved"]
    assert obs.metadata["reward_components"] == {"grade": 0.5, "penalty": 0.0}
    assert obs.reward == pytest.approx(0.5) and obs.graded_score == 1.0


def test_malformed_completion_costs_the_declared_reward(report):
    env = report.make_env()
    env.reset(seed=1, eci=1)
    obs = env.step(report.protocol.parse("I would query the database").action)
    assert obs.error == "malformed_completion" and "no JSON object" in obs.feedback
    assert obs.reward == report.section.text_protocol.malformed_reward == 0.0
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
    env = report.make_env()
    env.reset(seed=1, eci=1, task=task)
    obs = env.step(ReportAction(**payload))
    assert obs.error == code and obs.feedback
    assert obs.reward == report.section.invalid_action_reward == 0.0 and not obs.done


def test_stepping_after_done_is_harmless(report):
    env = report.make_env()
    result = run_episode(env, make_policy(report, "oracle"), 3, 2)
    again = env.step(ReportAction(command="submit_report"))
    assert again.done and again.reward == 0.0 and again.error == "episode_over"
    assert env.state.step_count == result.steps


def test_state_and_first_observation_never_hold_the_answer(report):
    env = report.make_env()
    for eci in range(1, 6):
        for seed in range(30):
            obs = env.reset(seed=seed, eci=eci)
            secrets = env.secret_values()
            assert secrets, "every task has something to hide"
            visible = obs.model_dump_json() + env.state.model_dump_json()
            assert not [s for s in secrets if s in visible]
    ep = env.oracle_view()
    state = env.state.model_dump_json()
    assert ep.customer_name not in state and ep.designated not in state
    assert set(env.state.model_dump()) == {"episode_id", "step_count", "eci", "seed", "step_budget", "done",
                                           "episode_return"}


def test_openenv_static_validation_passes(tmp_path):
    pkg = tmp_path / "daily_report"
    shutil.copytree(SEEDS_DIR / "daily_report", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run([sys.executable, "-m", "openenv.cli", "validate", "--level", "static", str(pkg)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  static.manifest" in result.stdout and "Verdict: PASS" in result.stdout
