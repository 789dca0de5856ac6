"""Reference policies of the inventory family: the privileged oracle, a shallow heuristic that takes the
dashboard at face value (the baseline a trained agent must beat), and a careful planner that earns what it
knows by honest actions (observations only: evidence that the bar is within an honest agent's reach). All
read the domain through the environment, never a catalogue of their own."""

from __future__ import annotations

import math
from typing import Any

from openadapt.families.inventory.engine import ROUNDS_PER_PERIOD
from openadapt.families.inventory.planner import Arrival, Belief, ItemBelief, Option, next_decision, plan_day
from openadapt.kit import Policy


class InventoryOracle(Policy):
    """Reads the episode's truth and plays the cheaper of two plans the engine computed on its draws (the
    reference, or the clairvoyant plan that knows the real demand and delays) along the honest path: on the
    noisy tiers it counts every item first, on the hidden-constraint tiers it reads the notices of every supplier
    it will order from, then it places each period's orders and moves on to the next period that has one."""

    name = "oracle"
    privileged = True

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        truth = env.oracle_view()
        tier = env.tier
        self.checks = list(truth.episode.items) if (tier.noise > 0 or tier.drop > 0) else []
        suppliers = list(dict.fromkeys(s for _, _, s, _ in truth.oracle_plan.orders))
        self.reads = suppliers if tier.hidden_constraints else []
        self.queue = list(truth.oracle_plan.orders)
        self.last_day = truth.episode.horizon

    def act(self, observation: Any) -> Any:
        make, tools = self.env.action_type, self.env.domain.tools
        if self.checks:
            return make(action=tools.check, item=self.checks.pop(0))
        if self.reads:
            return make(action=tools.notices, supplier=self.reads.pop(0))
        day = observation.day
        if self.queue and self.queue[0][0] == day:
            _, item, supplier, qty = self.queue.pop(0)
            return make(action=tools.order, item=item, supplier=supplier, quantity=qty)
        until = self.queue[0][0] if self.queue else self.last_day + 1
        return make(action=tools.advance, days=max(1, until - day))


def observed_belief(env: Any, obs: Any, *, robust: bool, learned_leads: bool, signals: bool) -> Belief:
    """A planner's belief built from the dashboard alone. `robust`: allow each supplier's worst delay;
    `learned_leads`: use the lead times the agent was told over the catalogue's; `signals`: add the demand the
    feed's signals announce on top of the forecast."""
    cat = env.catalogue()
    day, horizon = obs.day, obs.last_day
    told = {s["id"]: s.get("known_lead_time") for s in obs.suppliers}
    bumps: dict[str, dict[int, float]] = {}
    if signals:
        for message in obs.feed:
            if message.get("kind") == "signal":
                days = range(message["first_day"], message["last_day"] + 1)
                for t in days:
                    bumps.setdefault(message["item"], {})[t] = 1 + message["pct"] / 100
    items = []
    for view in obs.items:
        item = view["id"]
        spec = cat.items[item]
        highs = {row[0]: row[3] for row in view["forecast"] if row[3] is not None}
        fallback = (sum(highs.values()) / len(highs)) if highs else cat.mid[item] * (1 + spec.variability)
        demand = {}
        for t in range(day, horizon + 1):
            value = highs.get(t, fallback)
            demand[t] = math.ceil(value * bumps.get(item, {}).get(t, 1.0))
        if view.get("lots") is not None:
            lots = [(qty, use_by) for qty, use_by in view["lots"]]
        else:
            on_hand = view["on_hand"] if view["on_hand"] is not None else view["safety_level"]
            lots = [(on_hand, None)]
        incoming = []
        for order in obs.orders:
            if order["item"] == item:
                delay = cat.suppliers[order["supplier"]].max_delay if robust else 0
                lead = told.get(order["supplier"]) if learned_leads else None
                due = order["placed"] + lead if lead else order["due"]
                incoming.append((due + delay, order["quantity"]))
        options = []
        for supplier, offer in cat.sellers[item]:
            lead = told.get(supplier.id) if learned_leads and told.get(supplier.id) else supplier.lead_time
            buffer = supplier.max_delay if robust else 0
            options.append(Option(supplier.id, offer.min_order, supplier.order_fee,
                                  cat.price_steps(supplier.id, item), Arrival(lead, buffer), float(buffer)))
        items.append(ItemBelief(
            id=item, location=spec.location, space=spec.space, holding=spec.holding_cost,
            shelf_life=spec.shelf_life, safety=view["safety_level"], usual=cat.cycle[item] * cat.mid[item],
            cycle=cat.cycle[item], lots=lots, incoming=incoming, demand=demand, options=options))
    capacity = {loc["id"]: float(loc["capacity"]) for loc in obs.locations}
    booked = {loc["id"]: float(loc["booked"]) for loc in obs.locations}
    return Belief(day, horizon, items, capacity, booked)


class _PlannerPolicy(Policy):
    """Shared driver: place the planner's orders for this period one per step, then move on to the next period
    in which it would order."""

    robust = True
    learned_leads = True
    signals = False

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        self.tools = env.domain.tools
        self.refused: set[str] = set()
        self.placed: dict[tuple[int, str], int] = {}

    def _belief(self, obs: Any) -> Belief:
        return observed_belief(self.env, obs, robust=self.robust, learned_leads=self.learned_leads,
                               signals=self.signals)

    def _plan(self, obs: Any) -> Any:
        make = self.env.action_type
        belief = self._belief(obs)
        for order in plan_day(belief):
            key = f"{obs.day}:{order.item}:{order.supplier}:{order.qty}"
            if key not in self.refused and self.placed.get((obs.day, order.item), 0) < ROUNDS_PER_PERIOD:
                self._last = key
                self.placed[(obs.day, order.item)] = self.placed.get((obs.day, order.item), 0) + 1
                return make(action=self.tools.order, item=order.item, supplier=order.supplier, quantity=order.qty)
        self._last = None
        return make(action=self.tools.advance, days=max(1, next_decision(belief) - obs.day))

    def _learn(self, obs: Any) -> None:
        if obs.error and getattr(self, "_last", None):
            self.refused.add(self._last)


class FaceValueHeuristic(_PlannerPolicy):
    """What a shallow agent does: it runs the textbook order-up-to policy on the dashboard at face value. It
    trusts the stock records (a count not shown is taken to be the safety level), plans on the lead times the
    dashboard shows (the catalogue's, or the latest it was told) and on on-time delivery, adds every demand
    signal in the feed on top of the forecast, takes a promotion offered today for an item it is about to
    order, never counts an item and never reads a notice."""

    name = "heuristic"
    robust = False
    signals = True

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        self.taken: set[str] = set()

    def act(self, observation: Any) -> Any:
        self._learn(observation)
        make = self.env.action_type
        due = {order.item for order in plan_day(self._belief(observation))}
        for message in observation.feed:
            key = f"{message.get('day')}:{message.get('supplier')}:{message.get('item')}"
            if (message.get("kind") == "offer" and message["day"] == observation.day and message["item"] in due
                    and key not in self.taken):
                self.taken.add(key)
                self._last = None
                return make(action=self.tools.order, item=message["item"], supplier=message["supplier"],
                            quantity=message["quantity"])
        return self._plan(observation)


class CarefulPlanner(_PlannerPolicy):
    """An honest careful agent (observations only): from ECI 2 it counts every item before planning and allows
    for each supplier's worst delay; from ECI 4 it reads the notices of every supplier of the items in play; it
    plans on the lead times it was told, ignores demand signals and promotions, and learns storage limits from
    refusals. It plays the engine's reference policy, and shows the bar is within an honest agent's reach."""

    name = "careful"

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        eci = observation.eci
        self.robust = eci >= 2
        self.checks = [view["id"] for view in observation.items] if eci >= 2 else []
        self.reads = [s["id"] for s in observation.suppliers] if eci >= 4 else []

    def act(self, observation: Any) -> Any:
        self._learn(observation)
        make = self.env.action_type
        if self.checks:
            return make(action=self.tools.check, item=self.checks.pop(0))
        if self.reads:
            return make(action=self.tools.notices, supplier=self.reads.pop(0))
        return self._plan(observation)
