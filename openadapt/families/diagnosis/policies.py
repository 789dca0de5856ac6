"""Reference policies of the diagnosis family: the privileged oracle and a shallow telltale-matching heuristic
(the baseline a trained agent must beat). Both read the domain through the environment, never a catalogue."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

from openadapt.families.domain import template_pattern
from openadapt.kit import Policy


class DiagnosisOracle(Policy):
    """Reads the hidden incident and walks the shortest honest path: find the root through the dependency
    report if it is two hops away, read its logs, read its notes on tiers where constraints hide, then diagnose
    quoting a line it has actually been shown."""

    name = "oracle"
    privileged = True

    def act(self, observation: Any) -> Any:
        env, inc = self.env, self.env.oracle_view()
        tools = env.domain.tools
        plan = []
        if len(inc.path) > 2:
            plan.append((tools.dependencies, inc.alert_component))
        if len(inc.path) > 1:
            plan.append((tools.logs, inc.root))
        if inc.runbook_required:
            plan.append((tools.notes, inc.root))
        done = observation.metadata.get("step", 0)
        if done < len(plan):
            tool, component = plan[done]
            return env.action_type(tool=tool, component=component)
        seen = [line for line in inc.supporting if line in observation.logs]
        return env.action_type(
            tool=tools.diagnose, component=inc.root, fault=inc.fault.id, fix=inc.fix, evidence=seen[:1],
            confidence=1.0,
            reasoning=f"The alert on {inc.alert_component} traces to {inc.root}, whose own logs show the fault; "
                      f"the evidence line comes from {inc.root}.",
        )


class TelltaleHeuristic(Policy):
    """What a shallow agent does: follow one '{dependency} timed out' hop, count each fault's telltale words in
    the logs, blame the component printing the best match, and apply the usual fix with high confidence."""

    name = "heuristic"

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        self.domain = env.domain

    @cached_property
    def _hop(self) -> re.Pattern[str]:
        """The first symptom line as a pattern that captures the dependency it names."""
        return template_pattern(self.domain.symptom_lines[0], capture=("dependency",))

    def _named(self, line: str, components: list[str]) -> str | None:
        """The first component a line names as a word of its own."""
        for word in line.split():
            if word.rstrip(":,") in components:
                return word.rstrip(":,")
        return None

    def act(self, observation: Any) -> Any:
        make, d = self.env.action_type, self.domain
        components = observation.components
        hop = next((m.group(1) for line in observation.logs if (m := self._hop.search(line))), None)
        if hop and observation.metadata.get("step", 0) == 0:
            return make(tool=d.tools.logs, component=hop)
        best, lines = None, []
        for fault in d.faults:
            hits = [line for line in observation.logs if any(w in line for w in fault.telltales)]
            if len(hits) > len(lines):
                best, lines = fault, hits
        alerting = self._named(observation.alert, components) or components[0]
        if best is None:
            fallback = d.faults[-1]
            return make(tool=d.tools.diagnose, component=alerting, fault=fallback.id, fix=fallback.fix,
                        confidence=0.9, reasoning="No clear signal.")
        named = [n for line in lines if (n := self._named(line, components))]
        component = named[0] if named and observation.error is None else alerting
        return make(
            tool=d.tools.diagnose, component=component, fault=best.id, fix=best.fix, evidence=lines[:2],
            confidence=0.9, reasoning=f"{component} logs match the {best.id} pattern in {len(lines)} lines.",
        )

