"""The inventory world: one episode's draws (`Episode`) and the simulation of stock, purchase orders and costs,
period by period (`Stock`). A simulation is a pure function of its episode and of the orders placed in it, so the
engine can replay any policy on the same demand (the reference, the clairvoyant plan, the agent's own run).

Timing of one period d: orders due in d arrive at its start; the agent acts; `advance` then serves d's demand from
the lots that expire first (what is missing is lost and costs the stock-out penalty), throws away lots whose last
usable period is d, and charges holding on what is left.

Costs (all in the domain's currency; `Ledger`): order fees; the premium of paying above the item's best available
price; holding; stock-out penalties; waste (expired units at the best price); and, at the end of the horizon, the
hand-over: stock on hand plus in transit above the item's safety level is excess (charged at the best price: the
period bought it and did not need it), stock on hand below the safety level costs half the stock-out penalty
per missing unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openadapt.families.inventory.domain import InventoryDomain, Item, Offer, Supplier

HANDOVER_SHORT_WEIGHT = 0.5


@dataclass
class Lot:
    qty: int
    use_by: int | None  # last period it can be used in; None: it keeps


@dataclass
class PurchaseOrder:
    id: str
    item: str
    supplier: str
    qty: int
    unit_price: float
    placed: int
    due: int  # the promised period (the catalogue lead time: a drift shows only on the supplier's notices)
    arrives: int  # the real period (true lead time + the delay drawn for its supplier and order period)
    status: str = "open"  # open, received, cancelled
    promo: bool = False


@dataclass(frozen=True)
class Promo:
    day: int
    supplier: str
    item: str
    pct: int
    min_qty: int
    text: str


@dataclass
class Ledger:
    fees: float = 0.0
    premium: float = 0.0
    holding: float = 0.0
    stockouts: float = 0.0
    waste: float = 0.0
    excess: float = 0.0
    handover: float = 0.0

    @property
    def total(self) -> float:
        return (self.fees + self.premium + self.holding + self.stockouts + self.waste + self.excess
                + self.handover)

    def view(self) -> dict[str, float]:
        parts = {k: round(v, 2) for k, v in vars(self).items()}
        parts["total"] = round(self.total, 2)
        return parts


@dataclass
class Episode:
    """Everything drawn at reset. The agent sees parts of it (noisily, on the noisy tiers); the simulation and
    the reference policies read the truth."""

    horizon: int
    items: list[str]
    mean: dict[str, float]
    forecast: dict[str, list[float]]  # expected demand, index 1..horizon (index 0 unused)
    low: dict[str, list[int]]
    high: dict[str, list[int]]
    demand: dict[str, list[int]]  # what really happens; always within [low, high]
    safety: dict[str, int]
    lead: dict[str, int]  # true lead time per supplier (drifted ones included)
    drifted: dict[str, int]  # supplier -> its drifted lead time
    delay: dict[str, list[int]]  # per supplier, the delay of an order placed in period d (index 0..horizon)
    late_active: bool
    initial: dict[str, list[Lot]]
    capacity: dict[str, float]  # true usable capacity per location
    listed: dict[str, float]  # what the site's master data lists
    squeezed: str | None = None  # the location whose usable capacity is below its listed one
    squeeze_reason: str = ""
    promos: list[Promo] = field(default_factory=list)
    messages: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # feed messages by period
    drift_texts: dict[str, str] = field(default_factory=dict)  # supplier -> its drift notice
    event: tuple[str, int, int] | None = None  # a real demand event (item, first period, rise %): in the forecast
    book_offset: dict[str, int] = field(default_factory=dict)  # record error per item (noisy tiers)
    withheld: set[str] = field(default_factory=set)  # items whose count the records do not show
    forecast_shown: dict[str, list[float | None]] = field(default_factory=dict)  # noisy tiers' forecast view
    po_start: int = 1000


class Catalogue:
    """The domain's static facts, indexed for the simulation and the planners."""

    def __init__(self, domain: InventoryDomain):
        self.domain = domain
        self.items: dict[str, Item] = {i.id: i for i in domain.items}
        self.suppliers: dict[str, Supplier] = {s.id: s for s in domain.suppliers}
        self.locations = {loc.id: loc for loc in domain.locations}
        self.sellers = domain.sellers()
        self.offers: dict[tuple[str, str], Offer] = {(s.id, o.item): o for s in domain.suppliers for o in s.offers}
        self.best: dict[str, float] = {
            item: min(min([o.unit_price, *(b.unit_price for b in o.price_breaks)]) for _, o in pairs)
            for item, pairs in self.sellers.items() if pairs}
        self.mid = {i.id: (i.demand[0] + i.demand[1]) / 2 for i in domain.items}
        self.cycle = {i.id: self._cycle(i) for i in domain.items}

    def _cycle(self, item: Item) -> int:
        """Periods one regular order covers: the economic order interval of the item's cheapest supplier,
        bounded to 2..6 periods (a static fact every planner can compute from the catalogue)."""
        pairs = self.sellers[item.id]
        if not pairs:
            return 3
        supplier, _ = min(pairs, key=lambda so: (so[1].unit_price, so[0].id))
        fee = max(supplier.order_fee, 1e-9)
        interval = (2 * fee / (item.holding_cost * self.mid[item.id])) ** 0.5
        cycle = max(2, min(6, round(interval)))
        if item.shelf_life is not None:
            cycle = min(cycle, max(2, item.shelf_life - supplier.max_delay - 2))
        return cycle

    def price_steps(self, supplier: str, item: str) -> list[tuple[int, float]]:
        """(minimum quantity, unit price) steps of an offer, the list price first."""
        offer = self.offers[(supplier, item)]
        return [(offer.min_order, offer.unit_price), *((b.min_quantity, b.unit_price) for b in offer.price_breaks)]

    def unit_price(self, supplier: str, item: str, qty: int) -> float:
        price = self.offers[(supplier, item)].unit_price
        for minimum, step in self.price_steps(supplier, item)[1:]:
            if qty >= minimum:
                price = step
        return price


class Stock:
    """The physical simulation of one episode: lots, purchase orders, costs. Deterministic."""

    def __init__(self, ep: Episode, cat: Catalogue):
        self.ep, self.cat = ep, cat
        self.day = 1
        self.lots: dict[str, list[Lot]] = {i: [Lot(lot.qty, lot.use_by) for lot in ep.initial[i]] for i in ep.items}
        self.orders: list[PurchaseOrder] = []
        self.ledger = Ledger()
        self.demanded = dict.fromkeys(ep.items, 0)
        self.served = dict.fromkeys(ep.items, 0)
        self.short_days: dict[str, list[int]] = {i: [] for i in ep.items}
        self.events: list[dict[str, Any]] = []  # what happened, for the agent's feed
        self.finished = False
        self._serial = ep.po_start

    # ---- views --------------------------------------------------------------------------------------------
    @property
    def over(self) -> bool:
        return self.day > self.ep.horizon

    def on_hand(self, item: str) -> int:
        return sum(lot.qty for lot in self.lots[item])

    def open_orders(self, item: str | None = None) -> list[PurchaseOrder]:
        return [o for o in self.orders if o.status == "open" and (item is None or o.item == item)]

    def booked(self, location: str) -> float:
        """Space booked in a location: stock on hand plus open orders, in the location's space unit."""
        items = self.cat.items
        total = sum(lot.qty * items[item].space for item in self.ep.items if items[item].location == location
                    for lot in self.lots[item])
        return total + sum(o.qty * items[o.item].space for o in self.orders
                           if o.status == "open" and items[o.item].location == location)

    # ---- actions ------------------------------------------------------------------------------------------
    def price(self, supplier: str, item: str, qty: int) -> tuple[float, bool]:
        """The unit price of an order placed now, and whether a promotion of today sets it."""
        price = self.cat.unit_price(supplier, item, qty)
        for promo in self.ep.promos:
            if (promo.day == self.day and promo.supplier == supplier and promo.item == item
                    and qty >= promo.min_qty):
                offer = self.cat.offers[(supplier, item)]
                discounted = round(offer.unit_price * (1 - promo.pct / 100), 4)
                if discounted < price:
                    return discounted, True
        return price, False

    def room(self, item: str) -> float:
        """Units of `item` that still fit its location now."""
        spec = self.cat.items[item]
        return (self.ep.capacity[spec.location] - self.booked(spec.location)) / spec.space

    def place(self, item: str, supplier: str, qty: int) -> PurchaseOrder:
        """Place an order the caller has already checked (offered, minimum, capacity)."""
        price, promo = self.price(supplier, item, qty)
        due = self.day + self.cat.suppliers[supplier].lead_time  # the supplier promises its catalogue lead time
        arrives = self.day + self.ep.lead[supplier] + (self.ep.delay[supplier][self.day] if self.ep.late_active else 0)
        self._serial += 1
        order = PurchaseOrder(f"PO-{self._serial}", item, supplier, qty, price, self.day, due, arrives, promo=promo)
        self.orders.append(order)
        self.ledger.fees += self.cat.suppliers[supplier].order_fee
        self.ledger.premium += qty * (price - self.cat.best[item])
        return order

    def cancel(self, order: PurchaseOrder) -> float:
        """Cancel an open order; returns the fee kept (an order placed this period is cancelled free)."""
        order.status = "cancelled"
        self.ledger.premium -= order.qty * (order.unit_price - self.cat.best[order.item])
        fee = self.cat.suppliers[order.supplier].order_fee
        if order.placed == self.day:
            self.ledger.fees -= fee
            return 0.0
        return fee

    def advance(self) -> None:
        """End the current period (demand, expiry, holding) and start the next (arrivals)."""
        if self.over:
            return
        d, ep, cat = self.day, self.ep, self.cat
        for item in ep.items:
            spec = cat.items[item]
            lots = self.lots[item]
            want = ep.demand[item][d]
            need = want
            for lot in lots:
                take = min(lot.qty, need)
                lot.qty -= take
                need -= take
                if need == 0:
                    break
            self.demanded[item] += want
            self.served[item] += want - need
            if need:
                self.ledger.stockouts += need * spec.stockout_penalty
                self.short_days[item].append(d)
                self.events.append({"day": d, "kind": "stock-out", "item": item, "units": need})
            expired = sum(lot.qty for lot in lots if lot.use_by is not None and lot.use_by <= d)
            if expired:
                self.ledger.waste += expired * cat.best[item]
                self.events.append({"day": d, "kind": "expired", "item": item, "units": expired})
            self.lots[item] = [lot for lot in lots if lot.qty > 0 and (lot.use_by is None or lot.use_by > d)]
            self.ledger.holding += self.on_hand(item) * spec.holding_cost
        self.day = d + 1
        if self.over:
            self._finish()
            return
        for order in self.orders:
            if order.status == "open" and order.arrives == self.day:
                order.status = "received"
                life = cat.items[order.item].shelf_life
                self._receive(order.item, Lot(order.qty, None if life is None else self.day + life - 1))
                self.events.append({"day": self.day, "kind": "arrival", "item": order.item, "order": order.id,
                                    "supplier": order.supplier, "units": order.qty,
                                    "late": order.arrives - order.due})

    def _receive(self, item: str, lot: Lot) -> None:
        lots = self.lots[item]
        lots.append(lot)
        lots.sort(key=lambda x: (x.use_by is None, x.use_by or 0))

    def _finish(self) -> None:
        """The hand-over at the end of the horizon."""
        self.finished = True
        for item in self.ep.items:
            spec = self.cat.items[item]
            on_hand = self.on_hand(item)
            position = on_hand + sum(o.qty for o in self.open_orders(item))
            target = self.ep.safety[item]
            self.ledger.excess += max(0, position - target) * self.cat.best[item]
            self.ledger.handover += max(0, target - on_hand) * spec.stockout_penalty * HANDOVER_SHORT_WEIGHT

    def run_out(self) -> None:
        """Play the rest of the horizon with no more orders."""
        while not self.over:
            self.advance()

    # ---- outcome ------------------------------------------------------------------------------------------
    def critical_short(self) -> list[str]:
        return [i for i in self.ep.items if self.cat.items[i].critical and self.short_days[i]]

    def fill_rate(self, critical_weight: float = 3.0) -> float:
        """Units served over units demanded, a critical item's units weighing `critical_weight`."""
        num = den = 0.0
        for item in self.ep.items:
            w = critical_weight if self.cat.items[item].critical else 1.0
            num += w * self.served[item]
            den += w * self.demanded[item]
        return num / den if den else 1.0
