"""The diagnosis domain: a system of components that depend on each other, the faults they can have, and what
an investigator sees.

Each episode plants one fault in one component. Components that depend on it (directly or a few hops away) show
symptoms; the alert may fire on such a victim. The agent investigates through four tools (logs, metrics,
dependency health, runbook notes) and submits one diagnosis: the component, the fault, and the fix.
"""

from __future__ import annotations

import re

from pydantic import Field

from openadapt.families.domain import (
    IDENT,
    LOG_LEVELS,
    Code,
    Domain,
    DomainPart,
    DomainProblem,
    Placeholders,
    Reference,
    Rule,
    dependency_cycle,
    duplicates,
    identifier_problems,
    names_differ,
)

# Placeholders the engine fills in log lines (besides {component}/{dependency} where stated).
NUMBER_PLACEHOLDERS = ("n", "pct", "m", "build", "date")
MIN_FIXES = 4  # distinct usual fixes among the faults (rule `usual_fixes`)


class Component(DomainPart):
    name: str = Field(min_length=2, max_length=40, pattern=r"^[a-z0-9][a-z0-9_.-]*$", description=(
        "Identifier of one component of the system, as it appears in its logs, e.g. 'freezer-room-2', "
        "'checkout-service', 'node-7'. Lowercase, digits, '-', '_' or '.'."))
    kind: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "What sort of component this is, one word, e.g. 'compressor', 'evaporator', 'controller', 'app', 'datastore'. "
        "Faults name the kinds they can strike."))
    depends_on: list[str] = Field(default_factory=list, max_length=8, description=(
        "Names of the components this one needs in order to work (it shows symptoms when one of them fails). "
        "No cycles."))
    note: str = Field(min_length=5, max_length=200, description=(
        "This component's own routine runbook note: who owns it, where it is, when it was last serviced, in its "
        "own words (every component's note is different). It never names a fault."))


class Metric(DomainPart):
    name: str = Field(min_length=2, max_length=40, pattern=IDENT,
                      description="metric identifier with its unit, e.g. 'discharge_pressure_bar'")
    healthy: float = Field(description="its usual value when nothing is wrong")
    faulty: float = Field(description="its value when the fault is present (clearly different from healthy)")


# A fix is a verb and its object, two words at least: a one-word fix ('increase', 'update') is a word the episode's
# texts hold anyway, so the secret shows at reset ('increase' in "latency increase"). Every example's fix has the
# form.
VERB_OBJECT = r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$"  # a plain group: llama.cpp's grammars refuse (?:


class Constraint(DomainPart):
    # The note's example is the family's general form of a constraint, in no world of its own (any system has a
    # unit it cannot take offline and a standby to move its load to): a note that takes its words for this
    # world's component is not a copy. Asked without it (with a skeleton of it, other worlds' notes, or part by
    # part), a small model writes the fault's runbook advice or the usual fix instead; with it, it takes the form
    # (docs/history/designer.md).
    FORMS = frozenset({"note"})

    note: str = Field(min_length=20, max_length=300, description=(
        "A runbook note on the faulty component that makes the usual fix wrong, and says what to do instead, "
        "naming that fix in parentheses, e.g. 'runbook note: {component} is the only unit of its kind running "
        "today; do not take it offline. Move its load to the standby unit instead (shift_to_standby).' May use "
        "{component}."))
    fix: str = Field(min_length=3, max_length=40, pattern=VERB_OBJECT,
                     description="the fix the note calls for (an identifier, verb_object)")


class Fault(DomainPart):
    id: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "Identifier of the fault, specific to this world, e.g. 'frosted_evaporator_coil', 'refrigerant_leak'."))
    fix: str = Field(min_length=3, max_length=40, pattern=VERB_OBJECT, description=(
        "Identifier of the usual fix: a verb and what it acts on in this world (verb_object). Different faults "
        "may share a fix only rarely."))
    applies_to: list[str] = Field(default_factory=list, max_length=8, description=(
        "Component kinds this fault can strike (empty: any kind)."))
    evidence: list[str] = Field(min_length=2, max_length=5, description=(
        "Log lines the faulty component prints, specific enough to tell this fault from the others. Each line "
        "starts with a level (ERROR/WARN/INFO) and '{component}', e.g. 'WARN {component} suction pressure "
        "{n} minutes without reaching setpoint'. Placeholders: {component}, {n}, {pct}, {m}, {build}, {date}."))
    telltales: list[str] = Field(min_length=1, max_length=4, description=(
        "One to three words or short phrases from the evidence lines that a hurried investigator would search "
        "for (each must occur in an evidence line), e.g. 'setpoint', 'defrost overdue'."))
    metrics: list[Metric] = Field(min_length=2, max_length=4, description=(
        "Readings of the faulty component that move when this fault is present."))
    runbook: str = Field(min_length=20, max_length=300, description=(
        "The runbook's advice for this fault: how to recognise it and the usual fix, in one or two sentences."))
    constraint: Constraint = Field(description=(
        "A fact about the faulty component, in its notes, that makes the usual fix wrong and calls for another."))


class ToolNames(DomainPart):
    """What the five actions are called in this world (each keeps its role in the mechanics)."""

    logs: str = Field(default="inspect_logs", pattern=IDENT,
                      description="reads a component's recent log lines")
    metrics: str = Field(default="query_metrics", pattern=IDENT,
                         description="reads a component's key readings")
    dependencies: str = Field(default="check_dependencies", pattern=IDENT,
                              description="health of everything a component relies on")
    notes: str = Field(default="read_runbook", pattern=IDENT,
                       description="a component's runbook notes (where operational constraints live)")
    diagnose: str = Field(default="diagnose_incident", pattern=IDENT,
                          description="the final answer: component, fault, fix")


class DependencyStatus(DomainPart):
    degraded: str = Field(default="degraded (errors rising, calls timing out)", max_length=120,
                          description="how a dependency on the failing path is reported")
    healthy: str = Field(default="healthy", max_length=120, description="how a sound dependency is reported")
    unknown: str = Field(default="status unknown (probe timed out)", max_length=120,
                         description="how a dependency whose probe failed is reported (noisy tiers)")


class DiagnosisDomain(Domain):
    KEYS = {"components": "name", "faults": "id"}
    NAMED_LINES = {"symptom_lines": {"component": "components", "dependency": "components"}}
    VARIED_KEYS = frozenset({"components", "faults"})
    # The dependency chain three deep is `min_chain` of the depends_on reference, not a rule here.
    RULES = (
        Rule("usual_fixes", ("faults",),
             f"The faults have at least {MIN_FIXES} different usual fixes (`fix`), so that guessing the most common "
             "fix is not enough."),
        Rule("reading_moves", ("faults",),
             "Each reading of a fault (`metrics`) has a faulty value different from its healthy one: the metrics "
             "tool shows the fault only by that change."),
        Rule("upstream_kinds", ("faults", "components"),
             "A fault that names kinds (`applies_to`) names at least one kind of a component that another component "
             "depends on.",
             "From ECI 3 the alert fires on a component downstream of the faulty one."),
    )
    REFERENCES = {"components.depends_on": Reference("components.name", later_only=True, min_chain=3),
                  "faults.applies_to": Reference("components.kind")}
    PLACEHOLDERS = (
        Placeholders("faults[].evidence[]", ("component", *NUMBER_PLACEHOLDERS), ("component",),
                     says="must name the faulty component with {component}"),
        Placeholders("faults[].constraint.note", ("component",)),
        Placeholders("alert", ("component", "rate", "latency"), ("component",),
                     says="must contain {component} (the alerting one)"),
        Placeholders("symptom_lines[]", ("component", "dependency", *NUMBER_PLACEHOLDERS), ("component", "dependency"),
                     says="must name both {component} and {dependency}"),
        Placeholders("recovered_line", ("component", "dependency")),
        Placeholders("background_lines[]", ("component", *NUMBER_PLACEHOLDERS), ("component",),
                     says="must use {component}"),
        Placeholders("noise_lines[]", ("component", *NUMBER_PLACEHOLDERS), ("component",), says="must use {component}"),
    )

    agent_role: str = Field(min_length=3, max_length=80, description=(
        "Who the agent is, e.g. 'the night-shift refrigeration technician', 'the on-call site reliability engineer'."))
    system_noun: str = Field(min_length=3, max_length=80, description=(
        "What the whole system is called, e.g. 'cold-storage refrigeration plant', 'microservice system'."))
    component_noun: str = Field(default="component", min_length=3, max_length=30, description=(
        "What one component is called, singular, e.g. 'compressor', 'service', 'pod'."))
    components: list[Component] = Field(min_length=6, max_length=40, description=(
        "The components of the system and who depends on whom. Include dependency chains at least three "
        "deep (A depends on B depends on C) so that a fault can sit two hops below the alerting component."))
    faults: list[Fault] = Field(min_length=5, max_length=20, description=(
        "The faults this world knows, each with its own evidence, readings, runbook advice and constraint."))
    tools: ToolNames = Field(default_factory=ToolNames, description=(
        "What the five actions are called in this world, e.g. {'logs': 'read_controller_log', 'metrics': "
        "'read_gauges', 'dependencies': 'check_refrigerant_loop', 'notes': 'read_service_notes', 'diagnose': "
        "'file_work_order'}; each keeps its role."))
    alert: str = Field(min_length=10, max_length=200, description=(
        "The page that opens an episode; must contain {component} (the alerting one) and may use {rate} (a "
        "percentage) and {latency} (a duration in ms), e.g. '[P2] {component}: temperature {rate}% above setpoint'."))
    symptom_lines: list[str] = Field(min_length=3, max_length=3, description=(
        "Exactly three log lines a component prints when something it depends on fails; each uses "
        "{component} and {dependency}: the first says that {dependency} timed out, the second that it refused "
        "the connection, the third that it answered with errors, e.g. 'ERROR {component} request to "
        "{dependency} timed out'."))
    background_lines: list[str] = Field(min_length=4, max_length=10, description=(
        "Routine log lines a healthy component prints (no fault signal); use {component}, may use {n}, {pct}."))
    recovered_line: str = Field(min_length=10, max_length=200, description=(
        "A line in which a component mentions a HEALTHY dependency that recovered, e.g. 'WARN {component} "
        "retrying call to {dependency} (attempt 1 of 3, succeeded)'. Misleads on adversarial tiers."))
    noise_lines: list[str] = Field(min_length=4, max_length=10, description=(
        "Benign lines that share words with fault evidence (they mislead a keyword matcher on noisy tiers), "
        "e.g. 'INFO {component} defrost cycle completed on schedule'. Use {component}."))
    victim_metrics: list[Metric] = Field(min_length=2, max_length=2, description=(
        "Two readings of this world's own that degrade on every component downstream of a fault, named for "
        "what this world measures, e.g. 'supply_air_temp_c' and 'compressor_duty_pct' in a refrigeration plant."))
    dependency_status: DependencyStatus = Field(default_factory=DependencyStatus, description=(
        "How the dependency-health tool words a dependency's state in this world."))

    # ---- drafts ------------------------------------------------------------------------------------------
    @classmethod
    def tidy(cls, data: dict) -> dict:
        """Telltales that do not occur in their fault's evidence give way to the evidence's own most distinctive
        words, and a telltale listed twice is listed once; fault ids and fixes spelled with hyphens or spaces
        become identifiers; a constraint note and its fix are made to agree (`_naming_its_fix`); an evidence line's
        unknown placeholder, in braces or angle brackets, is read as what it stands for (`_known_placeholders`,
        `_angle_slots`); a log line without the component it is printed by (a fault's evidence, a symptom, a
        background or a noise line) gets '{component}' (a small model leaves it out of fault evidence, even in
        repairs); a dependency listed twice is listed once."""
        data = dict(data)
        names = [c["name"] for c in data.get("components", [])
                 if isinstance(c, dict) and isinstance(c.get("name"), str)]
        faults = [dict(f) for f in data.get("faults", []) if isinstance(f, dict)]
        for fault in faults:
            for key in ("id", "fix"):
                if key in fault:
                    fault[key] = _identifier(fault[key])
            constraint = fault.get("constraint")
            if isinstance(constraint, dict) and isinstance(constraint.get("fix"), str):
                fix = _identifier(constraint["fix"])
                note = str(constraint.get("note", "")).replace(constraint["fix"], fix)
                fault["constraint"] = {**constraint, "fix": fix, "note": note}
            if isinstance(fault.get("evidence"), list):
                fault["evidence"] = [_with_component(_known_placeholders(line), "ERROR", names)
                                     for line in fault["evidence"]]
        if faults:
            texts = [" ".join(str(e) for e in f.get("evidence", [])) for f in faults]
            for i, fault in enumerate(faults):
                kept = list(dict.fromkeys(t for t in fault.get("telltales", []) if isinstance(t, str) and t
                                          and t in texts[i]))  # a small model repeats telltales: 'water seeping'
                others = " ".join(t for j, t in enumerate(texts) if j != i).lower()
                words = [w.strip(".,:;()'\"") for w in texts[i].split()]
                own = [w for w in dict.fromkeys(words) if len(w) >= 5 and "{" not in w and w.lower() not in others
                       and w.upper() != w]
                fault["telltales"] = (kept or sorted(own, key=len, reverse=True)[:2] or fault.get("telltales", []))[:4]
                if isinstance(fault.get("constraint"), dict):
                    fault["constraint"] = _naming_its_fix(fault["constraint"], fault.get("fix"))
            data["faults"] = faults
        for name, level in (("background_lines", "INFO"), ("noise_lines", "INFO")):
            data[name] = [_with_component(_angle_slots(line), level, names) for line in data.get(name, [])]
        # A dependency named twice is named once (a small model repeats them: a replica set needing
        # `deployment-config` over and over); what the list means is unchanged.
        if isinstance(data.get("components"), list):
            data["components"] = [{**c, "depends_on": list(dict.fromkeys(c["depends_on"]))}
                                  if isinstance(c, dict) and isinstance(c.get("depends_on"), list)
                                  and all(isinstance(d, str) for d in c["depends_on"]) else c
                                  for c in data["components"]]
        data["symptom_lines"] = [_with_component(_with_dependency(line, names), "ERROR")
                                 for line in data.get("symptom_lines", [])]
        return data

    # ---- semantic checks ---------------------------------------------------------------------------------
    def family_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        names = [c.name for c in self.components]
        p += duplicates(self.components, "name", "domain.components")
        p += duplicates(self.faults, "id", "domain.faults")
        p += identifier_problems([f.id for f in self.faults], "domain.faults", field="id")
        p += identifier_problems([f.fix for f in self.faults], "domain.faults", field="fix")
        p += identifier_problems([f.constraint.fix for f in self.faults], "domain.faults", field="constraint.fix")
        known = set(names)
        kinds = {c.kind for c in self.components}
        for i, comp in enumerate(self.components):
            for j, dep in enumerate(comp.depends_on):
                if dep not in known:
                    p.append(DomainProblem(path=f"domain.components[{i}].depends_on[{j}]", value=dep,
                                           code=Code.UNKNOWN_REFERENCE, message=f"{dep!r} is not a defined component"))
                elif dep == comp.name:
                    p.append(DomainProblem(path=f"domain.components[{i}].depends_on[{j}]",
                                           message="a component cannot depend on itself"))
        p += self._cycle_problems()
        if self.max_depth() < 2 and not p:
            p.append(DomainProblem(path="domain.components", message=(
                "no dependency chain is three components deep (A -> B -> C): tiers 3-5 place the fault up to "
                "two hops below the alerting component")))
        fixes = {f.fix for f in self.faults}
        for i, fault in enumerate(self.faults):
            at = f"domain.faults[{i}]"
            for j, kind in enumerate(fault.applies_to):
                if kind not in kinds:
                    p.append(DomainProblem(path=f"{at}.applies_to[{j}]",
                                           message=f"{kind!r} is not the kind of any component ({sorted(kinds)})"))
            eligible = [c for c in self.components if not fault.applies_to or c.kind in fault.applies_to]
            if fault.applies_to and not any(self._has_dependents(c.name) for c in eligible):
                p.append(self.rule("upstream_kinds").broken(
                    f"{at}.applies_to", f"nothing depends on a component of kinds {fault.applies_to}"))
            text = " ".join(fault.evidence)
            for j, word in enumerate(fault.telltales):
                if word not in text:
                    p.append(DomainProblem(path=f"{at}.telltales[{j}]",
                                           message=f"{word!r} does not occur in this fault's evidence lines"))
            p += duplicates(fault.metrics, "name", f"{at}.metrics")
            for j, metric in enumerate(fault.metrics):
                if abs(metric.faulty - metric.healthy) < 1e-9:
                    p.append(self.rule("reading_moves").broken(
                        f"{at}.metrics[{j}]", f"healthy and faulty values are equal ({metric.healthy:g})"))
            if fault.constraint.fix == fault.fix:
                p.append(DomainProblem(path=f"{at}.constraint.fix",
                                       message=f"must differ from the usual fix {fault.fix!r} (the constraint "
                                       "makes it wrong)"))
            elif fault.constraint.fix in fixes:
                p.append(DomainProblem(path=f"{at}.constraint.fix", message=(
                    f"{fault.constraint.fix!r} is another fault's usual fix; a constrained fix must be its own, "
                    f"none of the usual fixes {sorted(fixes)}")))
            if fault.constraint.fix not in fault.constraint.note:
                p.append(DomainProblem(path=f"{at}.constraint.note",
                                       message=f"must name the fix it calls for ({fault.constraint.fix!r})"))
        p += self._line_problems()
        usual = sorted({f.fix for f in self.faults})
        if len(usual) < MIN_FIXES:
            p.append(self.rule("usual_fixes").broken("domain.faults", f"{len(usual)} ({', '.join(usual)})"))
        p += names_differ(self.tools.model_dump(), "domain.tools", "tool names")
        return p

    def _line_problems(self) -> list[DomainProblem]:
        if "timed out" in self.symptom_lines[0]:
            return []
        return [DomainProblem(path="domain.symptom_lines[0]",
                              message="must say that '{dependency}' timed out (or 'timed out' in its words)")]

    def _cycle_problems(self) -> list[DomainProblem]:
        cycle = dependency_cycle({c.name: [d for d in c.depends_on if d != c.name] for c in self.components})
        if cycle is None:
            return []
        return [DomainProblem(path="domain.components",
                              message=f"dependency cycle: {' -> '.join(cycle)} (dependencies must not loop)")]

    # ---- facts the engine uses ---------------------------------------------------------------------------
    def _has_dependents(self, name: str) -> bool:
        return any(name in c.depends_on for c in self.components)

    def max_depth(self) -> int:
        """Hops of the longest dependency chain (A -> B -> C is 2)."""
        graph = {c.name: c.depends_on for c in self.components}
        memo: dict[str, int] = {}

        def depth(node: str, seen: frozenset[str]) -> int:
            if node in memo:
                return memo[node]
            best = 0
            for dep in graph.get(node, []):
                if dep in graph and dep not in seen:
                    best = max(best, 1 + depth(dep, seen | {dep}))
            memo[node] = best
            return best

        return max((depth(n, frozenset({n})) for n in graph), default=0)


def _named(name: str) -> str:
    """A pattern for `name` as a whole component name ('pump-1' is not in 'pump-12')."""
    return rf"(?<![\w-]){re.escape(name)}(?![\w-])"


_NAMED_FIX = re.compile(r"\(([a-z][a-z0-9_]*)\)")
NOTE_CHARS = Constraint.model_fields["note"].metadata[-1].max_length


def _naming_its_fix(constraint: dict, usual_fix) -> dict:
    """A constraint whose note does not name its fix: where the note names one other fix in parentheses, and
    not the usual one, that is the fix it calls for (a small model's note copies '... (shift_to_standby)'
    with `fix: replace_pump`); otherwise the fix goes in parentheses at the note's end, the note first cut back
    to its last full sentence where it would not fit (a note written to its 300-character bound ends mid-word).
    Where neither works the checks report it."""
    fix, note = constraint.get("fix"), constraint.get("note")
    if not isinstance(fix, str) or not fix or not isinstance(note, str) or fix in note:
        return constraint
    named = set(_NAMED_FIX.findall(note))
    if len(named) == 1 and (only := named.pop()) != usual_fix:
        return {**constraint, "fix": only}
    room = NOTE_CHARS - len(fix) - 3
    if len(note) > room:
        ends = [m.end() for m in re.finditer(r"[.;!](\s|$)", note[:room])]
        if not ends:
            return constraint
        note = note[:ends[-1]].rstrip()
    return {**constraint, "note": f"{note} ({fix})"}


def _identifier(value):
    """'Pump-Failure' or 'pump failure' as the identifier it means ('pump_failure'): a small model hyphenates
    fault ids and fixes, and its renames keep them. Anything else is left for the checks to report."""
    if not isinstance(value, str):
        return value
    spelled = re.sub(r"[\s-]+", "_", value.strip()).lower()
    return spelled if re.fullmatch(r"[a-z][a-z0-9_]*", spelled) else value


def _with_dependency(line, names: list[str]):
    """A symptom line written with two components' real names and no placeholders (the designer asks for it so:
    `NAMED_LINES`): the first named, the one printing it, becomes '{component}', the second '{dependency}'."""
    if not isinstance(line, str) or "{component}" in line or "{dependency}" in line:
        return line
    found = sorted((m.start(), n) for n in names if (m := re.search(_named(n), line)))
    if len(found) != 2:
        return line
    for (_, name), placeholder in zip(found, ("{component}", "{dependency}"), strict=True):
        line = re.sub(_named(name), placeholder, line)
    return line


_EVIDENCE_PLACEHOLDERS = ("component", *NUMBER_PLACEHOLDERS)


def _known_placeholders(line):
    """An evidence line's placeholders the engine does not fill: the first stands for the faulty component where
    the line has no '{component}' (a small model: 'WARN {failing_pump} ...'), any other becomes its words
    ('{pump_id}' -> 'pump id'); a slot in angle brackets is read as one in braces (`_angle_slots`)."""
    if not isinstance(line, str):
        return line
    line = _angle_slots(line)
    for name in re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", line):
        if name not in _EVIDENCE_PLACEHOLDERS:
            stands = "{component}" if "{component}" not in line else name.replace("_", " ")
            line = line.replace("{" + name + "}", stands, 1)
    return line


_ANGLE_SLOT = re.compile(r"<([A-Za-z][\w .-]{0,30})>")  # as the shared check's slot (families/domain.py)


def _angle_slots(line):
    """A log line's slot in angle brackets right after '{component}' names the component twice and goes (a
    small model writes 'ERROR {component} <pod-name> ...' and keeps it through repairs); where the line has no
    '{component}' the first stands for it; any other becomes its words."""
    if not isinstance(line, str):
        return line
    line = re.sub(r"(\{component\})\s*" + _ANGLE_SLOT.pattern, r"\1", line)
    for slot in _ANGLE_SLOT.finditer(line):
        stands = "{component}" if "{component}" not in line else re.sub(r"[\W_]+", " ", slot.group(1)).strip()
        line = line.replace(slot.group(0), stands, 1)
    return line


def _with_component(line, default_level: str = "INFO", names: list[str] = ()):
    """A log line without the component it is printed by gets '{component}': in place of the one component it
    names literally (a small model writes 'ERROR irrigation-pump-1 suction pressure ...' in a fault any pump
    may have), else after its level (and a level if it has none); a small model's '... {dependency} timed out
    ...' loses its ellipses. A symptom line is given no `names`: the component it names may be the dependency."""
    if not isinstance(line, str) or "{component}" in line:
        return line
    named = [n for n in names if re.search(_named(n), line)]
    if len(named) == 1:
        return re.sub(_named(named[0]), "{component}", line, count=1)
    line = line.strip(". ") or line
    level, _, rest = line.partition(" ")
    if level.lower().rstrip(":") in LOG_LEVELS:
        return f"{level} {{component}} {rest}"
    return f"{default_level} {{component}} {line}"
