"""The replenishment planner every reference policy shares: a periodic-review order-up-to policy that orders
"at the last moment" from the supplier with the best landed cost.

It plans from a `Belief` (what some planner holds true: lots on hand, orders in transit and when they will come,
the demand to plan for, each supplier's arrival for an order placed in a period, the storage room). Fed with the
truth and the forecast's upper bounds it is the engine's reference (a careful planner); fed with the truth and
the real demand it is the clairvoyant plan; fed with the dashboard at face value it is the shallow heuristic.

For each item it projects the stock (first-expiry-first-out, lots expiring, lost sales) and finds the first
period `t*` with a shortfall (or, at the end of the horizon, stock below the safety level). Among the suppliers
whose order placed now would arrive by `t*` it takes the one with the lowest landed unit cost (price at the usual
quantity, the order fee spread over it, and holding for the periods of lateness it plans for); it orders now only
when ordering next period from that supplier would be too late. If no supplier can arrive in time any more, the
fastest one is used now. The quantity covers every shortfall from the arrival through `cycle` periods (or to the
end of the horizon, plus the safety level), rounded up to the minimum order, up to a price break within 25%
unless the order is the horizon's last, and down to the room left in the location.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

BREAK_STRETCH = 1.25  # round up to a price break at most this far above the quantity needed


@dataclass(frozen=True)
class Arrival:
    """When an order placed in a period arrives, as a planner believes: lead time plus an allowance for delay,
    or (clairvoyant) plus the delay really drawn for that period."""

    lead: int
    buffer: int = 0
    delays: tuple[int, ...] | None = None

    def __call__(self, day: int) -> int:
        drawn = self.delays[day] if self.delays is not None and day < len(self.delays) else 0
        return day + self.lead + self.buffer + drawn


@dataclass
class Option:
    """One way to buy an item, as the planner believes it."""

    supplier: str
    moq: int
    fee: float
    steps: list[tuple[int, float]]  # (minimum quantity, unit price), the list price first
    arrival: Callable[[int], int]  # the period an order placed in period d arrives in
    buffer: float = 0.0  # periods of lateness the planner allows for

    def price(self, qty: int) -> float:
        price = self.steps[0][1]
        for minimum, step in self.steps[1:]:
            if qty >= minimum:
                price = step
        return price


@dataclass
class ItemBelief:
    id: str
    location: str
    space: float
    holding: float
    shelf_life: int | None
    safety: int
    usual: float  # the usual order quantity (cycle periods of mid-range demand): scores suppliers
    cycle: int
    lots: list[tuple[int, int | None]]  # (units, last usable period)
    incoming: list[tuple[int, int]]  # (arrival period, units) of orders in transit
    demand: dict[int, int]  # planning demand per period, today .. horizon
    options: list[Option] = field(default_factory=list)


@dataclass
class Belief:
    day: int
    horizon: int
    items: list[ItemBelief]
    capacity: dict[str, float]
    booked: dict[str, float]


@dataclass(frozen=True)
class PlannedOrder:
    item: str
    supplier: str
    qty: int


def project(item: ItemBelief, start: int, horizon: int,
            extra: tuple[tuple[int, int], ...] = ()) -> tuple[dict[int, int], dict[int, int]]:
    """End-of-period stock and shortfall for periods start..horizon: arrivals at the start of a period (a late
    order believed overdue comes next period), demand served from the lots that expire first, expiry."""
    lots = sorted(([q, u] for q, u in item.lots if q > 0), key=lambda x: (x[1] is None, x[1] or 0))
    arrivals: dict[int, int] = {}
    for day, qty in (*item.incoming, *extra):
        day = max(day, start + 1)
        arrivals[day] = arrivals.get(day, 0) + qty
    stock: dict[int, int] = {}
    short: dict[int, int] = {}
    for t in range(start, horizon + 1):
        if t in arrivals:
            lots.append([arrivals[t], None if item.shelf_life is None else t + item.shelf_life - 1])
            lots.sort(key=lambda x: (x[1] is None, x[1] or 0))
        need = item.demand.get(t, 0)
        for lot in lots:
            take = min(lot[0], need)
            lot[0] -= take
            need -= take
            if need == 0:
                break
        short[t] = need
        lots = [lot for lot in lots if lot[0] > 0 and (lot[1] is None or lot[1] > t)]
        stock[t] = sum(lot[0] for lot in lots)
    return stock, short


def gap_from(item: ItemBelief, belief: Belief, stock: dict[int, int], short: dict[int, int],
             start: int) -> int | None:
    """The first period from `start` on with a shortfall (or the horizon's end when the final stock is below
    safety). Shortfalls before `start` (the earliest an order can arrive) cannot be helped any more."""
    gap = next((t for t in range(max(start, belief.day), belief.horizon + 1) if short[t] > 0), None)
    if gap is None and start <= belief.horizon and stock[belief.horizon] < item.safety:
        gap = belief.horizon
    return gap


def earliest(item: ItemBelief, day: int) -> int:
    return min((o.arrival(day) for o in item.options), default=day + 1)


def score(option: Option, item: ItemBelief) -> tuple[float, str]:
    qty = max(option.moq, math.ceil(item.usual))
    return (option.price(qty) + option.fee / qty + item.holding * option.buffer, option.supplier)


def choose(item: ItemBelief, gap: int, day: int, today: int, horizon: int) -> Option | None:
    """The supplier to order from in period `day` (None: not yet, or nothing useful)."""
    ok = [o for o in item.options if o.arrival(day) <= gap]
    if ok:
        best = min(ok, key=lambda o: score(o, item))
        if day < horizon and best.arrival(day + 1) <= gap:
            return None  # ordering next period is still in time
        return best
    if day != today or not item.options:
        return None
    fastest = min(item.options, key=lambda o: (o.arrival(day), score(o, item)))
    return fastest if fastest.arrival(day) <= horizon else None


def quantity(item: ItemBelief, option: Option, gap: int, belief: Belief, stock: dict[int, int],
             short: dict[int, int]) -> int:
    """Units to order now from `option`: see the module docstring."""
    arrive = option.arrival(belief.day)
    last = min(belief.horizon, max(arrive, gap) + item.cycle - 1)
    if item.shelf_life is not None:
        last = min(last, arrive + item.shelf_life - 1)
    need = sum(short[t] for t in range(arrive, last + 1) if t in short)
    if last == belief.horizon:
        need += max(0, item.safety - stock[belief.horizon])
    qty = max(need, option.moq)
    if last < belief.horizon:
        for minimum, _ in option.steps[1:]:
            if qty < minimum <= qty * BREAK_STRETCH:
                qty = minimum
    room = (belief.capacity.get(item.location, math.inf) - belief.booked.get(item.location, 0.0)) / item.space
    if qty > room:
        qty = math.floor(room + 1e-6)
    return qty if qty >= option.moq else 0


def plan_item(item: ItemBelief, belief: Belief) -> PlannedOrder | None:
    stock, short = project(item, belief.day, belief.horizon)
    gap = gap_from(item, belief, stock, short, earliest(item, belief.day))
    if gap is None:
        return None
    option = choose(item, gap, belief.day, belief.day, belief.horizon)
    if option is None or option.arrival(belief.day) > belief.horizon:
        return None
    qty = quantity(item, option, gap, belief, stock, short)
    return PlannedOrder(item.id, option.supplier, qty) if qty > 0 else None


def plan_day(belief: Belief) -> list[PlannedOrder]:
    """Today's orders, item by item (each one books its room before the next is planned)."""
    orders = []
    booked = dict(belief.booked)
    for item in belief.items:
        order = plan_item(item, Belief(belief.day, belief.horizon, belief.items, belief.capacity, booked))
        if order is not None:
            orders.append(order)
            booked[item.location] = booked.get(item.location, 0.0) + order.qty * item.space
    return orders


def next_decision(belief: Belief) -> int:
    """The next period after today in which the plan would order, with nothing new learned (horizon + 1: none)."""
    best = belief.horizon + 1
    for item in belief.items:
        stock, short = project(item, belief.day, belief.horizon)
        for day in range(belief.day + 1, min(best, belief.horizon + 1)):
            gap = gap_from(item, belief, stock, short, earliest(item, day))
            if gap is None:
                break
            option = choose(item, gap, day, day, belief.horizon)
            if option is not None:
                if option.arrival(day) <= belief.horizon:
                    best = min(best, day)
                break
    return best
