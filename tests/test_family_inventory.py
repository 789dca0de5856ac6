"""The inventory family: its engine on the warehouse_restocking and hospital_pharmacy examples and on a mining
fleet's spare parts planned by the week, written here (proof that the engine holds no domain knowledge); its
reward, each tier's mechanics, rejected actions and domain validation."""

from __future__ import annotations

import copy
import math
import re
import statistics
from pathlib import Path

import pytest
import yaml
from family_checks import act, broken_rules, metadata_contract, package, trajectory

from openadapt.envpkg.evaluation import evaluate, make_policy, run_episode
from openadapt.envpkg.examples import write_example_package
from openadapt.envpkg.loader import load, resolve
from openadapt.families import get_family
from openadapt.families.domain import DomainError
from openadapt.families.inventory.engine import COST_MARGIN
from openadapt.families.inventory.policies import CarefulPlanner
from openadapt.kit.policy import policy_rng

FAMILY = get_family("inventory")
COMPONENTS = {"service", "cost", "outcome"}

# A third world, unrelated to the other two: spare parts for a fleet of haul trucks at a remote mine, planned
# week by week, with parts flown in or trucked up the range, and its own names for every action.
FLEET = """
title: Kestrel Ridge mine fleet spares
summary: The Kestrel Ridge open-pit mine runs 38 haul trucks and 9 loaders far from any city. As the maintenance
  stores planner you keep the wear parts the workshop fits every week in stock; a truck waiting for a part stops
  hauling ore, but every spare on the shelf ties up cash the mine would rather spend on diesel.
agent_role: the maintenance stores planner of the Kestrel Ridge mine
site: Kestrel Ridge maintenance stores
currency: AUD
period_noun: week
items:
- {id: hyd_filter_kit, name: hydraulic return filter kit HF-220, unit: kits, location: parts_store, critical: true,
   demand: [6, 11], variability: 0.25, holding_cost: 1.2, stockout_penalty: 2400.0, safety_days: 1.0, space: 0.05}
- {id: brake_pad_set, name: wet-disc brake friction pack, unit: sets, location: parts_store, demand: [3, 6],
   variability: 0.3, holding_cost: 4.0, stockout_penalty: 900.0, safety_days: 1.0, space: 0.1}
- {id: tyre_4000r57, name: 40.00R57 haul truck tyre, unit: tyres, location: tyre_yard, critical: true,
   demand: [2, 4], variability: 0.3, holding_cost: 45.0, stockout_penalty: 30000.0, safety_days: 1.0, space: 1.0}
- {id: engine_oil_drum, name: 15W-40 engine oil 205 L drum, unit: drums, location: lube_bay, demand: [10, 18],
   variability: 0.2, demand_profile: [1.2, 1.0, 0.9, 0.9], holding_cost: 2.0, stockout_penalty: 500.0,
   safety_days: 1.0, space: 0.25}
- {id: idler_roller, name: conveyor idler roller 152 mm, unit: rollers, location: parts_store, demand: [8, 16],
   variability: 0.3, holding_cost: 0.6, stockout_penalty: 150.0, safety_days: 1.5, space: 0.02}
suppliers:
- id: outback_hydraulics
  name: Outback Hydraulics Pty
  lead_time: 2
  on_time_rate: 0.8
  max_delay: 1
  order_fee: 600.0
  offers:
  - {item: hyd_filter_kit, unit_price: 380.0, min_order: 6, price_breaks: [{min_quantity: 20, unit_price: 355.0}]}
  - {item: brake_pad_set, unit_price: 1450.0, min_order: 2}
  notices: ['{supplier}: our Kalgoorlie branch has new opening hours; phone orders are unchanged.']
- id: airfreight_parts
  name: Red Dust Air Freight Parts
  lead_time: 1
  on_time_rate: 0.95
  max_delay: 1
  order_fee: 2800.0
  offers:
  - {item: hyd_filter_kit, unit_price: 455.0, min_order: 1}
  - {item: tyre_4000r57, unit_price: 48000.0, min_order: 1}
  - {item: idler_roller, unit_price: 140.0, min_order: 4}
  notices: ['{supplier}: the airstrip lights were upgraded; night landings need no extra notice now.']
- id: titan_tyres
  name: Titan Mining Tyres
  lead_time: 3
  on_time_rate: 0.75
  max_delay: 2
  order_fee: 3500.0
  offers:
  - {item: tyre_4000r57, unit_price: 41500.0, min_order: 2}
  notices: ['{supplier}: tyre pressure sensors ship pre-paired with each tyre from this quarter.']
- id: pilbara_lubricants
  name: Pilbara Lubricants
  lead_time: 2
  on_time_rate: 0.9
  max_delay: 1
  order_fee: 450.0
  offers:
  - {item: engine_oil_drum, unit_price: 720.0, min_order: 8, price_breaks: [{min_quantity: 24, unit_price: 690.0}]}
  notices: ['{supplier}: empty drums are collected on every second delivery, as before.']
- id: conveyco
  name: ConveyCo Components
  lead_time: 3
  on_time_rate: 0.85
  max_delay: 1
  order_fee: 380.0
  offers:
  - {item: idler_roller, unit_price: 98.0, min_order: 20}
  - {item: brake_pad_set, unit_price: 1290.0, min_order: 4}
  - {item: engine_oil_drum, unit_price: 760.0, min_order: 4}
  notices: ['{supplier}: invoices now quote the mine site code on every line.']
locations:
- id: parts_store
  name: workshop parts store
  space_unit: rack bays
  capacity_reasons: ['the store mezzanine is closed while its handrails are replaced']
- id: tyre_yard
  name: fenced tyre yard
  space_unit: tyre slots
  capacity_reasons: ['a stack of scrap casings waits for the recycler in the yard']
- id: lube_bay
  name: bunded lubricant bay
  space_unit: drum spaces
  capacity_reasons: ['the bund is being relined, so one row of drum spaces is out of use']
texts:
  drift_notices:
  - '{supplier}: the range road is closed for repairs; freight now takes {days} {period}s (catalogue {old}).'
  - '{supplier}: our regional warehouse is short-staffed, so deliveries need {days} {period}s from order.'
  demand_signals:
  - 'Shift supervisor: the new pit stage starts in week {first_day}; {item} use may rise {pct}%.'
  - 'Rumour from the workshop: the trucks are due an extra service round in week {first_day}, {item} up {pct}%.'
  - 'Mine planner: a second loader crew works weeks {first_day}-{last_day}, needing {pct}% more {item}.'
  promotions:
  - '{supplier} end-of-year deal: {pct}% off {item} when you take {quantity} {unit} or more this week.'
  - '{supplier} container special: {quantity} {unit} of {item} or more at {pct}% off, this week only.'
tools: {check: stocktake_part, notices: read_vendor_notice, order: raise_requisition, cancel: cancel_requisition,
        advance: end_week}
"""


def _package(root: Path, name: str, data: dict):
    return package(FAMILY, root, name, data, task="{title}: keep the parts in stock.")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    return load(resolve(str(write_example_package("inventory", "warehouse_restocking",
                                                  tmp_path_factory.mktemp("warehouse")))))


@pytest.fixture(scope="module")
def pharmacy(tmp_path_factory):
    return load(resolve(str(write_example_package("inventory", "hospital_pharmacy",
                                                  tmp_path_factory.mktemp("pharmacy")))))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    return _package(tmp_path_factory.mktemp("fleet"), "fleet_spares", yaml.safe_load(FLEET))


@pytest.fixture(scope="module", params=["warehouse", "pharmacy", "fleet"])
def any_pkg(request):
    return request.getfixturevalue(request.param)


def find(env, eci, predicate, start=0):
    """Reset to the first seed whose episode satisfies `predicate(env)`; returns (seed, observation)."""
    for seed in range(start, start + 400):
        obs = env.reset(seed=seed, eci=eci)
        if predicate(env):
            return seed, obs
    raise AssertionError("no seed found")


def play_orders(env, orders, obs, scale=1.0):
    """Place `orders` [(period, item, supplier, units)] in their periods (`scale` times the units, as far as they
    fit), advancing in between; returns the last observation (after the horizon)."""
    tools = env.domain.tools
    queue = list(orders)
    while not obs.done:
        if queue and queue[0][0] == obs.day:
            _, item, supplier, qty = queue.pop(0)
            qty = qty if scale == 1.0 else min(round(qty * scale), math.floor(env._stock.room(item)))
            obs = act(env, action=tools.order, item=item, supplier=supplier, quantity=qty)
            assert obs.error is None, obs.feedback
        else:
            until = queue[0][0] if queue else obs.last_day + 1
            obs = act(env, action=tools.advance, days=until - obs.day)
    return obs


# ---- registration, the contract ---------------------------------------------------------------------------
def test_the_family_is_registered_with_its_examples():
    assert get_family("inventory") is FAMILY and FAMILY.ref == "inventory@1"
    assert {"warehouse_restocking", "hospital_pharmacy"} <= set(FAMILY.examples())
    assert FAMILY.step_budget[5] < FAMILY.step_budget[4]


@pytest.mark.parametrize("eci", [1, 3, 5])
def test_episode_is_a_function_of_seed_and_tier(any_pkg, eci):
    for policy in ("random", "heuristic"):
        assert trajectory(any_pkg, policy, 11, eci) == trajectory(any_pkg, policy, 11, eci)
    env = any_pkg.make_env()
    openings = {env.reset(seed=s, eci=eci).model_dump_json(exclude={"metadata"}) for s in range(20)}
    assert len(openings) == 20


def test_metadata_contract_and_reward_range(any_pkg):
    for _, _, final in metadata_contract(any_pkg, COMPONENTS, range(10), rng=policy_rng):
        assert sum(final.metadata["reward_components"].values()) <= 1.0 + 1e-9


def test_tiers_separate_the_policies_on_every_domain(any_pkg):
    """The oracle solves every tier of every domain (the fleet is a world the engine was not written for); the
    heuristic falls with the tier; random never solves; an honest careful planner reaches the bar."""
    oracle, heuristic = (evaluate(any_pkg, p, range(1, 6), 40) for p in ("oracle", "heuristic"))
    rand = evaluate(any_pkg, "random", range(1, 6), 15)
    rates = [heuristic.tier(t).solve_rate for t in range(1, 6)]
    assert rates[0] >= 0.9 and rates[4] <= 0.3 and rates[0] - rates[4] >= 0.6, rates
    assert all(b <= a + 0.1 for a, b in zip(rates, rates[1:], strict=False)), rates
    for t in range(1, 6):
        assert oracle.tier(t).solve_rate == 1.0, (t, oracle.tier(t))
        assert oracle.tier(t).mean_return >= any_pkg.section.solved_reward
        assert rand.tier(t).solve_rate == 0.0
    env = any_pkg.make_env()
    for eci in (2, 4, 5):
        careful = [run_episode(env, CarefulPlanner(), s, eci).solved for s in range(1000000, 1000015)]
        assert statistics.fmean(careful) >= 0.9, (eci, careful)


# ---- reward and outcome on hand-made actions ---------------------------------------------------------------
def test_the_reference_plan_played_by_hand_scores_full(warehouse):
    env = warehouse.make_env()
    obs = env.reset(seed=3, eci=1)
    final = play_orders(env, env.oracle_view().reference.orders, obs)
    meta = final.metadata
    assert meta["solved"] and meta["termination"] == "agent"
    assert meta["reward_components"] == {"service": 0.35, "cost": 0.4, "outcome": 0.25}
    assert final.reward == pytest.approx(1.0)
    assert env._verdict.total_cost == pytest.approx(env._verdict.reference_cost)


def test_doing_nothing_runs_out_and_fails(warehouse):
    env = warehouse.make_env()
    env.reset(seed=3, eci=1)
    final = act(env, action=env.domain.tools.advance, days=30)
    verdict, parts = env._verdict, final.metadata["reward_components"]
    assert final.done and not final.metadata["solved"] and verdict.critical_short
    assert parts["outcome"] == 0.0 and parts["cost"] < 0.4 and parts["service"] < 0.35
    assert any(m["kind"] == "stock-out" for m in final.feed)


def test_over_buying_serves_everything_but_costs_the_outcome(warehouse):
    env = warehouse.make_env()
    obs = env.reset(seed=3, eci=1)
    final = play_orders(env, env.oracle_view().reference.orders, obs, scale=2.0)
    verdict = env._verdict
    assert verdict.fill == 1.0 and not verdict.critical_short
    assert verdict.total_cost > verdict.reference_cost * (1 + COST_MARGIN)
    assert not final.metadata["solved"] and final.metadata["reward_components"]["cost"] < 0.4


def test_budget_exhaustion_plays_out_the_horizon_unsolved(warehouse):
    env = warehouse.make_env()
    env.reset(seed=2, eci=5)
    item = env._truth.episode.items[0]
    budget = warehouse.section.step_budget[5]
    for i in range(budget):
        obs = act(env, action=env.domain.tools.check, item=item)
        assert obs.done == (i == budget - 1)
    assert obs.metadata["termination"] == "budget_exhausted" and not obs.metadata["solved"]
    assert env._stock.over  # the rest of the horizon ran with no more orders


# ---- each tier's mechanics ---------------------------------------------------------------------------------
def _view(obs, item):
    return next(v for v in obs.items if v["id"] == item)


def test_noisy_records_are_wrong_until_counted(warehouse):
    env = warehouse.make_env()
    _, obs = find(env, 2, lambda e: e._truth.episode.book_offset)
    item = next(iter(env._truth.episode.book_offset))
    physical = env._stock.on_hand(item)
    assert _view(obs, item)["on_hand"] != physical
    obs = act(env, action=env.domain.tools.check, item=item)
    assert obs.error is None and _view(obs, item)["on_hand"] == physical
    _, obs = find(env, 2, lambda e: e._truth.episode.withheld)
    item = next(iter(env._truth.episode.withheld))
    assert _view(obs, item)["on_hand"] is None
    obs = act(env, action=env.domain.tools.check, item=item)
    assert _view(obs, item)["on_hand"] == env._stock.on_hand(item)
    env.reset(seed=0, eci=1)  # the clean tier's records are exact
    assert all(v["on_hand"] == env._stock.on_hand(v["id"]) for v in env.observe()["items"])


def test_noisy_forecasts_are_blurred_until_counted(warehouse):
    env = warehouse.make_env()

    def blurred(e):
        ep = e._truth.episode
        return any(ep.forecast_shown[i][1:] != ep.forecast[i][1:] for i in ep.items)

    _, obs = find(env, 2, blurred)
    ep = env._truth.episode
    item = next(i for i in ep.items if ep.forecast_shown[i][1:] != ep.forecast[i][1:])
    true_rows = [[t, round(ep.forecast[item][t], 1)] for t in range(1, ep.horizon + 1)]
    assert [r[:2] for r in _view(obs, item)["forecast"]] != true_rows
    obs = act(env, action=env.domain.tools.check, item=item)
    assert [r[:2] for r in _view(obs, item)["forecast"]] == true_rows
    for t, _, low, high in _view(obs, item)["forecast"]:
        assert low <= ep.demand[item][t] <= high  # demand always falls inside the forecast's range


def test_deliveries_are_late_only_on_the_noisy_tiers(warehouse):
    def lateness(eci):
        env, late = warehouse.make_env(), []
        for seed in range(30):
            run_episode(env, make_policy(warehouse, "oracle"), seed, eci)
            late += [o.arrives - o.due for o in env._stock.orders]
        return late

    assert set(lateness(1)) == {0}
    assert max(lateness(2)) > 0


def _injected(env):
    return [m for ms in env._truth.episode.messages.values() for m in ms if m["kind"] in ("signal", "offer")]


def test_distractors_are_injected_from_eci_3_and_rumours_cannot_happen(warehouse):
    env = warehouse.make_env()
    for eci, count in ((1, 0), (2, 0), (3, 3), (4, 3), (5, 5)):
        for seed in range(12):
            env.reset(seed=seed, eci=eci)
            ep, injected = env._truth.episode, _injected(env)
            announced = ep.event is not None and count > 0  # the real event is announced too
            assert len(injected) == count + announced, (eci, seed)
            for m in injected:
                if m["kind"] == "signal" and (m["item"], m["first_day"], m["pct"]) != ep.event:
                    for t in range(m["first_day"], m["last_day"] + 1):  # the rumoured rise lies outside the range
                        assert ep.forecast[m["item"]][t] * (1 + m["pct"] / 100) > ep.high[m["item"]][t]


def test_taking_a_promotion_is_a_trap(warehouse):
    env = warehouse.make_env()
    tools = env.domain.tools
    outcomes = []
    for seed in range(40):
        obs = env.reset(seed=seed, eci=3)
        ep = env._truth.episode
        if not ep.promos:
            continue
        promo = ep.promos[0]
        queue = sorted([*env.oracle_view().reference.orders, (promo.day, promo.item, promo.supplier, promo.min_qty)],
                       key=lambda o: o[0])
        refused = False
        while not obs.done:
            if queue and queue[0][0] == obs.day:
                _, item, supplier, qty = queue.pop(0)
                obs = act(env, action=tools.order, item=item, supplier=supplier, quantity=qty)
                refused |= obs.error == "over_capacity"
            else:
                obs = act(env, action=tools.advance, days=(queue[0][0] if queue else obs.last_day + 1) - obs.day)
        outcomes.append("refused" if refused else "solved" if obs.metadata["solved"] else "trapped")
    assert outcomes and "solved" not in outcomes, outcomes


def test_a_drift_is_announced_openly_then_only_on_the_notice_board(warehouse):
    env = warehouse.make_env()
    tools = env.domain.tools
    _, obs = find(env, 3, lambda e: e._truth.episode.drifted)
    supplier, lead = next(iter(env._truth.episode.drifted.items()))
    assert any(m["kind"] == "notice" and m["supplier"] == supplier for m in obs.feed)
    assert next(s for s in obs.suppliers if s["id"] == supplier)["known_lead_time"] == lead

    _, obs = find(env, 4, lambda e: e._truth.episode.drifted)
    ep = env._truth.episode
    supplier, lead = next(iter(ep.drifted.items()))
    text = ep.drift_texts[supplier]
    assert text in env.secret_values() and text not in obs.model_dump_json()
    assert next(s for s in obs.suppliers if s["id"] == supplier)["known_lead_time"] is None
    item = next(o.item for o in env.catalogue().suppliers[supplier].offers if o.item in ep.items)
    offer = env.catalogue().offers[(supplier, item)]
    obs = act(env, action=tools.order, item=item, supplier=supplier, quantity=offer.min_order)
    order = env._stock.orders[-1]
    catalogue = env.catalogue().suppliers[supplier].lead_time
    assert order.due == obs.day + catalogue and order.arrives >= obs.day + lead > order.due  # the promise is stale
    obs = act(env, action=tools.notices, supplier=supplier)
    assert any(text in line for line in obs.notices)
    assert next(s for s in obs.suppliers if s["id"] == supplier)["known_lead_time"] == lead


def test_a_squeezed_location_shows_only_when_an_order_does_not_fit(warehouse):
    env = warehouse.make_env()
    tools = env.domain.tools
    _, obs = find(env, 4, lambda e: e._truth.episode.squeezed)
    ep, cat = env._truth.episode, env.catalogue()
    location = ep.squeezed
    assert ep.capacity[location] < ep.listed[location]
    assert next(loc for loc in obs.locations if loc["id"] == location)["capacity"] == ep.listed[location]
    item = next(i for i in ep.items if cat.items[i].location == location)
    supplier, offer = cat.sellers[item][0]
    room_listed = (ep.listed[location] - env._stock.booked(location)) / cat.items[item].space
    room_true = env._stock.room(item)
    qty = max(offer.min_order, math.floor(room_true + 1e-6) + 1)
    assert qty <= room_listed, "an order that fits the listed space but not the usable one"
    obs = act(env, action=tools.order, item=item, supplier=supplier.id, quantity=qty)
    assert obs.error == "over_capacity" and ep.squeeze_reason in obs.feedback
    assert f"{ep.capacity[location]:g}" in obs.feedback
    assert next(loc for loc in obs.locations if loc["id"] == location)["capacity"] == ep.capacity[location]
    fits = math.floor(room_true + 1e-6)
    obs = act(env, action=tools.order, item=item, supplier=supplier.id, quantity=max(offer.min_order, fits))
    assert obs.error is None or fits < offer.min_order
    env.reset(seed=0, eci=3)
    assert env._truth.episode.squeezed is None and env.secret_values() == []


def test_the_hardest_tier_has_the_smallest_budget_and_two_drifts(warehouse):
    env = warehouse.make_env()
    drifts = []
    for seed in range(20):
        env.reset(seed=seed, eci=5)
        drifts.append(len(env._truth.episode.drifted))
        assert env.state.step_budget == warehouse.section.step_budget[5] < warehouse.section.step_budget[4]
    assert max(drifts) == 2


# ---- rejected actions ---------------------------------------------------------------------------------------
def test_invalid_actions_are_rejected_with_a_code_and_penalty(warehouse):
    env = warehouse.make_env()
    env.reset(seed=1, eci=1)
    ep, cat, tools = env._truth.episode, env.catalogue(), env.domain.tools
    item = ep.items[0]
    supplier, offer = cat.sellers[item][0]
    stranger = next(s for s in cat.suppliers if (s, item) not in cat.offers)
    other = next(i.id for i in env.domain.items if i.id not in ep.items)
    cases = [
        ({}, "missing_action"),
        ({"action": tools.check}, "missing_item"),
        ({"action": tools.check, "item": other}, "not_planned"),
        ({"action": tools.notices}, "missing_supplier"),
        ({"action": tools.order, "item": item}, "missing_supplier"),
        ({"action": tools.order, "item": item, "supplier": supplier.id}, "missing_quantity"),
        ({"action": tools.order, "item": item, "supplier": stranger, "quantity": 500}, "not_offered"),
        ({"action": tools.order, "item": item, "supplier": supplier.id, "quantity": 1}, "below_minimum")
        if offer.min_order > 1 else ({"action": tools.cancel}, "missing_order"),
        ({"action": tools.order, "item": item, "supplier": supplier.id, "quantity": 900000}, "over_capacity"),
        ({"action": tools.cancel}, "missing_order"),
        ({"action": tools.cancel, "order_id": "PO-1"}, "unknown_order"),
    ]
    for payload, code in cases:
        obs = env.step(env.action_type(**payload))
        assert obs.error == code, (payload, obs.error, obs.feedback)
        assert obs.reward == warehouse.section.invalid_action_reward and not obs.done and obs.feedback
    obs = act(env, action=tools.order, item=item, supplier=supplier.id, quantity=offer.min_order)
    order_id = obs.orders[-1]["id"]
    assert act(env, action=tools.cancel, order_id=order_id).error is None
    assert act(env, action=tools.cancel, order_id=order_id).error == "not_open"


def test_unknown_names_and_wrong_types_are_refused_by_the_schema(warehouse):
    with pytest.raises(ValueError):
        warehouse.action_cls.model_validate({"action": "raise_po", "item": "mainframe"})
    with pytest.raises(ValueError):
        warehouse.action_cls.model_validate({"action": "raise_po", "quantity": -3})
    env = warehouse.make_env()
    env.reset(seed=1, eci=1)
    obs = env.step(warehouse.protocol.parse("I would order more water").action)
    assert obs.error == "malformed_completion" and obs.reward == warehouse.section.malformed_reward


# ---- domain validation --------------------------------------------------------------------------------------
def _problems(mutate) -> list[str]:
    data = yaml.safe_load(FAMILY.examples()["warehouse_restocking"].read_text())
    mutate(data)
    with pytest.raises(DomainError) as info:
        FAMILY.parse_domain(copy.deepcopy(data))
    return [str(p) for p in info.value.problems]


def test_domain_errors_name_the_field():
    def broken_location(d):
        d["items"][2]["location"] = "roof_space"

    def broken_offer(d):
        d["suppliers"][1]["offers"][0]["item"] = "bubble_wrap"

    def duplicate_item(d):
        d["items"][3]["id"] = d["items"][0]["id"]

    def bad_placeholder(d):
        d["texts"]["drift_notices"][1] = "{supplier}: orders now take {lead_days} days (was {old})."

    expected = {
        broken_location: "domain.items[2].location: 'roof_space' is not a defined location",
        broken_offer: "domain.suppliers[1].offers[0].item: 'bubble_wrap' is not a defined item",
        duplicate_item: "domain.items[3].id: 'stretch_film_500' is already used by domain.items[0]",
        bad_placeholder: "domain.texts.drift_notices[1]: unknown placeholder(s) {lead_days}",
    }
    for mutate, message in expected.items():
        problems = _problems(mutate)
        assert any(p.startswith(message) for p in problems), (mutate.__name__, problems)
    assert any(p.startswith("domain.texts.drift_notices[1]: must contain {days}") for p in _problems(bad_placeholder))


def _broken_rules(mutate) -> dict[str, set[str]]:
    data = yaml.safe_load(FAMILY.examples()["warehouse_restocking"].read_text())
    mutate(data)
    return broken_rules(FAMILY, data)


def _set(path: str, value):
    """A mutation setting `path` ('suppliers.0.offers.0.min_order') of the domain's data to `value`."""
    *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]

    def mutate(d):
        for key in parents:
            d = d[key]
        d[last] = value
    return mutate


def test_a_domain_too_small_for_a_tier_breaks_the_rule_it_was_told():
    def without_label_sellers(d):  # the thermal labels (items[2]) lose both their sellers
        d["suppliers"][0]["offers"].pop(2)
        del d["suppliers"][2]

    def four_label_sellers(d):
        for s in (1, 4):
            d["suppliers"][s]["offers"].append({"item": "label_roll_thermal", "unit_price": 14.0, "min_order": 12})

    def single_sourced(d):
        d["suppliers"] = [s for s in d["suppliers"] if s["id"] not in ("quickpak_direct", "metro_wholesale",
                                                                      "homecare_brands")]

    def two_active(d):  # the third supplier sells only an item the domain does not keep
        d["suppliers"] = d["suppliers"][:3]
        d["suppliers"][2]["offers"][0]["item"] = "bubble_wrap"

    offer = "domain.suppliers[0].offers[0]"
    cases = [
        # No critical item, then none that is not: an episode plans one critical item and two others.
        (lambda d: [item.update(critical=False) for item in d["items"]], "domain.items", "critical_mix"),
        (lambda d: [item.update(critical=True) for item in d["items"][1:]], "domain.items", "critical_mix"),
        (without_label_sellers, "domain.items[2]", "sellers_per_item"),
        (four_label_sellers, "domain.items[2]", "sellers_per_item"),
        (single_sourced, "domain.suppliers", "two_sellers"),
        (two_active, "domain.suppliers", "active_suppliers"),
        (_set("suppliers.4.offers.0.min_order", 5000), "domain.suppliers[4].offers[0].min_order", "min_order_size"),
        (_set("suppliers.0.offers.0.price_breaks.0.unit_price", 12.0), f"{offer}.price_breaks[0].unit_price",
         "price_breaks"),
        (_set("suppliers.0.offers.0.price_breaks.0.min_quantity", 60), f"{offer}.price_breaks[0].min_quantity",
         "price_breaks"),
        # The yogurt keeps 8 days; alpine_dairy's lead time 2 + delay 1 + drift 3 + 6 usable needs 12.
        (_set("items.7.shelf_life", 8), "domain.suppliers[7].offers[0].item", "shelf_life"),
    ]
    for mutate, path, code in cases:
        assert code in _broken_rules(mutate).get(path, set()), (path, code)
    declared = {r.code for r in FAMILY.domain.RULES}
    assert declared == {code for _, _, code in cases}  # every declared rule is broken above


def test_schema_errors_name_the_field_too():
    def bad_variability(d):
        d["items"][0]["variability"] = 0.9

    def too_few_items(d):
        d["items"] = d["items"][:3]

    assert any(p.startswith("domain.items[0].variability") for p in _problems(bad_variability))
    assert any(p.startswith("domain.items:") for p in _problems(too_few_items))


# ---- no domain knowledge in the mechanics -------------------------------------------------------------------
def test_the_engine_holds_no_domain_knowledge():
    words = ("ridgeway", "water", "stretch", "yogurt", "pharmacy", "saline", "insulin", "northline", "metro",
             "clearspring", "pallet", "cases", "rolls", "USD", "EUR", "raise_po", "close_day", "cycle_count")
    root = FAMILY.root
    files = [root / f for f in ("engine.py", "world.py", "planner.py", "policies.py", "models.py")]
    for path in [*files, *(root / "prompts").glob("*.j2")]:
        code = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        code = re.sub(r'""".*?"""', "", code, flags=re.S)
        found = [w for w in words if re.search(rf"(?<![A-Za-z_]){re.escape(w)}", code, flags=re.I)]
        assert not found, (path.name, found)


def test_the_rendered_package_passes_the_sandbox_validator(validator, tmp_path):
    pkg = write_example_package("inventory", "hospital_pharmacy", tmp_path)
    report = validator.validate(pkg)
    failed = [c.check_id for c in report.checks if c.status.value not in ("pass", "skip")]
    assert report.verdict.value == "pass", failed


def test_the_draft_tidy_drops_price_breaks_that_are_no_discount():
    """The warehouse's 1.5B draft wrote breaks at the list price and the minimum order (ten of its problems): each
    is dropped, the real discounts after it kept; a sound domain is left as it is."""
    from openadapt.families.inventory.domain import InventoryDomain
    from openadapt.families.yamlio import read_domain_file

    sound = read_domain_file(get_family("inventory").examples()["warehouse_restocking"])
    assert InventoryDomain.tidy(copy.deepcopy(sound)) == sound
    draft = copy.deepcopy(sound)
    breaks = draft["suppliers"][3]["offers"][0]["price_breaks"]
    assert breaks == [{"min_quantity": 600, "unit_price": 2.95}, {"min_quantity": 1200, "unit_price": 2.85}]
    breaks.insert(0, {"min_quantity": 240, "unit_price": 3.1})  # the minimum order at the list price
    breaks.insert(2, {"min_quantity": 900, "unit_price": 2.99})  # dearer than the break before it
    assert InventoryDomain.tidy(draft) == sound


def test_a_name_that_lists_its_records_fields_is_a_problem():
    # the warehouse's 1.5B at bf6952d: an item named 'Inventory, bags, bulk_racking, critical, 0.2, 0.01, 40.0, ...'
    data = FAMILY.load_example(sorted(FAMILY.examples())[0]).model_dump(mode="json")
    data["items"][0]["name"] = "Inventory, bags, bulk_racking, critical, 0.2, 0.01, 40.0, 1.5, 0.0125"
    problems = {p.path: p.message for p in FAMILY.domain.model_validate(data).problems()}
    assert "lists the record's fields" in problems["domain.items[0].name"]
    data["items"][0]["name"] = "stretch wrap film, 500 mm x 300 m, cast, clear"  # commas, one figure: a name
    assert "domain.items[0].name" not in {p.path for p in FAMILY.domain.model_validate(data).problems()}
