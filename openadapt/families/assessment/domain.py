"""The assessment domain: a kind of document, the rubric it is graded against, and the passages that make a
document good or bad on each criterion.

Each episode assembles one document by seed: every rubric criterion gets one planted *feature* (a strength or a
defect, written as the document itself would read) whose level is the criterion's hidden true level, among
neutral filler. The rubric's rule: a criterion gets the level of the best strength shown for it, capped by the
worst defect shown. Harder tiers blur the text (OCR errors) and lose sections from the copy, plant passages that
only look like defects and strengths that do not move a grade, and put a department rule in force that only the
grading guide reveals. The agent reads sections, may consult the guide, and submits one grade per criterion with
the quote that decides it and feedback.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from openadapt.families.domain import (
    IDENT,
    Code,
    Domain,
    DomainPart,
    DomainProblem,
    Placeholders,
    Reference,
    duplicates,
    names_differ,
    placeholders,
    unknown_ref,
)
from openadapt.families.domain import Rule as DomainRule  # `Rule` here is a grading rule of the domain

# Every string inside a list is bounded too: a domain file is untrusted data.
Passage = Annotated[str, StringConstraints(strip_whitespace=True, min_length=10, max_length=500)]
Descriptor = Annotated[str, StringConstraints(strip_whitespace=True, min_length=5, max_length=300)]
Cue = Annotated[str, StringConstraints(strip_whitespace=True, min_length=2, max_length=60)]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=2, max_length=40)]
Value = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=80)]
# The ECI 5 budget (9 steps) must hold the shortest honest path: read every section an honest grader needs
# (the graded ones plus the section of the rule in force), request up to two missing ones, read the guide,
# submit. So at most this many sections may ever need reading.
MAX_NEEDED_SECTIONS = 5
MIN_LOOKALIKES = 3  # ECI 3-4 plant one passage that looks like a defect but is acceptable, ECI 5 two: by seed
MIN_RULES = 2  # ECI 4 draws which rule is in force; another rule's trigger is planted as a decoy
MIN_LEVELS_PER_CRITERION = 3  # the hidden true level must vary by seed, and leave room above it for strengths


class Section(DomainPart):
    id: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "Identifier of one section of the document, as the agent types it to read the section, e.g. "
        "'procedure', 'access_control'."))
    title: str = Field(min_length=3, max_length=80, description=(
        "The section's heading as printed in the document, e.g. 'Experimental procedure', "
        "'2. Access control'."))
    filler: list[Passage] = Field(min_length=2, max_length=8, description=(
        "Two to eight neutral sentences this section always contains, written as the document itself would "
        "read (they neither help nor hurt any criterion), e.g. 'All titrations were carried out at room "
        "temperature in the teaching laboratory.' They may use the slots' {placeholders}; they must not contain "
        "any feature's cue words."))


class Feature(DomainPart):
    id: str = Field(min_length=3, max_length=50, pattern=IDENT, description=(
        "Identifier of this strength or defect, unique in the domain, e.g. 'human_error_blamed', "
        "'mfa_vpn_only'."))
    label: str = Field(min_length=3, max_length=60, description=(
        "What a grader would call it, in a few words, e.g. 'blames human error', 'MFA only on the VPN'. "
        "Feedback that lists many labels is keyword stuffing and is penalised."))
    kind: Literal["strength", "defect"] = Field(description=(
        "'defect': something the document does that the rubric marks down (it caps the criterion at its level); "
        "'strength': something it does that earns its level. A criterion gets the level of the best strength the "
        "document shows for it, capped by the worst defect it shows. Write both as things present in the text "
        "(a wrong mole ratio, a captioned titration curve), not as absences (no units), so that any strength "
        "can stand beside any defect of the criterion without contradicting it."))
    level: int = Field(ge=1, le=6, description=(
        "The level (1 = lowest, counting the scale) this feature sets: a defect caps the criterion there (below "
        "the top of the scale), a strength earns it (level 2 or more)."))
    cues: list[Cue] = Field(min_length=1, max_length=4, description=(
        "One to four short phrases from the snippets that a hurried grader would key on, e.g. 'human error', "
        "'as written in the lab manual'. Every snippet contains at least one of them; no filler, rule trigger or "
        "other feature in the same section contains them (only lookalikes may)."))
    snippets: list[Passage] = Field(min_length=2, max_length=5, description=(
        "Two to five alternative passages that exhibit this feature, written in the author's own voice as "
        "they would appear in the document (never a grader's description of it), one or two sentences each, "
        "e.g. 'The difference from the label value was probably caused by human error.' Each shows this one "
        "feature only (on ECI 3 it may sit beside another feature of the criterion). May use the slots' "
        "{placeholders}."))


class Lookalike(DomainPart):
    resembles: str = Field(min_length=3, max_length=50, pattern=IDENT, description=(
        "The id of a defect of this criterion that this passage looks like at a glance."))
    snippets: list[Passage] = Field(min_length=1, max_length=4, description=(
        "Passages that share that defect's cue words but are correct and acceptable on a careful reading (an "
        "unusual but valid method, a limitation that is properly handled), e.g. 'Human error in judging the end "
        "point was reduced by titrating against a white tile.' They never change the grade. May use slots."))


class Criterion(DomainPart):
    id: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "Identifier of one rubric criterion, as the agent types it when grading, e.g. 'error_analysis'."))
    name: str = Field(min_length=3, max_length=80, description=(
        "The criterion's name as printed in the rubric, e.g. 'Error analysis and discussion'."))
    section: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "The id of the section in which this criterion is assessed (its evidence is planted there)."))
    descriptors: list[Descriptor] = Field(min_length=3, max_length=6, description=(
        "The rubric's level descriptors for this criterion, lowest level first, one per level of the scale; "
        "each says which defect caps a criterion there or which strength earns it, e.g. 'The difference from "
        "the label is put down to human error.'"))
    absent_level: int = Field(default=1, ge=1, le=6, description=(
        "The level this criterion gets when its section was never submitted (usually 1)."))
    features: list[Feature] = Field(min_length=3, max_length=8, description=(
        "The strengths and defects a document can show on this criterion: at least three different levels, at "
        "least one defect, and a strength at the top level."))
    lookalikes: list[Lookalike] = Field(default_factory=list, max_length=6, description=(
        "Passages that look like one of this criterion's defects but are acceptable (distractors on ECI 3+)."))


class Rule(DomainPart):
    id: str = Field(min_length=3, max_length=50, pattern=IDENT, description=(
        "Identifier of a department-specific grading rule, e.g. 'stock_naoh_unstandardised'."))
    criterion: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "The id of the criterion whose level the rule caps."))
    cap: int = Field(ge=1, le=5, description=(
        "The highest level the criterion may get when the rule's trigger is in the document (below the top of "
        "the scale, and below a level that criterion's features can reach, so that the rule can bind)."))
    section: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "The id of the section where the trigger passage appears."))
    triggers: list[Passage] = Field(min_length=2, max_length=4, description=(
        "Two to four alternative passages, in the author's voice, that look harmless under the public rubric "
        "but fall foul of the rule, e.g. 'The NaOH concentration was taken from the stock bottle label.' May use "
        "slots."))
    note: str = Field(min_length=30, max_length=400, description=(
        "The grading-guide note that states the rule, shown only to a grader who reads the guide while the rule "
        "is in force. Must contain {cap} (filled with the level) and may use {criterion} (its name), e.g. "
        "'Department rule this term: a report that takes the NaOH concentration from the stock label is capped "
        "at {cap} for {criterion}.'"))


class Slot(DomainPart):
    name: str = Field(min_length=2, max_length=30, pattern=IDENT, description=(
        "A placeholder that texts use as {name}, filled once per episode, e.g. 'student', 'sample'."))
    values: list[Value] = Field(min_length=2, max_length=12, description=(
        "Two to twelve values it takes, each fitting every text that uses it and any value of the other slots "
        "(they are drawn independently), e.g. ['malt vinegar', 'apple cider vinegar']."))


class ToolNames(DomainPart):
    """What the four actions are called in this world (each keeps its role in the mechanics)."""

    read: str = Field(default="read_section", pattern=IDENT, description="reads one section of the document")
    request: str = Field(default="request_original", pattern=IDENT, description=(
        "asks for the original of a section missing from the agent's copy"))
    guide: str = Field(default="read_guide", pattern=IDENT, description=(
        "reads the grading guide (where department rules in force live)"))
    submit: str = Field(default="submit_grades", pattern=IDENT, description=(
        "the final answer: one grade per criterion"))


class Notices(DomainPart):
    missing: str = Field(default="[{section}: these pages are missing from this copy of the document]",
                         min_length=10, max_length=200, description=(
        "What the agent's copy shows for a section lost in transmission or scanning; must contain {section} "
        "(its title)."))
    absent: str = Field(default="{section}: the author confirms that this section was not submitted.",
                        min_length=10, max_length=200, description=(
        "The answer to a request for a section that was never submitted; must contain {section}."))


class AssessmentDomain(Domain):
    KEYS = {"sections": "id", "criteria": "id", "rules": "id"}
    RULES = (
        DomainRule("lookalikes", ("criteria",),
                   f"The criteria together need at least {MIN_LOOKALIKES} lookalikes (passages that look like a "
                   "defect but are acceptable).",
                   "ECI 3 and 4 plant one per document and ECI 5 two, drawn by seed from all of them."),
        DomainRule("levels_per_criterion", ("criteria",),
                   f"Each criterion's features reach at least {MIN_LEVELS_PER_CRITERION} distinct levels.",
                   "The hidden true level varies by seed and a strength can sit above it (ECI 3)."),
        DomainRule("sections_to_read", ("rules", "criteria", "sections"),
                   f"With any one rule in force, a grader reads at most {MAX_NEEDED_SECTIONS} sections: assess "
                   "criteria in few sections, and put rule triggers in graded sections.",
                   "ECI 5's step budget."),
    )
    REFERENCES = {"criteria.section": Reference("sections.id"), "rules.criterion": Reference("criteria.id"),
                  "rules.section": Reference("sections.id")}
    PLACEHOLDERS = (
        *(Placeholders(at, names_from="domain.slots[].name") for at in (
            "header", "sections[].filler[]", "criteria[].features[].snippets[]", "criteria[].lookalikes[].snippets[]",
            "rules[].triggers[]")),
        *(Placeholders(f"notices.{field}", ("section",), ("section",), says="must name the section with {section}")
          for field in ("missing", "absent")),
        Placeholders("guide_notes[]"),
        Placeholders("rules[].note", ("cap", "criterion"), ("cap",), says="must state the cap with {cap}"),
    )
    agent_role: str = Field(min_length=3, max_length=80, description=(
        "Who the agent is, e.g. 'the teaching assistant grading CHEM 201 lab reports', 'the third-party risk "
        "analyst'."))
    document_noun: str = Field(min_length=3, max_length=40, description=(
        "What one document is called, singular, e.g. 'lab report', 'questionnaire response'."))
    author_noun: str = Field(min_length=3, max_length=40, description=(
        "Who wrote it and reads the feedback, e.g. 'student', 'vendor'."))
    header: str = Field(min_length=10, max_length=200, description=(
        "The document's title line, shown when the episode opens; may use slots, e.g. 'CHEM 201 lab report: "
        "acetic acid in {sample}, submitted by {student}'."))
    scale: list[Name] = Field(min_length=3, max_length=6, description=(
        "The names of the rubric's levels, lowest first, e.g. ['beginning', 'developing', 'proficient', "
        "'exemplary']."))
    sections: list[Section] = Field(min_length=3, max_length=8, description=(
        "The document's sections in printed order: the graded ones, and others a grader need not read."))
    criteria: list[Criterion] = Field(min_length=3, max_length=6, description=(
        "The rubric: three to six criteria, each assessed in one section."))
    rules: list[Rule] = Field(min_length=2, max_length=6, description=(
        "Department-specific rules that cap a criterion when a harmless-looking passage is present; on ECI 4+ "
        "one of them is in force per episode and only the grading guide says which."))
    guide_notes: list[Passage] = Field(min_length=2, max_length=10, description=(
        "General notes of the grading guide (accepted practices, how to read the rubric), e.g. 'A Gran plot is "
        "an accepted way to locate the end point.' Shown whenever the guide is read."))
    slots: list[Slot] = Field(min_length=1, max_length=12, description=(
        "Placeholders filled per episode, so that the same passage reads differently from one document to "
        "the next."))
    tools: ToolNames = Field(default_factory=ToolNames)
    notices: Notices = Field(default_factory=Notices)

    # ---- facts the engine uses ---------------------------------------------------------------------------
    def graded_sections(self) -> list[str]:
        """Ids of the sections some criterion is assessed in, in printed order."""
        used = {c.section for c in self.criteria}
        return [s.id for s in self.sections if s.id in used]

    def needed_sections(self, rule: Rule | None) -> list[str]:
        """The sections an honest grader must read when `rule` is in force (None: no rule), in printed order."""
        used = {c.section for c in self.criteria} | ({rule.section} if rule else set())
        return [s.id for s in self.sections if s.id in used]

    # ---- semantic checks ---------------------------------------------------------------------------------
    def family_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        levels = len(self.scale)
        section_ids = [s.id for s in self.sections]
        criterion_ids = [c.id for c in self.criteria]
        p += duplicates(self.sections, "id", "domain.sections")
        p += duplicates(self.criteria, "id", "domain.criteria")
        p += duplicates(self.rules, "id", "domain.rules")
        p += duplicates(self.slots, "name", "domain.slots")
        p += self._feature_duplicates()
        if len({s.lower() for s in self.scale}) != levels:
            p.append(DomainProblem(path="domain.scale", message=f"level names must differ: {self.scale}"))
        p += names_differ(self.tools.model_dump(), "domain.tools", "tool names")

        for i, c in enumerate(self.criteria):
            p += self._criterion_problems(i, c, levels, section_ids)
        for i, rule in enumerate(self.rules):
            p += self._rule_problems(i, rule, levels, section_ids, criterion_ids)
        p += self._cue_problems()

        lookalikes = sum(len(c.lookalikes) for c in self.criteria)
        if lookalikes < MIN_LOOKALIKES:
            p.append(self.rule("lookalikes").broken("domain.criteria", f"{lookalikes} lookalike(s) in all"))
        for rule in self.rules:
            needed = self.needed_sections(rule)
            if len(needed) > MAX_NEEDED_SECTIONS and rule.section in section_ids:
                p.append(self.rule("sections_to_read").broken("domain.criteria", (
                    f"with rule {rule.id!r} in force a grader must read {len(needed)} sections ({', '.join(needed)})")))
                break
        return p

    def _feature_duplicates(self) -> list[DomainProblem]:
        seen: dict[str, str] = {}
        p = []
        for i, c in enumerate(self.criteria):
            for j, f in enumerate(c.features):
                at = f"domain.criteria[{i}].features[{j}]"
                if f.id in seen:
                    p.append(DomainProblem(path=f"{at}.id", code=Code.DUPLICATE_NAME, value=f.id,
                                           message=f"{f.id!r} is already used by {seen[f.id]}: "
                                           "feature ids must be unique in the domain"))
                else:
                    seen[f.id] = at
        return p

    def _criterion_problems(self, i: int, c: Criterion, levels: int,
                            section_ids: list[str]) -> list[DomainProblem]:
        at = f"domain.criteria[{i}]"
        p = unknown_ref(c.section, section_ids, f"{at}.section", "section")
        if len(c.descriptors) != levels:
            p.append(DomainProblem(path=f"{at}.descriptors", message=(
                f"has {len(c.descriptors)} descriptor(s); the scale has {levels} levels: write one per level, "
                "lowest first")))
        if c.absent_level > levels:
            p.append(DomainProblem(path=f"{at}.absent_level", message=f"{c.absent_level} is above the scale's "
                                   f"top level ({levels})"))
        for j, f in enumerate(c.features):
            fat = f"{at}.features[{j}]"
            if f.level > levels:
                p.append(DomainProblem(path=f"{fat}.level", message=f"{f.level} is above the scale's top level "
                                       f"({levels})"))
            elif f.kind == "defect" and f.level == levels:
                p.append(DomainProblem(path=f"{fat}.level", message=(
                    f"a defect cannot sit at the top level ({levels}): the rubric marks it down")))
            elif f.kind == "strength" and f.level == 1:
                p.append(DomainProblem(path=f"{fat}.level", message=(
                    "a strength at level 1 earns nothing: give it the level it earns (2 or more)")))
            for k, snippet in enumerate(f.snippets):
                if not any(cue.lower() in snippet.lower() for cue in f.cues):
                    p.append(DomainProblem(path=f"{fat}.snippets[{k}]", message=(
                        f"contains none of the feature's cues {f.cues}: every snippet must contain one")))
            for k, cue in enumerate(f.cues):
                if placeholders(cue) or "{" in cue:
                    p.append(DomainProblem(path=f"{fat}.cues[{k}]", message="a cue is literal text, no {placeholder}"))
                elif not any(cue.lower() in s.lower() for s in f.snippets):
                    p.append(DomainProblem(path=f"{fat}.cues[{k}]", message=(
                        f"{cue!r} occurs in none of this feature's snippets")))
        distinct = sorted({f.level for f in c.features if f.level <= levels})
        if len(distinct) < MIN_LEVELS_PER_CRITERION:
            p.append(self.rule("levels_per_criterion").broken(f"{at}.features", f"levels {distinct}"))
        if not any(f.kind == "defect" for f in c.features):
            p.append(DomainProblem(path=f"{at}.features", message="has no defect: write at least one"))
        if not any(f.kind == "strength" and f.level == levels for f in c.features):
            p.append(DomainProblem(path=f"{at}.features", message=(
                f"has no strength at the top level ({levels}): write what earns it")))
        defects = {f.id: f for f in c.features if f.kind == "defect"}
        for j, lk in enumerate(c.lookalikes):
            lat = f"{at}.lookalikes[{j}]"
            if lk.resembles not in defects:
                p += unknown_ref(lk.resembles, defects, f"{lat}.resembles", f"defect of criterion {c.id!r}")
                continue
            cues = defects[lk.resembles].cues
            for k, snippet in enumerate(lk.snippets):
                if not any(cue.lower() in snippet.lower() for cue in cues):
                    p.append(DomainProblem(path=f"{lat}.snippets[{k}]", message=(
                        f"shares none of {lk.resembles!r}'s cues {cues}: a lookalike must look like that defect")))
        return p

    def _rule_problems(self, i: int, rule: Rule, levels: int, section_ids: list[str],
                       criterion_ids: list[str]) -> list[DomainProblem]:
        at = f"domain.rules[{i}]"
        p = unknown_ref(rule.criterion, criterion_ids, f"{at}.criterion", "criterion")
        p += unknown_ref(rule.section, section_ids, f"{at}.section", "section")
        if rule.cap >= levels:
            p.append(DomainProblem(path=f"{at}.cap", message=f"{rule.cap} must be below the top level ({levels})"))
        criterion = next((c for c in self.criteria if c.id == rule.criterion), None)
        if criterion is not None and not any(f.level > rule.cap for f in criterion.features):
            p.append(DomainProblem(path=f"{at}.cap", message=(
                f"no feature of {rule.criterion!r} is above level {rule.cap}, so the rule could never bind")))
        return p

    def _cue_problems(self) -> list[DomainProblem]:
        """A cue must single out its feature among everything else planted in its section (filler, other
        features, rule triggers); only lookalikes of that feature may share it."""
        p: list[DomainProblem] = []
        texts: dict[str, list[tuple[str, str, str]]] = {}  # section -> (path, owner feature id, text)
        for i, s in enumerate(self.sections):
            texts.setdefault(s.id, []).extend((f"domain.sections[{i}].filler[{j}]", "", t)
                                              for j, t in enumerate(s.filler))
        for i, c in enumerate(self.criteria):
            for j, f in enumerate(c.features):
                texts.setdefault(c.section, []).extend((f"domain.criteria[{i}].features[{j}].snippets[{k}]", f.id, t)
                                                       for k, t in enumerate(f.snippets))
        for i, rule in enumerate(self.rules):
            texts.setdefault(rule.section, []).extend((f"domain.rules[{i}].triggers[{k}]", "", t)
                                                      for k, t in enumerate(rule.triggers))
        for i, c in enumerate(self.criteria):
            for j, f in enumerate(c.features):
                for k, cue in enumerate(f.cues):
                    clash = next((path for path, owner, text in texts.get(c.section, [])
                                  if owner != f.id and cue.lower() in text.lower()), None)
                    if clash:
                        p.append(DomainProblem(path=f"domain.criteria[{i}].features[{j}].cues[{k}]", message=(
                            f"{cue!r} also occurs in {clash} (same section): a cue must single out its feature")))
        return p
