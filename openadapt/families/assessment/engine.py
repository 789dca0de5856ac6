"""The assessment engine: grade one document per rubric criterion, with the quote that decides each grade.

Each episode assembles a document from the domain by the seed. Every criterion gets one planted feature (a
strength or a defect) whose level is the criterion's hidden true level. The rubric's rule, which every planted
combination respects: a criterion gets the level of the best strength the document shows for it, capped by the
worst defect it shows. The tiers turn the profile's knobs, never the tier number:

- noise: lines come through OCR-garbled; drop: graded sections go missing from the copy (the original must be
  requested, and may turn out never to have been submitted, which sets the criterion's `absent_level`);
- distractors: passages that share a defect's cue words but are acceptable (lookalikes), and strengths that do
  not move the grade (above a deciding defect, or below a deciding strength);
- hidden_constraints: one department rule is in force per episode, stated only in the grading guide; when its
  trigger passage is in the document it caps a criterion, and another rule's trigger may sit there as a decoy.

Grades are scored against the hidden truth: level accuracy (partial credit off by one), evidence that quotes the
deciding passage as it was shown, feedback, efficiency; penalties for invented quotes, stuffing and hedging.
Nothing here knows what the documents are about: the domain says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

from openadapt.families.assessment.domain import AssessmentDomain, Feature, Rule
from openadapt.families.assessment.models import MAX_QUOTES
from openadapt.families.assessment.quotes import quotes_line, squash
from openadapt.families.domain import fill, iter_texts
from openadapt.families.engine import FamilyEnvironment, per_domain
from openadapt.kit import Outcome, TierProfile
from openadapt.kit.text import is_stuffed

CONSTRAINT_RATE = 0.6  # hidden-constraint episodes whose rule in force binds (its trigger is in the document)
DECOY_RATE = 0.5  # hidden-constraint episodes that also carry the trigger of a rule that is not in force
ABSENT_RATE = 0.4  # missing sections that turn out never to have been submitted
OCR_ERRORS_PER_NOISE = 8  # misread characters in a garbled line: 1 + noise x this (3 at 0.3, 4 at 0.4)
OFF_BY_ONE = 0.3  # accuracy credit for a grade one level off
MIN_QUOTE_CHARS = 20
FEEDBACK_WORDS = (6, 150)
FILLER_PER_SECTION = (2, 3)


@dataclass
class Placed:
    """One line of the document: its text as shown, and what put it there."""

    text: str
    kind: str  # filler | feature | extra | lookalike | trigger | decoy
    criterion: str = ""
    ref: str = ""  # feature id (features, lookalikes: the defect resembled) or rule id (triggers)


@dataclass
class Truth:
    """The hidden grade of one criterion and the lines that justify it."""

    level: int
    evidence: list[str]  # a grade must quote one of these lines (as shown)
    allowed: list[str] = field(default_factory=list)  # it may also quote these
    feature: Feature | None = None  # the deciding planted feature (None when the section was never submitted)
    capped_by: str | None = None  # the rule that capped it
    absent: bool = False


@dataclass
class Case:
    """The privileged truth of one episode (what the oracle reads; never served)."""

    header: str
    reference: str
    lines: dict[str, list[Placed]]  # section id -> its lines as they read when present
    missing: dict[str, bool]  # sections missing from the copy -> True when never submitted
    truth: dict[str, Truth]
    rule: Rule | None  # the rule in force (hidden-constraint tiers)
    rule_note: str | None
    decoy: Rule | None
    needed: list[str]  # the sections an honest grader must read
    guide: list[str]
    hidden: bool  # the guide must be read (a rule may be in force)
    min_steps: int

    @property
    def constrained(self) -> bool:
        return any(t.capped_by for t in self.truth.values())


@dataclass
class Verdict:
    """The scored submission; the reward components read from it."""

    accuracy: float = 0.0
    evidence: float = 0.0
    feedback: float = 0.0
    efficiency: float = 0.0
    penalty: float = 0.0
    solved: bool = False
    details: dict[str, Any] = field(default_factory=dict)


class AssessmentEnvironment(FamilyEnvironment):
    domain: ClassVar[AssessmentDomain]
    REWARD = (
        ("accuracy", 0.0, 0.50, "level per criterion: exact 1, off by one 0.3"),
        ("evidence", 0.0, 0.25, "quotes of the deciding passage, as shown"),
        ("feedback", 0.0, 0.10, "feedback per criterion: 6-150 words, its own"),
        ("efficiency", 0.0, 0.15, "steps beyond the shortest honest path"),
        ("penalty", -0.50, 0.0, "invented quotes, stuffing, one level for all"),
    )

    # ---- the domain, indexed once per class -----------------------------------------------------------
    @per_domain
    def _index(cls) -> dict[str, Any]:
        d = cls.domain
        labels = [f.label for c in d.criteria for f in c.features]
        ids = [f.id.replace("_", " ") for c in d.criteria for f in c.features]
        return {
            "titles": {s.id: s.title for s in d.sections},
            "contents": [f"{s.id}: {s.title}" for s in d.sections],
            "criteria": [c.id for c in d.criteria],
            "graded": d.graded_sections(),
            "stuffing": tuple(dict.fromkeys(t.lower() for t in [*labels, *ids])),
            "showable": "\n".join(text for path, text in iter_texts(d) if not path.endswith(".label")).lower(),
            "top": len(d.scale),
        }

    # ---- episode generation ---------------------------------------------------------------------------
    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        d, ix, p = self.domain, self._index(), self.perturb
        reference = f"#{rng.randint(100_000, 999_999)}"
        values = {slot.name: rng.choice(slot.values) for slot in d.slots}

        def text(template: str) -> str:
            return fill(template, **values)

        rule = rng.choice(d.rules) if tier.hidden_constraints else None
        binding = rule is not None and rng.random() < CONSTRAINT_RATE
        decoy = None
        if rule is not None and rng.random() < DECOY_RATE:
            decoy = rng.choice([r for r in d.rules if r is not rule])
        picks = self._draw_levels(rng, rule if binding else None)

        missing: dict[str, bool] = {}
        graded = ix["graded"]
        if p.chance(tier.drop):
            first = rng.choice(graded)
            missing[first] = rng.random() < ABSENT_RATE
            if len(graded) > 1 and p.chance(tier.drop):
                missing[rng.choice([s for s in graded if s != first])] = rng.random() < ABSENT_RATE

        lines: dict[str, list[Placed]] = {}
        for s in d.sections:
            count = min(len(s.filler), rng.randint(*FILLER_PER_SECTION))
            lines[s.id] = [Placed(text(t), "filler") for t in rng.sample(s.filler, count)]
        for c in d.criteria:
            f = picks[c.id]
            lines[c.section].append(Placed(text(rng.choice(f.snippets)), "feature", c.id, f.id))
        if tier.distractors:
            # A third of the distractors (rounded) are lookalikes, the rest strengths that leave the level alone.
            lookalikes = (tier.distractors + 1) // 3
            pool = [(c, lk) for c in d.criteria for lk in c.lookalikes]
            for c, lk in rng.sample(pool, min(lookalikes, len(pool))):
                lines[c.section].append(Placed(text(rng.choice(lk.snippets)), "lookalike", c.id, lk.resembles))
            for c in rng.sample(d.criteria, min(len(d.criteria), tier.distractors - lookalikes)):
                extra = self._extra_strength(c, picks[c.id], rng)
                if extra is not None:
                    lines[c.section].append(Placed(text(rng.choice(extra.snippets)), "extra", c.id, extra.id))
        if binding:
            lines[rule.section].append(Placed(text(rng.choice(rule.triggers)), "trigger", rule.criterion, rule.id))
        if decoy is not None:
            lines[decoy.section].append(Placed(text(rng.choice(decoy.triggers)), "decoy", decoy.criterion, decoy.id))
        errors = 1 + int(tier.noise * OCR_ERRORS_PER_NOISE)
        for items in lines.values():
            rng.shuffle(items)
            for item in items:
                item.text = p.misread(item.text, errors)

        rule_note = None
        if rule is not None:
            criterion = next(c for c in d.criteria if c.id == rule.criterion)
            rule_note = fill(rule.note, cap=f"level {rule.cap} ({d.scale[rule.cap - 1]})", criterion=criterion.name)
        guide = list(d.guide_notes)
        if rule_note is not None:
            guide.insert(rng.randint(0, len(guide)), rule_note)
        needed = d.needed_sections(rule)
        hidden = bool(tier.hidden_constraints)
        self._case = Case(
            header=text(d.header), reference=reference, lines=lines, missing=missing,
            truth=self._truth(lines, missing, picks, rule if binding else None, rule_note),
            rule=rule, rule_note=rule_note, decoy=decoy, needed=needed, guide=guide, hidden=hidden,
            min_steps=len(needed) + len(missing) + hidden + 1,
        )
        self._verdict = Verdict()
        self._read: dict[str, list[str]] = {}
        self._requested: set[str] = set()
        self._guide: list[str] = []
        self._shown: list[str] = [self._case.header, reference, *ix["contents"]]

    def _draw_levels(self, rng: random.Random, binding: Rule | None) -> dict[str, Feature]:
        """The deciding feature of every criterion: a level drawn uniformly from those its features reach (above
        the cap of a rule that is about to bind), redrawn a few times until the criteria do not all share one
        level (one level for all must never be the right answer)."""
        picks: dict[str, Feature] = {}
        for _ in range(12):
            for c in self.domain.criteria:
                options = [f for f in c.features if f.level <= self._index()["top"]
                           and not (binding is not None and c.id == binding.criterion and f.level <= binding.cap)]
                level = rng.choice(sorted({f.level for f in options}))
                picks[c.id] = rng.choice([f for f in options if f.level == level])
            if len({f.level for f in picks.values()}) > 1:
                break
        return picks

    @staticmethod
    def _extra_strength(c: Any, pick: Feature, rng: random.Random) -> Feature | None:
        """A strength that leaves the criterion's level where it is: above a deciding defect (a strength never
        makes up for a defect), or below a deciding strength (the best strength shown counts)."""
        if pick.kind == "defect":
            options = [f for f in c.features if f.kind == "strength" and f.level > pick.level]
        else:
            options = [f for f in c.features if f.kind == "strength" and f.level < pick.level]
        return rng.choice(options) if options else None

    def _truth(self, lines: dict[str, list[Placed]], missing: dict[str, bool], picks: dict[str, Feature],
               binding: Rule | None, rule_note: str | None) -> dict[str, Truth]:
        d, titles = self.domain, self._index()["titles"]
        truth: dict[str, Truth] = {}
        for c in d.criteria:
            title = titles[c.section]
            if missing.get(c.section):
                truth[c.id] = Truth(c.absent_level, [fill(d.notices.absent, section=title)],
                                    [fill(d.notices.missing, section=title)], absent=True)
                continue
            pick = picks[c.id]
            decider = next(x for x in lines[c.section] if x.kind == "feature" and x.criterion == c.id)
            truth[c.id] = Truth(pick.level, [decider.text], [], pick)
            if (binding is not None and binding.criterion == c.id and not missing.get(binding.section)
                    and pick.level > binding.cap):
                trigger = next(x for x in lines[binding.section] if x.kind == "trigger")
                truth[c.id] = Truth(binding.cap, [trigger.text], [decider.text, rule_note or ""], pick,
                                    capped_by=binding.id)
        return truth

    # ---- stepping -------------------------------------------------------------------------------------
    def apply(self, action: Any) -> Outcome:
        tools, titles = self.domain.tools, self._index()["titles"]
        if action.tool is None:
            names = ", ".join(tools.model_dump().values())
            return Outcome(f"Say which tool to use: one of {names}.", error="missing_tool")
        if action.tool == tools.submit:
            return self._submit(action)
        if action.tool == tools.guide:
            if self._guide:
                return Outcome(f"{action.tool}: you have already read the grading guide; nothing new.")
            self._guide = list(self._case.guide)
            self._shown.extend(self._guide)
            return Outcome(f"{action.tool}: {len(self._guide)} note(s) from the grading guide.")
        if action.section is None:
            return Outcome(f"{action.tool} needs a section.", error="missing_section")
        if action.section not in titles:
            return Outcome(f"Unknown section {action.section!r}.", error="unknown_section")
        section, case = action.section, self._case
        title = titles[section]
        if action.tool == tools.read:
            if section in self._read:
                return Outcome(f"{action.tool} {section}: already read; nothing new.")
            shown = self._show(section, self.domain.notices.missing if section in case.missing else None)
            return Outcome(f"{action.tool} {section}: {len(shown)} line(s).")
        if action.tool == tools.request:
            if section not in case.missing:
                return Outcome(f"{title} is complete in your copy: there is nothing to request.", error="not_missing")
            if section in self._requested:
                return Outcome(f"{action.tool} {section}: already requested; nothing new.")
            self._requested.add(section)
            shown = self._show(section, self.domain.notices.absent if case.missing[section] else None)
            return Outcome(f"{action.tool} {section}: the original arrived ({len(shown)} line(s)).")
        return Outcome(f"Unknown tool {action.tool!r}.", error="unknown_tool")

    def _show(self, section: str, notice: str | None) -> list[str]:
        """The agent reads `section`: its lines, or the `notice` (a domain text naming it) in their place."""
        if notice is not None:
            shown = [fill(notice, section=self._index()["titles"][section])]
        else:
            shown = [x.text for x in self._case.lines[section]]
        self._read[section] = shown
        self._shown.extend(shown)
        return shown

    def _submit(self, action: Any) -> Outcome:
        ix = self._index()
        if not action.grades:
            return Outcome("Submit one grade per criterion: " + ", ".join(ix["criteria"]) + ".", error="no_grades")
        grades: dict[str, Any] = {}
        for i, grade in enumerate(action.grades, 1):
            if grade.criterion is None or grade.level is None:
                return Outcome(f"Grade {i} needs a criterion and a level.", error="incomplete_grade")
            if not 1 <= grade.level <= ix["top"]:
                return Outcome(f"Grade {i}: level {grade.level} is outside 1-{ix['top']}.", error="bad_level")
            if grade.criterion not in ix["criteria"]:
                return Outcome(f"Grade {i}: unknown criterion {grade.criterion!r}.", error="unknown_criterion")
            if grade.criterion in grades:
                return Outcome(f"{grade.criterion} is graded twice.", error="duplicate_grade")
            grades[grade.criterion] = grade
        left = [c for c in ix["criteria"] if c not in grades]
        if left:
            return Outcome(f"Every criterion needs a grade; missing: {', '.join(left)}.", error="missing_criteria")
        self._verdict = self._score(grades)
        v = self._verdict.details
        return Outcome(f"Grades submitted: {v['exact']} of {v['criteria']} at the right level, the deciding passage "
                       f"quoted for {v['cited']}.", terminal=True, solved=self._verdict.solved)

    def _score(self, grades: dict[str, Any]) -> Verdict:
        ix, case, verdict = self._index(), self._case, Verdict()
        shown = [squash(line) for line in self._shown]
        shown_set = set(self._shown)
        n = len(ix["criteria"])
        accuracy = evidence = feedback = 0.0
        exact = cited_count = 0
        invented = stuffed = False
        all_cited = all_feedback = True
        texts = [squash(g.feedback).lower() for g in grades.values()]
        for cid in ix["criteria"]:
            grade, truth = grades[cid], case.truth[cid]
            diff = abs(grade.level - truth.level)
            exact += diff == 0
            accuracy += 1.0 if diff == 0 else OFF_BY_ONE if diff == 1 else 0.0
            quotes = [q for q in (squash(e) for e in grade.evidence) if q]
            real = [q for q in quotes if any(q in line for line in shown)]
            invented |= len(real) < len(quotes)
            stuffed |= len(quotes) > MAX_QUOTES
            deciding = [line for line in truth.evidence if line in shown_set]
            cited = any(quotes_line(q, line, MIN_QUOTE_CHARS) for q in real for line in deciding)
            off = any(not any(quotes_line(q, line, MIN_QUOTE_CHARS) for line in truth.evidence + truth.allowed)
                      for q in real)
            credit = (1.0 if not off else 0.5) if cited else 0.0
            evidence += credit
            cited_count += cited
            all_cited &= credit == 1.0
            words = len(grade.feedback.split())
            stuffed_here = is_stuffed(grade.feedback, ix["stuffing"])
            stuffed |= stuffed_here
            own = texts.count(squash(grade.feedback).lower()) == 1
            ok = FEEDBACK_WORDS[0] <= words <= FEEDBACK_WORDS[1] and not stuffed_here and own
            feedback += ok
            all_feedback &= ok
        hedged = n >= 3 and len({g.level for g in grades.values()}) == 1 and len(
            {t.level for t in case.truth.values()}) > 1

        steps, budget = self._state.step_count, self._state.step_budget
        slack, wasted = budget - case.min_steps, max(0, steps - case.min_steps)
        pace = 1.0 if wasted == 0 else (max(0.0, 1.0 - wasted / slack) if slack > 0 else 0.0)
        verdict.accuracy = 0.50 * accuracy / n
        verdict.evidence = 0.25 * evidence / n
        verdict.feedback = 0.10 * feedback / n
        verdict.efficiency = 0.15 * (accuracy / n) * pace
        verdict.penalty = -(0.15 * invented + 0.20 * stuffed + 0.15 * hedged)
        verdict.solved = exact == n and all_cited and all_feedback and not (invented or stuffed or hedged)
        verdict.details = {"exact": exact, "criteria": n, "cited": cited_count, "invented": invented,
                           "stuffed": stuffed, "hedged": hedged}
        return verdict

    # ---- views ----------------------------------------------------------------------------------------
    def observe(self) -> dict[str, Any]:
        ix = self._index()
        return {
            "document": self._case.header,
            "reference": self._case.reference,
            "contents": list(ix["contents"]),
            "criteria": list(ix["criteria"]),
            "sections": {k: list(v) for k, v in self._read.items()},
            "guide": list(self._guide),
        }

    def oracle_view(self) -> Case:
        return self._case

    def secret_values(self) -> list[str]:
        """The grader's names of the features planted in this document: the engine never annotates a passage
        with what it exhibits (that would give each criterion's level away). Labels that the domain's own texts
        happen to contain are left out, since the document may show them as text."""
        shown = self._index()["showable"]
        return [t.feature.label for t in self._case.truth.values()
                if t.feature is not None and t.feature.label.lower() not in shown]
