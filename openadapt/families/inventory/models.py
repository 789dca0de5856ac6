"""Action and observation of the inventory family; the action's choices come from the domain."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from openadapt.families.inventory.domain import InventoryDomain
from openadapt.kit.models import AgentAction, AgentObservation, with_choices

MAX_QUANTITY = 1_000_000
MAX_PERIODS = 30


class InventoryAction(AgentAction):
    """One of five actions; every field has a default: fill the ones the action needs."""

    action: str | None = Field(default=None, description="what to do")
    item: str | None = Field(default=None, description="check, order: the item")
    supplier: str | None = Field(default=None, description="order: who to buy from; notices: whose board to read")
    quantity: int | None = Field(default=None, ge=0, le=MAX_QUANTITY, description="order: units to buy")
    order_id: str | None = Field(default=None, description="cancel: the purchase order, e.g. PO-4102")
    days: int | None = Field(default=None, ge=1, le=MAX_PERIODS,
                             description="advance: how many periods to move on (default 1)")


class InventoryObservation(AgentObservation):
    """The planner's dashboard now (hidden: the real demand to come, real delays, true counts where the records
    are wrong, lead times that drifted unannounced, and the usable space of a squeezed location)."""

    day: int = Field(default=1, description="the current period (actions happen at its start)")
    last_day: int = Field(default=1, description="the horizon's last period")
    items: list[dict[str, Any]] = Field(default_factory=list, description=(
        "items in play: id, location, critical, safety_level, on_hand (the records; null: not shown), lots "
        "(perishables: [units, last usable period]; null when the records are doubtful), on_order, forecast "
        "([period, expected, low, high] from now to the horizon; nulls: not shown)"))
    suppliers: list[dict[str, Any]] = Field(default_factory=list, description=(
        "suppliers of the items in play: id, catalogue lead_time, known_lead_time (latest you were told), "
        "on_time_rate, max_delay"))
    locations: list[dict[str, Any]] = Field(default_factory=list, description=(
        "storage used by the items in play: id, capacity (as listed, or as you learned it), booked (on hand plus "
        "open orders), space_unit"))
    orders: list[dict[str, Any]] = Field(default_factory=list, description=(
        "open purchase orders: id, item, supplier, quantity, unit_price, placed, due (the promised period)"))
    feed: list[dict[str, Any]] = Field(default_factory=list, description=(
        "recent messages: day, kind (arrival, stock-out, expired, count, notice, signal, offer), text"))
    notices: list[str] = Field(default_factory=list, description="supplier notices read so far")
    costs: dict[str, float] = Field(default_factory=dict, description="costs so far, by kind, and their total")


def models(domain: InventoryDomain) -> tuple[type[InventoryAction], type[InventoryObservation]]:
    action = with_choices(InventoryAction, "InventoryAction", {
        "action": list(domain.tools.model_dump().values()),
        "item": [i.id for i in domain.items],
        "supplier": [s.id for s in domain.suppliers],
    })
    return action, InventoryObservation
