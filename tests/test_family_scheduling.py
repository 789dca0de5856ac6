"""The scheduling family: exact optimum, reward and outcome on hand-made plans, what each tier changes, rejected
actions, domain validation with field paths, and a second world (a court list) run by the same engine."""

from __future__ import annotations

import copy
import itertools
import random
import statistics

import pytest
import yaml

from openadapt.envpkg.evaluation import run_episode
from openadapt.families import get_family
from openadapt.families.domain import DomainError
from openadapt.families.scheduling import solver
from openadapt.families.yamlio import read_domain_file
from openadapt.kit import RandomPolicy

COMPONENTS = {"coverage", "objective", "efficiency", "penalty"}


@pytest.fixture(scope="module")
def family():
    return get_family("scheduling")


def _bind(family, domain):
    return family.bind(domain, family.section(task="scheduling test"))


@pytest.fixture(scope="module")
def rooms(family):
    return _bind(family, family.load_example("operating_rooms"))


@pytest.fixture(scope="module")
def dock(family):
    return _bind(family, family.load_example("warehouse_dock"))


def _episode(bound, eci, want, seeds=range(300)):
    """A fresh env reset to the first seed whose day satisfies `want(env, day)`."""
    env = bound.env_cls()
    for seed in seeds:
        env.reset(seed=seed, eci=eci)
        if want(env, env.oracle_view()):
            return env, seed
    raise AssertionError("no seed gives such a day")


def _book(env, booking, **extra):
    return env.step(env.action_type(tool=env.domain.tools.assign, task=booking.task, site=booking.site,
                                    staff=booking.staff, start=env.clock(booking.start), **extra))


def _submit(env):
    return env.step(env.action_type(tool=env.domain.tools.submit))


def _anywhere(env, job):
    """Some booking of `job` the engine accepts now (by its own check)."""
    day = env.oracle_view()
    for site in day.rooms:
        for staff in day.people:
            for start in range(env.domain.day_slots):
                if env.check(job, site, staff, start) is None:
                    return site, staff, start
    return None


# ---- the exact search ------------------------------------------------------------------------------------
def _brute(items, blocked):
    choices = [[(m, s) for m in it.modes for s in m.scores] + ([] if it.required else [None]) for it in items]
    best = None
    for combo in itertools.product(*choices):
        masks, score = dict(blocked), 0
        for choice in combo:
            if choice is None:
                continue
            mode, start = choice
            for r, off, length in mode.uses:
                bits = solver.interval(start + off, start + off + length)
                if masks.get(r, 0) & bits:
                    break
                masks[r] = masks.get(r, 0) | bits
            else:
                score += mode.scores[start][0]
                continue
            break
        else:
            best = score if best is None else max(best, score)
    return best


def test_solver_is_exact_against_brute_force():
    """Random small instances with regular scores, twins and interchangeable staff: same optimum."""
    rng = random.Random(7)
    for _ in range(150):
        horizon, sites, staff = rng.randint(5, 8), rng.randint(1, 2), rng.randint(1, 3)
        items = []
        for i in range(rng.randint(2, 4)):
            length, turn, twin = rng.randint(1, 3), rng.randint(0, 1), items and rng.random() < 0.3
            item = solver.Item(f"t{i}", rng.random() < 0.3)
            if twin:
                item.modes = [solver.Mode(m.key, m.uses, dict(m.scores)) for m in items[-1].modes]
                item.required = items[-1].required
            else:
                value, wish, late = rng.randint(3, 12), rng.randint(0, horizon), rng.randint(2, horizon)
                for site, person in itertools.product(range(sites), range(staff)):
                    mode = solver.Mode((site, person), ((site, 0, length + turn), (sites + person, 0, length)))
                    for start in range(rng.randint(0, 2), horizon - length + 1):
                        mode.scores[start] = (value + 2 * (start <= wish) - max(0, start + length - late), None)
                    item.modes.append(mode)
            items.append(item)
        blocked = {sites: solver.interval(0, rng.randint(0, 2))}
        got = solver.solve(items, sites + staff, pools=(tuple(range(sites)), tuple(range(sites, sites + staff))),
                           blocked=blocked, node_limit=10**6)
        assert (got.score if got.feasible else None) == _brute(items, blocked)


def test_the_optimum_is_a_plan_the_engine_accepts(rooms):
    env = rooms.env_cls()
    for seed in range(12):
        env.reset(seed=seed, eci=1 + seed % 5)
        day = env.oracle_view()
        assert sum(env.score_of(day.jobs[b.task], b.staff, b.start, b.end) for b in day.optimum) == day.best
        for b in day.optimum:
            job = day.jobs[b.task]
            job.confirmed, day.people[b.staff].confirmed = True, True
            if b.task in day.visible and not any(r.forbids(job.kind.id, b.site, b.staff, b.end) for r in day.rules):
                assert env.check(job, b.site, b.staff, b.start) is None
                env._bookings[b.task] = b


# ---- reward and outcome on hand-made plans ---------------------------------------------------------------
def test_the_optimal_plan_solves_with_full_reward(rooms):
    env, _ = _episode(rooms, 1, lambda env, day: True)
    for booking in env.oracle_view().optimum:
        assert _book(env, booking).error is None
    final = _submit(env)
    parts = final.metadata["reward_components"]
    assert final.metadata["solved"] and set(parts) == COMPONENTS
    assert parts == {"coverage": 0.3, "objective": 0.5, "efficiency": 0.2, "penalty": 0.0}
    assert final.reward == pytest.approx(1.0)


def test_leaving_out_a_task_of_the_optimum_is_not_solved(rooms):
    env, _ = _episode(rooms, 1, lambda env, day: any(not day.jobs[b.task].mandatory for b in day.optimum))
    day = env.oracle_view()
    dropped = next(b for b in day.optimum if not day.jobs[b.task].mandatory)
    for booking in day.optimum:
        if booking is not dropped:
            _book(env, booking)
    parts = _submit(env).metadata
    assert not parts["solved"]
    assert parts["reward_components"]["coverage"] < 0.3 and parts["reward_components"]["objective"] < 0.45


def test_wasted_steps_lower_efficiency_only(rooms):
    env, seed = _episode(rooms, 1, lambda env, day: True)
    for booking in env.oracle_view().optimum:
        _book(env, booking)
    fast = _submit(env).metadata["reward_components"]
    env.reset(seed=seed, eci=1)
    for site in list(env.oracle_view().rooms)[:3]:
        env.step(env.action_type(tool=env.domain.tools.inspect, site=site))
    for booking in env.oracle_view().optimum:
        _book(env, booking)
    final = _submit(env)
    slow = final.metadata["reward_components"]
    assert final.metadata["solved"] and slow["efficiency"] < fast["efficiency"] == pytest.approx(0.2)
    assert slow["objective"] == fast["objective"]


def test_an_empty_plan_earns_nothing(rooms):
    env, _ = _episode(rooms, 1, lambda env, day: True)
    final = _submit(env)
    assert not final.metadata["solved"] and final.reward == pytest.approx(0.0)


def test_doing_nothing_until_the_budget_ends_is_unsolved(rooms):
    env, _ = _episode(rooms, 5, lambda env, day: True)
    for _ in range(rooms.section.step_budget[5]):
        obs = env.step(env.action_type())
    assert obs.done and obs.metadata["termination"] == "budget_exhausted" and not obs.metadata["solved"]
    assert obs.metadata["step"] == rooms.section.step_budget[5] < rooms.section.step_budget[1]


# ---- what each tier changes ------------------------------------------------------------------------------
def test_clean_tier_lists_everything_confirmed_and_marks_the_unavailable(rooms):
    env = rooms.env_cls()
    for seed in range(6):
        obs = env.reset(seed=seed, eci=1)
        day = env.oracle_view()
        assert all(t.confirmed and t.minutes is not None for t in obs.tasks) and all(p.confirmed for p in obs.staff)
        assert not day.rules and day.disruption is None and not any(j.fake for j in day.jobs.values())
        unavailable = [s.status for s in obs.sites if day.rooms[s.id].blocked] + \
                      [p.status for p in obs.staff if day.people[p.id].absent]
        assert unavailable and all(status.startswith(("closed:", "absent:")) for status in unavailable)


def test_noise_lists_estimates_and_gaps_that_inspection_confirms(dock):
    env, _ = _episode(dock, 2, lambda env, day: any(j.shown is None and not j.confirmed for j in day.jobs.values()))
    job = next(j for j in env.oracle_view().jobs.values() if j.shown is None and not j.confirmed)
    view = next(t for t in env.observe()["tasks"] if t.id == job.id)
    assert view.minutes is None and not view.confirmed and "not confirmed" in view.duration
    site, staff = next(iter(env.oracle_view().rooms)), next(iter(env.oracle_view().people))
    obs = env.step(env.action_type(tool=env.domain.tools.assign, task=job.id, site=site, staff=staff,
                                   start=env.domain.clock.day_start))
    assert obs.error in {"duration_unconfirmed", "capability_mismatch", "skill_mismatch", "site_unavailable",
                         "staff_unavailable"}
    obs = env.step(env.action_type(tool=env.domain.tools.inspect, task=job.id))
    view = next(t for t in obs.tasks if t.id == job.id)
    assert view.confirmed and view.minutes == job.slots * env.domain.clock.slot_minutes


def _overrun(env):
    """Book a task on an estimate shorter than its real duration, and another task right after that estimate in
    the same site; returns the follower's id (None when this day offers no such pair)."""
    day = env.oracle_view()
    for person in day.people.values():
        person.confirmed = True  # isolate the duration estimate
    for job in (j for j in day.jobs.values() if j.shown is not None and not j.confirmed and j.shown < j.slots):
        spot = _anywhere(env, job)
        if spot is None:
            continue
        site, staff, start = spot
        after = start + job.shown + env._turn
        for follower in day.jobs.values():
            fits = follower.kind.needs in day.rooms[site].spec.capabilities
            if follower is job or not follower.confirmed or not fits:
                continue
            for other in day.people:
                if other != staff and env.check(follower, site, other, after) is None:
                    assert _book(env, type(day.optimum[0])(job.id, site, staff, start, start)).error is None
                    assert env.booking(job.id).end == start + job.shown  # booked as listed
                    assert _book(env, type(day.optimum[0])(follower.id, site, other, after, after)).error is None
                    return follower.id
    return None


def test_booking_on_a_short_estimate_breaks_the_plan_on_the_day(rooms):
    env = rooms.env_cls()
    for seed in range(200):
        env.reset(seed=seed, eci=2)
        follower = _overrun(env)
        if follower is not None:
            break
    else:
        raise AssertionError("no day with a short estimate and a follower")
    final = _submit(env)
    assert not final.metadata["solved"] and follower in env._broken and "cannot be kept" in final.feedback


def test_distractors_are_invalid_requests_and_resources_that_look_available(rooms):
    env, _ = _episode(rooms, 3, lambda env, day: True)
    day, obs = env.oracle_view(), env.observe()
    fakes = [j for j in day.jobs.values() if j.fake]
    assert len(fakes) == 2 and all(j.id in day.visible for j in fakes)
    reasons = [r.split("{client}")[1][:20] for r in env.domain.invalid_requests]
    assert all(any(reason in note for note in j.notes for reason in reasons) for j in fakes)
    hidden_sites = [s for s in obs["sites"] if day.rooms[s.id].blocked]
    hidden_staff = [p for p in obs["staff"] if day.people[p.id].absent]
    assert all(s.status == "open" for s in hidden_sites) and all(p.status == "on duty" for p in hidden_staff)
    trap = (hidden_sites or hidden_staff)[0]
    assert any(trap.id in notice for notice in obs["notices"])
    # booking a listed-open resource that cannot be used is refused with the reason
    job = day.jobs[day.visible[0]]
    if hidden_sites:
        action = env.action_type(tool=env.domain.tools.assign, task=job.id, site=trap.id,
                                 staff=next(iter(day.people)), start=env.domain.clock.day_start)
        assert env.step(action).error == "site_unavailable"
    else:
        action = env.action_type(tool=env.domain.tools.assign, task=job.id, site=next(iter(day.rooms)),
                                 staff=trap.id, start=env.domain.clock.day_start)
        assert env.step(action).error == "staff_unavailable"


def test_booking_an_invalid_request_is_penalised(rooms):
    env, _ = _episode(rooms, 3, lambda env, day: any(_anywhere(env, j) for j in day.jobs.values() if j.fake))
    day = env.oracle_view()
    fake = next(j for j in day.jobs.values() if j.fake and _anywhere(env, j))
    site, staff, start = _anywhere(env, fake)
    assert env.step(env.action_type(tool=env.domain.tools.assign, task=fake.id, site=site, staff=staff,
                                    start=env.clock(start))).error is None
    for booking in day.optimum:
        _book(env, booking)
    final = _submit(env)
    assert not final.metadata["solved"] and final.metadata["reward_components"]["penalty"] == pytest.approx(-0.25)


def test_hidden_rule_is_only_revealed_by_a_rejection_or_an_inspection(rooms):
    env, seed = _episode(rooms, 4, lambda env, day: day.rules[0].probe is not None)
    rule = env.oracle_view().rules[0]
    assert rule.text not in env.observe()["notes"] and rule.text in env.secret_values()
    for item in env.oracle_view().inspections:  # what the probe books with must be confirmed
        env.step(env.action_type(tool=env.domain.tools.inspect,
                                 **{"task" if item in env.oracle_view().jobs else "staff": item}))
    first = _book(env, rule.probe)
    assert first.error == "rule_violation" and first.reward == 0.0 and rule.text in first.notes
    again = _book(env, rule.probe)
    assert again.error == "rule_violation" and again.reward == rooms.section.invalid_action_reward
    env.reset(seed=seed, eci=4)
    rule = env.oracle_view().rules[0]
    field = "site" if rule.site else "staff"
    obs = env.step(env.action_type(tool=env.domain.tools.inspect, **{field: rule.reveal_by}))
    assert obs.error is None and rule.text in obs.notes and rule.revealed


def test_hidden_rules_usually_cut_into_the_optimum(rooms):
    env = rooms.env_cls()
    cuts = []
    for seed in range(20):
        env.reset(seed=seed, eci=4)
        day = env.oracle_view()
        assert len(day.rules) == 1 and day.best <= day.clean_best
        cuts.append(day.best < day.clean_best)
    assert statistics.fmean(cuts) >= 0.6


def test_top_tier_has_two_rules_and_a_mid_plan_disruption(dock):
    env = dock.env_cls()
    kinds = set()
    for seed in range(10):
        env.reset(seed=seed, eci=5)
        day = env.oracle_view()
        assert len(day.rules) == 2 and day.disruption is not None and day.disruption.text not in str(env.observe())
        kinds.add(day.disruption.kind)
    assert kinds == {"emergency", "absence"}


def test_an_emergency_arrives_mid_plan_and_must_be_booked(dock):
    env, _ = _episode(dock, 5, lambda env, day: day.disruption.kind == "emergency")
    event = env.oracle_view().disruption
    for step in range(1, event.at_step + 1):
        obs = env.step(env.action_type(tool=env.domain.tools.inspect, site=next(iter(env.oracle_view().rooms))))
        assert (event.job.id in [t.id for t in obs.tasks]) == (step >= event.at_step)
    new = next(t for t in obs.tasks if t.id == event.job.id)
    assert new.mandatory and new.start_by and "NEW" in obs.feedback and event.text in obs.notices


def test_an_absence_mid_plan_cancels_that_persons_bookings(dock):
    def absence(env, day):
        return day.disruption.kind == "absence" and any(
            day.jobs[t].kind.skill in day.people[day.disruption.staff].spec.skills and not day.jobs[t].fake
            for t in day.visible)

    env, _ = _episode(dock, 5, absence)
    day = env.oracle_view()
    event = day.disruption
    person = day.people[event.staff]
    person.confirmed = True
    job = next(day.jobs[t] for t in day.visible if day.jobs[t].kind.skill in person.spec.skills)
    job.confirmed = True
    spot = next(((site, start) for site in day.rooms for start in range(env.domain.day_slots)
                 if env.check(job, site, event.staff, start) is None), None)
    if spot is None:
        pytest.skip("that person cannot take the task in this day")
    obs = env.step(env.action_type(tool=env.domain.tools.assign, task=job.id, site=spot[0], staff=event.staff,
                                   start=env.clock(spot[1])))
    while not event.fired:
        obs = env.step(env.action_type(tool=env.domain.tools.inspect, site=next(iter(day.rooms))))
    assert job.id not in [b.task for b in obs.schedule] and "CHANGE" in obs.feedback
    assert next(p for p in obs.staff if p.id == event.staff).status.startswith("absent")


def test_submitting_before_the_disruption_is_judged_on_the_changed_day(dock):
    env, _ = _episode(dock, 5, lambda env, day: day.disruption.kind == "emergency")
    final = _submit(env)
    assert env.oracle_view().disruption.fired and "Before the plan went out" in final.feedback
    assert not final.metadata["solved"]


# ---- rejected actions ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("payload", "code"), [
    ({}, "missing_tool"),
    ({"tool": "book_case"}, "missing_task"),
    ({"tool": "book_case", "task": "case_12", "site": "or_1", "staff": "dr_okafor", "start": "08:00"},
     "unknown_task"),
    ({"tool": "inspect"}, "missing_target"),
    ({"tool": "inspect", "site": "or_1", "staff": "dr_okafor"}, "ambiguous_target"),
    ({"tool": "unbook_case", "task": "FIRST"}, "not_booked"),
    ({"tool": "book_case", "task": "FIRST"}, "missing_site"),
    ({"tool": "book_case", "task": "FIRST", "site": "SITE"}, "missing_staff"),
    ({"tool": "book_case", "task": "FIRST", "site": "SITE", "staff": "STAFF"}, "missing_start"),
])
def test_invalid_actions_are_rejected_with_a_code(rooms, payload, code):
    env, _ = _episode(rooms, 1, lambda env, day: "case_12" not in day.visible)
    day = env.oracle_view()
    names = {"FIRST": day.visible[0], "SITE": next(iter(day.rooms)), "STAFF": next(iter(day.people))}
    obs = env.step(env.action_type(**{k: names.get(v, v) for k, v in payload.items()}))
    assert obs.error == code and obs.feedback and not obs.done
    assert obs.reward == rooms.section.invalid_action_reward


def test_infeasible_bookings_are_rejected_with_their_reason(rooms):
    env, _ = _episode(rooms, 1, lambda env, day: len(day.optimum) >= 2)
    day = env.oracle_view()
    first, second = day.optimum[0], day.optimum[1]
    job = day.jobs[first.task]
    wrong_site = next((s for s, r in day.rooms.items() if r.blocked is None and
                       job.kind.needs not in r.spec.capabilities), None)
    if wrong_site:
        assert _book(env, type(first)(first.task, wrong_site, first.staff, first.start, first.end)).error == \
            "capability_mismatch"
    wrong_staff = next((p for p, x in day.people.items() if x.absent is None and
                        job.kind.skill not in x.spec.skills), None)
    if wrong_staff:
        assert _book(env, type(first)(first.task, first.site, wrong_staff, first.start, first.end)).error == \
            "skill_mismatch"
    late = env.domain.day_slots - job.slots + 1
    assert _book(env, type(first)(first.task, first.site, first.staff, late, late + job.slots)).error in \
        {"outside_hours", "outside_availability", "too_late"}
    assert _book(env, first).error is None
    clash = _book(env, type(second)(second.task, first.site, first.staff, first.start, first.end))
    assert clash.error in {"site_busy", "staff_busy", "capability_mismatch", "skill_mismatch", "before_ready",
                           "outside_availability", "too_late"}


# ---- domain validation -----------------------------------------------------------------------------------
def _example_data(family) -> dict:
    return yaml.safe_load(family.examples()["operating_rooms"].read_text(encoding="utf-8"))


def _problems(family, data) -> list[str]:
    with pytest.raises(DomainError) as err:
        family.parse_domain(data)
    return [str(p) for p in err.value.problems]


def test_domain_problems_name_the_field(family):
    broken = _example_data(family)
    broken["sites"][0]["capabilities"][0] = "robotic_arm"
    assert any(p.startswith("domain.sites[0].capabilities[0]:") and "robotic_arm" in p
               for p in _problems(family, broken))

    twin = _example_data(family)
    twin["staff"][3]["id"] = twin["staff"][1]["id"]
    assert any(p.startswith("domain.staff[3].id:") and "unique" in p for p in _problems(family, twin))

    small = _example_data(family)
    small["sites"] = small["sites"][:3]
    small["task_types"] = [t for t in small["task_types"] if t["needs"] in {"general", "laminar_flow"}]
    small["emergencies"] = [e for e in small["emergencies"] if e["task_type"] in {t["id"] for t in small["task_types"]}]
    small["hidden_rules"] = [r for r in small["hidden_rules"] if r["kind"] != "site_excludes_type"][:2]
    problems = _problems(family, small)
    assert any(p.startswith("domain.sites:") and "at least 4" in p for p in problems)
    assert any(p.startswith("domain.hidden_rules:") and "ECI 4" in p for p in problems)

    placeholder = _example_data(family)
    placeholder["late_start"][0] = "{staff} is in the {clinic_name} clinic until {time}."
    assert any(p.startswith("domain.late_start[0]:") and "{clinic_name}" in p
               for p in _problems(family, placeholder))

    rule = _example_data(family)
    rule["hidden_rules"][3]["text"] = "The on-call consultant must be free from the early afternoon onwards."
    assert any(p.startswith("domain.hidden_rules[3].text:") and "{staff}" in p for p in _problems(family, rule))

    clock = _example_data(family)
    clock["task_types"][0]["min_minutes"] = 45
    assert any(p.startswith("domain.task_types[0].min_minutes:") for p in _problems(family, clock))

    schema = _example_data(family)
    schema["sites"][1]["id"] = "Theatre 2"
    assert any(p.startswith("domain.sites[1].id:") for p in _problems(family, schema))


# ---- a second world through the same engine --------------------------------------------------------------
COURT = """
title: Crown Court listing office
summary: The Blackfriars Crown Court lists its hearings a day ahead. You build tomorrow's list; each hearing needs
  a courtroom with the right facilities and a judge with the right ticket, custody cases cannot slip, and
  sickness, broken video links and urgent applications keep rearranging the day.
agent_role: the listing officer
plan_noun: tomorrow's court list
site_noun: courtroom
staff_noun: judge
task_noun: hearing
client_noun: party
task_id_prefix: hearing
clock: {day_start: '09:30', regular_end: '16:30', overtime_end: '17:30', slot_minutes: 30}
turnaround_minutes: 0
turnaround_label: no gap needed between hearings
capabilities:
- {id: jury_box, label: a twelve-seat jury box and retiring room}
- {id: secure_dock, label: a secure glass dock linked to the cells}
- {id: video_link, label: a prison video-link suite}
- {id: family_suite, label: a private family hearing room with a waiting area}
skills:
- {id: crime, label: authorised to try criminal cases}
- {id: family, label: family-division ticket}
- {id: civil, label: civil-list ticket}
- {id: youth, label: youth-court authorisation}
sites:
- {id: court_1, label: Court 1 (the large jury court), capabilities: [jury_box, secure_dock],
  note: oak-panelled and cold in winter.}
- {id: court_2, label: Court 2, capabilities: [jury_box, video_link], note: the public gallery seats forty.}
- {id: court_3, label: Court 3, capabilities: [secure_dock, video_link], note: next to the cells corridor.}
- {id: court_4, label: Court 4 (family), capabilities: [family_suite, video_link], note: on the quiet second floor.}
- {id: court_5, label: Court 5 (annexe), capabilities: [family_suite], note: across the courtyard in the annexe.}
staff:
- {id: judge_okoro, name: HHJ Adaeze Okoro, skills: [crime, youth], note: sits in Court 1 most weeks.}
- {id: judge_fairley, name: HHJ Martin Fairley, skills: [crime], note: prefers to take sentences first thing.}
- {id: judge_marsh, name: DJ Helen Marsh, skills: [family, civil], note: runs the family pilot scheme.}
- {id: judge_quinn, name: DJ Ronan Quinn, skills: [civil, family], available_until: '16:30', note: part-time.}
- {id: judge_dunmore, name: Recorder Paul Dunmore, skills: [crime, civil], note: a barrister sitting part-time.}
- {id: judge_abara, name: HHJ Grace Abara, skills: [youth, family], note: the designated youth judge.}
task_types:
- {id: jury_trial_day, label: a day of a jury trial, needs: jury_box, skill: crime, min_minutes: 120,
  max_minutes: 210, priority: 4}
- {id: sentencing, label: a sentencing hearing, needs: secure_dock, skill: crime, min_minutes: 30,
  max_minutes: 60, priority: 3}
- {id: bail_application, label: a bail application over video, needs: video_link, skill: crime,
  min_minutes: 30, max_minutes: 60, priority: 2}
- {id: child_arrangements, label: a child arrangements hearing, needs: family_suite, skill: family,
  min_minutes: 60, max_minutes: 120, priority: 4}
- {id: small_claims, label: a small claims hearing, needs: video_link, skill: civil, min_minutes: 30,
  max_minutes: 90, priority: 1}
- {id: youth_plea, label: a youth plea hearing, needs: secure_dock, skill: youth, min_minutes: 30,
  max_minutes: 60, priority: 3}
- {id: injunction, label: an injunction application, needs: family_suite, skill: civil, min_minutes: 30,
  max_minutes: 60, priority: 5}
clients: [Mr D. Hallam, Ms P. Achterberg, Mr J. Oyelaran, the Whitcombe family, Mrs R. Szabo, Mr K. Lindgren,
  Ms T. Moyo, Mr A. Castellano, the Pryce children, Mr B. Farouk, Ms L. Devereux, Mr S. Okonjo, Ms H. Varga,
  Mr C. Ilunga, Mrs E. Bramwell, Mr F. Tavares]
emergencies:
- {task_type: injunction, text: '{client} needs an urgent non-molestation order heard by {time}.',
  start_within_minutes: 120}
- {task_type: bail_application, text: '{client} was remanded overnight and must be produced before a judge by
    {time}.', start_within_minutes: 90}
hidden_rules:
- {kind: site_excludes_type, text: 'The video codec in {site} failed its test call: no {task_type} there
    tomorrow.', task_types: [bail_application, small_claims]}
- {kind: staff_excludes_type, text: '{staff} has declared a conflict of interest and cannot hear any {task_type}
    tomorrow.'}
- {kind: staff_ends_by, text: '{staff} must rise by {time} to sit on the appeal panel.'}
- {kind: shared_equipment, text: 'Only one secure escort van is booked: {task_types} hearings cannot overlap.',
  task_types: [sentencing, youth_plea]}
late_start: ['{staff} is signing warrants in chambers until {time}.']
early_finish: ['{staff} leaves at {time} for a judicial college seminar.']
prefers_staff: ['{client} has appeared before {staff} before; listing with {staff} saves a re-reading.']
prefers_before: ['{client} travels from Dover and asks to be heard by {time} if possible.']
routine_notes: ['{client}: interpreter (Romanian) booked.', '{client}: bundle lodged on time.',
  '{client}: special measures screen requested.', '{client}: counsel confirmed availability.']
invalid_requests: ['{client}: the case was settled yesterday afternoon; the clerk has the consent order.',
  '{client}: listed in error; this matter belongs to the county court.',
  '{client}: the defendant is in hospital and the hearing was vacated by the judge.']
site_blocked: ['{site} is closed for asbestos survey work.', '{site} is reserved for a coroner''s inquest.']
staff_absent: ['{staff} is unwell and will not sit tomorrow.', '{staff} has been called to the Court of Appeal.']
notices: ['The cafe opens at 08:45.', 'Security scanners at the main entrance are being upgraded.',
  'Robing room lockers must be emptied by Friday.']
tools: {inspect: read_file, assign: list_hearing, unassign: vacate_hearing, submit: publish_list}
"""


@pytest.fixture(scope="module")
def court(family):
    return _bind(family, family.parse_domain(yaml.safe_load(COURT), source="court"))


def test_a_second_world_runs_on_the_same_engine_and_the_oracle_solves_every_tier(family, court):
    env = court.env_cls()
    assert env.reset(seed=1, eci=1).tasks[0].id.startswith("hearing_")
    for eci in range(1, 6):
        results = [run_episode(env, family.oracle(), 1_000_000 + s, eci) for s in range(8)]
        assert all(r.solved for r in results), (eci, [r.seed for r in results if not r.solved])
        assert min(r.episode_return for r in results) >= court.section.solved_reward
    random_rate = statistics.fmean(run_episode(env, RandomPolicy(court.action_cls), s, 1).solved for s in range(20))
    assert random_rate <= 0.1


def test_the_heuristic_falls_with_the_tier(family, dock):
    env = dock.env_cls()
    rates = [statistics.fmean(run_episode(env, family.heuristic(), 2_000_000 + s, eci).solved for s in range(30))
             for eci in (1, 3, 5)]
    assert rates[0] >= 0.5 and rates[0] - rates[2] >= 0.4 and rates[1] <= rates[0], rates


def test_episodes_are_a_function_of_seed_and_tier(rooms):
    def trace(seed, eci):
        env = rooms.env_cls()
        steps = []
        run_episode(env, RandomPolicy(rooms.action_cls), seed, eci,
                    on_step=lambda a, o: steps.append(o.model_dump_json(exclude={"metadata"})))
        return steps

    for eci in (1, 5):
        assert trace(3, eci) == trace(3, eci)
    env = rooms.env_cls()
    assert len({env.reset(seed=s, eci=3).model_dump_json(exclude={"metadata"}) for s in range(10)}) == 10


def test_an_arrival_that_is_not_a_clock_time_is_a_schema_problem_not_a_crash():
    """The operating rooms' 1.5B wrote an arrival window without 'HH:MM': the checks split it on ':' and raised,
    ending the whole design."""
    family = get_family("scheduling")
    data = read_domain_file(family.examples()["operating_rooms"])
    data["task_types"][0]["arrival"] = ["morning", "09:00"]
    with pytest.raises(DomainError, match=r"task_types\[0\]\.arrival"):
        family.parse_domain(data)


def test_the_draft_tidy_makes_the_last_mandatory_kinds_optional_until_three_are():
    from openadapt.families.scheduling.domain import SchedulingDomain

    kinds = [{"id": f"k{i}", "mandatory": True} for i in range(4)]
    tidied = SchedulingDomain.tidy({"task_types": kinds})["task_types"]
    assert [k["mandatory"] for k in tidied] == [True, False, False, False] and kinds[3]["mandatory"] is True
    mixed = [{"id": "a", "mandatory": False}, {"id": "b", "mandatory": True}, {"id": "c", "mandatory": True},
             {"id": "d", "mandatory": False}, {"id": "e", "mandatory": True}]
    assert [k["mandatory"] for k in SchedulingDomain.tidy({"task_types": mixed})["task_types"]] == [
        False, True, True, False, False]
    sound = read_domain_file(get_family("scheduling").examples()["operating_rooms"])
    assert SchedulingDomain.tidy(sound) == sound


def test_the_draft_tidy_puts_durations_on_the_grid_drops_arrivals_before_the_day_and_repeated_clients():
    """The operating rooms' 1.5B draft: 15-30 minutes on a 30-minute grid, arrival 00:00-00:30 on a day from
    07:30; a dock draft: one client six times. The tidied draft has none of those problems."""
    from openadapt.families.scheduling.domain import SchedulingDomain

    sound = read_domain_file(get_family("scheduling").examples()["operating_rooms"])
    draft = copy.deepcopy(sound)
    slot = draft["clock"]["slot_minutes"]
    kind = draft["task_types"][1]
    kind.update(min_minutes=slot // 2, max_minutes=slot + 1, arrival=["00:00", "00:30"])
    draft["clients"] = draft["clients"][:3] + [draft["clients"][0]] * 3 + draft["clients"][3:]
    tidied = SchedulingDomain.tidy(draft)
    assert (tidied["task_types"][1]["min_minutes"], tidied["task_types"][1]["max_minutes"]) == (slot, 2 * slot)
    assert tidied["task_types"][1]["arrival"] == [] and tidied["clients"] == sound["clients"]
    problems = [p for p in get_family("scheduling").parse_domain(tidied).problems()
                if p.path.startswith(("domain.task_types[1]", "domain.clients"))]
    assert not problems
    kept = copy.deepcopy(sound)
    kept["task_types"][1]["arrival"] = ["09:00", "10:00"]  # a window in the day is the draft's to keep
    assert SchedulingDomain.tidy(kept)["task_types"][1]["arrival"] == ["09:00", "10:00"]


def test_a_task_kind_longer_than_half_of_normal_hours_breaks_the_rule_it_was_told(family):
    data = _example_data(family)
    data["task_types"][0]["max_minutes"] = 300  # over half of 08:00-17:00: no site could hold two in a day
    with pytest.raises(DomainError) as err:
        family.parse_domain(data)
    (broken,) = [p for p in err.value.problems if p.rule == "two_per_day"]
    assert broken.path == "domain.task_types[0].max_minutes"
    assert broken.message.startswith(family.domain.rule("two_per_day").says)
