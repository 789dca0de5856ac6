"""The family-domain designer: an LLM (the embedded local model by default, or any OpenAI-compatible endpoint)
chooses a family for the task and writes that family's `Domain` as data, piece by piece.

Small models do well on small, well-described pieces with a worked example, and badly on a whole domain at once
(docs/history/designer.md has the measurements). So:

1. **The task's mechanic** (one constrained request): the world, what the agent does, what success means.
2. **The family**: with the local model, the family name it is most likely to answer given a menu of every
   family's description, calibrated against a content-free task (never a keyword count); with an endpoint, one
   constrained choice among the families or `none`, with its reason. The choice, its scores and a reason are
   recorded in provenance.
3. **The domain, in pieces** (one growing conversation, so the model's KV cache is reused): the scalar fields
   first, then the keys of every keyed list (`Domain.KEYS`: the component names, the fault ids...), then each
   list one item at a time, each piece constrained by its own JSON schema, its key fixed and its references
   (`Domain.REFERENCES`) limited to keys that exist, with one of the family's example domains (another world) as
   the worked example. The items of a keyed list are each written from the same point of the conversation, out
   of sight of one another (a small model copies the item before into the next); later pieces see them all.
4. **Checks and piece repair**: the family's schema and semantic checks, plus names or texts copied from the
   worked example, name the field paths that are wrong; exactly those pieces are asked for again, with the
   problems, before anything reaches the sandbox validator.

The same prompt, model, sampling settings and seed give the same package.

This module holds the choice and the design loop; the rest lives beside it: `session` (the conversation and its
KV-cache reuse), `pieces` (planning, each piece's schema and instruction, assembly), `draft` (the state the checks
read and the repairs write), `copying` (what a draft took from the worked example) and `repair` (the regenerate
primitive and the structural repairs, each a switch).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import typing
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError, create_model

from openadapt.designer.base import Candidate, DesignerInfo, task_distribution
from openadapt.designer.brief import write_brief
from openadapt.designer.deadline import NO_DEADLINE, Deadline, OutOfTime
from openadapt.designer.draft import PHRASE_ROUNDS, Draft
from openadapt.designer.pieces import (
    Piece,
    constrained_schema,
    instruction_for,
    max_tokens_for,
    owner,
    plan_pieces,
    trimmed_example,
)
from openadapt.designer.placeholders import piece_schema
from openadapt.designer.repair import distinct_keys, drop_hopeless, fix
from openadapt.designer.session import Session
from openadapt.designer.switches import checked
from openadapt.envpkg.render import family_package
from openadapt.families import all_families
from openadapt.families.base import Family
from openadapt.families.domain import FROM_EXAMPLE, Code, Domain, DomainProblem, numbered_copies
from openadapt.families.yamlio import dump_domain
from openadapt.llm.chat import ChatBackend, ReplyError, Usage
from openadapt.llm.local.catalogue import CATALOGUE, DEFAULT_MODEL

MAX_REPAIR_ROUNDS = 2  # piece repairs before the package goes to the validator

Progress = Callable[[str, int, str], None]

# No "AI agents" or "training environments" here: a small model wrote them back into a world's title and texts
# ('Reconciliation environment for AI agent'), and rewrites asked again kept them.
SYSTEM = ("You write the data of one world, as the people who work in it know it: its entities, rules, failure "
          "modes and texts, specific to the task you are given, realistic and varied. You answer with one JSON "
          "object exactly as asked, nothing else.")


class TaskMechanic(BaseModel):
    # the trade, not the package: named 'an online negotiation environment', the header frames the package
    world: str = Field(max_length=200, description=(
        "the place or trade where the task happens, in a few words, as its people name it (not 'an environment')"))
    agent_does: str = Field(max_length=300, description="what the agent does, step by step, in one sentence")
    succeeds_when: str = Field(max_length=300, description="what counts as success for the agent")


class FamilyPick(BaseModel):
    reason: str = Field(max_length=200, description="why this family models the task (or why none does)")
    family: str = Field(description="the family's name, or 'none'")


class FamilyChoice(BaseModel):
    family: str | None
    method: str  # how the choice was made (recorded in provenance)
    scores: dict[str, float] = Field(default_factory=dict)  # per family, by `method`
    reason: str = ""
    mechanic: TaskMechanic | None = None  # what the task is about, where the designer asked (the pieces do)
    fit: float | None = None  # the local model's: how far its closest family fits the task (`FIT_FLOOR`)

    def note(self) -> dict[str, Any]:
        return {"family": self.family, "method": self.method, "reason": self.reason,
                "scores": {k: round(v, 3) for k, v in self.scores.items()},
                **({"mechanic": self.mechanic.model_dump()} if self.mechanic else {}),
                **({"fit": round(self.fit, 3)} if self.fit is not None else {})}


# ---- 1-2: the mechanic and the family ---------------------------------------------------------------------------
NULL_TASK = "(no task given)"  # the content-free input of contextual calibration
# How far the local model's closest family fits a task: its calibrated score over the menu's 'none', plus its
# log-odds of 'yes' asked whether that family models the task. Measured with the default model: the 14 benchmark
# prompts fit by 6.23-9.80, eight tasks no family models by 3.52-5.96 (the calibrated score alone separates
# nothing). The floor sits 1.2 under the lowest benchmark prompt, so it refuses only clear cases, and only for the
# model it was measured on: another model's log-probabilities have another scale (docs/history/designer.md).
FIT_FLOOR = 5.0
FIT_MODEL_SHA256 = CATALOGUE[DEFAULT_MODEL].sha256
_NULL_SCORES: dict[tuple[int, tuple[str, ...]], dict[str, float]] = {}


def family_menu(families: list[Family], with_none: bool = False) -> str:
    lines = [f"- {f.name}: {f.summary}. Fits: {f.fits}" for f in families]
    if with_none:
        lines.append("- none: no family above models the task")
    return ("You design training environments for AI agents. Each environment uses one mechanics family:\n" +
            "\n".join(lines) + "\nAnswer with one family name only.")


def _pick_messages(menu: str, task: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": menu},
            {"role": "user", "content": f"The task:\n> {task}\n\nWhich one family models this task faithfully?"}]


def choose_family(backend: ChatBackend, task: str, families: list[Family], deadline: Deadline = NO_DEADLINE,
                  describe: bool = True) -> tuple[FamilyChoice, Session]:
    """The family for a task, and the session that described its mechanic (`describe`; the whole-domain designer
    does without) and counts every request made here.

    With a backend that exposes next-token log-probabilities (the local model), the family is the name the
    model is most likely to answer, calibrated against a content-free task (contextual calibration: a small
    model's prior for some names would otherwise win whatever the task). Otherwise (an endpoint), one constrained
    choice among the families or 'none', with its reason."""
    names = [f.name for f in families]
    scores: dict[str, float] = {}
    reason = ""
    deadline.check()
    session = Session(backend, [{"role": "system", "content": SYSTEM}], order=["mechanic"], deadline=deadline)
    fit = None
    if hasattr(backend, "option_logprobs"):
        menu, options = family_menu(families, with_none=True), [*names, "none"]
        raw = backend.option_logprobs(_pick_messages(menu, task), options)
        key = (id(backend), tuple(options))
        if key not in _NULL_SCORES:
            _NULL_SCORES[key] = backend.option_logprobs(_pick_messages(menu, NULL_TASK), options)
        calibrated = {n: raw[n] - _NULL_SCORES[key][n] for n in options}
        scores = {n: calibrated[n] for n in names}
        chosen, method = max(scores, key=scores.get), "calibrated next-token log-probability of the family name"
        fit = scores[chosen] - calibrated["none"] + _yes_margin(backend, task, next(f for f in families
                                                                                    if f.name == chosen))
        if fit < FIT_FLOOR and backend.describe().sha256 == FIT_MODEL_SHA256:
            reason = (f"the embedded model finds no family that models it: its closest, {chosen}, fits by "
                      f"{fit:.2f}, under {FIT_FLOOR}")
            chosen = None
    else:
        menu = family_menu(families, with_none=True)
        enum = create_model("FamilyPick", __base__=FamilyPick,
                            family=(typing.Literal[tuple(names + ["none"])], Field(description="the family")))
        pick = Session(backend, [{"role": "system", "content": menu}], deadline=deadline, usage=session.usage,
                       completions=session.completions).ask(
            f"The task:\n> {task}\n\nWhich one family models this task faithfully? Answer as JSON with `reason` "
            "(one sentence) then `family` (a name above, or none).", enum, max_tokens=160)
        chosen, method = (None if pick.family == "none" else pick.family), "constrained choice with a reason"
        scores, reason = {n: float(n == pick.family) for n in names}, pick.reason
    mechanic = session.ask(
        f"The task:\n> {task}\n\nDescribe the core of this task as JSON: `world` (the setting in a few words), "
        "`agent_does` (what the agent does, in one sentence), `succeeds_when` (what counts as success).",
        TaskMechanic, max_tokens=220, key="mechanic") if describe else None
    if chosen is not None and not reason:
        family = next(f for f in families if f.name == chosen)
        reason = session.ask(f"In one sentence: why does the `{chosen}` family ({family.summary}) model this task?",
                             _Reason, max_tokens=80).reason
    return FamilyChoice(family=chosen, method=method, scores=scores, reason=reason, mechanic=mechanic,
                        fit=fit), session


def _yes_margin(backend: ChatBackend, task: str, family: Family) -> float:
    """log P(yes) - log P(no), the model asked whether `family` models the task faithfully."""
    messages = [{"role": "system", "content": f"An environment family: {family.name}: {family.summary}. Fits: "
                 f"{family.fits}"},
                {"role": "user", "content": f"The task:\n> {task}\n\nCan this family model this task faithfully, "
                 "with the task's own world and actions? Answer yes or no."}]
    said = backend.option_logprobs(messages, ["yes", "no", "Yes", "No"])
    return max(said["yes"], said["Yes"]) - max(said["no"], said["No"])


class _Reason(BaseModel):
    reason: str = Field(max_length=200)



def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]{4,}", text.lower()))


def _sentence(text: str) -> str:
    """`text` ending as a sentence does."""
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


def pick_example(task: str, family: Family) -> tuple[Domain, dict[str, Any]]:
    """The worked example, and how it was picked: of the family's own examples (a seed package's domain only
    where the family has none), the one that shares the fewest of the task's words (ties by name), so that it is
    visibly another world and never the task's own (a Kubernetes task never gets the Kubernetes example to copy).
    Not a seed: a generated package must not carry a seed's entities, and a small model copies a seed's texts
    almost word for word. Not the world most like the task's: a small model carries a near world's details into
    the task's (docs/history/designer.md)."""
    files, task_words = family.examples(), _words(task)
    own = [n for n, path in files.items() if path.parent == family.root / "examples"] or list(files)
    shared = {n: len(task_words & _words(path.read_text(encoding="utf-8"))) for n, path in files.items()}
    chosen = min(sorted(own), key=lambda n: shared[n])
    return family.load_example(chosen), {"example": chosen, "shared_words": shared}


# ---- the designer -------------------------------------------------------------------------------------------------
class FamilyDomainDesigner:
    """A `Designer` writing a family domain; see the module docstring."""

    @property
    def deterministic(self) -> bool:
        """Once no family fitted, asking again gives the same answer: the loop stops."""
        return self.choice is not None and self.choice.family is None

    @property
    def no_family(self) -> bool:
        return self.deterministic

    def __init__(self, backend: ChatBackend, name: str, task: str, *, families: list[Family] | None = None,
                 progress: Progress | None = None, kind: str = "local", deadline: Deadline = NO_DEADLINE,
                 off: frozenset[str] = frozenset()):
        self.backend = backend
        self.deadline = deadline
        self.off = checked(off)  # the designer's switches turned off (`switches.SWITCHES`): measurements only
        # The embedded model writes every piece after the header aside where the family asks it
        # (`Domain.PIECES_ASIDE`): a small model copies the worked example's world; an endpoint model keeps the
        # conversation, where the example shows it the whole shape.
        self._pieces_aside = kind == "local"
        self.name = name
        self.task = task
        self.families = families or all_families()
        self.progress = progress or (lambda phase, attempt, detail: None)
        self.choice: FamilyChoice | None = None
        self.draft: Draft | None = None
        self._usage_mark = Usage()  # the session's total when the current attempt began
        info = backend.describe()
        self.info = DesignerInfo(backend=kind, model=info.model, base_url=info.base_url,
                                 model_sha256=info.sha256, settings={**info.sampling.model_dump(),
                                                                     "threads": info.threads, "n_ctx": info.n_ctx,
                                                                     **({"switched_off": sorted(self.off)}
                                                                        if self.off else {})})

    # -- Designer protocol --
    def design(self) -> Candidate:
        started = time.monotonic()
        if hasattr(self.backend, "new_design"):  # the local model: no saved contexts of an earlier design
            self.backend.new_design()
        self.progress("choosing a family", 1, f"{len(self.families)} families")
        try:
            choice, session = choose_family(self.backend, self.task, self.families, self.deadline)
        except OutOfTime:
            return Candidate(problems=[f"{self.deadline} was reached before a family was chosen"])
        self.choice = choice
        notes = {"choice": choice.note()}
        if choice.family is None:
            return Candidate(problems=[f"no family fits the task ({choice.reason})"], usage=session.usage,
                             notes=notes)
        family = next(f for f in self.families if f.name == choice.family)
        self.info = self.info.model_copy(update={"family": family.ref})
        example, notes["example"] = pick_example(self.task, family)
        others = [family.load_example(n) for n in family.examples() if family.load_example(n) != example]
        self.progress("writing", 1, "the expert's brief")
        try:
            brief, asked = write_brief(self.backend, self.task, family.brief, self.deadline)
        except OutOfTime:
            brief, asked = None, None
        notes["brief"] = brief
        session = self._domain_session(family, example, choice, brief, session)
        if asked is not None:
            session.record(asked, "brief", aside=True)
        self.draft = Draft(family=family, example=example, others=others, task=self.task, session=session,
                           deadline=self.deadline, progress=self.progress,
                           pieces=plan_pieces(family.domain, example, split_records=self._pieces_aside))
        self._usage_mark = Usage()
        session.order = [p.path for p in self.draft.pieces]
        for piece in self.draft.pieces:
            self._write(piece)
        return self._candidate(notes, started)

    def repair(self, previous: Candidate, feedback: str, attempt: int) -> Candidate:
        if self.draft is None:  # no family fitted: asking again would give the same answer
            return previous
        started = time.monotonic()
        draft = self.draft
        draft.attempt = attempt
        if previous.problems and not previous.files and _keeps_repairing(previous.notes):
            # The draft never parsed: more rounds on its bad pieces first (a full rewrite costs every piece again).
            return self._candidate({"choice": self.choice.note() if self.choice else None, "continued": attempt},
                                   started)
        note = ("An earlier version of this domain failed the environment validator:\n" + feedback[:1500] +
                "\nWrite the domain again, so that these checks pass.")
        draft.session.prefix = [*draft.session.prefix[:3], {"role": "user", "content": note},
                                {"role": "assistant", "content": "{\"ok\": true}"}]
        draft.session.forget()
        draft.item_tries.clear()
        draft.rounds_seen.clear()
        for piece in draft.pieces:
            piece.value = None
        for piece in draft.pieces:
            self._write(piece)
        return self._candidate({"choice": self.choice.note() if self.choice else None, "redesign": attempt}, started)

    # -- internals --
    def _domain_session(self, family: Family, example: Domain, choice: FamilyChoice, brief: str | None,
                        chosen: Session) -> Session:
        """The conversation the pieces are written in; it goes on counting the requests of `chosen` (the
        family choice's)."""
        expert = (f"What an expert of this world says about it (write this world from it, never from the "
                  f"example's):\n{brief}\n\n" if brief else "")
        mechanic = choice.mechanic
        # whole sentences: run together, a small model copies them into the domain as they stand
        context = (f"The task:\n> {self.task}\n\nIts world: {_sentence(mechanic.world)} The agent "
                   f"{_sentence(mechanic.agent_does)} It succeeds when {_sentence(mechanic.succeeds_when)}\n\n{expert}"
                   f"You will write the domain of a `{family.name}` environment ({family.summary}) for this task, "
                   "one piece at a time. Every name and text must belong to the task's world. Here is a worked "
                   f"example of a domain of the same family for ANOTHER world (never copy its names or texts):\n"
                   f"{trimmed_example(example)}")
        return Session(self.backend, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": context},
                                      {"role": "assistant", "content": "{\"ready\": true}"}], usage=chosen.usage,
                       completions=chosen.completions, deadline=self.deadline)

    def _write(self, piece: Piece, problems: list[DomainProblem] | None = None) -> None:
        draft, family = self.draft, self.draft.family
        # A record that copied the worked example is written again aside: in its sight, the copy comes back.
        aside = piece.aside or (piece.field is not None and not piece.keys
                                and any(p.code in FROM_EXAMPLE for p in problems or ()))
        aside = aside or (piece.field is not None and self._pieces_aside and family.domain.PIECES_ASIDE)
        instruction = instruction_for(replace(piece, aside=aside), draft.pieces, family, problems)
        started = time.monotonic()
        try:
            schema = piece_schema(constrained_schema(piece, draft.pieces, family.domain), family, piece)
            if aside:  # the worked example's lines are not in sight, so they are not copied
                piece.value = draft.session.ask_aside(f"{draft.world_so_far()}{instruction}", piece.model,
                                                      max_tokens_for(piece, draft.example), key=piece.path,
                                                      schema=schema, turn=instruction.split("\n")[0],
                                                      recorded=short_fields if piece.index is not None else None)
            else:
                apart = self._siblings(piece)
                piece.value = draft.session.ask(instruction, piece.model, max_tokens_for(piece, draft.example),
                                                key=piece.path, schema=schema, apart=apart,
                                                recorded=short_fields if apart else None)
            if piece.keys and problems is None:
                keys = piece.value.items
                repeated = [k for i, k in enumerate(keys) if k.lower() in [x.lower() for x in keys[:i]]]
                copies = [keys[i] for i in numbered_copies(keys)] if piece.field in family.domain.VARIED_KEYS else []
                if (repeated or copies) and ("distinct_keys" in self.off or not distinct_keys(draft, piece)):
                    said = [DomainProblem(path=piece.path, code=Code.DUPLICATE_NAME, message=(
                        f"{', '.join(repeated)} repeated: every one must differ"))] if repeated else []
                    said += [DomainProblem(path=piece.path, code=Code.NUMBERED_COPY, message=(
                        f"{', '.join(copies)}: numbered copies of one name; name other parts"))] if copies else []
                    self._write(piece, problems=said)
        except OutOfTime:
            if piece.value is None and piece.field is not None and piece.index is None and not piece.keys and all(
                    not f.is_required() for f in piece.model.model_fields.values()):
                piece.value = piece.model()  # a record the schema defaults whole (the tool names): its defaults
                return
            if piece.value is None:
                if not draft.unwritten:
                    draft.say("writing", f"{self.deadline} was reached: no more requests")
                draft.unwritten.add(piece.path)
            return
        except (ReplyError, ValidationError) as exc:
            piece.value = None
            draft.say("writing", f"{piece.path}: unusable reply ({str(exc)[:80]})")
            return
        last = draft.session.completions[-1]
        speed = f", {last['tokens_per_s']:.0f} tok/s" if last.get("tokens_per_s") else ""
        draft.say("writing", f"{piece.path} ({time.monotonic() - started:.1f} s{speed})")

    @staticmethod
    def _keep_sound_fields(piece: Piece, before: BaseModel | None, paths: set[str],
                           problems: list[DomainProblem]) -> None:
        """After a piece is written again for problems in some of its fields, the others keep what they were (a rewrite
        brings back problems just repaired). A problem with the piece as a whole (or a line of a list piece), or a copy
        of the worked example (its short texts are copies too, too short to be caught), keeps the rewrite whole."""
        if before is None or piece.value is None or any(p.code in FROM_EXAMPLE for p in problems):
            return
        wrong = set()
        for path in paths:
            rest = path.removeprefix(piece.path) if piece.field is not None else path.removeprefix("domain")
            if path == piece.path or not rest.startswith("."):
                return  # the piece itself, or one of its lines
            wrong.add(re.split(r"[.\[]", rest[1:])[0])
        kept = before.model_dump()
        merged = {k: v if k in wrong or k not in kept else kept[k] for k, v in piece.value.model_dump().items()}
        with contextlib.suppress(ValidationError):  # fields checked together: the rewrite stands whole
            piece.value = piece.model.model_validate(merged)

    def _siblings(self, piece: Piece) -> frozenset[str]:
        """The other items of a keyed list (`faults[1]` beside `faults[0]`...): each item is written out of their
        sight, from its own key: a small model copies the item before it into the next, and back when repaired."""
        pieces = self.draft.pieces
        if piece.index is None or not any(p.keys and p.field == piece.field for p in pieces):
            return frozenset()
        return frozenset(p.path for p in pieces if p.field == piece.field and p.index is not None and p is not piece)

    def _attempt_usage(self) -> Usage:
        used = self.draft.session.usage.since(self._usage_mark)
        self._usage_mark = self.draft.session.usage.model_copy()
        return used

    def _candidate(self, notes: dict[str, Any], started: float) -> Candidate:
        """The attempt's candidate after piece repairs; its usage is this attempt's own (the session's is the
        running total of the whole design)."""
        draft = self.draft
        problems = draft.check()
        started_with, rounds = {str(p) for p in problems}, 0
        while problems and rounds < MAX_REPAIR_ROUNDS and not self.deadline.passed:
            rounds += 1
            problems = draft.accept_phrases(problems)
            if not problems:
                break
            if "drop_hopeless" not in self.off and drop_hopeless(draft, problems):
                problems = draft.check()
                if not problems:
                    break
            for problem in problems:
                draft.rounds_seen[str(problem)] = draft.rounds_seen.get(str(problem), 0) + 1
            by_piece: dict[str, tuple[Piece, list[DomainProblem], set[str]]] = {}
            done: set[str] = set()  # nodes asked for once this round, with all their problems
            for problem in problems:
                if fix(draft, problem, done, self.off):
                    continue
                for piece in owner(problem.path, draft.pieces):
                    entry = by_piece.setdefault(piece.path, (piece, [], set()))
                    entry[1].append(problem)
                    entry[2].add(problem.path)
            if by_piece:
                first = next(iter(by_piece.values()))[1][0]
                draft.say("repairing pieces", f"round {rounds}: {len(by_piece)} piece(s), e.g. {str(first)[:140]}")
            for piece, found, paths in by_piece.values():
                before = piece.value
                self._write(piece, problems=found[:6])
                self._keep_sound_fields(piece, before, paths, found)
            problems = draft.check()
        notes = {**notes, "piece_repair_rounds": rounds, "problems": [len(started_with), len(problems)],
                 "fixed": len(started_with - {str(p) for p in problems}),
                 "accepted_phrases": [f"{field}: {phrase}" for (field, phrase), n in draft.phrase_rounds.items()
                                      if n >= PHRASE_ROUNDS],
                 "requests": len(draft.session.completions),
                 "completions": draft.session.completions[-60:], "design_s": round(time.monotonic() - started, 1)}
        if problems and self.deadline.passed:
            notes["out_of_time"] = True
            unwritten = f"{len(draft.unwritten)} piece(s) not written, " if draft.unwritten else ""
            problems = [DomainProblem(path="domain", message=f"{self.deadline} was reached: {unwritten}"
                                      f"{len(problems)} problem(s) left unrepaired"), *problems]
        if problems:
            data = yaml.safe_dump(draft.data(), sort_keys=False, allow_unicode=True, width=120)
            why = "".join(f"# - {' '.join(str(p).split())}\n" for p in problems[:12])
            return Candidate(problems=[str(p) for p in problems[:12]], usage=self._attempt_usage(), notes=notes,
                             draft=f"# The domain as drafted; it did not parse:\n{why}{data}")
        files = family_files(self.name, self.task, draft.family, draft.family.parse_domain(draft.data()), self.info)
        return Candidate(files=files, usage=self._attempt_usage(), notes=notes)


def family_files(name: str, task: str, family: Family, domain: Domain, info: DesignerInfo) -> dict[str, str]:
    """The package of a designed domain: its domain.yaml, README and the family's rendered boilerplate."""
    header = f"Domain of {name} (family {family.ref}), designed by {info.model} for the task:\n{task}"
    return family_package(name, family.section(task=task), dump_domain(domain, header=header),
                          design_readme(name, task, family, domain, info), tags=("openadapt", "generated"),
                          task_distribution=task_distribution(info))


def short_fields(value: BaseModel) -> str:
    """A list item written aside, as the conversation records it: its short fields (its id, fix, kinds), not its
    lines of prose: later pieces need to know the item, not to evaluate thousands of tokens of its log lines."""
    data = value.model_dump(mode="json")
    short = {k: v for k, v in data.items() if (isinstance(v, str) and len(v) <= 60) or isinstance(v, int | float)
             or (isinstance(v, list) and all(isinstance(x, str) and len(x) <= 40 for x in v))}
    return json.dumps(short, ensure_ascii=False)


def _keeps_repairing(notes: dict[str, Any]) -> bool:
    """Whether an attempt whose draft never parsed is followed by more piece repairs rather than a rewrite of
    every piece: the first time, and again for as long as the last such attempt fixed one of the problems it
    started with. Fixed, not fewer: the semantic checks run only on a draft that fits the schema, so fixing a
    schema problem can bring out more problems than it removed. Repairs get nearer a parsing draft than a rewrite."""
    return "continued" not in notes or notes.get("fixed", 0) > 0


def design_readme(name: str, task: str, family: Family, domain: Domain, info: DesignerInfo) -> str:
    tiers = "\n".join(f"| {t} | {family.tier_changes.get(t, '')} | {family.step_budget[t]} |"
                      for t in sorted(family.step_budget))
    return (f"# {name}\n\n**Task:** {task}\n\n{domain.summary}\n\nA `{family.ref}` environment ({family.summary}): "
            f"its content is `domain.yaml`, written by {info.model} ({info.backend}); the mechanics are openadapt's "
            f"`{family.name}` engine.\n\n| ECI | what the tier changes | step budget |\n|---|---|---|\n{tiers}\n")


__all__ = ["FamilyDomainDesigner", "choose_family", "plan_pieces"]
