"""The querying family: SQL answers checked by execution against a drifting SQLite schema."""

import copy
import json
import random

import pytest
from family_checks import act, broken_rules, package, rejected

from openadapt.envpkg.evaluation import evaluate, make_policy, run_episode
from openadapt.envpkg.examples import write_example_package
from openadapt.envpkg.loader import load
from openadapt.families import get_family
from openadapt.families.domain import Code, DomainError
from openadapt.families.querying.database import (
    RENAMED,
    adapter_sql,
    norm_rows,
    oracle_sources,
    same_result,
    same_value,
)

COMPONENTS = {"correctness", "efficiency", "grounding", "penalty"}


@pytest.fixture(scope="module")
def family():
    return get_family("querying")


@pytest.fixture(scope="module")
def sales(tmp_path_factory):
    return load(str(write_example_package("querying", "sales_database", tmp_path_factory.mktemp("q"))))


def _package(family, data, root, name):
    return package(family, root, name, data, task="{title}: answer questions with SQL.")


def _reset_until(env, eci, predicate, seeds=range(400)):
    for seed in seeds:
        obs = env.reset(seed=seed, eci=eci)
        if predicate(env.oracle_view()):
            return seed, obs
    raise AssertionError("no episode matched")


def _described(env, obs):
    for table in env.oracle_view().oracle_tables:
        obs = act(env, tool="describe_table", table=table)
    return obs


# ---- the family and its examples --------------------------------------------------------------------------------
def test_family_is_registered_with_two_example_worlds(family):
    assert family.ref == "querying@1"
    assert {"sales_database", "clinic_appointments"} <= set(family.examples())
    for name in ("sales_database", "clinic_appointments"):
        domain = family.load_example(name)
        assert len(domain.questions) >= 6 and len(domain.tables) >= 4
    assert family.step_budget[5] < family.step_budget[4]


def test_oracle_solves_every_tier_and_the_heuristic_falls(sales):
    oracle = evaluate(sales, "oracle", range(1, 6), 40)
    heuristic = evaluate(sales, "heuristic", range(1, 6), 40)
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate == 1.0
        assert oracle.tier(t).mean_return >= sales.section.solved_reward
    rates = [heuristic.tier(t).solve_rate for t in range(1, 6)]
    assert rates[0] >= 0.95 and rates[4] <= 0.15, rates
    assert all(b <= a + 0.05 for a, b in zip(rates, rates[1:], strict=False)), rates


def test_episodes_are_a_function_of_seed_and_tier(sales):
    for eci in (1, 5):
        first = [(a.model_dump(), o.model_dump()) for a, o in _trace(sales, sales.make_env(), 17, eci)]
        assert first == [(a.model_dump(), o.model_dump()) for a, o in _trace(sales, sales.make_env(), 17, eci)]
    env = sales.make_env()
    openings = {env.reset(seed=s, eci=3).model_dump_json(exclude={"metadata"}) for s in range(12)}
    assert len(openings) == 12


def _trace(pkg, env, seed, eci):
    steps = []
    run_episode(env, make_policy(pkg, "random"), seed, eci, on_step=lambda a, o: steps.append((a, o)))
    return steps


# ---- reward components on hand-made actions ---------------------------------------------------------------------
def test_checked_correct_answer_scores_full_and_components_add_up(sales):
    env = sales.make_env()
    obs = _described(env, env.reset(seed=5, eci=1))
    final = act(env, tool="submit_answer", sql=env.oracle_view().reference)
    meta = final.metadata
    assert meta["solved"] and final.reward == pytest.approx(1.0)
    assert meta["reward_components"] == {"correctness": 0.6, "efficiency": 0.2, "grounding": 0.2, "penalty": 0.0}
    assert obs.described and not obs.done


def test_unchecked_answer_loses_grounding_and_wasted_steps_cost_efficiency(sales):
    env = sales.make_env()
    env.reset(seed=5, eci=1)
    blind = act(env, tool="submit_answer", sql=env.oracle_view().reference)
    assert blind.metadata["solved"] and blind.metadata["reward_components"]["grounding"] == 0.0
    env.reset(seed=5, eci=1)
    for _ in range(3):
        act(env, tool="list_tables")
    _described(env, None)
    slow = act(env, tool="submit_answer", sql=env.oracle_view().reference).metadata["reward_components"]
    assert slow["grounding"] == pytest.approx(0.2) and 0.0 < slow["efficiency"] < 0.2


def test_wrong_answer_is_not_solved(sales):
    env = sales.make_env()
    env.reset(seed=5, eci=1)
    case = env.oracle_view()
    table = next(iter(case.read))
    final = act(env, tool="submit_answer", sql=f"SELECT COUNT(*) + 1000 FROM {table}")
    meta = final.metadata
    assert final.done and not meta["solved"]
    assert meta["reward_components"]["correctness"] == 0.0 and meta["reward_components"]["efficiency"] == 0.0


def test_value_answer_counts_when_it_was_computed(sales):
    env = sales.make_env()
    seed, _ = _reset_until(env, 1, lambda c: len(c.gold) == 1 and len(c.gold[0]) == 1)
    value = env.oracle_view().gold_cells[0]
    guessed = act(env, tool="submit_answer", value=value)
    assert guessed.metadata["solved"] and guessed.metadata["reward_components"]["grounding"] == 0.0
    env.reset(seed=seed, eci=1)
    shown = act(env, tool="run_query", sql=env.oracle_view().reference)
    assert value in " ".join(shown.result)
    computed = act(env, tool="submit_answer", value=value)
    assert computed.metadata["solved"] and computed.metadata["reward_components"]["grounding"] == 0.2


def test_results_compare_by_execution_not_by_text():
    gold = [("Fjord 2 Tent", 12.0), ("Polar Down Bag", 9.0)]
    assert same_result([("Polar Down Bag", 9.0), ("Fjord 2 Tent", 12.0)], gold, ordered=False)
    assert not same_result([("Polar Down Bag", 9.0), ("Fjord 2 Tent", 12.0)], gold, ordered=True)
    assert same_result([(12.0, "Fjord 2 Tent"), (9.0, "Polar Down Bag")], gold, ordered=True)  # column order free
    assert not same_result([("Fjord 2 Tent", 12.0)], gold, ordered=False)
    assert not same_result([("Fjord 2 Tent", 12.0, 1.0), ("Polar Down Bag", 9.0, 1.0)], gold, ordered=False)
    assert same_value("1,234.57", [(1234.5678,)]) and not same_value("1234.6", [(1234.5678,)])
    assert same_value("north", [("North",)])


# ---- each tier's mechanic ---------------------------------------------------------------------------------------
def test_tier_1_is_the_documented_schema_with_full_comments(sales):
    env = sales.make_env()
    documented = {t.name for t in env.domain.tables}
    for seed in range(20):
        env.reset(seed=seed, eci=1)
        case = env.oracle_view()
        assert set(case.tables) == documented and not case.placement.hidden
        obs = _described(env, None)
        assert "(no description)" not in "\n".join(obs.described) and RENAMED[:8] not in "\n".join(obs.described)
        assert "NULL" not in "\n".join(obs.described)


def test_tier_2_renames_and_withholds_documentation_and_leaves_nulls(sales):
    env = sales.make_env()
    renamed = withheld = nulls = 0
    for seed in range(40):
        env.reset(seed=seed, eci=2)
        case = env.oracle_view()
        renamed += any(case.placement.table(t) != t or any(case.placement.column(t, c) != c for c in cols)
                       for t, cols in case.read.items())
        text = "\n".join(act(env, tool="describe_table", table=name).described[-1] for name in sorted(case.tables))
        withheld += "(no description)" in "\n".join(env.observe()["described"])
        nulls += any(v is None for t in case.tables.values() for row in t.rows for v in row)
        assert not case.placement.stale and not case.placement.hidden and text
    assert renamed >= 15 and withheld >= 30 and nulls >= 20


def test_tier_3_plants_distractors_that_wear_documented_names(sales):
    env = sales.make_env()
    seed, obs = _reset_until(env, 3, lambda c: any(w for _, w in c.placement.stale.values()))
    case = env.oracle_view()
    documented = next(t for t, (_, wears) in case.placement.stale.items() if wears)
    live = case.placement.table(documented)
    assert documented in obs.tables and live in obs.tables and live != documented
    catalog = act(env, tool="list_tables").catalog
    assert any(line.startswith(f"{documented} ") and live in line for line in catalog)  # the stale note says so
    # the documented query runs on the stale copy: wrong, and penalised for reading a distractor
    env.reset(seed=seed, eci=3)
    sources, _ = oracle_sources(env.domain, case.read, case.placement, skip=("stale", documented, None))
    final = act(env, tool="submit_answer", sql=adapter_sql(case.reference, sources))
    assert not final.metadata["solved"] and final.metadata["reward_components"]["penalty"] == pytest.approx(-0.2)


def test_tier_4_hidden_soft_delete_is_only_revealed_by_describing_the_table(sales):
    env = sales.make_env()
    seed, obs = _reset_until(env, 4, lambda c: c.placement.hidden[0][0] == "soft_delete")
    case = env.oracle_view()
    table = case.placement.hidden[0][1]
    note = env.domain.table(table).soft_delete.note.split(";")[0]
    assert note not in obs.model_dump_json()
    described = act(env, tool="describe_table", table=case.placement.table(table))
    assert note in "\n".join(described.described)
    sources, _ = oracle_sources(env.domain, case.read, case.placement, skip=case.placement.hidden[0])
    env.reset(seed=seed, eci=4)
    assert not act(env, tool="submit_answer", sql=adapter_sql(case.reference, sources)).metadata["solved"]
    env.reset(seed=seed, eci=4)
    _described(env, None)
    assert act(env, tool="submit_answer", sql=case.oracle_sql).metadata["solved"]


def test_tier_4_unit_change_is_documented_only_in_the_column_comment(sales):
    env = sales.make_env()
    _, obs = _reset_until(env, 4, lambda c: c.placement.hidden[0][0] == "unit")
    case = env.oracle_view()
    _, table, column = case.placement.hidden[0]
    unit = next(c for c in env.domain.table(table).columns if c.name == column).unit
    assert unit.name not in obs.model_dump_json() and unit.note not in obs.model_dump_json()
    live = next(t for t in case.oracle_tables if any(c.name == unit.name for c in case.tables[t].columns))
    lines = act(env, tool="describe_table", table=live).described
    assert any(line.startswith(f"  - {unit.name} INTEGER") and unit.note in line for line in lines)


def test_hidden_constraints_matter_on_every_constraint_tier(sales):
    env = sales.make_env()
    for eci, expected in ((4, 1), (5, 2)):
        counts, fallbacks = [], 0
        for seed in range(30):
            env.reset(seed=seed, eci=eci)
            case = env.oracle_view()
            counts.append(len(case.placement.hidden))
            fallbacks += case.fallback
        assert fallbacks == 0 and min(counts) >= 1 and max(counts) == expected


def test_tier_5_budget_is_smaller_and_exhaustion_ends_unsolved(sales):
    budget = sales.section.step_budget
    assert budget[5] < budget[4] == budget[1]
    env = sales.make_env()
    env.reset(seed=2, eci=5)
    for i in range(budget[5]):
        obs = act(env, tool="list_tables")
        assert obs.done == (i == budget[5] - 1)
    assert obs.metadata["termination"] == "budget_exhausted" and not obs.metadata["solved"]
    for seed in range(30):  # the honest path always fits the smallest budget
        env.reset(seed=seed, eci=5)
        assert env.oracle_view().min_steps <= budget[5]


# ---- invalid actions --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("payload", "code"), [
    ({}, "missing_tool"),
    ({"tool": "describe_table"}, "missing_table"),
    ({"tool": "describe_table", "table": "mainframe"}, "unknown_table"),
    ({"tool": "run_query"}, "missing_sql"),
    ({"tool": "run_query", "sql": "SELECT nope FROM nowhere"}, "sql_error"),
    ({"tool": "run_query", "sql": "DELETE FROM orders"}, "sql_forbidden"),
    ({"tool": "submit_answer"}, "missing_answer"),
    ({"tool": "submit_answer", "sql": "SELECT amount FROM nowhere"}, "sql_error"),
])
def test_invalid_actions_are_rejected_with_a_code(sales, payload, code):
    env = rejected(sales, payload, code)
    assert env.oracle_view().tables["orders"].rows  # nothing was written


def test_queries_are_read_only_and_bounded(sales):
    env = sales.make_env()
    env.reset(seed=1, eci=1)
    obs = act(env, tool="run_query", sql="SELECT COUNT(*) FROM order_items a, order_items b, order_items c")
    assert obs.error == "sql_too_slow"
    obs = act(env, tool="run_query", sql="SELECT id FROM order_items")
    assert obs.result[-1].startswith("... (more rows") and len(obs.result) == 22


def test_state_and_first_observation_never_hold_the_answer(sales):
    env = sales.make_env()
    for seed in range(20):
        obs = env.reset(seed=seed, eci=4)
        visible = obs.model_dump_json() + env.state.model_dump_json()
        assert env.oracle_view().oracle_sql not in visible
        assert not any(s in visible for s in env.secret_values())


# ---- domain validation ------------------------------------------------------------------------------------------
def _broken(family, change):
    data = copy.deepcopy(family.load_example("sales_database").model_dump(mode="json"))
    change(data)
    with pytest.raises(DomainError) as info:
        family.parse_domain(data)
    found: dict[str, str] = {}
    for problem in info.value.problems:
        found[problem.path] = found.get(problem.path, "") + problem.message + "; "
    return found


def _table(data, name):
    return next(t for t in data["tables"] if t["name"] == name)


def _broken_rules(family, change) -> dict[str, set[str]]:
    """The declared rules the example breaks once `change`d, by path; each problem in the words the designer was
    told before it wrote the fields."""
    data = copy.deepcopy(family.load_example("sales_database").model_dump(mode="json"))
    change(data)
    return broken_rules(family, data)


def _columns(data, table, *names):
    return [c for c in _table(data, table)["columns"] if c["name"] in names]


def test_a_domain_too_small_for_a_tier_breaks_the_rule_it_was_told(family):
    # Question 4 reads products' category and list_price only.
    def unrenamed_prices(d):
        _table(d, "products")["renames"] = []
        for c in _columns(d, "products", "category", "list_price"):
            c["renames"] = []
    assert _broken_rules(family, unrenamed_prices) == {"domain.questions[4]": {"question_renames"}}

    def no_unit_for_prices(d):
        for c in _columns(d, "products", "list_price"):
            c["unit"] = None
    assert _broken_rules(family, no_unit_for_prices) == {"domain.questions[4]": {"question_hidden"}}
    # Question 5 reads customers' region only, which has no decoy: the stale copy was its one distractor.
    assert _broken_rules(family, lambda d: _table(d, "customers").update(stale=None)) == {
        "domain.questions[5]": {"question_distractors"}}

    def one_distractor(d):
        for t in d["tables"]:
            t["stale"] = t["stale"] if t["name"] == "customers" else None
            for c in t["columns"]:
                c["decoy"] = None
    assert "distractors" in _broken_rules(family, one_distractor)["domain.tables"]

    def soft_deletes_only(d):
        for t in d["tables"]:
            t["split"] = None
            for c in t["columns"]:
                c["unit"] = None
    assert "hidden_kinds" in _broken_rules(family, soft_deletes_only)["domain.tables"]


def test_broken_reference_names_its_field(family):
    problems = _broken(family, lambda d: _table(d, "orders")["columns"][1].update(ref="clients_v2"))
    assert "clients_v2" in problems["domain.tables[3].columns[1].ref"]
    problems = _broken(family, lambda d: d["questions"][0]["slots"][0].update(table="order_book"))
    assert "order_book" in problems["domain.questions[0].slots[0].table"]


def test_duplicate_names_are_refused(family):
    problems = _broken(family, lambda d: d["tables"][2].update(name="customers"))
    assert "already used" in problems["domain.tables[2].name"]
    problems = _broken(family, lambda d: _table(d, "orders").update(renames=["clients"]))
    assert "already used" in problems["domain.tables[3].renames[0]"]


def test_bad_placeholder_and_bad_sql_name_their_field(family):
    problems = _broken(family, lambda d: d["questions"][0].update(text="How many orders in {monht} had {status}?"))
    assert "{monht}" in problems["domain.questions[0].text"]
    problems = _broken(family, lambda d: d["questions"][1].update(sql=d["questions"][1]["sql"].replace(
        "i.quantity", "i.qty_shipped")))
    assert "no such column" in problems["domain.questions[1].sql"]
    problems = _broken(family, lambda d: d["questions"][4].update(sql="SELECT * FROM products WHERE category = "
                                                                      "{category}"))
    assert "'*'" in problems["domain.questions[4].sql"]


def test_domain_too_small_for_a_tiers_mechanics(family):
    def strip(d):
        for t in d["tables"]:
            t["stale"] = None
            t["soft_delete"] = None
            t["split"] = None
            for c in t["columns"]:
                c["decoy"] = None
    rules = _broken_rules(family, strip)
    assert {"question_distractors", "question_hidden"} <= rules["domain.questions[0]"]
    assert {"distractors", "hidden_kinds"} <= rules["domain.tables"]

    def no_hidden_for_prices(d):
        _table(d, "products")["stale"] = None
        for t in d["tables"]:
            t["soft_delete"] = None
        for c in _table(d, "products")["columns"]:
            c["unit"] = None
    assert "question_hidden" in _broken_rules(family, no_hidden_for_prices)["domain.questions[4]"]
    problems = _broken(family, lambda d: d.update(questions=d["questions"][:4]))
    assert "domain.questions" in problems


# ---- a second world, written here: the engine holds no domain knowledge -----------------------------------------
PARCELS = {
    "title": "Regional parcel network",
    "summary": "A regional carrier moves parcels between its hubs with couriers on vans, bikes and trucks. "
               "Dispatch asks how many parcels moved, how heavy they were and what they earned.",
    "agent_role": "the dispatch analyst",
    "database_noun": "dispatch database",
    "tables": [
        {"name": "hubs", "comment": "One row per sorting hub of the network.", "min_rows": 5, "max_rows": 7,
         "renames": ["depots"],
         "columns": [
             {"name": "id", "type": "integer", "comment": "Hub code number.", "kind": "key", "renames": ["hub_no"]},
             {"name": "hub_name", "type": "text", "comment": "Name painted on the gate.", "kind": "choice",
              "unique": True, "choices": ["Elm Yard", "Quayside", "Millbrook", "Ashford Cross", "Ridgeway",
                                          "Canal Wharf", "Stonegate"]},
             {"name": "city", "type": "text", "comment": "Town the hub is in.", "kind": "choice",
              "choices": ["Leeds", "York", "Hull"], "renames": ["town"]}],
         "split": {"table": "hub_sites", "key": "hub_id", "columns": ["city"],
                   "note": "Site details moved to {side} when the property system took them over.",
                   "comment": "Where each hub is located."},
         "stale": {"names": ["hubs_legacy"], "note": "Hub list from the old routing tool; superseded by {live}."}},
        {"name": "couriers", "comment": "One row per courier contracted to a hub.", "min_rows": 8, "max_rows": 12,
         "renames": ["drivers"],
         "columns": [
             {"name": "id", "type": "integer", "comment": "Courier badge number.", "kind": "key"},
             {"name": "courier_name", "type": "text", "comment": "Name on the contract.", "kind": "choice",
              "unique": True, "renames": ["driver_name"],
              "choices": ["Amy Cole", "Raj Patel", "Tom Reed", "Zoe Hart", "Ian Shaw", "Eve Lamb", "Sam Ford",
                          "Kim Nash", "Lee Wong", "Ada Park", "Max Dunn", "Joy Bell"]},
             {"name": "hub_id", "type": "integer", "comment": "Hub the courier starts from.", "kind": "ref",
              "ref": "hubs", "renames": ["depot_id"]},
             {"name": "vehicle", "type": "text", "comment": "What the courier drives.", "kind": "choice",
              "choices": ["van", "cargo bike", "truck"], "renames": ["vehicle_type"],
              "decoy": {"name": "vehicle_2022", "note": "Vehicle as recorded in 2022, never updated; see {live}."}}],
         "soft_delete": {"column": "has_left", "style": "flag",
                         "note": "Couriers who left keep their row with has_left = 1; they no longer count."}},
        {"name": "shipments", "comment": "One row per parcel handed to a courier.", "min_rows": 60,
         "max_rows": 90, "renames": ["parcels", "consignments"],
         "columns": [
             {"name": "id", "type": "integer", "comment": "Tracking number.", "kind": "key"},
             {"name": "courier_id", "type": "integer", "comment": "Courier who carried it.", "kind": "ref",
              "ref": "couriers", "renames": ["driver_id"]},
             {"name": "shipped_on", "type": "date", "comment": "Day it left the hub.", "kind": "date",
              "start": "2025-01-01", "end": "2025-06-30", "renames": ["dispatch_date"]},
             {"name": "weight_kg", "type": "real", "comment": "Weighed mass in kilograms.", "kind": "number",
              "low": 0.5, "high": 30.0, "decimals": 1, "renames": ["mass_kg"],
              "unit": {"name": "weight_g", "factor": 1000, "note": "Weighed mass in grams since the new scales."}},
             {"name": "status", "type": "text", "comment": "Where the parcel is now.", "kind": "choice",
              "choices": ["delivered", "in transit", "returned"], "weights": [6, 2, 1]},
             {"name": "fee", "type": "real", "comment": "Carriage fee in pounds, net.", "kind": "number",
              "low": 3.0, "high": 40.0, "decimals": 2, "renames": ["charge"],
              "decoy": {"name": "fee_gross", "factor": 1.2, "note": "Fee with VAT for receipts; net fee is {live}."}}],
         "soft_delete": {"column": "deleted_at", "style": "timestamp",
                         "note": "Parcels scanned by mistake keep their row with deleted_at set; ignore them."},
         "stale": {"names": ["shipments_backup"], "note": "Nightly backup from March, not refreshed; use {live}."}},
    ],
    "questions": [
        {"id": "hub_delivered", "text": "How many parcels carried by couriers of {hub} were delivered?",
         "sql": "SELECT COUNT(*) FROM shipments s JOIN couriers c ON c.id = s.courier_id JOIN hubs h ON h.id = "
                "c.hub_id WHERE h.hub_name = {hub} AND s.status = 'delivered'",
         "slots": [{"name": "hub", "table": "hubs", "column": "hub_name"}]},
        {"id": "month_weight", "text": "What did the parcels shipped in {month} weigh in total, in kilograms?",
         "sql": "SELECT SUM(weight_kg) FROM shipments WHERE substr(shipped_on, 1, 7) = {month}",
         "slots": [{"name": "month", "table": "shipments", "column": "shipped_on", "part": "month"}]},
        {"id": "status_fee", "text": "What is the average net fee of parcels with status '{status}'?",
         "sql": "SELECT AVG(fee) FROM shipments WHERE status = {status}",
         "slots": [{"name": "status", "table": "shipments", "column": "status"}]},
        {"id": "vehicle_couriers", "text": "How many couriers drive a {vehicle}?",
         "sql": "SELECT COUNT(*) FROM couriers WHERE vehicle = {vehicle}",
         "slots": [{"name": "vehicle", "table": "couriers", "column": "vehicle"}]},
        {"id": "top_couriers", "ordered": True,
         "text": "Which two couriers carried the most parcels in {month}? Name and count, most first (ties by name).",
         "sql": "SELECT c.courier_name, COUNT(*) AS n FROM shipments s JOIN couriers c ON c.id = s.courier_id "
                "WHERE substr(s.shipped_on, 1, 7) = {month} GROUP BY c.id ORDER BY n DESC, c.courier_name LIMIT 2",
         "slots": [{"name": "month", "table": "shipments", "column": "shipped_on", "part": "month"}]},
        {"id": "city_parcels", "text": "How many parcels left hubs in {city}?",
         "sql": "SELECT COUNT(*) FROM shipments s JOIN couriers c ON c.id = s.courier_id JOIN hubs h ON h.id = "
                "c.hub_id WHERE h.city = {city}",
         "slots": [{"name": "city", "table": "hubs", "column": "city"}]},
    ],
}


def test_a_second_world_runs_through_the_same_engine(family, tmp_path):
    parcels = _package(family, PARCELS, tmp_path, "parcel_network")
    oracle = evaluate(parcels, "oracle", range(1, 6), 25)
    heuristic = evaluate(parcels, "heuristic", range(1, 6), 25)
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate == 1.0
        assert oracle.tier(t).mean_return >= parcels.section.solved_reward
    assert heuristic.tier(1).solve_rate >= 0.95 and heuristic.tier(5).solve_rate <= 0.2
    env = parcels.make_env()
    env.reset(seed=3, eci=1)
    assert set(env.oracle_view().tables) == {"hubs", "couriers", "shipments"}
    prompt = parcels.protocol.system_prompt()
    assert "dispatch analyst" in prompt and "courier_name" in prompt and "orders" not in prompt


def test_every_final_observation_keeps_the_metadata_contract(sales):
    env = sales.make_env()
    low, high = sales.section.reward_range
    for eci in range(1, 6):
        for policy in ("oracle", "heuristic", "random"):
            obs = env.reset(seed=eci, eci=eci)
            agent = make_policy(sales, policy)
            agent.begin(env, obs, random.Random(0))
            while not obs.done:
                obs = env.step(agent.act(obs))
                assert low <= obs.reward <= high
                json.loads(obs.model_dump_json())
            assert set(obs.metadata["reward_components"]) == COMPONENTS
            assert sales.protocol.render(obs)
    assert norm_rows  # the comparison helpers are importable for custom graders


def test_the_draft_tidy_drops_what_can_never_happen_and_keeps_the_rest_as_written(family):
    """The sales database's 1.5B draft: columns renamed to their own names, a key column written three times,
    a repeated e-mail, 300 products with 8 unique names, a slot nothing uses, an ordered question without ORDER
    BY. Each is dropped or made consistent from the draft itself; a sound domain is left as it is."""
    from openadapt.families.querying.domain import QueryingDomain
    from openadapt.families.yamlio import read_domain_file

    sound = read_domain_file(family.examples()["sales_database"])
    assert QueryingDomain.tidy(copy.deepcopy(sound)) == sound
    draft = copy.deepcopy(sound)
    customers = draft["tables"][0]
    key, name = customers["columns"][0], customers["columns"][1]
    key["renames"], key["type"] = [key["name"], "client_no", "client_no"], "text"
    customers["columns"].insert(1, copy.deepcopy(key))  # the key column written twice
    name["choices"] = name["choices"][:6] + [name["choices"][0]]
    name["weights"] = [1.0] * 6 + [5.0]
    question = next(q for q in draft["questions"] if q.get("ordered"))
    question["sql"] = question["sql"].split(" ORDER BY")[0]
    question["slots"].append({"name": "region", "table": "customers", "column": "region"})
    tidied = QueryingDomain.tidy(copy.deepcopy(draft))
    columns = tidied["tables"][0]["columns"]
    assert [c["name"] for c in columns] == [c["name"] for c in sound["tables"][0]["columns"]]
    assert columns[0]["renames"] == ["client_no"] and columns[0]["type"] == "integer"
    assert columns[1]["choices"] == name["choices"][:6] and columns[1]["weights"] == [1.0] * 6
    assert tidied["tables"][0]["max_rows"] == 6 and tidied["tables"][0]["min_rows"] <= 6
    tidied_question = next(q for q in tidied["questions"] if q["id"] == question["id"])
    assert tidied_question["ordered"] is False and "region" not in [s["name"] for s in tidied_question["slots"]]
    problems = [p for p in family.parse_domain(tidied).problems() if "renames" in p.path or "choices" in p.path
                or p.path.startswith("domain.questions") and "slot" in p.message]
    assert not problems


def test_the_draft_tidy_reads_keys_and_references_off_the_column_names_and_a_repeated_question_is_a_problem(family):
    """The drifting-SQL 1.5B draft: a ref written 'table.column', a second key that holds another table's key, a
    table whose key was written as a reference to a table that does not exist, one question asked again (the tidy
    keeps it: dropped, the list fell short of its minimum; the check names it for the designer to replace)."""
    from openadapt.families.querying.domain import QueryingDomain
    from openadapt.families.yamlio import read_domain_file

    sound = read_domain_file(family.examples()["sales_database"])
    draft = copy.deepcopy(sound)
    tables = {t["name"]: t for t in draft["tables"]}
    tables["orders"]["columns"][1]["ref"] = "customers.id"
    tables["order_items"]["columns"][2].update(kind="key")
    tables["order_items"]["columns"][2].pop("ref")
    tables["products"]["columns"][0].update(kind="ref", ref="order_details")
    repeated = copy.deepcopy(draft["questions"][1])
    repeated["id"], repeated["text"] = "again", "  " + repeated["text"].upper()
    draft["questions"].insert(3, repeated)
    tidied = QueryingDomain.tidy(draft)
    assert tidied["tables"] == sound["tables"]
    assert tidied["questions"] == draft["questions"]
    with pytest.raises(DomainError) as raised:
        family.parse_domain(tidied)
    repeat = next(p for p in raised.value.problems if p.path == "domain.questions[3]")
    assert repeat.code == Code.REPEATED_TEXT and "questions[1]" in repeat.message
    column = {"name": "note_id", "type": "integer", "comment": "a key nothing names", "kind": "ref", "ref": "notes"}
    tables["orders"]["columns"].append(column)
    assert QueryingDomain.tidy(draft)["tables"][3]["columns"][-1] == column  # a name that says nothing: as drafted


def test_the_draft_tidy_gives_a_placeholder_without_a_slot_the_column_its_name_points_to(family):
    """The drifting-SQL draft used {month} and {category} with no slots; {month} is a date column's month in a
    table the SQL reads, {category} the column of that name. A name nothing in the schema has stays unslotted."""
    from openadapt.families.querying.domain import QueryingDomain
    from openadapt.families.yamlio import read_domain_file

    sound = read_domain_file(family.examples()["sales_database"])
    draft = copy.deepcopy(sound)
    question = draft["questions"][1]
    assert [s["name"] for s in question["slots"]] == ["category", "month"]
    question["slots"] = []
    question["text"] += " {flavour}"
    slots = QueryingDomain.tidy(draft)["questions"][1]["slots"]
    assert slots == [{"name": "category", "table": "products", "column": "category", "part": "full"},
                     {"name": "month", "table": "orders", "column": "order_date", "part": "month"}]


def test_the_draft_tidy_moves_a_slot_to_the_one_table_that_has_its_column(family):
    """The drifting-SQL draft filled {month} from `customers.order_date`, a column of `orders` only. A column two
    tables have stays where the draft put it: which one was meant is the model's to say."""
    from openadapt.families.querying.domain import QueryingDomain
    from openadapt.families.yamlio import read_domain_file

    draft = read_domain_file(family.examples()["sales_database"])
    draft["questions"][1]["slots"][1]["table"] = "customers"
    assert QueryingDomain.tidy(copy.deepcopy(draft))["questions"][1]["slots"][1]["table"] == "orders"
    draft["questions"][1]["slots"][0].update(table="regions", column="id")  # every table's key: no one has it
    assert QueryingDomain.tidy(draft)["questions"][1]["slots"][0]["table"] == "regions"
    draft["questions"][1]["slots"][0].update(table="orders", column="id")  # its table has it: as drafted
    assert QueryingDomain.tidy(draft)["questions"][1]["slots"][0] == {"name": "category", "table": "orders",
                                                                       "column": "id"}


def test_the_draft_tidy_makes_a_soft_delete_one_the_table_can_hold(family):
    """A dated soft delete in a table without a date column becomes a flag; a marker named like one of the
    table's columns takes a name of its own."""
    from openadapt.families.querying.domain import QueryingDomain
    from openadapt.families.yamlio import read_domain_file

    draft = copy.deepcopy(read_domain_file(family.examples()["sales_database"]))
    tables = {t["name"]: t for t in draft["tables"]}
    tables["products"]["soft_delete"] = {"column": "retired_at", "style": "timestamp",
                                         "note": "Retired products keep their row with retired_at set."}
    tables["order_items"]["soft_delete"]["column"] = "quantity"
    tidied = {t["name"]: t for t in QueryingDomain.tidy(draft)["tables"]}
    assert tidied["products"]["soft_delete"]["style"] == "flag"
    assert tidied["order_items"]["soft_delete"]["column"] == "is_deleted"
    assert tidied["orders"]["soft_delete"] == tables["orders"]["soft_delete"]  # sound: as written
    problems = [p for p in family.parse_domain(QueryingDomain.tidy(draft)).problems() if "soft_delete" in p.path]
    assert not problems


@pytest.mark.parametrize("where", ["table", "column"])
def test_a_rename_that_is_not_an_identifier_never_reaches_sql(family, where):
    """Renames become table and column names in the episode's CREATE TABLE: anything but an identifier (here a
    statement smuggled into the DDL) is refused by the schema, with the field's path."""
    data = family.load_example(sorted(family.examples())[0]).model_dump(mode="json")
    hostile = "x (a); WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r"
    target = data["tables"][0] if where == "table" else data["tables"][0]["columns"][1]
    target["renames"] = [hostile]
    with pytest.raises(DomainError) as refused:
        family.parse_domain(data)
    assert "renames" in str(refused.value)
