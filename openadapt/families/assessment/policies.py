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
    the grading guide), look for every feature's cue words, and give each criterion the level of the weakest
    feature whose cue it finds (the top level when none), quoting the line the cue was found in. A missing
    section is taken as never submitted."""

    name = "heuristic"

    def act(self, observation: Any) -> Any:
        d, make = self.env.domain, self.env.action_type
        graded = d.graded_sections()
        unread = [s for s in graded if s not in observation.sections]
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
                found = [(f.level, line, cue) for f in c.features for line in lines for cue in f.cues
                         if cue.lower() in line.lower()]
                if found:
                    level, quote, cue = min(found, key=lambda item: item[0])
                    why = f"the section says '{cue}'"
                else:
                    level, quote, why = len(d.scale), (lines[0] if lines else ""), "nothing in it is marked down"
            grades.append({"criterion": c.id, "level": level, "evidence": [quote] if quote else [],
                           "feedback": f"{c.name}: level {level} because {why}."})
        return make(tool=d.tools.submit, grades=grades)
