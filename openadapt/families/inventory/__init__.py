"""The inventory family: keep a few items in stock over a horizon of periods under demand that strays from its
forecast, ordering from suppliers whose lead times drift and who deliver late, at a cost close to a careful
planner's (warehouse replenishment, a hospital pharmacy's drugs, a kitchen's ingredients, a fleet's spare
parts)."""

from openadapt.families import register_family
from openadapt.families.base import Family
from openadapt.families.inventory.domain import InventoryDomain
from openadapt.families.inventory.engine import COST_MARGIN, HORIZON, WEIGHTS, InventoryEnvironment
from openadapt.families.inventory.models import models
from openadapt.families.inventory.policies import FaceValueHeuristic, InventoryOracle


def prompt_context(domain: InventoryDomain) -> dict:
    sellers = domain.sellers()
    return {
        "domain": domain, "tools": domain.tools, "period": domain.period_noun, "currency": domain.currency,
        "horizon": HORIZON, "margin_pct": round(COST_MARGIN * 100), "weights": WEIGHTS,
        "items": domain.items, "suppliers": domain.suppliers, "locations": domain.locations,
        "sellers": {item: [s.id for s, _ in pairs] for item, pairs in sellers.items()},
    }


FAMILY = register_family(Family(
    name="inventory",
    version=1,
    summary=("keep stock of a few items between running out and over-buying over a horizon of periods, under "
             "uncertain demand, ordering from suppliers whose lead times drift"),
    fits=("replenishment and inventory control: a warehouse or store restocking from suppliers, a hospital "
          "pharmacy's drugs and supplies, a restaurant's ingredients, spare parts for a fleet or a plant; anything "
          "where stock is consumed by demand that is forecast but uncertain and refilled by purchase orders with "
          "lead times, minimum orders, price breaks, shelf lives and storage limits. Not for routing a queue of "
          "cases (workflow), allocating people or rooms to time slots (scheduling) or haggling with one "
          "counterpart (negotiation)"),
    brief=("name the items kept in stock, who supplies them and how long delivery usually takes, and what"
           " makes demand swing"),
    domain=InventoryDomain,
    environment=InventoryEnvironment,
    models=models,
    oracle=InventoryOracle,
    heuristic=FaceValueHeuristic,
    step_budget={1: 20, 2: 24, 3: 24, 4: 30, 5: 26},
    reward_range=(-0.1, 1.0),
    tier_changes={
        1: "exact stock records and forecasts, catalogue lead times hold, deliveries on time",
        2: "+ stock records wrong (mostly phantom stock) or not shown for some items (15% each), forecasts blurred "
           "or gappy (30% each); deliveries late as each supplier's reliability says",
        3: "+ three distractors (demand rumours, promotions whose minimum is a trap; a real demand event announced "
           "too); one supplier's lead time drifts by 2-3 periods, announced in the feed",
        4: "+ the drift is posted only on the supplier's notice board (acknowledgements keep promising the "
           "catalogue lead time); one location holds less than listed, learned when an order does not fit",
        5: "+ 40% noise and withholding (20% of records), five distractors, two suppliers drift; a budget of 26",
    },
    prompt_context=prompt_context,
))
