"""The inventory domain: the stock a site keeps (items, their demand and costs), the suppliers it buys from (lead
times, reliability, minimum orders, price breaks) and where the stock is stored, plus the texts an agent reads
(supplier notices, demand signals, offers), as data.

Each episode simulates a horizon of periods (days, shifts, weeks: the domain's `period_noun`) for a few of the
items. Demand is drawn from each item's range and profile and always falls inside the forecast's range; orders
arrive after their supplier's lead time (late, on the harder tiers, as the supplier's reliability says); stock
that outlives its shelf life is thrown away. The engine knows none of the names: everything below is the domain's.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from openadapt.families.domain import (
    IDENT,
    Code,
    Domain,
    DomainPart,
    DomainProblem,
    Placeholders,
    Rule,
    duplicates,
    name_field,
    unknown_ref,
)

ITEMS_PER_EPISODE = 3  # items in play in one episode (one of them critical)
MAX_DRIFT = 3  # periods a drifted lead time can grow by (ECI 3+)
MAX_SELLERS = 3  # suppliers per item (an honest planner reads each one's notices on ECI 4-5)
MOQ_PERIODS = 6  # a minimum order may not exceed this many periods of the item's highest average demand
SHELF_MARGIN = 6  # shelf life must exceed a supplier's worst lead time (with drift) by this many periods

Text = Annotated[str, StringConstraints(min_length=10, max_length=240)]

# Placeholders each text may use (and must use), filled by the engine with fill(), never str.format.
DRIFT_ALLOWED, DRIFT_REQUIRED = ("supplier", "days", "old", "period"), ("supplier", "days")
SIGNAL_ALLOWED, SIGNAL_REQUIRED = ("item", "pct", "first_day", "last_day", "unit"), ("item", "pct", "first_day")
PROMO_ALLOWED, PROMO_REQUIRED = ("supplier", "item", "pct", "quantity", "unit"), ("pct", "quantity")
NOTICE_ALLOWED: tuple[str, ...] = ("supplier",)
REASON_ALLOWED: tuple[str, ...] = ("location",)


class Item(DomainPart):
    id: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "The item's code in lower case with underscores, as this world writes it on the item's bin label, e.g. "
        "'stretch_film_500mm', 'amoxicillin_500mg'. The agent types it to check or order the item."))
    name: str = Field(min_length=3, max_length=80, description=(
        "The item as staff call it, e.g. 'stretch wrap film, 500 mm x 300 m', 'amoxicillin 500 mg capsules'."))
    unit: str = Field(min_length=1, max_length=20, description=(
        "The unit stock is counted and ordered in, plural as it reads after a number, e.g. 'rolls', 'packs of "
        "21', 'kg', 'cases'."))
    location: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "Id of the storage location the item is kept in (one of `locations`), e.g. 'bulk_racking'."))
    critical: bool = Field(default=False, description=(
        "True when running out is not acceptable at all (a life-saving drug, a part that grounds the fleet, the "
        "product a key customer's contract guarantees): one stock-out of a critical item fails the episode. At "
        "least one item must be critical, and at least two must not be."))
    demand: tuple[Annotated[float, Field(gt=0, le=100000)], Annotated[float, Field(gt=0, le=100000)]] = Field(
        description=(
            "Average demand per period, as a range [low, high] the episode draws one value from, in `unit`, "
            "e.g. [30, 55]. Realistic for this site's size."))
    variability: float = Field(default=0.2, ge=0.05, le=0.35, description=(
        "How far one period's demand strays from its forecast, as a share: 0.2 means demand always falls within "
        "20% of the forecast (the forecast's range shows these bounds), e.g. 0.1 for steady consumption, 0.3 for "
        "lumpy orders."))
    demand_profile: list[Annotated[float, Field(ge=0.2, le=3.0)]] = Field(default_factory=list, max_length=7,
                                                                           description=(
        "Optional repeating pattern of demand by period, as multipliers of the average (2 to 7 values), e.g. "
        "[1.2, 1.1, 1.0, 1.0, 1.3, 0.5, 0.4] for a site busy on Fridays and quiet at weekends. Empty: flat."))
    holding_cost: float = Field(gt=0, le=100000, description=(
        "Cost of keeping one unit in stock for one period (capital, space, insurance), in `currency`, e.g. 0.04 "
        "for a cheap consumable, 2.5 for refrigerated stock."))
    stockout_penalty: float = Field(gt=0, le=1000000, description=(
        "Cost of one unit of demand that cannot be served (lost margin, an emergency purchase, a cancelled "
        "procedure), in `currency`, e.g. 12.0. Usually several times the unit price."))
    safety_days: float = Field(default=1.5, ge=0.5, le=5.0, description=(
        "Safety level in periods of average demand, e.g. 1.5: the stock the site wants on hand at the end of the "
        "planning horizon (it is handed over to the next one)."))
    shelf_life: int | None = Field(default=None, ge=3, le=365, description=(
        "Periods a unit stays usable after it is received (it is thrown away at the end of its last one), e.g. "
        "14 for fresh produce in days; empty for stock that keeps. Must exceed every supplier's lead time plus "
        "delay by a few periods."))
    space: float = Field(default=1.0, gt=0, le=1000, description=(
        "Storage space one unit takes, in its location's `space_unit`, e.g. 0.05 (a case takes 1/20 of a pallet "
        "position); 1 when the location counts units."))


class PriceBreak(DomainPart):
    min_quantity: int = Field(ge=2, le=1000000, description=(
        "Order at least this many units (more than the minimum order and any smaller break), e.g. 200 ..."))
    unit_price: float = Field(gt=0, le=1000000, description=(
        "... and each unit costs this, below the list price and any smaller break's price, e.g. 2.95."))


class Offer(DomainPart):
    item: str = Field(min_length=2, max_length=40, pattern=IDENT, description="Id of the item this supplier sells.")
    unit_price: float = Field(gt=0, le=1000000, description="List price of one unit, in `currency`, e.g. 3.20.")
    min_order: int = Field(default=1, ge=1, le=1000000, description=(
        "Minimum order quantity in units, e.g. 48 (a full case layer); at most a few periods of the item's demand."))
    price_breaks: list[PriceBreak] = Field(default_factory=list, max_length=3, description=(
        "Volume discounts: larger quantities at lower unit prices, e.g. [{min_quantity: 200, unit_price: 2.95}]; "
        "quantities increasing and above the minimum order, prices falling and below the list price."))


class Supplier(DomainPart):
    id: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "The supplier's short name in lower case with underscores, as this world's buyers write it, e.g. "
        "'northline_packaging'. The agent types it to order from the supplier or read its notices."))
    name: str = Field(min_length=2, max_length=60, description="Its trading name, e.g. 'Northline Packaging Ltd'.")
    lead_time: int = Field(ge=1, le=7, description=(
        "Catalogue lead time in periods: an order placed in period d is promised for the start of period d + "
        "lead_time, e.g. 3. On the hardest tiers the real lead time drifts above it."))
    on_time_rate: float = Field(default=0.9, ge=0.5, le=1.0, description=(
        "Share of orders delivered on the promised period (the others arrive late by up to `max_delay`), e.g. "
        "0.85. Lateness only happens from ECI 2 on."))
    max_delay: int = Field(default=1, ge=0, le=3, description="The latest a late delivery arrives, in periods, e.g. 1.")
    order_fee: float = Field(default=0.0, ge=0, le=100000, description=(
        "Fixed cost of one purchase order (delivery, handling, paperwork), in `currency`, e.g. 45.0."))
    offers: list[Offer] = Field(min_length=1, max_length=12, description=(
        "What it sells: one offer per item, with price, minimum order and price breaks."))
    notices: list[Text] = Field(min_length=1, max_length=4, description=(
        "Routine notices on this supplier's board that change nothing for ordering (contacts, invoicing, holiday "
        "cut-offs already past), e.g. '{supplier}: remittance advices now go to accounts@northline.example.' May "
        "use {supplier}."))


class Location(DomainPart):
    id: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "The storage location's short name in lower case with underscores, e.g. 'bulk_racking', 'cold_room'."))
    name: str = Field(min_length=3, max_length=60, description="What staff call it, e.g. 'bulk racking, aisles 1-6'.")
    space_unit: str = Field(min_length=1, max_length=30, description=(
        "What its space is counted in, plural, e.g. 'pallet positions', 'shelf bins', 'units'."))
    capacity_reasons: list[Text] = Field(min_length=1, max_length=4, description=(
        "Why its usable space can be lower than listed for a while, e.g. 'aisle 4 racking closed for its annual "
        "load inspection'. On the hidden-constraint tiers one is quoted when an order does not fit. May use "
        "{location}."))


class Texts(DomainPart):
    drift_notices: list[Text] = Field(min_length=2, max_length=6, description=(
        "A supplier's notice that its real lead time has grown, with {supplier} (its name) and {days} (the new "
        "lead time, in periods); may use {old} (the catalogue lead time) and {period}, e.g. '{supplier}: port "
        "congestion at the ferry terminal - deliveries now take {days} days from order (catalogue: {old}).'"))
    demand_signals: list[Text] = Field(min_length=3, max_length=8, description=(
        "A message claiming demand for an item will rise, with {item} (its name), {pct} (the rise, percent) and "
        "{first_day}; may use {last_day} and {unit}, e.g. 'Key account says its promotion runs days {first_day}-"
        "{last_day}: expect {item} up {pct}%.' Some are true (the forecast already has them), some are rumours."))
    promotions: list[Text] = Field(min_length=2, max_length=6, description=(
        "A supplier's offer for today only, with {pct} (the discount, percent) and {quantity} (the minimum "
        "quantity); may use {supplier}, {item} and {unit}, e.g. '{supplier} flash deal: {pct}% off {item} on "
        "orders of {quantity} {unit} or more placed today.' The minimum is always far above what is needed."))


class ToolNames(DomainPart):
    """What the five actions are called in this world (each keeps its role in the mechanics)."""

    check: str = name_field("check_item", "a physical count of one item plus its full forecast", "cycle_count")
    notices: str = name_field("read_notices", "reading one supplier's notice board", "read_supplier_bulletin")
    order: str = name_field("place_order", "placing a purchase order (item, supplier, quantity)", "raise_po")
    cancel: str = name_field("cancel_order", "cancelling an open purchase order", "cancel_po")
    advance: str = name_field("advance", "ending the period(s) and moving time on", "close_day")


class InventoryDomain(Domain):
    RULES = (
        Rule("critical_mix", ("items",),
             f"At least one item is critical and at least {ITEMS_PER_EPISODE - 1} are not.",
             f"An episode plans one critical item, whose stock-out fails it, and {ITEMS_PER_EPISODE - 1} others."),
        Rule("sellers_per_item", ("items", "suppliers"),
             f"Every item is offered by 1 to {MAX_SELLERS} suppliers.",
             "An episode orders each item it plans, and on ECI 4-5 a careful planner reads every seller's notices "
             "within the step budget."),
        Rule("two_sellers", ("items", "suppliers"),
             "At least two items are offered by two or more suppliers: choosing between a cheap slow supplier and a "
             "fast dear one (and switching when a lead time drifts) is part of the task."),
        Rule("active_suppliers", ("items", "suppliers"),
             "At least three suppliers offer an item.", "ECI 5 drifts the lead times of two suppliers in play."),
        Rule("min_order_size", ("items", "suppliers"),
             f"An offer's min_order is at most {MOQ_PERIODS} periods of its item's highest average demand (`demand`'s "
             "high): a larger one would outlast the planning horizon."),
        Rule("price_breaks", ("suppliers",),
             "Each price break of an offer is a discount: its min_quantity above the offer's min_order and any "
             "smaller break's, its unit_price below the list price and any smaller break's."),
        Rule("shelf_life", ("items", "suppliers"),
             f"An item with a shelf_life keeps at least each seller's lead_time + max_delay + "
             f"{MAX_DRIFT + SHELF_MARGIN} periods.",
             f"From ECI 3 a lead time drifts by up to {MAX_DRIFT}, and stock must stay usable {SHELF_MARGIN} more."),
    )
    PLACEHOLDERS = (
        Placeholders("suppliers[].notices[]", NOTICE_ALLOWED),
        Placeholders("locations[].capacity_reasons[]", REASON_ALLOWED),
        Placeholders("texts.drift_notices[]", DRIFT_ALLOWED, DRIFT_REQUIRED),
        Placeholders("texts.demand_signals[]", SIGNAL_ALLOWED, SIGNAL_REQUIRED),
        Placeholders("texts.promotions[]", PROMO_ALLOWED, PROMO_REQUIRED),
    )
    agent_role: str = Field(min_length=5, max_length=100, description=(
        "Who the agent is, e.g. 'the replenishment planner of the Ridgeway distribution centre'."))
    site: str = Field(min_length=3, max_length=80, description=(
        "The site whose stock is kept, e.g. 'Ridgeway distribution centre', 'St Brigid's hospital pharmacy'."))
    currency: str = Field(default="USD", min_length=1, max_length=5, description=(
        "Currency code or symbol of every cost and price, e.g. 'USD', 'EUR', 'GBP'."))
    period_noun: str = Field(default="day", min_length=3, max_length=12, pattern=r"^[a-z]+$", description=(
        "The planning period, singular: 'day' (a warehouse, a kitchen), 'shift', 'week' (spare parts)."))
    items: list[Item] = Field(min_length=ITEMS_PER_EPISODE + 1, max_length=20, description=(
        "The stock keeping units; an episode plans three of them (one critical). Four or more, of different "
        "demand sizes and costs."))
    suppliers: list[Supplier] = Field(min_length=3, max_length=12, description=(
        "Who the site buys from, with lead times, reliability, order fees and offers. Several items should be "
        "sold by two suppliers (a cheap slow one and a fast dear one) so that the choice matters."))
    locations: list[Location] = Field(min_length=1, max_length=6, description=(
        "Where stock is stored; the engine sizes each location's capacity for the episode."))
    texts: Texts = Field(description="Notices, demand signals and offers the agent reads.")
    tools: ToolNames = Field(default_factory=ToolNames, description=(
        "What the five actions are called in this world, e.g. {'check': 'cycle_count', 'notices': "
        "'read_supplier_bulletin', 'order': 'raise_po', 'cancel': 'cancel_po', 'advance': 'close_day'}."))

    # ---- drafts ------------------------------------------------------------------------------------------
    @classmethod
    def tidy(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A price break that is no discount (its quantity not above the minimum order or the previous break's, or
        its price not below the list price or the previous break's) is dropped: the offer is then sold at the
        prices it does discount. A small model writes `{min_quantity: 2, unit_price: 15}` beside a list price
        of 15 and a minimum order of 2; the breaks are optional."""
        data = dict(data)
        if isinstance(data.get("suppliers"), list):
            data["suppliers"] = [_with_real_breaks(s) for s in data["suppliers"]]
        return data

    # ---- semantic checks ---------------------------------------------------------------------------------
    def family_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        p += duplicates(self.items, "id", "domain.items")
        p += duplicates(self.items, "name", "domain.items")
        p += duplicates(self.suppliers, "id", "domain.suppliers")
        p += duplicates(self.suppliers, "name", "domain.suppliers")
        p += duplicates(self.locations, "id", "domain.locations")
        tools = list(self.tools.model_dump().items())
        seen_tools: dict[str, str] = {}
        for role, name in tools:
            if name in seen_tools:
                p.append(DomainProblem(path=f"domain.tools.{role}", code=Code.NAME_CLASH, value=name,
                                       message=f"{name!r} is already the name of "
                                       f"the {seen_tools[name]} action: each action needs its own name"))
            seen_tools.setdefault(name, role)
        locations = {loc.id for loc in self.locations}
        items = {item.id: item for item in self.items}
        for i, item in enumerate(self.items):
            at = f"domain.items[{i}]"
            p += unknown_ref(item.location, locations, f"{at}.location", "location")
            low, high = item.demand
            if low > high:
                p.append(DomainProblem(path=f"{at}.demand", message=f"low {low:g} is above high {high:g}"))
            if len(item.demand_profile) == 1:
                p.append(DomainProblem(path=f"{at}.demand_profile", message=(
                    "a single multiplier is no pattern: give 2 to 7 values, or none for flat demand")))
        p += self._offer_problems(items)
        p += self._variety_problems(items)
        return p

    def _offer_problems(self, items: dict[str, Item]) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        for s, supplier in enumerate(self.suppliers):
            p += duplicates(supplier.offers, "item", f"domain.suppliers[{s}].offers")
            for o, offer in enumerate(supplier.offers):
                at = f"domain.suppliers[{s}].offers[{o}]"
                if offer.item not in items:
                    p += unknown_ref(offer.item, items, f"{at}.item", "item")
                    continue
                item = items[offer.item]
                limit = MOQ_PERIODS * item.demand[1]
                if offer.min_order > limit:
                    p.append(self.rule("min_order_size").broken(
                        f"{at}.min_order", f"{offer.min_order} units against {limit:g} ({MOQ_PERIODS} "
                        f"{self.period_noun}s of {item.id})"))
                breaks = self.rule("price_breaks")
                last_qty, last_price = offer.min_order, offer.unit_price
                for b, brk in enumerate(offer.price_breaks):
                    if brk.min_quantity <= last_qty:
                        p.append(breaks.broken(f"{at}.price_breaks[{b}].min_quantity",
                                               f"{brk.min_quantity} after {last_qty}"))
                    if brk.unit_price >= last_price:
                        p.append(breaks.broken(f"{at}.price_breaks[{b}].unit_price",
                                               f"{brk.unit_price:g} after {last_price:g}"))
                    last_qty, last_price = brk.min_quantity, brk.unit_price
                if item.shelf_life is not None:
                    worst = supplier.lead_time + supplier.max_delay + MAX_DRIFT + SHELF_MARGIN
                    if item.shelf_life < worst:
                        p.append(self.rule("shelf_life").broken(
                            f"{at}.item", f"{item.id} keeps {item.shelf_life} {self.period_noun}s, {supplier.id} "
                            f"needs {worst}"))
        return p

    def _variety_problems(self, items: dict[str, Item]) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        rule = self.rule
        sellers = self.sellers()
        for i, item in enumerate(self.items):
            if not sellers[item.id] or len(sellers[item.id]) > MAX_SELLERS:
                p.append(rule("sellers_per_item").broken(
                    f"domain.items[{i}]", f"{item.id} is offered by {len(sellers[item.id])} suppliers"))
        critical = [item.id for item in self.items if item.critical]
        others = len(self.items) - len(critical)
        if not critical or others < ITEMS_PER_EPISODE - 1:
            p.append(rule("critical_mix").broken("domain.items", f"{len(critical)} critical, {others} not"))
        dual = [item.id for item in self.items if len(sellers[item.id]) >= 2]
        if len(dual) < 2:
            p.append(rule("two_sellers").broken("domain.suppliers", f"two or more sellers for {dual or 'none'}"))
        active = [s.id for s in self.suppliers if any(o.item in items for o in s.offers)]
        if len(active) < 3:
            p.append(rule("active_suppliers").broken("domain.suppliers", f"{active or 'none'}"))
        return p

    # ---- facts the engine uses ---------------------------------------------------------------------------
    def sellers(self) -> dict[str, list[tuple[Supplier, Offer]]]:
        """For each item id, the (supplier, offer) pairs that sell it, in the domain's order."""
        found: dict[str, list[tuple[Supplier, Offer]]] = {item.id: [] for item in self.items}
        for supplier in self.suppliers:
            for offer in supplier.offers:
                if offer.item in found:
                    found[offer.item].append((supplier, offer))
        return found


def _with_real_breaks(supplier: Any) -> Any:
    """`supplier` with each offer's price breaks that are discounts (see `InventoryDomain.tidy`)."""
    if not isinstance(supplier, dict) or not isinstance(supplier.get("offers"), list):
        return supplier
    offers = []
    for offer in supplier["offers"]:
        breaks = offer.get("price_breaks") if isinstance(offer, dict) else None
        quantity, price = offer.get("min_order", 1) if isinstance(offer, dict) else 1, \
            offer.get("unit_price") if isinstance(offer, dict) else None
        if not isinstance(breaks, list) or not all(isinstance(v, int | float) for v in (quantity, price)):
            offers.append(offer)
            continue
        kept = []
        for brk in breaks:
            q, u = (brk.get("min_quantity"), brk.get("unit_price")) if isinstance(brk, dict) else (None, None)
            if isinstance(q, int | float) and isinstance(u, int | float) and (q <= quantity or u >= price):
                continue
            kept.append(brk)
            if isinstance(q, int | float) and isinstance(u, int | float):
                quantity, price = q, u
        offers.append({**offer, "price_breaks": kept})
    return {**supplier, "offers": offers}
