"""The whole-domain designer, for capable models: the whole domain in one request, with the family's fields and
every rule the domain must meet stated before the model writes; what the checks then find (each problem's path,
code and sentence) goes back for one revision of the whole.

A capable model keeps a domain consistent across its fields when it writes them together, and a rule stated
before it writes costs nothing where the same rule found afterwards costs a round trip. Small models do better
on small constrained pieces (`family_design`); `generate --design-mode auto` picks this mode for an endpoint.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import yaml

from openadapt.designer.base import Candidate, DesignerInfo
from openadapt.designer.copying import copied_from_example
from openadapt.designer.deadline import NO_DEADLINE, Deadline, OutOfTime
from openadapt.designer.family_design import (
    SYSTEM,
    FamilyChoice,
    Progress,
    choose_family,
    family_files,
    pick_example,
)
from openadapt.designer.session import Session
from openadapt.designer.switches import checked
from openadapt.families import all_families
from openadapt.families.base import Family
from openadapt.families.docs import schema_tables
from openadapt.families.domain import Domain, DomainError, DomainProblem
from openadapt.llm.chat import ChatBackend, Completion, Usage

MAX_REVISIONS = 2  # revisions of the whole per attempt before the package goes to the validator (or is unusable)
MAX_PROBLEMS_SENT = 30  # problems listed in one revision request (the rest come back in the next, if still there)


def domain_rules(domain: type[Domain]) -> list[str]:
    """Every rule of `domain` that no single field's description states, as sentences: how its lists refer to
    each other (`KEYS`, `REFERENCES`), placeholders that stand for names (`NAMED_LINES`), what the first items
    must write (`REQUIRED_IN_FIRST`), names of different things (`VARIED_KEYS`), texts without figures
    (`NO_DIGITS`), and the family's rules across fields (`RULES`). Each is read from the declaration the checks
    use, so what the model is told and what it is held to cannot drift apart."""
    lines = [f"`{name}` items are told apart by their `{key}`: every one different." for name, key in
             domain.KEYS.items()]
    for path, ref in domain.REFERENCES.items():
        name, field = path.split(".", 1)
        source, key = ref.source.split(".", 1)
        if ref.by_kind:
            kinds = "; ".join(f"kind {kind!r}: one of the `{k}`s of `{s}`" for kind, target in ref.by_kind
                              for s, k in [target.split(".", 1)])
            lines.append(f"Each `{field}` of a `{name}` item names, by the item's kind, {kinds}; other kinds name "
                         "nothing.")
            continue
        later = ", a later item of the same list" if ref.later_only else ""
        lines.append(f"Each `{field}` of a `{name}` item is one of the `{key}`s of `{source}`{later}.")
        if ref.min_chain:
            lines.append(f"Through `{name}`.`{field}` there is a chain of at least {ref.min_chain} items (A -> B -> C "
                         "is 3).")
    for field, names in domain.NAMED_LINES.items():
        spelled = ", ".join(f"`{{{placeholder}}}` stands for one of the `{domain.KEYS[lst]}`s of `{lst}`"
                            for placeholder, lst in names.items())
        lines.append(f"In `{field}`, {spelled}: write the placeholders, the engine fills in the names.")
    for path, count in domain.REQUIRED_IN_FIRST.items():
        name, field = path.split(".", 1)
        lines.append(f"At least the first {count} items of `{name}` write `{field}`.")
    for name in sorted(domain.VARIED_KEYS):
        lines.append(f"The `{name}` are different things: at most half of their names may be one name numbered.")
    for path in sorted(domain.NO_DIGITS):
        lines.append(f"`{path}` holds no figures.")
    return lines + [f"{rule.says} {rule.why}".strip() for rule in domain.RULES]


def whole_request(task: str, family: Family, example: Domain, state_rules: bool = True) -> str:
    """The one request for the whole domain: the task, the family and what its tiers change, its fields, its
    rules (`state_rules`), and one example domain of another world (the shape, never the content)."""
    tiers = "\n".join(f"- ECI {t}: {family.tier_changes[t]}" for t in sorted(family.tier_changes))
    rules = ("Rules it must meet across its fields:\n" + "\n".join(f"- {line}" for line in domain_rules(
        family.domain)) + "\n\n") if state_rules else ""
    shown = json.dumps(example.model_dump(mode="json"), ensure_ascii=False)
    return (f"The task:\n> {task}\n\nWrite the domain of a `{family.name}` environment for this task. The family: "
            f"{family.summary}. Its mechanics are fixed code; the domain is the data they run on, every name, "
            f"number and text the agent meets. What each tier (ECI 1-5) changes:\n{tiers}\n\n"
            f"The domain is one JSON object with these fields (nested records below it):\n\n"
            f"{schema_tables(family.domain)}\n{rules}A domain of this family for ANOTHER world, to show the shape "
            f"only (never copy its names, texts or numbers):\n{shown}\n\nWrite this task's world as one of its "
            "experts knows it: its own parts, people, records, figures and phrases, realistic and varied. Answer "
            "with the whole domain as one JSON object, nothing else.")


def revision_request(problems: list[DomainProblem]) -> str:
    shown = problems[:MAX_PROBLEMS_SENT]
    more = f"\n(and {len(problems) - len(shown)} more of the same kinds)" if len(problems) > len(shown) else ""
    listed = "\n".join(f"- {p.path} [{p.rule or p.code}]: {' '.join(p.message.split())}" for p in shown)
    return (f"Checking this domain found {len(problems)} problem(s) (path [rule or code]: what is wrong):\n{listed}"
            f"{more}\n\nWrite the whole domain again as one JSON object: fix each problem and keep everything else.")


def validator_request(feedback: str) -> str:
    return (f"The environment validator ran this domain's package and failed it:\n{feedback}\n\nWrite the whole "
            "domain again as one JSON object, so that these checks pass; keep everything else.")


class NotAnObject(ValueError):
    """A reply that holds no JSON object."""


def reply_object(completion: Completion) -> dict[str, Any]:
    """The JSON object of a reply: the whole text, or the first fenced block, or from its first `{` to its last
    `}` (a capable model without a response format may wrap its JSON). NotAnObject says why there is none."""
    if completion.truncated:
        raise NotAnObject(f"the reply was cut off at the token limit after {completion.usage.completion_tokens} "
                          "tokens: write shorter texts")
    text = completion.text.strip()
    fenced = re.search(r"```(?:json)?\s*\n(.*?)\n\s*```", text, re.DOTALL)
    text = fenced.group(1) if fenced else text[text.find("{"):text.rfind("}") + 1] if "{" in text else text
    try:
        data = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        raise NotAnObject(f"the reply is not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(data, dict):
        raise NotAnObject(f"the reply is a JSON {type(data).__name__}, not one object")
    return data


class WholeDomainDesigner:
    """A `Designer` writing a family domain in one request per revision; see the module docstring."""

    def __init__(self, backend: ChatBackend, name: str, task: str, *, families: list[Family] | None = None,
                 progress: Progress | None = None, kind: str = "openai-compatible",
                 deadline: Deadline = NO_DEADLINE, off: frozenset[str] = frozenset()):
        self.backend, self.name, self.task, self.deadline = backend, name, task, deadline
        self.off = checked(off)  # the designer's switches turned off (`switches.SWITCHES`): measurements only
        self.families = families or all_families()
        self.progress = progress or (lambda phase, attempt, detail: None)
        self.choice: FamilyChoice | None = None
        self._family: Family | None = None
        self._example: Domain | None = None
        self._others: list[Domain] = []
        self._session: Session | None = None
        self._draft_text = ""  # the latest reply: the domain a revision starts from
        self._last_problems: list[DomainProblem] = []  # what the checks found in it
        self._usage_mark = Usage()
        info = backend.describe()
        self.info = DesignerInfo(backend=kind, model=info.model, base_url=info.base_url, model_sha256=info.sha256,
                                 settings={**info.sampling.model_dump(), "threads": info.threads,
                                           "n_ctx": info.n_ctx, "design_mode": "whole",
                                           **({"switched_off": sorted(self.off)} if self.off else {})})

    @property
    def deterministic(self) -> bool:
        """Once no family fitted, asking again gives the same answer: the loop stops."""
        return self.choice is not None and self.choice.family is None

    @property
    def no_family(self) -> bool:
        return self.deterministic

    def design(self) -> Candidate:
        started = time.monotonic()
        self.progress("choosing a family", 1, f"{len(self.families)} families")
        try:
            self.choice, self._session = choose_family(self.backend, self.task, self.families, self.deadline,
                                                       describe=False)
        except OutOfTime:
            return Candidate(problems=[f"{self.deadline} was reached before a family was chosen"])
        notes: dict[str, Any] = {"choice": self.choice.note(), "design_mode": "whole"}
        if self.choice.family is None:
            return Candidate(problems=[f"no family fits the task ({self.choice.reason})"],
                             usage=self._attempt_usage(), notes=notes)
        self._family = next(f for f in self.families if f.name == self.choice.family)
        self.info = self.info.model_copy(update={"family": self._family.ref})
        self._example, notes["example"] = pick_example(self.task, self._family)
        self._others = [self._family.load_example(n) for n in self._family.examples()
                        if self._family.load_example(n) != self._example]
        return self._revised(None, notes, started, 1)

    def repair(self, previous: Candidate, feedback: str, attempt: int) -> Candidate:
        if self._family is None:  # no family fitted: asking again would give the same answer
            return previous
        started = time.monotonic()
        if not self._draft_text:  # nothing was written (the time limit, a refused request): from scratch
            note = None
        elif previous.usable:
            note = validator_request(feedback)
        else:  # the revisions ran out with problems left: more revisions of the same draft
            note = revision_request(self._last_problems)
        return self._revised(note, {"design_mode": "whole", "repair": attempt}, started, attempt)

    # -- internals --
    def _revised(self, first_note: str | None, notes: dict[str, Any], started: float, attempt: int) -> Candidate:
        """Ask for the whole domain (from scratch, or as a revision of the latest draft told `first_note`), then
        revise it while the checks find problems, at most MAX_REVISIONS times."""
        note, rounds, found, data = first_note, [], [], None
        try:
            revisions = 0 if "revise" in self.off else MAX_REVISIONS
            for revision in range(revisions + 1):
                data, found = self._ask(note, attempt, revision)
                rounds.append(len(found))
                if not found or revision == revisions:
                    break
                note = revision_request(found)
                self.progress("revising", attempt, f"{len(found)} problem(s), e.g. {str(found[0])[:140]}")
        except OutOfTime:
            found = found or [DomainProblem(path="domain", message=f"{self.deadline} was reached before the domain "
                                            "was written")]
        notes = {**notes, "problems_per_round": rounds, "requests": len(self._session.completions),
                 "completions": self._session.completions[-20:], "design_s": round(time.monotonic() - started, 1)}
        self._last_problems = found
        if found:
            why = "".join(f"# - {' '.join(str(p).split())}\n" for p in found[:12])
            draft = (yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120) if data is not None
                     else "\n".join(f"# {line}" for line in self._draft_text.splitlines()))
            return Candidate(problems=[str(p) for p in found[:12]], usage=self._attempt_usage(), notes=notes,
                             draft=f"# The domain as drafted; it did not pass its checks:\n{why}{draft}\n")
        domain = self._family.parse_domain(self._family.domain.tidy(data))
        files = family_files(self.name, self.task, self._family, domain, self.info)
        return Candidate(files=files, usage=self._attempt_usage(), notes=notes)

    def _ask(self, note: str | None, attempt: int, revision: int) -> tuple[dict[str, Any] | None,
                                                                           list[DomainProblem]]:
        """One request: the whole domain (note None), or a revision of the latest draft; its data and problems."""
        self.deadline.check()
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": whole_request(self.task, self._family, self._example,
                                                              state_rules="state_rules" not in self.off)}]
        if note is not None:
            messages += [{"role": "assistant", "content": self._draft_text}, {"role": "user", "content": note}]
        began = time.monotonic()
        completion = self.backend.complete(messages, schema=self._family.domain.model_json_schema())
        self._session.record(completion, "domain" if revision == 0 and note is None else f"revision {revision}")
        self.progress("writing", attempt, f"the whole domain ({time.monotonic() - began:.1f} s, "
                                          f"{completion.usage.completion_tokens} tokens)")
        self._draft_text = completion.text.strip()
        try:
            data = reply_object(completion)
        except NotAnObject as exc:
            return None, [DomainProblem(path="domain", message=f"{exc}. Answer with the whole domain as one JSON "
                                        "object, nothing else.")]
        return data, self._check(data)

    def _check(self, data: dict[str, Any]) -> list[DomainProblem]:
        tidied = self._family.domain.tidy(data)
        try:
            self._family.parse_domain(tidied)
            problems: list[DomainProblem] = []
        except DomainError as exc:
            problems = list(exc.problems)
        return problems + copied_from_example(tidied, self._example, self._others, self.task)

    def _attempt_usage(self) -> Usage:
        used = self._session.usage.since(self._usage_mark) if self._session else Usage()
        self._usage_mark = self._session.usage.model_copy() if self._session else Usage()
        return used


__all__ = ["WholeDomainDesigner", "domain_rules", "whole_request"]
