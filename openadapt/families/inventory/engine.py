"""The inventory engine: keep a few items in stock over a horizon of periods, ordering from suppliers whose lead
times drift, under demand that strays from its forecast, at a cost close to a careful planner's.

Each episode is a pure function of `(seed, eci)`: the items in play, their demand (always inside the forecast's
range), each supplier's true lead time and the delay of every order it could be sent, the records' errors, the
storage capacity and the messages of the feed. The engine then plays its reference on the same draws: the
planner of `planner.py` fed with the truth (true counts, true lead times, lateness allowed for) and the upper end
of every forecast range. Its cost is the bar: an episode is solved when the agent ends the horizon itself, no
critical item ran out, and its total cost is at most the reference's plus `COST_MARGIN` (plus a sliver of the
period's purchase value).

Tiers turn the `TierProfile` knobs: `noise` makes records wrong (phantom stock, miscounts), blurs forecasts and
lets suppliers deliver late; `drop` withholds counts and forecast days; `distractors` injects demand rumours and
promotions whose minimum quantity is a trap (and announces the true demand events too, which the forecast
already holds); `depth` drifts the lead time of that many suppliers in play (announced openly while constraints
are not hidden); `hidden_constraints` moves the drift into the supplier's own notices only (its order
acknowledgements keep promising the catalogue lead time) and shrinks one location's usable space below the
listed one, which shows only when an order does not fit. Nothing here knows what the items or suppliers are:
the domain says.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, ClassVar

from openadapt.families.domain import fill
from openadapt.families.engine import FamilyEnvironment, per_domain
from openadapt.families.inventory.domain import ITEMS_PER_EPISODE, MAX_DRIFT, InventoryDomain
from openadapt.families.inventory.planner import Arrival, Belief, ItemBelief, Option, next_decision, plan_day
from openadapt.families.inventory.world import Catalogue, Episode, Lot, Promo, Stock
from openadapt.kit import Outcome, TierProfile

HORIZON = 12  # periods per episode
COST_MARGIN = 0.15  # solved: total cost within 15% of the reference's ...
SLACK_SHARE = 0.005  # ... plus 0.5% of the value of the horizon's expected demand
SERVICE_STEEPNESS = 5.0  # service credit falls to 0 at a (critical-weighted) fill rate of 80%
RECORD_SHARE = 0.5  # an item's stock record is wrong with noise x this, not shown with drop x this
EVENT_RATE = 0.5  # share of episodes with a real demand event (in the forecast)
FEED_WINDOW = 16  # feed messages shown
ROUNDS_PER_PERIOD = 3  # planning rounds per period (each may order what the last one showed is due)
WEIGHTS = {"service": 0.35, "cost": 0.40, "outcome": 0.25}
DESCRIPTIONS = {
    "service": "share of demand served (critical items weigh 3x); 0 at 80% or less",
    "cost": "1 at or below the reference policy's cost, falling to 0 at twice it",
    "outcome": "solved: horizon finished, no critical stock-out, cost within the margin of the reference",
}


@dataclass
class Verdict:
    service: float = 0.0
    cost: float = 0.0
    outcome: float = 0.0
    solved: bool = False
    total_cost: float = 0.0
    reference_cost: float = 0.0
    threshold: float = 0.0
    fill: float = 0.0
    critical_short: tuple[str, ...] = ()
    finished: bool = False


@dataclass
class Plan:
    """A policy the engine played on this episode's draws: its orders by period and what it cost."""

    orders: list[tuple[int, str, str, int]]  # (period, item, supplier, units)
    visits: int  # periods the planner acted in (each ends with one advance)
    cost: float
    critical_short: list[str]
    peak: dict[str, float]  # most space booked per location


@dataclass
class Truth:
    """The privileged view of one episode (what the oracle reads; never served)."""

    episode: Episode
    reference: Plan
    oracle_plan: Plan | None = None


def nice_ceil(x: float) -> float:
    """`x` rounded up to a figure a site would list (0.1 steps below 5, then 0.5, 1, 5, 10)."""
    step = 0.1 if x < 5 else 0.5 if x < 20 else 1 if x < 50 else 5 if x < 500 else 10
    return round(math.ceil(x / step - 1e-9) * step, 1)


class InventoryEnvironment(FamilyEnvironment):
    domain: ClassVar[InventoryDomain]
    REWARD = tuple((name, 0.0, weight, DESCRIPTIONS[name]) for name, weight in WEIGHTS.items())

    # ---- the domain, indexed once per class ---------------------------------------------------------------
    @per_domain
    def catalogue(cls) -> Catalogue:
        return Catalogue(cls.domain)

    # ---- reward -------------------------------------------------------------------------------------------
    def verdict(self) -> Verdict:
        return self._score()

    # ---- episode generation -------------------------------------------------------------------------------
    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        ep = self._draw(rng, tier)
        self._truth = Truth(ep, reference_plan(ep, self.catalogue()))
        self._stock = Stock(ep, self.catalogue())
        self._verdict = None
        self._checked: set[str] = set()
        self._notices: list[str] = []
        self._known_lead: dict[str, int] = {}
        self._revealed: set[str] = set()
        self._feed: list[dict[str, Any]] = []
        self._forecasts: dict[tuple[str, bool], list[list[Any]]] = {}
        cat = self.catalogue()
        self._in_play = [s for s in self.domain.suppliers if any(o.item in ep.items for o in s.offers)]
        self._locations = sorted({cat.items[i].location for i in ep.items})
        self._finished_by_agent = False
        for message in ep.messages.get(1, []):
            self._post(message)
            if message["kind"] == "notice":
                self._known_lead[message["supplier"]] = ep.lead[message["supplier"]]

    def _draw(self, rng: random.Random, tier: TierProfile) -> Episode:
        d, cat = self.domain, self.catalogue()
        horizon = HORIZON
        first = rng.choice([i for i in d.items if i.critical])
        others = rng.sample([i for i in d.items if i is not first], ITEMS_PER_EPISODE - 1)
        items = [first, *others]
        rng.shuffle(items)
        ids = [i.id for i in items]
        phase = rng.randrange(7)
        mean, forecast = {}, {}
        for item in items:
            mean[item.id] = rng.uniform(*item.demand)
            profile = item.demand_profile or [1.0]
            forecast[item.id] = [0.0] + [mean[item.id] * profile[(phase + t - 1) % len(profile)]
                                         for t in range(1, horizon + 1)]
        event = None
        if rng.random() < EVENT_RATE:
            event = (rng.choice(ids), rng.randint(4, horizon - 2), rng.choice((30, 40, 50, 60)))
            for t in (event[1], event[1] + 1):
                forecast[event[0]][t] *= 1 + event[2] / 100
        low, high, demand = {}, {}, {}
        for item in items:
            v, f = item.variability, forecast[item.id]
            low[item.id] = [0] + [math.floor(f[t] * (1 - v)) for t in range(1, horizon + 1)]
            high[item.id] = [0] + [math.ceil(f[t] * (1 + v)) for t in range(1, horizon + 1)]
            drawn = [round(f[t] * rng.uniform(1 - v, 1 + v)) for t in range(1, horizon + 1)]
            demand[item.id] = [0] + [min(high[item.id][t], max(low[item.id][t], x)) for t, x in enumerate(drawn, 1)]
        safety = {i.id: math.ceil(mean[i.id] * i.safety_days) for i in items}
        delay = {s.id: [0] + [0 if s.max_delay == 0 or rng.random() < s.on_time_rate else rng.randint(1, s.max_delay)
                              for _ in range(horizon)] for s in d.suppliers}
        lead = {s.id: s.lead_time for s in d.suppliers}
        in_play = [s for s in d.suppliers if any(o.item in ids for o in s.offers)]
        primaries = []
        for item in ids:  # the supplier the catalogue makes each item's first choice
            supplier, _ = min(cat.sellers[item], key=lambda so: (so[1].unit_price, so[0].id))
            if supplier not in primaries:
                primaries.append(supplier)
        ranked = [*primaries, *(s for s in in_play if s not in primaries)]
        drifted: dict[str, int] = {}
        drift_texts: dict[str, str] = {}
        count = min(tier.depth, len(ranked))
        chosen = rng.sample(primaries, min(count, len(primaries)))
        chosen += rng.sample([s for s in ranked if s not in chosen], count - len(chosen))
        for supplier in chosen:
            grow = rng.randint(2, MAX_DRIFT)
            drifted[supplier.id] = supplier.lead_time + grow
            lead[supplier.id] = drifted[supplier.id]
            drift_texts[supplier.id] = fill(rng.choice(d.texts.drift_notices), supplier=supplier.name,
                                            days=drifted[supplier.id], old=supplier.lead_time, period=d.period_noun)
        late = tier.noise > 0
        initial = {}
        for item in items:
            worst = min(lead[s.id] + (s.max_delay if late else 0) for s, _ in cat.sellers[item.id])
            cover = min(horizon, worst + rng.randint(1, 3))
            qty = sum(high[item.id][1:cover + 1])
            use_by = None if item.shelf_life is None else min(item.shelf_life - 1, cover + rng.randint(1, 3))
            initial[item.id] = [Lot(qty, use_by)]
        ep = Episode(horizon=horizon, items=ids, mean=mean, forecast=forecast, low=low, high=high, demand=demand,
                     safety=safety, lead=lead, drifted=drifted, delay=delay, late_active=late, initial=initial,
                     capacity={loc.id: math.inf for loc in d.locations}, listed={}, drift_texts=drift_texts,
                     event=event, po_start=rng.randint(40, 89) * 100)
        # Storage: sized on the reference's peak; on hidden-constraint tiers one location holds less than listed.
        first = reference_plan(ep, cat)
        peak = first.peak
        spread, squeeze = {}, {}
        for loc in d.locations:
            spread[loc.id], squeeze[loc.id] = rng.uniform(1.6, 2.1), rng.uniform(1.06, 1.2)
        used = sorted({cat.items[i].location for i in ids})
        for loc in d.locations:
            top = max(peak.get(loc.id, 0.0), 1.0)
            ep.listed[loc.id] = nice_ceil(top * spread[loc.id])
            ep.capacity[loc.id] = ep.listed[loc.id]
        squeezed = rng.choice(used)
        reason = rng.choice(cat.locations[squeezed].capacity_reasons)
        if tier.hidden_constraints:
            ep.squeezed = squeezed
            ep.capacity[squeezed] = nice_ceil(max(peak.get(squeezed, 0.0), 1.0) * squeeze[squeezed])
            ep.squeeze_reason = fill(reason, location=cat.locations[squeezed].name)
        self._records(ep, items, rng, tier)
        self._messages(ep, items, event, first.orders, rng, tier)
        return ep

    def _records(self, ep: Episode, items: list, rng: random.Random, tier: TierProfile) -> None:
        """Noisy tiers: stock records wrong (phantom stock mostly) or not shown; forecasts blurred or gappy."""
        p = self.perturb
        for item in items:
            qty = ep.initial[item.id][0].qty
            if p.chance(tier.noise * RECORD_SHARE):
                if rng.random() < 0.7:
                    ep.book_offset[item.id] = max(1, round(qty * rng.uniform(0.3, 0.7)))
                else:
                    ep.book_offset[item.id] = -max(1, round(qty * rng.uniform(0.2, 0.4)))
            elif p.chance(tier.drop * RECORD_SHARE):
                ep.withheld.add(item.id)
            shown: list[float | None] = list(ep.forecast[item.id])
            if p.chance(tier.noise):
                shown = [f * (1 + rng.uniform(-0.25, 0.25)) for f in shown]
            if p.chance(tier.drop):
                shown = [None if t and rng.random() < 0.5 else f for t, f in enumerate(shown)]
            ep.forecast_shown[item.id] = shown

    def _messages(self, ep: Episode, items: list, event: tuple[str, int, int] | None,
                  planned: list[tuple[int, str, str, int]], rng: random.Random, tier: TierProfile) -> None:
        d, cat = self.domain, self.catalogue()
        texts = d.texts
        names = {i.id: i for i in items}
        pool: list[dict[str, Any]] = []
        for item in items:  # demand rumours: nothing of them is in the forecast
            first = rng.randint(ep.horizon - 6, ep.horizon - 1)
            last = min(ep.horizon, first + 1)
            pct = rng.choice((60, 80, 100, 150))
            pool.append(self._signal(rng, item, pct, first, last, day=rng.randint(1, max(1, first - 3))))
        for item in items:  # promotions, timed when the item is due to be ordered; their minimum is a trap
            days = [(day, supplier) for day, it, supplier, _ in planned if it == item.id]
            if days:
                day, sid = rng.choice(days)
                supplier = cat.suppliers[sid]
            else:
                day, (supplier, _) = rng.randint(1, ep.horizon - 4), rng.choice(cat.sellers[item.id])
            offer = cat.offers[(supplier.id, item.id)]
            pct = rng.choice((10, 15, 20, 25))
            need = sum(ep.high[item.id][day + supplier.lead_time:]) + ep.safety[item.id]
            minimum = max(offer.min_order, math.ceil(nice_ceil(max(need, 1) * rng.uniform(1.6, 2.2))))
            text = fill(rng.choice(texts.promotions), supplier=supplier.name, item=item.name, pct=pct,
                        quantity=minimum, unit=item.unit)
            pool.append({"day": day, "kind": "offer", "text": text, "supplier": supplier.id, "item": item.id,
                         "pct": pct, "quantity": minimum})
        chosen = self.perturb.inject([], pool, tier.distractors)
        if tier.distractors and event is not None:  # the true event is announced too (the forecast has it)
            item = names[event[0]]
            chosen.append(self._signal(rng, item, event[2], event[1], event[1] + 1,
                                       day=max(1, event[1] - rng.randint(2, 4))))
        for message in chosen:
            if message["kind"] == "offer":
                ep.promos.append(Promo(message["day"], message["supplier"], message["item"], message["pct"],
                                       message["quantity"], message["text"]))
            ep.messages.setdefault(message["day"], []).append(message)
        if not tier.hidden_constraints:
            for supplier, text in ep.drift_texts.items():
                ep.messages.setdefault(1, []).insert(0, {"day": 1, "kind": "notice", "text": text,
                                                         "supplier": supplier})

    def _signal(self, rng: random.Random, item: Any, pct: int, first: int, last: int, day: int) -> dict[str, Any]:
        text = fill(rng.choice(self.domain.texts.demand_signals), item=item.name, pct=pct, first_day=first,
                    last_day=last, unit=item.unit)
        return {"day": day, "kind": "signal", "text": text, "item": item.id, "pct": pct, "first_day": first,
                "last_day": last}

    # ---- stepping -----------------------------------------------------------------------------------------
    def apply(self, action: Any) -> Outcome:
        tools = self.domain.tools
        if action.action is None:
            names = ", ".join(tools.model_dump().values())
            return Outcome(f"Say which action to take: one of {names}.", error="missing_action")
        handler = {tools.check: self._check, tools.notices: self._read_notices, tools.order: self._order,
                   tools.cancel: self._cancel, tools.advance: self._advance}[action.action]
        return handler(action)

    def _planned(self, action: Any) -> Outcome | None:
        if action.item is None:
            return Outcome(f"{action.action} needs an item.", error="missing_item")
        if action.item not in self._truth.episode.items:
            return Outcome(f"{action.item} is not one of the items planned this horizon "
                           f"({', '.join(self._truth.episode.items)}).", error="not_planned")
        return None

    def _check(self, action: Any) -> Outcome:
        refused = self._planned(action)
        if refused:
            return refused
        item, stock, ep = action.item, self._stock, self._truth.episode
        before = self._book(item)
        self._checked.add(item)
        unit = self.catalogue().items[item].unit
        shown = "not shown" if before is None else str(before)
        text = (f"{item}: {stock.on_hand(item)} {unit} counted on hand (the records showed {shown}); exact "
                f"forecast from {self.domain.period_noun} {min(stock.day, ep.horizon)} now in view.")
        self._post({"day": stock.day, "kind": "count", "text": text, "item": item})
        return Outcome(text)

    def _read_notices(self, action: Any) -> Outcome:
        if action.supplier is None:
            return Outcome(f"{action.action} needs a supplier.", error="missing_supplier")
        supplier = self.catalogue().suppliers[action.supplier]
        ep = self._truth.episode
        lines = [fill(n, supplier=supplier.name) for n in supplier.notices]
        if supplier.id in ep.drifted:
            lines.insert(0, ep.drift_texts[supplier.id])
            self._known_lead[supplier.id] = ep.lead[supplier.id]
        fresh = [f"[{supplier.id}] {line}" for line in lines if f"[{supplier.id}] {line}" not in self._notices]
        self._notices.extend(fresh)
        return Outcome(f"{action.action} {supplier.id}: {len(lines)} notice(s), {len(fresh)} new.")

    def _order(self, action: Any) -> Outcome:
        refused = self._planned(action)
        if refused:
            return refused
        if action.supplier is None:
            return Outcome(f"{action.action} needs a supplier.", error="missing_supplier")
        if action.quantity is None or action.quantity <= 0:
            return Outcome(f"{action.action} needs a quantity of at least 1.", error="missing_quantity")
        cat, stock, ep = self.catalogue(), self._stock, self._truth.episode
        item, supplier, qty = action.item, action.supplier, action.quantity
        offer = cat.offers.get((supplier, item))
        if offer is None:
            sellers = ", ".join(s.id for s, _ in cat.sellers[item])
            return Outcome(f"{supplier} does not sell {item} (it is sold by {sellers}).", error="not_offered")
        unit = cat.items[item].unit
        if qty < offer.min_order:
            return Outcome(f"{supplier} takes orders of {item} from {offer.min_order} {unit}.", error="below_minimum")
        spec = cat.items[item]
        room = stock.room(item)
        if qty > room + 1e-6:
            location = cat.locations[spec.location]
            fits = max(0, math.floor(room + 1e-6))
            if ep.squeezed == location.id and ep.capacity[location.id] < ep.listed[location.id]:
                self._revealed.add(location.id)
                return Outcome(f"Refused: {location.id} can take only {ep.capacity[location.id]:g} "
                               f"{location.space_unit} at present ({ep.squeeze_reason}), not the "
                               f"{ep.listed[location.id]:g} listed; {fits} {unit} of {item} still fit.",
                               error="over_capacity")
            return Outcome(f"Refused: {location.id} has room for {fits} more {unit} of {item} (stock on hand and "
                           "open orders count).", error="over_capacity")
        order = stock.place(item, supplier, qty)
        promo = " (promotional price)" if order.promo else ""
        return Outcome(f"{order.id}: {qty} {unit} of {item} from {supplier} at {order.unit_price:g} "
                       f"{self.domain.currency} each{promo}, fee {cat.suppliers[supplier].order_fee:g}; promised for "
                       f"the start of {self.domain.period_noun} {order.due}.")

    def _cancel(self, action: Any) -> Outcome:
        if not action.order_id:
            return Outcome(f"{action.action} needs an order_id.", error="missing_order")
        order = next((o for o in self._stock.orders if o.id == action.order_id), None)
        if order is None:
            return Outcome(f"There is no order {action.order_id}.", error="unknown_order")
        if order.status != "open":
            return Outcome(f"{order.id} is {order.status}: only open orders can be cancelled.", error="not_open")
        fee = self._stock.cancel(order)
        return Outcome(f"{order.id} cancelled" + (f"; its fee of {fee:g} is kept." if fee else ", free of charge."))

    def _advance(self, action: Any) -> Outcome:
        stock, ep = self._stock, self._truth.episode
        days = max(1, min(action.days or 1, ep.horizon - stock.day + 1))
        seen = len(stock.events)
        for _ in range(days):
            stock.advance()
            for event in stock.events[seen:]:
                self._post(self._event_message(event))
            seen = len(stock.events)
            if stock.over:
                break
            for message in ep.messages.get(stock.day, []):
                self._post(message)
                if message["kind"] == "notice":
                    self._known_lead[message["supplier"]] = ep.lead[message["supplier"]]
        noun = self.domain.period_noun
        if stock.over:
            self._finished_by_agent = True
            verdict = self._score()
            return Outcome(f"The horizon is over. Total cost {verdict.total_cost:.2f} {self.domain.currency} "
                           f"(reference {verdict.reference_cost:.2f}); " +
                           ("solved." if verdict.solved else "not solved."), terminal=True, solved=verdict.solved)
        return Outcome(f"{days} {noun}(s) passed; now {noun} {stock.day} of {ep.horizon}.")

    def _event_message(self, event: dict[str, Any]) -> dict[str, Any]:
        unit = self.catalogue().items[event["item"]].unit
        if event["kind"] == "arrival":
            late = f", {event['late']} late" if event["late"] else ""
            text = (f"{event['order']} arrived: {event['units']} {unit} of {event['item']} from "
                    f"{event['supplier']}{late}.")
        elif event["kind"] == "stock-out":
            text = f"stock-out: {event['item']} was {event['units']} {unit} short."
        else:
            text = f"expired: {event['units']} {unit} of {event['item']} thrown away."
        return {**event, "text": text}

    def _post(self, message: dict[str, Any]) -> None:
        self._feed.append(message)

    # ---- scoring ------------------------------------------------------------------------------------------
    def _score(self) -> Verdict:
        if self._verdict is not None:
            return self._verdict
        stock, ep, cat = self._stock, self._truth.episode, self.catalogue()
        if not stock.over:
            stock.run_out()  # the budget ran out: the rest of the horizon passes with no more orders
        reference = self._truth.reference.cost
        slack = SLACK_SHARE * sum(cat.best[i] * sum(ep.forecast[i][1:]) for i in ep.items)
        threshold = reference * (1 + COST_MARGIN) + slack
        total = stock.ledger.total
        fill_rate = stock.fill_rate()
        critical = tuple(stock.critical_short())
        solved = self._finished_by_agent and not critical and total <= threshold + 1e-9
        cost = 1.0 if total <= reference + 1e-9 else max(0.0, 1.0 - (total - reference) / (reference + slack))
        self._verdict = Verdict(
            service=WEIGHTS["service"] * max(0.0, 1.0 - SERVICE_STEEPNESS * (1.0 - fill_rate)),
            cost=WEIGHTS["cost"] * cost, outcome=WEIGHTS["outcome"] * solved, solved=solved,
            total_cost=round(total, 4), reference_cost=round(reference, 4), threshold=round(threshold, 4),
            fill=round(fill_rate, 4), critical_short=critical, finished=self._finished_by_agent)
        return self._verdict

    # ---- views --------------------------------------------------------------------------------------------
    def _book(self, item: str) -> int | None:
        """What the stock records show for an item (None: not shown)."""
        ep = self._truth.episode
        if item in self._checked:
            return self._stock.on_hand(item)
        if item in ep.withheld:
            return None
        return max(0, self._stock.on_hand(item) + ep.book_offset.get(item, 0))

    def _exact(self, item: str) -> bool:
        ep = self._truth.episode
        return item in self._checked or (item not in ep.withheld and not ep.book_offset.get(item))

    def _forecast_view(self, item: str) -> list[list[Any]]:
        """[period, expected, low, high] from now to the horizon (the records' view until the item is counted)."""
        ep, checked = self._truth.episode, item in self._checked
        rows = self._forecasts.get((item, checked))
        if rows is None:
            v = self.catalogue().items[item].variability
            source = ep.forecast[item] if checked else ep.forecast_shown[item]
            rows = [[t, None, None, None] if source[t] is None else
                    [t, round(source[t], 1), math.floor(source[t] * (1 - v)), math.ceil(source[t] * (1 + v))]
                    for t in range(1, ep.horizon + 1)]
            self._forecasts[(item, checked)] = rows
        return rows[min(self._stock.day, ep.horizon) - 1:]

    def observe(self) -> dict[str, Any]:
        stock, ep, cat = self._stock, self._truth.episode, self.catalogue()
        items = []
        for item in ep.items:
            spec = cat.items[item]
            view: dict[str, Any] = {
                "id": item, "location": spec.location, "critical": spec.critical, "safety_level": ep.safety[item],
                "on_hand": self._book(item), "on_order": sum(o.qty for o in stock.open_orders(item)),
                "forecast": self._forecast_view(item),
            }
            if spec.shelf_life is not None:
                view["lots"] = ([[lot.qty, lot.use_by] for lot in stock.lots[item]] if self._exact(item) else None)
            items.append(view)
        suppliers = [{"id": s.id, "lead_time": s.lead_time, "known_lead_time": self._known_lead.get(s.id),
                      "on_time_rate": s.on_time_rate, "max_delay": s.max_delay} for s in self._in_play]
        locations = []
        for loc in self._locations:
            shown = ep.capacity[loc] if loc in self._revealed else ep.listed[loc]
            locations.append({"id": loc, "capacity": shown, "booked": round(stock.booked(loc), 2),
                              "space_unit": cat.locations[loc].space_unit})
        orders = [{"id": o.id, "item": o.item, "supplier": o.supplier, "quantity": o.qty, "unit_price": o.unit_price,
                   "placed": o.placed, "due": o.due} for o in stock.open_orders()]
        return {
            "day": stock.day, "last_day": ep.horizon, "items": items, "suppliers": suppliers,
            "locations": locations, "orders": orders, "feed": self._feed[-FEED_WINDOW:],
            "notices": list(self._notices), "costs": stock.ledger.view(),
        }

    def oracle_view(self) -> Truth:
        truth = self._truth
        if truth.oracle_plan is None:
            truth.oracle_plan = oracle_plan(truth, self.catalogue(), self)
        return truth

    def secret_values(self) -> list[str]:
        """Hidden constraints: drift notices not yet announced and the usable space of a squeezed location."""
        ep = self._truth.episode
        if not self.tier.hidden_constraints:
            return []
        return [*ep.drift_texts.values(), *([ep.squeeze_reason] if ep.squeezed else [])]


# ---- plans the engine plays on an episode's draws ------------------------------------------------------------
def stock_belief(stock: Stock, cat: Catalogue, exact: bool) -> Belief:
    """A planner's belief read from the simulation: the truth, with either the real demand and arrivals (exact)
    or the forecast's upper bounds and the latest promised arrival (the careful reference)."""
    ep, day = stock.ep, stock.day
    items = []
    for item in ep.items:
        spec = cat.items[item]
        if exact:
            incoming = [(o.arrives, o.qty) for o in stock.open_orders(item)]
            demand = {t: ep.demand[item][t] for t in range(day, ep.horizon + 1)}
        else:
            incoming = [(o.placed + ep.lead[o.supplier] + (cat.suppliers[o.supplier].max_delay if ep.late_active
                                                            else 0), o.qty) for o in stock.open_orders(item)]
            demand = {t: ep.high[item][t] for t in range(day, ep.horizon + 1)}
        options = []
        for supplier, offer in cat.sellers[item]:
            sid, lead = supplier.id, ep.lead[supplier.id]
            if exact:
                buffer = 0
                arrival = Arrival(lead, delays=tuple(ep.delay[sid]) if ep.late_active else None)
            else:
                buffer = supplier.max_delay if ep.late_active else 0
                arrival = Arrival(lead, buffer)
            options.append(Option(sid, offer.min_order, supplier.order_fee, cat.price_steps(sid, item), arrival,
                                  float(buffer)))
        items.append(ItemBelief(
            id=item, location=spec.location, space=spec.space, holding=spec.holding_cost,
            shelf_life=spec.shelf_life, safety=ep.safety[item], usual=cat.cycle[item] * cat.mid[item],
            cycle=cat.cycle[item], lots=[(lot.qty, lot.use_by) for lot in stock.lots[item]], incoming=incoming,
            demand=demand, options=options))
    locations = {cat.items[i].location for i in ep.items}
    return Belief(day, ep.horizon, items, {loc: ep.capacity[loc] for loc in locations},
                  {loc: stock.booked(loc) for loc in locations})


def play(ep: Episode, cat: Catalogue, exact: bool) -> Plan:
    """Run the planner on the episode's draws: order as planned, then move on to its next decision period."""
    stock = Stock(ep, cat)
    orders: list[tuple[int, str, str, int]] = []
    visits = 0
    locations = {cat.items[i].location for i in ep.items}
    peak = {loc: stock.booked(loc) for loc in locations}
    while not stock.over:
        visits += 1
        for _ in range(ROUNDS_PER_PERIOD):  # an order can show the next gap is due now too: plan again
            placed = False
            for planned in plan_day(stock_belief(stock, cat, exact)):
                if planned.qty > stock.room(planned.item) + 1e-6:
                    continue
                stock.place(planned.item, planned.supplier, planned.qty)
                orders.append((stock.day, planned.item, planned.supplier, planned.qty))
                loc = cat.items[planned.item].location
                peak[loc] = max(peak[loc], stock.booked(loc))
                placed = True
            if not placed:
                break
        until = next_decision(stock_belief(stock, cat, exact))
        while not stock.over and stock.day < until:
            stock.advance()
    return Plan(orders, visits, stock.ledger.total, stock.critical_short(), peak)


def reference_plan(ep: Episode, cat: Catalogue) -> Plan:
    return play(ep, cat, exact=False)


def oracle_steps(plan: Plan, env: InventoryEnvironment, tier: TierProfile) -> int:
    """Steps the oracle's honest path takes to play `plan`."""
    days = sorted({day for day, *_ in plan.orders})
    advances = len(days) + (not days or days[0] != 1)
    checks = len(env._truth.episode.items) if (tier.noise > 0 or tier.drop > 0) else 0
    reads = len({supplier for _, _, supplier, _ in plan.orders}) if tier.hidden_constraints else 0
    return checks + reads + len(plan.orders) + advances


def oracle_plan(truth: Truth, cat: Catalogue, env: InventoryEnvironment) -> Plan:
    """The cheaper of the reference and the clairvoyant plan (real demand, real arrivals) that runs out of no
    critical item and fits the step budget; the reference when none is better."""
    budget = env.state.step_budget
    best = truth.reference
    exact = play(truth.episode, cat, exact=True)
    if (not exact.critical_short and exact.cost < best.cost
            and oracle_steps(exact, env, env.tier) <= budget):
        best = exact
    return best
