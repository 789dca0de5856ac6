"""Incident triage: find the root-cause service, the fault and the right mitigation of a degraded system.

Each episode is generated from the catalogue by the seed. The alert fires on a service that may only be a
victim of a fault further down its dependency chain (from ECI 3); evidence is partly withheld or blurred
(ECI 2); misleading lines from other services are injected (ECI 3); and a hidden operational constraint,
revealed only by the root service's runbook notes, can change the right mitigation (ECI 4).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from openadapt.kit import OpenAdaptEnvironment, Outcome, RewardComponent, RewardComponents, TierProfile
from openadapt.kit.text import grounded, is_stuffed

try:
    from ..models import IrrigationPumpsTriageAction, IrrigationPumpsTriageObservation
    from .catalogue import (
        BACKGROUND_LOGS,
        DATASTORES,
        DEPENDENTS,
        FAULTS,
        NOISE_LOGS,
        ROOT_CAUSES,
        SERVICES,
        SYMPTOM_LOGS,
        TOPOLOGY,
        Fault,
    )
except ImportError:  # standalone `uvicorn server.app:app`
    from models import IrrigationPumpsTriageAction, IrrigationPumpsTriageObservation
    from server.catalogue import (
        BACKGROUND_LOGS,
        DATASTORES,
        DEPENDENTS,
        FAULTS,
        NOISE_LOGS,
        ROOT_CAUSES,
        SERVICES,
        SYMPTOM_LOGS,
        TOPOLOGY,
        Fault,
    )

CONSTRAINT_RATE = 0.6  # share of hidden-constraint-tier episodes whose default mitigation is wrong
MIN_EVIDENCE_CHARS = 12
_STUFFING_TERMS = tuple(sorted({*ROOT_CAUSES, *(rc.replace("_", " ") for rc in ROOT_CAUSES)}))


@dataclass
class Incident:
    """The privileged truth of one episode (what the oracle reads; never served)."""

    root: str
    fault: Fault
    mitigation: str
    constrained: bool
    path: list[str]  # alerting service first, root last
    logs: dict[str, list[str]]
    metrics: dict[str, list[str]]
    dependencies: dict[str, list[str]]
    notes: dict[str, list[str]]
    runbook_required: bool
    min_steps: int
    supporting: list[str] = field(default_factory=list)  # fault evidence lines as the agent would see them

    @property
    def alert_service(self) -> str:
        return self.path[0]


@dataclass
class Verdict:
    """The scored diagnosis; the reward components read from it."""

    correctness: float = 0.0
    efficiency: float = 0.0
    quality: float = 0.0
    calibration: float = 0.0
    penalty: float = 0.0
    solved: bool = False


def _fill(template: str, rng: random.Random, **names: str) -> str:
    values = {
        "n": rng.randint(120, 9000), "pct": rng.randint(86, 99), "m": rng.choice((20, 32, 50, 64)),
        "build": f"v{rng.randint(2, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 9)}",
        "date": f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00Z",
        "dep": names.get("dep", "?"), "svc": names.get("svc", "?"),
    }
    return template.format(**values)


def _trend(healthy: float, faulty: float) -> str:
    mid = healthy + (faulty - healthy) * 0.6
    return f"{healthy:g} -> {mid:.0f} -> {faulty:g}"


class IrrigationPumpsTriageEnvironment(OpenAdaptEnvironment[IrrigationPumpsTriageAction, IrrigationPumpsTriageObservation]):
    observation_type = IrrigationPumpsTriageObservation

    # ---- reward ---------------------------------------------------------------------------------------
    def build_rubric(self) -> RewardComponents:
        self._verdict = Verdict()
        v = lambda name: (lambda action, outcome: getattr(self._verdict, name))  # noqa: E731
        return RewardComponents(
            RewardComponent("correctness", 0.0, 0.50, v("correctness"), "root service 0.20, fault 0.20, fix 0.10"),
            RewardComponent("efficiency", 0.0, 0.30, v("efficiency"), "steps beyond the shortest honest path"),
            RewardComponent("quality", 0.0, 0.15, v("quality"), "observed supporting evidence and reasoning"),
            RewardComponent("calibration", 0.0, 0.05, v("calibration"), "confidence matches the outcome"),
            RewardComponent("penalty", -0.50, 0.0, v("penalty"), "stuffing, invented evidence, overconfidence"),
        )

    # ---- episode generation ---------------------------------------------------------------------------
    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        depth = rng.randint(1, tier.depth) if tier.depth > 1 else tier.depth
        fault = FAULTS[rng.choice(ROOT_CAUSES)]
        eligible = [s for s in SERVICES
                    if not (fault.datastore_only and s not in DATASTORES)
                    and not (fault.app_only and s in DATASTORES)]
        chains = {s: self._chain(s, depth, rng) for s in eligible}
        deepest = max(len(c) for c in chains.values())
        root = rng.choice(sorted(s for s, c in chains.items() if len(c) == deepest))
        path = chains[root]
        constrained = tier.hidden_constraints and rng.random() < CONSTRAINT_RATE
        inc = Incident(
            root=root, fault=fault, constrained=constrained, path=path,
            mitigation=fault.constraint.mitigation if constrained else fault.mitigation,
            logs={}, metrics={}, dependencies={}, notes={},
            # The shortest path an agent without privileged state can justify: a hidden-constraint tier
            # obliges it to read the root's runbook notes whether or not a constraint turns out to be there.
            runbook_required=tier.hidden_constraints,
            min_steps=1 + (len(path) > 1) + (len(path) > 2) + tier.hidden_constraints,
        )
        p = self.perturb
        for svc in SERVICES:
            inc.logs[svc] = self._logs_for(svc, inc, rng)
            inc.metrics[svc] = self._metrics_for(svc, inc, rng)
            inc.notes[svc] = [f"{svc}: owned by team-{svc.split('-')[0]}; pager rotation on call."]
            inc.dependencies[svc] = self._dependency_report(svc, inc)
        if constrained:
            inc.notes[root].append(fault.constraint.note.format(svc=root))
        self._incident = inc
        self._verdict = Verdict()

        alert = path[0]
        error_rate = p.jitter(38.0 if alert != root else 12.0 + rng.random() * 40)
        self._alert = p.blur_numbers(f"[SEV2] {alert}: error rate {error_rate:.0f}% and p99 latency "
                                     f"{rng.randint(900, 4000)}ms over the last 10 minutes")
        noise = [_fill(t, rng, svc=rng.choice(SERVICES)) for t in rng.sample(NOISE_LOGS, round(tier.noise * 10))]
        self._seen_logs = p.inject(p.inject(inc.logs[alert], noise, len(noise)), self._distractor_lines(inc, rng))
        self._seen_metrics = list(inc.metrics[alert])
        self._seen_deps: list[str] = []
        self._runbook = self._runbook_snippets(fault, rng)
        self._inspected: set[tuple[str, str]] = {("inspect_logs", alert), ("query_metrics", alert)}
        self._observed_text = "\n".join(self._seen_logs + self._seen_metrics + [self._alert] + self._runbook)

    def _chain(self, root: str, depth: int, rng: random.Random) -> list[str]:
        """A dependency chain of up to `depth` hops from a victim (first) down to `root` (last)."""
        chain = [root]
        while len(chain) <= depth and DEPENDENTS[chain[0]]:
            chain.insert(0, rng.choice(DEPENDENTS[chain[0]]))
        return chain

    def _logs_for(self, svc: str, inc: Incident, rng: random.Random) -> list[str]:
        p = self.perturb
        background = [_fill(t, rng, svc=svc) for t in rng.sample(BACKGROUND_LOGS, 2)]
        if svc == inc.root:
            # A lossy log shipper: numbers blurred, lines cut short, the source field sometimes lost.
            evidence = [p.truncate(p.blur_numbers(_fill(t, rng, svc=p.missing(svc, "<unknown-source>"))))
                        for t in inc.fault.evidence]
            keep = rng.randrange(len(evidence))  # at least one piece of evidence always survives
            inc.supporting = [e for i, e in enumerate(evidence) if i == keep or not p.chance(p.tier.drop)]
            lines = inc.supporting + background
        elif svc in inc.path:
            dep = inc.path[inc.path.index(svc) + 1]
            symptoms = [p.blur_numbers(_fill(t, rng, svc=svc, dep=dep)) for t in SYMPTOM_LOGS]
            lines = symptoms[:1] + p.withhold(symptoms[1:]) + background
        else:
            lines = background
        rng.shuffle(lines)
        return lines

    def _metrics_for(self, svc: str, inc: Incident, rng: random.Random) -> list[str]:
        p = self.perturb
        if svc == inc.root:
            readings = [f"{svc} {name}: {p.missing(_trend(p.jitter(h), p.jitter(f)))}"
                        for name, h, f in inc.fault.metrics]
        elif svc in inc.path:
            readings = [f"{svc} error_rate_pct: {p.missing(_trend(0.2, round(p.jitter(35.0))))}",
                        f"{svc} p99_latency_ms: {p.missing(_trend(120, round(p.jitter(3000.0))))}"]
        else:
            readings = [f"{svc} error_rate_pct: {p.jitter(0.3):.1f} (flat)",
                        f"{svc} p99_latency_ms: {p.jitter(110.0):.0f} (flat)"]
        return readings

    def _dependency_report(self, svc: str, inc: Incident) -> list[str]:
        report, frontier = [], list(TOPOLOGY[svc])
        seen: set[str] = set()
        while frontier:
            dep = frontier.pop(0)
            if dep in seen:
                continue
            seen.add(dep)
            frontier.extend(TOPOLOGY[dep])
            if dep in inc.path:
                status = "degraded (errors rising, calls timing out)"
            else:
                status = self.perturb.missing("healthy", "status unknown (probe timed out)")
            report.append(f"{svc} -> {dep}: {status}")
        return report or [f"{svc} has no downstream dependencies"]

    def _distractor_lines(self, inc: Incident, rng: random.Random) -> list[str]:
        if self.tier.distractors == 0:
            return []
        bystanders = [s for s in SERVICES if s not in inc.path]
        others = [f for f in FAULTS.values() if f is not inc.fault]
        pool = []
        for fault in rng.sample(others, min(len(others), self.tier.distractors + 1)):
            svc = rng.choice(bystanders)
            pool.append(f"{_fill(rng.choice(fault.evidence), rng, svc=svc)} [resolved {rng.randint(2, 9)}h ago]")
        healthy_dep = [d for d in TOPOLOGY[inc.path[0]] if d not in inc.path]
        if healthy_dep:
            pool.append(f"WARN {inc.path[0]} retrying call to {rng.choice(healthy_dep)} (attempt 1 of 3, "
                        "succeeded)")
        return pool

    def _runbook_snippets(self, fault: Fault, rng: random.Random) -> list[str]:
        others = rng.sample([f for f in FAULTS.values() if f is not fault], 2 + self.tier.distractors // 2)
        snippets = [f"[{f.root_cause}] {f.runbook} -> {f.mitigation}" for f in [fault, *others]]
        true = snippets[0]
        kept = self.perturb.withhold(snippets, protect=lambda s: s == true and self.tier.eci == 1)
        rng.shuffle(kept)
        return kept

    # ---- stepping -------------------------------------------------------------------------------------
    def apply(self, action: IrrigationPumpsTriageAction) -> Outcome:
        if action.tool is None:
            return Outcome("Say which tool to use: one of inspect_logs, query_metrics, check_dependencies, "
                           "read_runbook, diagnose_incident.", error="missing_tool")
        if action.service is None:
            return Outcome(f"{action.tool} needs a service.", error="missing_service")
        if action.service not in TOPOLOGY:
            return Outcome(f"Unknown service {action.service!r}.", error="unknown_service")
        if action.tool == "diagnose_incident":
            return self._diagnose(action)
        key = (action.tool, action.service)
        if key in self._inspected:
            return Outcome(f"{action.tool} on {action.service} shows nothing new.")
        self._inspected.add(key)
        inc = self._incident
        revealed = {
            "inspect_logs": (self._seen_logs, inc.logs),
            "query_metrics": (self._seen_metrics, inc.metrics),
            "check_dependencies": (self._seen_deps, inc.dependencies),
            "read_runbook": (self._runbook, inc.notes),
        }[action.tool]
        lines = revealed[1][action.service]
        revealed[0].extend(lines)
        self._observed_text += "\n" + "\n".join(lines)
        return Outcome(f"{action.tool} on {action.service}: {len(lines)} new line(s).")

    def _diagnose(self, action: IrrigationPumpsTriageAction) -> Outcome:
        inc, verdict = self._incident, Verdict()
        if action.root_cause is None or action.mitigation is None:
            return Outcome("diagnose_incident needs root_cause and mitigation.", error="incomplete_diagnosis")
        hits = (action.service == inc.root, action.root_cause == inc.fault.root_cause,
                action.mitigation == inc.mitigation)
        verdict.correctness = 0.20 * hits[0] + 0.20 * hits[1] + 0.10 * hits[2]
        verdict.solved = all(hits)

        steps, budget = self._state.step_count, self._state.step_budget
        slack = budget - inc.min_steps
        wasted = max(0, steps - inc.min_steps)
        pace = 1.0 if wasted == 0 else (max(0.0, 1.0 - wasted / slack) if slack > 0 else 0.0)
        verdict.efficiency = 0.30 * (verdict.correctness / 0.50) * pace

        observed, invented = grounded(action.evidence, self._observed_text, MIN_EVIDENCE_CHARS)
        evidence = observed + invented
        supports = any(e in line for e in observed for line in inc.supporting if line in self._observed_text)
        words = len(action.reasoning.split())
        verdict.quality = (0.08 * supports
                           + 0.04 * (action.service in action.reasoning and 8 <= words <= 150)
                           + 0.03 * (bool(evidence) and action.confidence is not None))

        confidence = action.confidence
        if confidence is not None:
            verdict.calibration = 0.05 * (1.0 - abs(confidence - float(verdict.solved)))

        stuffed = is_stuffed(action.reasoning, _STUFFING_TERMS) or len(evidence) > 6
        overconfident = confidence is not None and confidence >= 0.8 and not verdict.solved
        verdict.penalty = -(0.20 * stuffed + 0.15 * bool(invented) + 0.15 * overconfident)
        self._verdict = verdict
        return Outcome(
            "Diagnosis submitted: " + ("correct." if verdict.solved else "not the whole answer."),
            terminal=True, solved=verdict.solved,
        )

    # ---- views ----------------------------------------------------------------------------------------
    def observe(self) -> dict[str, Any]:
        return {
            "alert": self._alert,
            "services": list(SERVICES),
            "logs": self._seen_logs,
            "metrics": self._seen_metrics,
            "dependencies": self._seen_deps,
            "runbook": self._runbook,
        }

    def oracle_view(self) -> Incident:
        return self._incident

    def secret_values(self) -> list[str]:
        # Constrained mitigations are never a runbook default: seen before read_runbook(root), they leak.
        return [self._incident.mitigation] if self._incident.constrained else []

    @classmethod
    def prompt_context(cls) -> dict[str, Any]:
        from openadapt.kit import TIER_MEANINGS

        return {"services": SERVICES, "tiers": TIER_MEANINGS}
