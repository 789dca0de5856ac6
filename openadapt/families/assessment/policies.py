"""Reference policies of the assessment family: the privileged oracle and a shallow cue-matching grader (the
baseline a trained agent must beat). Both read the domain through the environment, never a catalogue."""

from __future__ import annotations

from typing import Any

from openadapt.families.domain import fill
from openadapt.kit import Policy


class AssessmentOracle(Policy):
    """Reads the hidden truth and walks the shortest honest path: read every section an honest grader needs
    (the graded ones, and the section of the rule in force), request the original of each one missing from the
    copy, read the grading guide on tiers where a rule may be in force, then grade every criterion quoting the
    line that decides it as it was shown."""

    name = "oracle"
    privileged = True

    def act(self, observation: Any) -> Any:
        env, case = self.env, self.env.oracle_view()
        d = env.domain
        tools = d.tools
        plan: list[tuple[str, str | None]] = []
        for section in case.needed:
            plan.append((tools.read, section))
            if section in case.missing:
                plan.append((tools.request, section))
        if case.hidden:
            plan.append((tools.guide, None))
        done = observation.metadata.get("step", 0)
        if done < len(plan):
            tool, section = plan[done]
            return env.action_type(tool=tool, section=section)
        grades = []
        for c in d.criteria:
            truth = case.truth[c.id]
            if truth.absent:
                reason = "the section was never submitted"
            elif truth.capped_by:
                reason = "a department rule in the grading guide caps it"
            else:
                reason = f"it shows {truth.feature.label}"
            grades.append({
                "criterion": c.id, "level": truth.level, "evidence": truth.evidence[:1],
                "feedback": f"{c.name}: level {truth.level} ({d.scale[truth.level - 1]}), because {reason}; the "
                            "quoted passage is what decides it.",
            })
        return env.action_type(tool=tools.submit, grades=grades)


class CueHeuristic(Policy):
    """What a hurried grader does: read each graded section once (never asking for a missing one, never opening
    the grading guide), look for every feature's cue words, and give each criterion the level of the best
    strength whose cue it finds, capped by the worst such defect (the top level when it finds none), quoting the
    line the deciding cue was found in. A missing section is taken as never submitted."""

    name = "heuristic"

    def act(self, observation: Any) -> Any:
        d, make = self.env.domain, self.env.action_type
        unread = [s for s in d.graded_sections() if s not in observation.sections]
        if unread and observation.steps_remaining > 1:
            return make(tool=d.tools.read, section=unread[0])
        titles = {s.id: s.title for s in d.sections}
        grades = []
        for c in d.criteria:
            lines = observation.sections.get(c.section, [])
            notice = fill(d.notices.missing, section=titles[c.section])
            if lines == [notice]:
                level, quote, why = c.absent_level, notice, "the section is missing"
            else:
                level, quote, why = self._grade(c, lines, len(d.scale))
            grades.append({"criterion": c.id, "level": level, "evidence": [quote] if quote else [],
                           "feedback": f"{c.name}: level {level} because {why}."})
        return make(tool=d.tools.submit, grades=grades)

    @staticmethod
    def _grade(criterion: Any, lines: list[str], top: int) -> tuple[int, str, str]:
        found = [(f, line, cue) for f in criterion.features for line in lines for cue in f.cues
                 if cue.lower() in line.lower()]
        best = max((x for x in found if x[0].kind == "strength"), key=lambda x: x[0].level, default=None)
        worst = min((x for x in found if x[0].kind == "defect"), key=lambda x: x[0].level, default=None)
        decider = worst if worst and (best is None or worst[0].level < best[0].level) else best
        if decider is None:
            return top, (lines[0] if lines else ""), "nothing in it is marked down"
        feature, line, cue = decider
        return feature.level, line, f"the section says '{cue}'"
