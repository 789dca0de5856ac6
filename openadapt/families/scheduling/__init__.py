"""The scheduling family: book one day's tasks into sites, with staff, at start times, under hard constraints
(capability, skill, hours, arrival, latest start, no overlap, turnaround, rules) and soft ones (priorities,
wishes, overtime), through an emergency and an absence; feasibility and the objective are checked by the engine
against the optimum of its own exact search (operating lists, nurse rosters, dock doors, court lists)."""

from openadapt.families import register_family
from openadapt.families.base import Family
from openadapt.families.scheduling.domain import SchedulingDomain
from openadapt.families.scheduling.engine import (
    OVERTIME_COST,
    PREFERENCE_BONUS,
    SOLVED_GAP,
    VALUE_PER_PRIORITY,
    SchedulingEnvironment,
)
from openadapt.families.scheduling.models import models
from openadapt.families.scheduling.policies import GreedyHeuristic, SchedulingOracle


def prompt_context(domain: SchedulingDomain) -> dict:
    return {
        "domain": domain, "tools": domain.tools, "clock": domain.clock,
        "value_per_priority": VALUE_PER_PRIORITY, "preference_bonus": PREFERENCE_BONUS,
        "overtime_cost": OVERTIME_COST, "solved_gap_pct": round(SOLVED_GAP * 100),
        "example_task": f"{domain.task_id_prefix}_1", "example_site": domain.sites[0].id,
        "example_staff": domain.staff[0].id, "example_start": domain.clock.day_start,
    }


FAMILY = register_family(Family(
    name="scheduling",
    version=1,
    summary=("book a day's tasks into sites with staff at start times under hard and soft constraints, through "
             "an emergency and an absence, scored against the engine's exact optimum"),
    fits=("operating-room lists, nurse or crew rosters, dock-door or delivery slots, court or exam timetables, "
          "equipment bookings: anything where each task needs one place with the right capability and one "
          "person with the right skill for a stretch of a day, some requests matter more than others, and the "
          "plan must absorb disruptions. Not multi-day rostering with fairness rules, routing, or anything "
          "where a task needs a team of several people"),
    brief=("name the rooms or sites, the staff roles, the kinds of tasks with their usual durations, and"
           " the rules a planner must respect"),
    domain=SchedulingDomain,
    environment=SchedulingEnvironment,
    models=models,
    oracle=SchedulingOracle,
    heuristic=GreedyHeuristic,
    step_budget={1: 24, 2: 24, 3: 24, 4: 24, 5: 18},
    solved_reward=0.9,
    tier_changes={
        1: "every duration and working hours confirmed; one unavailable resource marked as such",
        2: "+ three durations or working hours listed as estimates (booked as listed, checked against the truth "
           "on submission) or not at all (must be confirmed before booking)",
        3: "+ two requests that must not be booked (their notes say why); a site or staff member that looks "
           "available but is not (only the bulletin says so)",
        4: "+ a hidden rule (equipment, certificate, hours) that cuts into the optimum, revealed by a rejected "
           "booking (free the first time) or by inspecting what it concerns",
        5: "+ four uncertain fields, three invalid requests, two unavailable resources, two hidden rules, a "
           "mid-plan emergency or absence, and a budget of 18 steps",
    },
    prompt_context=prompt_context,
))
