"""What the chaos events do to a running episode (the kit's `ChaosSchedule` decides when they fire).

- actor dropout: a colleague goes out of office; their in-progress work reverts to pending (a colleague with
  work in progress is preferred).
- priority spike: an open task's SLA is cut by 2 steps and an executive sends a message that needs an answer.
- inbox noise: a low-signal message arrives.

Strict but fair: an event fires at its rate whatever the state, but it never makes the queue impossible for a
mistake-free agent (`queue_slack`). A dropout never takes the last colleague of a skill whom the agent can see is
available, nor reverts work when that would make a deadline unreachable (it takes an idle colleague instead, or
nobody); a spike cuts by less than 2 steps when 2 would, and is skipped when even its message could not be answered
in time. Once an agent's own mistakes have made a deadline unreachable, events strike at full strength.

Targets are drawn from the episode's own effects rng, apart from the schedule's, so that when an event fires
never depends on what the agent did.
"""

from __future__ import annotations

import random

try:
    from .scenarios import COMPANY_DOMAIN, EXECUTIVE_SUBJECT, NOISE
    from .world import Message, Task, World, queue_slack, visible_available
except ImportError:  # standalone `uvicorn server.app:app`
    from server.scenarios import COMPANY_DOMAIN, EXECUTIVE_SUBJECT, NOISE
    from server.world import Message, Task, World, queue_slack, visible_available

SPIKE_CUT = 2


def disrupt(world: World, step: int) -> list[str]:
    """Draw this step's events and apply them; returns what happened, in words (kept for reports, not shown)."""
    if world.chaos is None:
        return []
    rng = world.effects_rng
    happened = []
    for event in world.chaos.draw():
        what = {"actor_dropout": _dropout, "priority_spike": _spike, "inbox_noise": _noise}[event](world, step, rng)
        happened.append(f"{event}: {what}")
        world.events.append((step, happened[-1]))
    return happened


def _dropout(world: World, step: int, rng: random.Random) -> str:
    eligible = [m for m in world.members if m.available and visible_available(world.members, m.skill, exclude=m)]
    work = {m.name: [t for t in world.tasks if t.open and t.owner == m.name and t.status == "in_progress"]
            for m in eligible}
    doomed = queue_slack(world, step) < 0
    busy = [m for m in eligible if work[m.name] and (doomed or _slack_after_revert(world, step, work[m.name]) >= 0)]
    pool = busy or [m for m in eligible if not work[m.name]]
    if not pool:
        return "nobody could be spared"
    member = rng.choice(pool)
    member.available = False
    for task in work[member.name]:
        task.status, task.owner = "pending", None
    return f"{member.name} is out of office; reverted {[t.id for t in work[member.name]] or 'nothing'}"


def _slack_after_revert(world: World, step: int, tasks: list[Task]) -> float:
    for task in tasks:
        task.status = "pending"
    try:
        return queue_slack(world, step)
    finally:
        for task in tasks:
            task.status = "in_progress"


def _spike(world: World, step: int, rng: random.Random) -> str:
    open_tasks = world.open_tasks()
    if not open_tasks:
        return "no open task"
    task = rng.choice(open_tasks)
    doomed = queue_slack(world, step) < 0
    cut = next((c for c in range(SPIKE_CUT, -1, -1)
                if doomed or _slack_after_cut(world, step, task, c) >= 0), None)
    if cut is None:
        return f"{task.id} could absorb no escalation (skipped)"
    task.deadline -= cut
    sender = f"{world.scenario.executive}@{COMPANY_DOMAIN}"
    world.messages.append(Message(world.next_message_id(), sender, EXECUTIVE_SUBJECT.format(tid=task.id), task.id,
                                  "executive"))
    return f"{task.id} deadline now step {task.deadline}"


def _slack_after_cut(world: World, step: int, task: Task, cut: int) -> float:
    task.deadline -= cut
    try:
        return queue_slack(world, step, extra_replies=1)  # the executive's message needs an answer too
    finally:
        task.deadline += cut


def _noise(world: World, step: int, rng: random.Random) -> str:
    sender, subject = rng.choice(NOISE)
    world.messages.append(Message(world.next_message_id(), f"{sender}@{COMPANY_DOMAIN}", subject, None, "noise"))
    return subject
