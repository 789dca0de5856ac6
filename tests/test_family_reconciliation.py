"""The reconciliation family: its reward on hand-made actions, what each tier really changes, invalid actions, the
domain checks (with field paths), and a third world written here that runs through the same engine."""

from __future__ import annotations

import copy
import random
import re
import statistics

import pytest
from family_checks import broken_rules

from openadapt.envpkg.evaluation import run_episode
from openadapt.families import get_family
from openadapt.families.domain import DomainError
from openadapt.families.reconciliation.engine import OCR_MISREADS, money, parse_line
from openadapt.kit import RandomPolicy
from openadapt.kit.policy import policy_rng

FAMILY = get_family("reconciliation")
COMPONENTS = {"detection", "classification", "resolution", "efficiency", "penalty"}

# A third world, unrelated to the shipped examples: a carrier's freight bills against the shipper's own records.
# Two sources, none keyed by the reference, no detail columns, no splits: a different shape of the same schema.
FREIGHT = {
    "title": "Freight bill audit",
    "summary": ("A grocery distributor's transport team audits each carrier's freight bills against the shipments "
                "booked in its transport management system before the weekly payment run, and disputes whatever "
                "does not match the booked lanes, pallet counts and rates."),
    "agent_role": "the freight audit analyst of the distribution centre",
    "batch_noun": "week 14 freight bill run",
    "period_start": "2026-03-30",
    "period_days": 28,
    "currency": "USD",
    "reference_format": "BOL {n}",
    "batch_size": 6,
    "sources": [
        {"name": "shipment", "noun": "booked shipment", "id_prefix": "SHP",
         "columns": [{"role": "reference", "label": "Bill of lading"}, {"role": "party", "label": "Carrier"},
                     {"role": "item", "label": "Lane"}, {"role": "quantity", "label": "Pallets booked"},
                     {"role": "unit_price", "label": "Rate per pallet"}, {"role": "amount", "label": "Booked charge"},
                     {"role": "date", "label": "Ship date"}],
         "memos": ["Tendered through the TMS load board at 06:00", "Booked by the {party} account desk for {item}"]},
        {"name": "freight_bill", "noun": "carrier freight bill", "id_prefix": "FB-", "external": True, "ocr": True,
         "date_lag": [2, 4],
         "columns": [{"role": "reference", "label": "BOL number"}, {"role": "party", "label": "Billed by"},
                     {"role": "item", "label": "Lane billed"}, {"role": "quantity", "label": "Pallets billed"},
                     {"role": "unit_price", "label": "Rate billed"}, {"role": "amount", "label": "Amount due"},
                     {"role": "date", "label": "Bill date"}],
         "memos": ["Emailed PDF bill, remit within 15 days", "Bill for {reference} signed for by the receiver"]},
    ],
    "parties": [
        {"id": "prairie_line", "name": "Prairie Line Freight", "aliases": ["PRAIRIE LINE FRT"],
         "items": ["chi_den_reefer", "mem_cmh_dry"],
         "terms": "Contract carrier since 2022; rates fixed per pallet for the calendar year; quick-pay in 10 days."},
        {"id": "bluewater_logistics", "name": "Bluewater Logistics", "aliases": ["BLUEWATER LOG"],
         "items": ["dal_atl_dry", "fre_pdx_reefer"],
         "terms": "Asset-light broker; tenders confirmed by email; detention billed after two free hours."},
        {"id": "red_mesa", "name": "Red Mesa Trucking", "aliases": ["RED MESA TRKG"],
         "items": ["dal_atl_dry", "mem_cmh_dry"],
         "terms": "Regional dry-van carrier; drop-trailer pool of twelve at the Dallas yard."},
        {"id": "lakeland_carriers", "name": "Lakeland Carriers",
         "items": ["chi_den_reefer", "fre_pdx_reefer"],
         "terms": "Temperature-controlled specialist; continuous reefer download supplied with every bill."},
        {"id": "summit_reefer", "name": "Summit Reefer Express",
         "items": ["fre_pdx_reefer", "chi_den_reefer", "dal_atl_dry"],
         "terms": "Team drivers on the long lanes; fuel surcharge table reviewed every quarter."},
    ],
    "items": [
        {"id": "chi_den_reefer", "name": "Chicago to Denver reefer", "unit": "pallets",
         "price": [52.0, 61.0], "quantity": [8, 26]},
        {"id": "dal_atl_dry", "name": "Dallas to Atlanta dry van", "unit": "pallets",
         "price": [38.0, 46.0], "quantity": [10, 26]},
        {"id": "fre_pdx_reefer", "name": "Fresno to Portland reefer", "unit": "pallets",
         "price": [44.0, 55.0], "quantity": [6, 24]},
        {"id": "mem_cmh_dry", "name": "Memphis to Columbus dry van", "unit": "pallets",
         "price": [30.0, 37.0], "quantity": [10, 26]},
    ],
    "resolutions": [
        {"id": "dispute_rate", "description": "dispute the bill and ask the carrier to rebill at the booked rate"},
        {"id": "dispute_pallets", "description": "dispute the pallet count against the signed bill of lading"},
        {"id": "reject_duplicate", "description": "reject the second bill for the same shipment"},
        {"id": "request_pod", "description": "ask the carrier for a proof of delivery before the bill is paid"},
        {"id": "short_pay_rate", "description": "pay at the booked rate and notify the carrier, without a dispute"},
        {"id": "accept_count", "description": "accept the billed count and correct the booking in the TMS"},
    ],
    "discrepancies": [
        {"id": "rate_overcharge", "description": "The carrier billed a higher rate per pallet than was booked",
         "mechanism": "shift", "source": "freight_bill", "role": "unit_price", "direction": "up",
         "change": [0.05, 0.2], "tolerance": 0.03, "flag": "freight_bill", "resolution": "dispute_rate"},
        {"id": "pallet_overcount", "description": "The carrier billed more pallets than were booked and shipped",
         "mechanism": "shift", "source": "freight_bill", "role": "quantity", "direction": "up",
         "change": [0.1, 0.4], "flag": "freight_bill", "resolution": "dispute_pallets"},
        {"id": "duplicate_bill", "description": "The carrier billed the same shipment twice",
         "mechanism": "duplicate", "source": "freight_bill", "flag": "freight_bill", "resolution": "reject_duplicate"},
        {"id": "unbooked_shipment", "description": "A bill arrived for a shipment that was never booked",
         "mechanism": "omit", "missing_from": ["shipment"], "flag": "freight_bill", "resolution": "request_pod"},
    ],
    "policies": [
        {"id": "diesel_index", "applies_to": "rate_overcharge", "tolerance": 0.09,
         "note": "{party} bills the weekly diesel index inside its rate: rates up to {tolerance} over the booked "
                 "rate are contractual."},
        {"id": "rate_letter", "applies_to": "rate_overcharge", "resolution": "short_pay_rate",
         "note": "{party} agreed in its 2026 rate letter that overbilled rates are short-paid without a dispute "
                 "(short_pay_rate)."},
        {"id": "mixed_pallets", "applies_to": "pallet_overcount", "resolution": "accept_count",
         "note": "{party} counts split mixed pallets as billable units under clause 9 of its contract: accept the "
                 "count and correct the booking (accept_count)."},
    ],
    "tools": {"listing": "pull_records", "inspect": "open_record", "terms": "read_carrier_contract",
              "flag": "raise_dispute_item", "unflag": "drop_dispute_item", "submit": "approve_payment_run"},
}


class World:
    """One domain bound into the engine, with the helpers the tests need."""

    def __init__(self, domain):
        self.domain = domain
        self.bound = FAMILY.bind(domain, FAMILY.section(task=f"test of {domain.title}"))
        self.act = self.bound.action_cls
        self.tools = domain.tools

    def env(self):
        return self.bound.env_cls()

    def oracle_steps(self, env) -> list:
        """The oracle's actions for the current episode, minus the final submit."""
        case, t = env.oracle_view(), self.tools
        steps = [self.act(tool=t.listing, source=s.name) for s in self.domain.sources]
        steps += [self.act(tool=t.inspect, record=r) for r in case.inspect]
        steps += [self.act(tool=t.terms, party=p) for p in case.terms]
        steps += [self.act(tool=t.flag, record=f.record, discrepancy=f.discrepancy, resolution=f.resolution)
                  for f in case.truth.values()]
        return steps

    def submit(self, env):
        return env.step(self.act(tool=self.tools.submit))


@pytest.fixture(scope="module")
def match() -> World:
    return World(FAMILY.load_example("three_way_match"))


@pytest.fixture(scope="module")
def bank() -> World:
    return World(FAMILY.load_example("bank_reconciliation"))


@pytest.fixture(scope="module")
def freight() -> World:
    return World(FAMILY.parse_domain(copy.deepcopy(FREIGHT)))


def _seed(world: World, eci: int, want, tries: int = 400) -> int:
    env = world.env()
    for seed in range(tries):
        env.reset(seed=seed, eci=eci)
        if want(env.oracle_view()):
            return seed
    raise AssertionError("no seed with the wanted episode")


def _rows(obs) -> dict[str, dict[str, str]]:
    return {parse_line(line)[1]: parse_line(line)[2] for line in obs.records}


# ---- registration and examples ---------------------------------------------------------------------------------
def test_family_is_registered_with_its_examples():
    assert FAMILY.ref == "reconciliation@1"
    assert {"three_way_match", "bank_reconciliation"} <= set(FAMILY.examples())
    assert FAMILY.step_budget[5] < FAMILY.step_budget[4]


# ---- reward on hand-made actions -------------------------------------------------------------------------------
def test_a_drafted_reference_or_date_column_marked_detail_is_tidied_to_listed():
    data = FAMILY.load_example("three_way_match").model_dump(mode="json")
    for column in data["sources"][0]["columns"]:  # the invoice matcher's 1.5B marked every column a detail
        column["detail"] = column["detail"] or column["role"] in ("reference", "date")
    details = {c["role"] for c in data["sources"][0]["columns"] if c["detail"]}
    with pytest.raises(DomainError, match="the reference column must be listed"):
        FAMILY.parse_domain(data)
    domain = FAMILY.parse_domain(FAMILY.domain.tidy(data))
    columns = {c.role: c.detail for c in domain.sources[0].columns}
    assert not columns["reference"] and not columns["date"]
    assert {role for role, detail in columns.items() if detail} == details - {"reference", "date"}


def test_the_honest_path_scores_full_and_solves(match):
    env = match.env()
    env.reset(seed=3, eci=3)
    for action in match.oracle_steps(env):
        assert env.step(action).error is None
    final = match.submit(env)
    meta = final.metadata
    assert final.done and meta["solved"] and final.reward == pytest.approx(1.0)
    assert set(meta["reward_components"]) == COMPONENTS
    assert meta["reward_components"]["penalty"] == 0.0


def test_a_false_flag_is_penalised_and_unsolves(match):
    env = match.env()
    env.reset(seed=3, eci=1)
    steps = match.oracle_steps(env)
    for action in steps:
        env.step(action)
    truth = env.oracle_view().truth
    innocent = next(r for r in env.oracle_view().listing["invoice"] if r not in truth)
    env.step(match.act(tool=match.tools.flag, record=innocent, discrepancy="price_variance",
                       resolution="request_credit_note"))
    meta = match.submit(env).metadata
    parts = meta["reward_components"]
    assert not meta["solved"] and parts["penalty"] == pytest.approx(-0.15)
    assert parts["detection"] == pytest.approx(0.40) and parts["efficiency"] < 0.15


def test_wrong_type_and_wrong_resolution_each_cost_their_share(match):
    seed = _seed(match, 3, lambda c: len(c.plants) == 2)
    env = match.env()
    env.reset(seed=seed, eci=3)
    case = env.oracle_view()
    first, second = list(case.truth.values())
    wrong_type = next(d.id for d in match.domain.discrepancies if d.id != first.discrepancy)
    wrong_fix = next(r.id for r in match.domain.resolutions if r.id != second.resolution)
    for action in match.oracle_steps(env)[:-2]:
        env.step(action)
    env.step(match.act(tool=match.tools.flag, record=first.record, discrepancy=wrong_type,
                       resolution=first.resolution))
    env.step(match.act(tool=match.tools.flag, record=second.record, discrepancy=second.discrepancy,
                       resolution=wrong_fix))
    parts = match.submit(env).metadata["reward_components"]
    assert parts["detection"] == pytest.approx(0.40)
    assert parts["classification"] == pytest.approx(0.10) and parts["resolution"] == pytest.approx(0.125)


def test_a_missed_discrepancy_costs_detection_and_solving(match):
    seed = _seed(match, 3, lambda c: len(c.plants) == 2)
    env = match.env()
    env.reset(seed=seed, eci=3)
    for action in match.oracle_steps(env)[:-1]:
        env.step(action)
    meta = match.submit(env).metadata
    assert not meta["solved"] and meta["reward_components"]["detection"] == pytest.approx(0.20)


def test_withdrawing_a_flag_removes_it_and_wasted_steps_cost_efficiency(match):
    env = match.env()
    env.reset(seed=5, eci=1)
    for action in match.oracle_steps(env):
        env.step(action)
    record = next(iter(env.oracle_view().truth))
    env.step(match.act(tool=match.tools.unflag, record=record))
    env.step(match.act(tool=match.tools.listing, source="invoice"))  # nothing new: a wasted step
    case = env.oracle_view()
    f = case.truth[record]
    obs = env.step(match.act(tool=match.tools.flag, record=record, discrepancy=f.discrepancy, resolution=f.resolution))
    assert len(obs.findings) == len(case.truth)
    meta = match.submit(env).metadata
    assert meta["solved"] and 0.0 < meta["reward_components"]["efficiency"] < 0.15


def test_submitting_nothing_earns_nothing(match):
    env = match.env()
    env.reset(seed=2, eci=2)
    final = match.submit(env)
    assert not final.metadata["solved"] and final.reward == 0.0


# ---- invalid actions ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("payload", "code"), [
    ({}, "missing_tool"),
    ({"tool": "list_documents"}, "missing_source"),
    ({"tool": "open_document"}, "missing_record"),
    ({"tool": "open_document", "record": "INV-00000"}, "unknown_record"),
    ({"tool": "read_vendor_terms"}, "missing_party"),
    ({"tool": "clear_exception", "record": "LISTED"}, "not_flagged"),
    ({"tool": "flag_exception", "record": "LISTED", "discrepancy": "price_variance"}, "incomplete_flag"),
])
def test_invalid_actions_are_rejected_with_a_code(match, payload, code):
    env = match.env()
    obs = env.reset(seed=1, eci=1)
    obs = env.step(match.act(tool="list_documents", source="invoice"))
    if payload.get("record") == "LISTED":
        payload = dict(payload, record=parse_line(obs.records[0])[1])
    obs = env.step(match.act(**payload))
    assert obs.error == code and obs.feedback and not obs.done
    assert obs.reward == FAMILY.invalid_action_reward


def test_a_record_must_be_listed_before_it_is_flagged_and_findings_are_capped(match):
    env = match.env()
    env.reset(seed=1, eci=1)
    hidden = env.oracle_view().listing["goods_receipt"][0]
    obs = env.step(match.act(tool="flag_exception", record=hidden, discrepancy="short_delivery",
                             resolution="short_pay_to_receipt"))
    assert obs.error == "unknown_record"
    for source in ("purchase_order", "goods_receipt", "invoice"):
        env.step(match.act(tool="list_documents", source=source))
    ids = [i for ids in env.oracle_view().listing.values() for i in ids]
    codes = [env.step(match.act(tool="flag_exception", record=i, discrepancy="price_variance",
                                resolution="request_credit_note")).error for i in ids[:13]]
    assert codes[:12] == [None] * 12 and codes[12] == "too_many_flags"


def test_wrong_typed_actions_are_refused_by_the_schema(match):
    with pytest.raises(ValueError):
        match.act.model_validate({"tool": "list_documents", "source": "warehouse"})
    with pytest.raises(ValueError):
        match.act.model_validate({"tool": "flag_exception", "discrepancy": "fraud"})


# ---- what each tier changes -----------------------------------------------------------------------------------
def _figures(obs) -> list[str]:
    return [v for row in _rows(obs).values() for label, v in row.items()
            if label.startswith(("Invoice total", "Qty", "Unit price", "Order value"))]


def _listed(world: World, env, seed: int, eci: int):
    env.reset(seed=seed, eci=eci)
    obs = None
    for source in world.domain.sources:
        obs = env.step(world.act(tool=world.tools.listing, source=source.name))
    return obs


def test_noise_misreads_figures_blanks_references_and_aliases_parties_only_from_eci_2(match):
    env = match.env()
    aliases = {a for p in match.domain.parties for a in p.aliases}
    counts = {1: [0, 0, 0], 2: [0, 0, 0]}
    for eci in (1, 2):
        for seed in range(12):
            obs = _listed(match, env, seed, eci)
            text = "\n".join(obs.records)
            counts[eci][0] += sum(bool(re.search(r"[OlSBZb]", f.split(" ")[0])) for f in _figures(obs))
            counts[eci][1] += text.count(match.domain.missing_marker)
            counts[eci][2] += sum(f"Vendor: {a} |" in text for a in aliases)
            # A misread figure still stands for the true one.
            for rec_id, row in _rows(obs).items():
                rec = env.oracle_view().records[rec_id]
                if "Invoice total (EUR)" in row:
                    shown = row["Invoice total (EUR)"]
                    for digit, letter in OCR_MISREADS.items():
                        shown = shown.replace(letter, digit)
                    assert shown == money(rec.values["amount"])
    assert counts[1] == [0, 0, 0]
    assert all(n > 0 for n in counts[2]), counts[2]


def test_adversarial_tiers_plant_records_that_look_wrong_but_match(match):
    env = match.env()
    kinds = {eci: set() for eci in (1, 2, 3)}
    for eci in (1, 2, 3):
        for seed in range(15):
            env.reset(seed=seed, eci=eci)
            case = env.oracle_view()
            kinds[eci] |= {t.kind for t in case.txns}
            truth = case.truth
            for rec_id in case.near_misses:  # within tolerance, never a discrepancy
                rec = case.records[rec_id]
                txn = case.txns[rec.txn]
                assert 0 < rec.values["unit_price"] / txn.unit_price - 1 <= 0.02 and rec_id not in truth
            for txn in case.txns:
                recs = [r for r in case.records.values() if r.txn == txn.n]
                if txn.kind == "split":
                    parts = [r for r in recs if r.source == "goods_receipt"]
                    assert len(parts) == 2 and sum(r.values["quantity"] for r in parts) == txn.quantity
                if txn.kind in ("split", "lookalike"):
                    assert {r.source for r in recs} == {"purchase_order", "goods_receipt", "invoice"}
                    assert not {r.id for r in recs} & set(truth)
                if txn.clone_of is not None:  # same party, item, figures; its own reference
                    twin = case.txns[txn.clone_of]
                    assert (twin.party, twin.item, twin.amount) == (txn.party, txn.item, txn.amount)
                    assert twin.reference != txn.reference
    assert kinds[1] == kinds[2] == {"ordinary", "planted"}
    assert {"near_miss", "split", "lookalike"} <= kinds[3]


def test_harder_tiers_plant_more_discrepancies_in_larger_batches(match):
    env = match.env()
    sizes = {}
    for eci in (1, 3, 5):
        plants, txns = [], []
        for seed in range(20):
            env.reset(seed=seed, eci=eci)
            case = env.oracle_view()
            plants.append(len(case.plants))
            txns.append(len([t for t in case.txns if t.clone_of is None]))
        sizes[eci] = (min(plants), max(plants), statistics.fmean(txns))
    assert sizes[1][:2] == (1, 2) and sizes[3][:2] == (2, 3)
    assert sizes[1][2] < sizes[3][2] < sizes[5][2]


def test_a_resolution_rule_hides_in_one_party_terms(match):
    seed = _seed(match, 4, lambda c: any(r.policy.resolution for r in c.rules))
    env = match.env()
    obs = env.reset(seed=seed, eci=4)
    case = env.oracle_view()
    rule = next(r for r in case.rules if r.policy.resolution)
    plant = next(p for p in case.plants if p.txn.party is rule.party)
    assert plant.resolution == rule.policy.resolution != plant.kind.resolution
    assert rule.text() not in obs.model_dump_json()
    other = next(p.id for p in match.domain.parties if p is not rule.party)
    obs = env.step(match.act(tool=match.tools.terms, party=other))
    assert rule.text() not in " ".join(obs.terms)
    obs = env.step(match.act(tool=match.tools.terms, party=rule.party.id))
    assert rule.text() in obs.terms[-1] and rule.policy.resolution in obs.terms[-1]


def test_a_tolerance_rule_makes_a_visible_variance_acceptable(match):
    seed = _seed(match, 4, lambda c: any(r.record for r in c.rules))
    env = match.env()
    env.reset(seed=seed, eci=4)
    case = env.oracle_view()
    rule = next(r for r in case.rules if r.record)
    rec = case.records[rule.record]
    variance = rec.values["unit_price"] / rule.txn.unit_price - 1
    assert 0.02 < variance <= rule.policy.tolerance and rule.record not in case.truth
    assert rule.party.id in case.terms  # the honest path reads that party's terms


def test_rules_only_on_hidden_constraint_tiers_and_more_of_them_at_eci_5(match):
    env = match.env()
    counts = {}
    for eci in (1, 2, 3, 4, 5):
        counts[eci] = sum(len((env.reset(seed=s, eci=eci), env.oracle_view())[1].rules) for s in range(60))
    assert counts[1] == counts[2] == counts[3] == 0
    assert 20 <= counts[4] <= 50 and counts[5] > counts[4]


def test_eci_5_has_the_smaller_budget_and_running_it_out_ends_unsolved(match):
    env = match.env()
    env.reset(seed=4, eci=5)
    assert env.state.step_budget == FAMILY.step_budget[5] < FAMILY.step_budget[4]
    for i in range(FAMILY.step_budget[5]):
        obs = env.step(match.act(tool=match.tools.terms, party="nordic_steel"))
        assert obs.done == (i == FAMILY.step_budget[5] - 1)
    assert obs.metadata["termination"] == "budget_exhausted" and not obs.metadata["solved"]
    assert env.oracle_view().min_steps <= FAMILY.step_budget[5]


def test_the_opening_shows_control_figures_but_no_answer(match):
    env = match.env()
    for eci in (1, 4, 5):
        obs = env.reset(seed=9, eci=eci)
        assert not obs.records and all("control total" in line for line in obs.sources if "goods" not in line)
        text, hidden = obs.model_dump_json(), env.hidden_texts()
        assert hidden and not any(secret in text for secret in hidden)
        assert not any(secret in env.state.model_dump_json() for secret in hidden)


def test_the_text_protocol_renders_and_round_trips(match, tmp_path):
    from openadapt.envpkg.examples import write_example_package
    from openadapt.envpkg.loader import load, resolve

    pkg = load(resolve(str(write_example_package("reconciliation", "three_way_match", tmp_path))))
    system = pkg.protocol.system_prompt()
    assert "price_variance" in system and "read_vendor_terms" in system and len(system) < 32_000
    env = pkg.make_env()
    obs = env.reset(seed=1, eci=5)
    for action in match.oracle_steps(env)[:3]:
        obs = env.step(pkg.action_cls.model_validate(action.model_dump()))
    assert "RECORDS:" in pkg.protocol.render(obs)
    parsed = pkg.protocol.parse('{"tool": "list_documents", "source": "invoice"}')
    assert parsed.ok and parsed.action.source == "invoice"
    obs = env.step(pkg.protocol.parse("I would pay them all").action)
    assert obs.error == "malformed_completion" and obs.reward == FAMILY.malformed_reward


# ---- domain checks name the field -------------------------------------------------------------------------------
def _problems(mutate) -> dict[str, str]:
    data = copy.deepcopy(FREIGHT)
    mutate(data)
    with pytest.raises(DomainError) as err:
        FAMILY.parse_domain(data)
    problems: dict[str, str] = {}
    for p in err.value.problems:
        problems[p.path] = f"{problems.get(p.path, '')} {p.message}".strip()
    return problems


def test_a_broken_reference_is_named():
    problems = _problems(lambda d: d["discrepancies"][1].update(resolution="pay_twice"))
    assert "not a defined resolution" in problems["domain.discrepancies[1].resolution"]
    problems = _problems(lambda d: d["parties"][0]["items"].append("anc_nome_sled"))
    assert "domain.parties[0].items[2]" in problems
    problems = _problems(lambda d: d["policies"][0].update(applies_to="late_delivery"))
    assert "domain.policies[0].applies_to" in problems


def test_a_duplicate_is_named():
    problems = _problems(lambda d: d["parties"][1].update(id="prairie_line"))
    assert "already used by domain.parties[0]" in problems["domain.parties[1].id"]
    problems = _problems(lambda d: d["discrepancies"].append(dict(d["discrepancies"][0], id="rate_gouge")))
    assert "cannot be told from domain.discrepancies[0]" in problems["domain.discrepancies[4].mechanism"]


def _broken_rules(mutate) -> dict[str, set[str]]:
    data = copy.deepcopy(FREIGHT)
    mutate(data)
    return broken_rules(FAMILY, data)


def test_a_domain_too_small_for_a_tier_breaks_the_rule_it_was_told():
    # No duplicate type: only near misses remain for the adversarial tiers.
    assert "lookalikes" in _broken_rules(lambda d: d["discrepancies"].pop(2))["domain.discrepancies"]
    # Every party rule on one type: the hidden-constraint tiers need two.
    assert "policy_types" in _broken_rules(lambda d: d["policies"].pop(2))["domain.policies"]
    # Too few (party, lane) pairs for the batch and the harder tiers' extra transactions.
    assert "trade_pairs" in _broken_rules(lambda d: d.update(batch_size=9))["domain.parties"]
    # No aliases: the noisy tiers could not rename a party.
    assert "aliased_parties" in _broken_rules(lambda d: [p.update(aliases=[]) for p in d["parties"]])["domain.parties"]
    # A planted change within the tolerance.
    assert _broken_rules(lambda d: d["discrepancies"][0].update(change=[0.02, 0.1]))[
        "domain.discrepancies[0].change"] == {"change_beyond_tolerance"}


def test_every_rule_reads_fields_of_its_domain_and_has_a_code_of_its_own():
    from openadapt.families import all_families

    for family in all_families():
        rules = family.domain.RULES
        assert len({r.code for r in rules}) == len(rules), family.name
        for rule in rules:
            assert set(rule.reads) <= set(family.domain.model_fields), (family.name, rule.code)
            assert rule.says.endswith(".") and len(rule.says) < 300


def test_a_bad_placeholder_is_named():
    problems = _problems(lambda d: d["policies"][0].update(note="{carrier} may bill up to {tolerance} over the "
                                                                "booked rate under its fuel clause."))
    assert "{carrier}" in problems["domain.policies[0].note"]
    problems = _problems(lambda d: d["sources"][0]["memos"].append("Tendered at {time} by the night desk"))
    assert "domain.sources[0].memos[2]" in problems


def test_other_semantic_problems_are_named():
    problems = _problems(lambda d: d["policies"][1].update(resolution="dispute_rate",
                                                           note="{party} wants disputes (dispute_rate) always."))
    assert "must differ from the usual resolution" in problems["domain.policies[1].resolution"]
    problems = _problems(lambda d: d["discrepancies"][3].update(late=True))
    assert "record later" in problems["domain.discrepancies[3].late"]
    problems = _problems(lambda d: d["parties"][0].update(aliases=["HX LOGISTICS 22"]))
    assert "shares no word" in problems["domain.parties[0].aliases[0]"]
    problems = _problems(lambda d: d["sources"].pop())
    assert any(path.startswith("domain.sources") for path in problems)


# ---- the engine holds no domain knowledge: three worlds, one engine ----------------------------------------------
@pytest.mark.parametrize("world", ["freight", "bank"])
def test_other_worlds_run_through_the_same_engine(world, request):
    w = request.getfixturevalue(world)
    env = w.env()
    rates = []
    for eci in range(1, 6):
        results = [run_episode(env, FAMILY.oracle(), seed, eci) for seed in range(30)]
        assert all(r.solved for r in results), (eci, [r.seed for r in results if not r.solved])
        assert min(r.episode_return for r in results) >= FAMILY.solved_reward
        rates.append(statistics.fmean(run_episode(env, FAMILY.heuristic(), s, eci).solved for s in range(30)))
    assert rates[0] >= 0.9 and rates[4] <= 0.3 and rates[0] - rates[4] >= 0.6, rates
    random_rate = statistics.fmean(run_episode(env, RandomPolicy(w.act), s, 1).solved for s in range(30))
    assert random_rate <= 0.05


def test_the_oracle_walks_the_honest_path_on_every_tier(freight):
    """It takes exactly the steps the engine counts as the shortest honest path, and reads terms only on the
    hidden-constraint tiers; the freight world has no detail columns, so it never opens a record."""
    env = freight.env()
    for eci in range(1, 6):
        for seed in range(10):
            steps = []
            run_episode(env, FAMILY.oracle(), seed, eci, on_step=lambda a, o, steps=steps: steps.append(a.tool))
            case = env.oracle_view()
            assert len(steps) == case.min_steps and "open_record" not in steps
            assert ("read_carrier_contract" in steps) == (eci >= 4)


def test_episodes_are_a_function_of_seed_and_tier(bank):
    env = bank.env()
    for eci in (1, 5):
        runs = []
        for _ in range(2):
            obs = env.reset(seed=17, eci=eci)
            policy = RandomPolicy(bank.act)
            policy.begin(env, obs, policy_rng(17))
            trace = [obs.model_dump(exclude={"metadata"})]
            while not obs.done:
                obs = env.step(policy.act(obs))
                trace.append(obs.model_dump(exclude={"metadata"}))
            runs.append(trace)
        assert runs[0] == runs[1]
        openings = {env.reset(seed=s, eci=eci).model_dump_json(exclude={"metadata"}) for s in range(12)}
        assert len(openings) == 12


def test_rewards_stay_in_range(bank):
    low, high = FAMILY.reward_range
    env = bank.env()
    for seed in range(20):
        for policy in (FAMILY.heuristic(), RandomPolicy(bank.act)):
            obs = env.reset(seed=seed, eci=seed % 5 + 1)
            policy.begin(env, obs, random.Random(seed))
            while not obs.done:
                obs = env.step(policy.act(obs))
                assert low <= obs.reward <= high
