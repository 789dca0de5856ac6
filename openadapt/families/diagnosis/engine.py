"""The diagnosis engine: find the component where the trouble starts, its fault, and the right fix.

Each episode is generated from the domain by the seed. The alert fires on a component that may only be a victim
of a fault further down its dependency chain (tier depth); evidence is partly withheld or blurred (noise, drop);
misleading lines from other components are injected (distractors); and a hidden operational constraint, revealed
only by the faulty component's runbook notes, can change the right fix (hidden constraints). Nothing here knows
what the components or faults are: the domain says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

from openadapt.families.diagnosis.domain import DiagnosisDomain, Fault
from openadapt.families.domain import fill
from openadapt.families.engine import FamilyEnvironment, per_domain
from openadapt.kit import Outcome, TierProfile
from openadapt.kit.text import grounded, is_stuffed

CONSTRAINT_RATE = 0.6  # share of hidden-constraint-tier episodes whose usual fix is wrong
MIN_EVIDENCE_CHARS = 12
UNKNOWN_SOURCE = "<unknown-source>"


@dataclass
class Incident:
    """The privileged truth of one episode (what the oracle reads; never served)."""

    root: str
    fault: Fault
    fix: str
    constrained: bool
    path: list[str]  # alerting component first, root last
    logs: dict[str, list[str]]
    metrics: dict[str, list[str]]
    dependencies: dict[str, list[str]]
    notes: dict[str, list[str]]
    runbook_required: bool
    min_steps: int
    supporting: list[str] = field(default_factory=list)  # fault evidence lines as the agent would see them

    @property
    def alert_component(self) -> str:
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


def _values(rng: random.Random) -> dict[str, Any]:
    """The random figures a log line may quote (always drawn, so every line costs the same draws)."""
    return {
        "n": rng.randint(120, 9000), "pct": rng.randint(86, 99), "m": rng.choice((20, 32, 50, 64)),
        "build": f"v{rng.randint(2, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 9)}",
        "date": f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00Z",
    }


def _line(template: str, rng: random.Random, **names: str) -> str:
    return fill(template, **_values(rng), component=names.get("component", "?"),
                dependency=names.get("dependency", "?"))


def _trend(healthy: float, faulty: float) -> str:
    mid = healthy + (faulty - healthy) * 0.6
    return f"{healthy:g} -> {mid:.0f} -> {faulty:g}"


class DiagnosisEnvironment(FamilyEnvironment):
    domain: ClassVar[DiagnosisDomain]
    REWARD = (
        ("correctness", 0.0, 0.50, "component 0.20, fault 0.20, fix 0.10"),
        ("efficiency", 0.0, 0.30, "steps beyond the shortest honest path"),
        ("quality", 0.0, 0.15, "observed supporting evidence and reasoning"),
        ("calibration", 0.0, 0.05, "confidence matches the outcome"),
        ("penalty", -0.50, 0.0, "stuffing, invented evidence, overconfidence"),
    )

    # ---- the domain, indexed once per class -----------------------------------------------------------
    @per_domain
    def _index(cls) -> dict[str, Any]:
        d = cls.domain
        names = tuple(c.name for c in d.components)
        return {
            "names": names,
            "topology": {c.name: tuple(c.depends_on) for c in d.components},
            "kinds": {c.name: c.kind for c in d.components},
            "notes": {c.name: c.note for c in d.components},
            "dependents": {n: tuple(c.name for c in d.components if n in c.depends_on) for n in names},
            "faults": {f.id: f for f in d.faults},
            "stuffing": tuple(sorted({*(f.id for f in d.faults), *(f.id.replace("_", " ") for f in d.faults)})),
        }

    # ---- episode generation ---------------------------------------------------------------------------
    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        d, ix = self.domain, self._index()
        names = ix["names"]
        depth = rng.randint(1, tier.depth) if tier.depth > 1 else tier.depth
        fault = ix["faults"][rng.choice([f.id for f in d.faults])]
        eligible = [n for n in names if not fault.applies_to or ix["kinds"][n] in fault.applies_to]
        chains = {n: self._chain(n, depth, rng) for n in eligible}
        deepest = max(len(c) for c in chains.values())
        root = rng.choice(sorted(n for n, c in chains.items() if len(c) == deepest))
        path = chains[root]
        constrained = tier.hidden_constraints and rng.random() < CONSTRAINT_RATE
        inc = Incident(
            root=root, fault=fault, constrained=constrained, path=path,
            fix=fault.constraint.fix if constrained else fault.fix,
            logs={}, metrics={}, dependencies={}, notes={},
            # The shortest path an agent without privileged state can justify: a hidden-constraint tier
            # obliges it to read the root's notes whether or not a constraint turns out to be there.
            runbook_required=tier.hidden_constraints,
            min_steps=1 + (len(path) > 1) + (len(path) > 2) + tier.hidden_constraints,
        )
        p = self.perturb
        for name in names:
            inc.logs[name] = self._logs_for(name, inc, rng)
            inc.metrics[name] = self._metrics_for(name, inc)
            inc.notes[name] = [f"{name}: {ix['notes'][name]}"]
            inc.dependencies[name] = self._dependency_report(name, inc)
        if constrained:
            inc.notes[root].append(fill(fault.constraint.note, component=root))
        self._incident = inc
        self._verdict = Verdict()

        alert = path[0]
        rate = p.jitter(38.0 if alert != root else 12.0 + rng.random() * 40)
        latency = rng.randint(900, 4000)
        self._alert = p.blur_numbers(fill(d.alert, component=alert, rate=f"{rate:.0f}", latency=latency))
        noise = [_line(t, rng, component=rng.choice(names))
                 for t in rng.sample(d.noise_lines, min(len(d.noise_lines), round(tier.noise * 10)))]
        self._seen_logs = p.inject(p.inject(inc.logs[alert], noise, len(noise)), self._distractor_lines(inc, rng))
        self._seen_metrics = list(inc.metrics[alert])
        self._seen_deps: list[str] = []
        self._notes = self._runbook_snippets(fault, rng)
        self._inspected: set[tuple[str, str]] = {(d.tools.logs, alert), (d.tools.metrics, alert)}
        self._observed_text = "\n".join(self._seen_logs + self._seen_metrics + [self._alert] + self._notes)

    def _chain(self, root: str, depth: int, rng: random.Random) -> list[str]:
        """A dependency chain of up to `depth` hops from a victim (first) down to `root` (last)."""
        dependents = self._index()["dependents"]
        chain = [root]
        while len(chain) <= depth and dependents[chain[0]]:
            chain.insert(0, rng.choice(dependents[chain[0]]))
        return chain

    def _logs_for(self, name: str, inc: Incident, rng: random.Random) -> list[str]:
        p, d = self.perturb, self.domain
        background = [_line(t, rng, component=name) for t in rng.sample(d.background_lines, 2)]
        if name == inc.root:
            # A lossy log shipper: numbers blurred, lines cut short, the source field sometimes lost.
            evidence = [p.truncate(p.blur_numbers(_line(t, rng, component=p.missing(name, UNKNOWN_SOURCE))))
                        for t in inc.fault.evidence]
            keep = rng.randrange(len(evidence))  # at least one piece of evidence always survives
            inc.supporting = [e for i, e in enumerate(evidence) if i == keep or not p.chance(p.tier.drop)]
            lines = inc.supporting + background
        elif name in inc.path:
            dep = inc.path[inc.path.index(name) + 1]
            symptoms = [p.blur_numbers(_line(t, rng, component=name, dependency=dep)) for t in d.symptom_lines]
            lines = symptoms[:1] + p.withhold(symptoms[1:]) + background
        else:
            lines = background
        rng.shuffle(lines)
        return lines

    def _metrics_for(self, name: str, inc: Incident) -> list[str]:
        p = self.perturb
        if name == inc.root:
            return [f"{name} {m.name}: {p.missing(_trend(p.jitter(m.healthy), p.jitter(m.faulty)))}"
                    for m in inc.fault.metrics]
        victim = self.domain.victim_metrics
        if name in inc.path:
            return [f"{name} {m.name}: {p.missing(_trend(m.healthy, round(p.jitter(m.faulty))))}" for m in victim]
        return [f"{name} {m.name}: {p.jitter(m.healthy):.1f} (flat)" for m in victim]

    def _dependency_report(self, name: str, inc: Incident) -> list[str]:
        topology, status = self._index()["topology"], self.domain.dependency_status
        report, frontier = [], list(topology[name])
        seen: set[str] = set()
        while frontier:
            dep = frontier.pop(0)
            if dep in seen:
                continue
            seen.add(dep)
            frontier.extend(topology[dep])
            health = status.degraded if dep in inc.path else self.perturb.missing(status.healthy, status.unknown)
            report.append(f"{name} -> {dep}: {health}")
        return report or [f"{name} has no dependencies"]

    def _distractor_lines(self, inc: Incident, rng: random.Random) -> list[str]:
        if self.tier.distractors == 0:
            return []
        d, ix = self.domain, self._index()
        bystanders = [n for n in ix["names"] if n not in inc.path]
        others = [f for f in d.faults if f is not inc.fault]
        pool = []
        for fault in rng.sample(others, min(len(others), self.tier.distractors + 1)):
            name = rng.choice(bystanders)
            pool.append(f"{_line(rng.choice(fault.evidence), rng, component=name)} [resolved {rng.randint(2, 9)}h ago]")
        healthy_dep = [dep for dep in ix["topology"][inc.path[0]] if dep not in inc.path]
        if healthy_dep:
            pool.append(fill(d.recovered_line, component=inc.path[0], dependency=rng.choice(healthy_dep)))
        return pool

    def _runbook_snippets(self, fault: Fault, rng: random.Random) -> list[str]:
        others = [f for f in self.domain.faults if f is not fault]
        others = rng.sample(others, min(len(others), 2 + self.tier.distractors // 2))
        snippets = [f"[{f.id}] {f.runbook} -> {f.fix}" for f in [fault, *others]]
        true = snippets[0]
        kept = self.perturb.withhold(snippets, protect=lambda s: s == true and self.tier.eci == 1)
        rng.shuffle(kept)
        return kept

    # ---- stepping -------------------------------------------------------------------------------------
    def apply(self, action: Any) -> Outcome:
        tools = self.domain.tools
        if action.tool is None:
            names = ", ".join(tools.model_dump().values())
            return Outcome(f"Say which tool to use: one of {names}.", error="missing_tool")
        if action.component is None:
            return Outcome(f"{action.tool} needs a component.", error="missing_component")
        if action.component not in self._index()["topology"]:
            return Outcome(f"Unknown {self.domain.component_noun} {action.component!r}.", error="unknown_component")
        if action.tool == tools.diagnose:
            return self._diagnose(action)
        key = (action.tool, action.component)
        if key in self._inspected:
            return Outcome(f"{action.tool} on {action.component} shows nothing new.")
        self._inspected.add(key)
        inc = self._incident
        seen, source = {
            tools.logs: (self._seen_logs, inc.logs),
            tools.metrics: (self._seen_metrics, inc.metrics),
            tools.dependencies: (self._seen_deps, inc.dependencies),
            tools.notes: (self._notes, inc.notes),
        }[action.tool]
        lines = source[action.component]
        seen.extend(lines)
        self._observed_text += "\n" + "\n".join(lines)
        return Outcome(f"{action.tool} on {action.component}: {len(lines)} new line(s).")

    def _diagnose(self, action: Any) -> Outcome:
        inc, verdict = self._incident, Verdict()
        if action.fault is None or action.fix is None:
            return Outcome(f"{action.tool} needs a fault and a fix.", error="incomplete_diagnosis")
        hits = (action.component == inc.root, action.fault == inc.fault.id, action.fix == inc.fix)
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
                           + 0.04 * (action.component in action.reasoning and 8 <= words <= 150)
                           + 0.03 * (bool(evidence) and action.confidence is not None))

        confidence = action.confidence
        if confidence is not None:
            verdict.calibration = 0.05 * (1.0 - abs(confidence - float(verdict.solved)))

        stuffed = is_stuffed(action.reasoning, self._index()["stuffing"]) or len(evidence) > 6
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
            "components": list(self._index()["names"]),
            "logs": self._seen_logs,
            "metrics": self._seen_metrics,
            "dependencies": self._seen_deps,
            "notes": self._notes,
        }

    def oracle_view(self) -> Incident:
        return self._incident

    def secret_values(self) -> list[str]:
        # Constrained fixes are never a runbook default: seen before the root's notes are read, they leak.
        return [self._incident.fix] if self._incident.constrained else []
