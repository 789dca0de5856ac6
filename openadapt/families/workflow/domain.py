"""The workflow domain: an enterprise desk (its lines of work, their categories and who handles them, the record
field every close cites, the desk's policies, its inbox traffic and its roles), as data.

Each episode draws one scenario (a line of work) and an authority scope (the junior or the senior role). The agent
works a queue of tasks with SLAs: assign each to a colleague with the right skill, route it as the desk's policies
require (escalate, defer, or work it and close it, with senior sign-off above a threshold), answer the
legitimate messages and never the phishing, while the record schema drifts and chaos strikes. The engine knows
none of the names: everything below is the domain's.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from openadapt.families.domain import (
    IDENT,
    Domain,
    DomainPart,
    DomainProblem,
    Placeholders,
    Rule,
    duplicate_values,
    duplicates,
    name_field,
    names_differ,
    unknown_refs,
)

EMAIL_DOMAIN = r"^[a-z0-9][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$"
LOCAL_PART = r"^[a-z][a-z0-9._-]*$"
# Keys of a task record as the agent sees it; the amount field (and its drifted name) must not be one of them.
VIEW_KEYS = ("id", "title", "category", "skill", "requester", "status", "owner", "sla", "blocker", "signed_off")
# The desk's eight actions by role (what each does is the engine's; what it is called is the domain's).
ACTION_ROLES = ("assign", "escalate", "defer", "close", "reply", "re_route", "lookup", "approval")
SeniorOnly = Literal["escalate", "close"]
# Bounded items of the domain's lists (a domain file is untrusted data).
Category = Annotated[str, StringConstraints(min_length=3, max_length=40, pattern=IDENT)]
# Patterns in the types, so that a designer's grammar holds them: checked only afterwards, a small model
# writes requesters as team names ('customer_support', 'IT_admin'), and the whole scenario is written again.
FirstName = Annotated[str, StringConstraints(min_length=2, max_length=20, pattern=LOCAL_PART)]
MailDomain = Annotated[str, StringConstraints(min_length=4, max_length=60, pattern=EMAIL_DOMAIN)]
Pattern = Annotated[str, StringConstraints(min_length=6, max_length=60)]
Subject = Annotated[str, StringConstraints(min_length=8, max_length=160)]
Phrase = Annotated[str, StringConstraints(min_length=3, max_length=30)]
# One lowercase word, or a stem ending in '*' (matched against the agent's words; a phrase never matches one)
Term = Annotated[str, StringConstraints(min_length=2, max_length=20, pattern=r"^[a-z][a-z0-9]*\*?$")]

# What the mechanics need of every scenario (see family_problems for why).
MIN_CATEGORIES = 6
MIN_ESCALATE = 3
MIN_DEFER = 2
MIN_URGENT_NOISE = 3  # ECI 5 injects three urgent-looking messages (five distractors, two of them phishing)
MIN_NOISE = 2
TEAM_PER_SKILL = 3  # colleagues per skill on the chaos tiers
MAX_SKILLS = 5


class Skill(DomainPart):
    name: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "A skill (a resolver group) of the desk's team, as the agent reads it on a task and a colleague, e.g. "
        "'account_exec', 'payroll', 'network_ops'."))
    categories: list[Category] = Field(min_length=1, max_length=10, description=(
        "The categories of work this skill handles (identifiers), e.g. ['discount_request', 'invoice_dispute']. "
        "A task's category is shown in its title, so never use a word of the phishing filter here."))


class Scenario(DomainPart):
    name: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "One line of work of the desk, as the agent reads it at the top of the desk, e.g. 'sales_pipeline', "
        "'customer_refund', 'end_user_support'."))
    policy_prefix: str = Field(min_length=2, max_length=5, pattern=r"^[A-Z]+$", description=(
        "Capital letters that start this scenario's policy ids (SAL gives SAL-1, SAL-2, SAL-3), unique."))
    amount_field: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "The record field every close and sign-off cites (the task's figure), e.g. 'deal_value', "
        "'refund_amount', 'affected_users'. Schema drift renames it mid-episode."))
    renamed_field: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "What the drift silently renames the amount field to, a plausible new API name, e.g. 'contract_amount'."))
    threshold_text: str = Field(min_length=8, max_length=40, description=(
        "How a sign-off threshold reads in the policy, with {amount} where the number goes (thousands "
        "separated by commas), e.g. '${amount}', '{amount} minutes', '{amount} users'."))
    thresholds: list[Annotated[int, Field(ge=1, le=10**9)]] = Field(min_length=3, max_length=5, description=(
        "Sign-off thresholds an episode draws from, increasing; the middle one is the textbook value a "
        "careless agent assumes when the policy's details are withheld, e.g. [25000, 40000, 60000]."))
    approval_title: str = Field(min_length=5, max_length=60, description=(
        "Title of this scenario's sign-off policy, e.g. 'Large deal sign-off', 'Major incident review'."))
    skills: list[Skill] = Field(min_length=2, max_length=MAX_SKILLS, description=(
        "Who handles what: two to five skills, each with the categories it handles (each category once)."))
    escalate_categories: list[Category] = Field(min_length=MIN_ESCALATE, max_length=6, description=(
        "Categories the escalation policy may list in an episode (serious matters, e.g. 'legal_threat', "
        "'data_loss'); the first is the usual one. At least three."))
    defer_categories: list[Category] = Field(min_length=MIN_DEFER, max_length=6, description=(
        "Categories the deferral policy may list (low-value asks for the next cycle, e.g. 'feature_wishlist'); "
        "the first is the usual one. At least two, none of them an escalation category."))
    requesters: list[MailDomain] = Field(min_length=1, max_length=12, description=(
        "E-mail domains of the people who raise this scenario's tasks: customers' or suppliers' domains (e.g. "
        "'acme.example'), or the company's own domain when the requesters are colleagues."))
    executive: str = Field(min_length=2, max_length=30, pattern=LOCAL_PART, description=(
        "Mailbox (the part before @) of the executive who pings about priority tasks, e.g. 'vp.sales', 'cio'."))


class InboxItem(DomainPart):
    FORMS = frozenset({"subject"})  # 'Fire drill on Thursday at 10:00' fits any organisation's inbox
    sender: str = Field(min_length=2, max_length=30, pattern=LOCAL_PART, description=(
        "Mailbox at the company's domain that sends it (the part before @), e.g. 'facilities', 'it-notices'."))
    subject: str = Field(min_length=8, max_length=120, description=(
        "Its subject line, naming no task, e.g. 'Fire drill on Thursday at 10:00'."))


class Roles(DomainPart):
    junior: str = Field(default="L1", min_length=2, max_length=12, pattern=r"^[A-Za-z][A-Za-z0-9_-]*$",
                        description="The junior scope's name as the agent sees it, e.g. 'L1', 'tier1', 'clerk'.")
    senior: str = Field(default="L2", min_length=2, max_length=12, pattern=r"^[A-Za-z][A-Za-z0-9_-]*$",
                        description="The senior scope's name, e.g. 'L2', 'tier2', 'charge_nurse'.")
    lead: str = Field(default="the L2 lead", min_length=4, max_length=40, description=(
        "Who signs off and takes over what the junior may not do, as feedback names them, e.g. 'the L2 lead', "
        "'the duty manager'."))
    senior_only: list[SeniorOnly] = Field(default_factory=lambda: ["escalate", "close"], min_length=1,
                                          max_length=2, description=(
        "What only the senior scope may do: 'escalate', 'close' or both. The oversight referee blocks a junior "
        "who tries (-0.5); a junior hands such work to the lead with the approval action instead."))


class ActionNames(DomainPart):
    """What the desk's eight actions are called in this world (each keeps its role in the mechanics)."""

    assign: str = name_field("assign_task", "assigning a pending task to a colleague with its skill", "assign_ticket")
    escalate: str = name_field("escalate", "escalating a task the escalation policy names", "escalate_ticket")
    defer: str = name_field("defer", "deferring a task the deferral policy names", "move_to_backlog")
    close: str = name_field("close_task", "closing finished work (citing the amount field)", "resolve_ticket")
    reply: str = name_field("reply_message", "answering a message", "reply_to_requester")
    re_route: str = name_field("re_route", "handing a blocked task to an available colleague", "reassign_ticket")
    lookup: str = name_field("lookup_policy", "reading a policy's (perhaps withheld) details", "check_policy")
    approval: str = name_field("request_approval", "asking for sign-off above the threshold (for a junior: the "
                            "hand-off to the lead)", "request_signoff")


class PolicyTexts(DomainPart):
    # The examples are the general form of such a policy in any line of work (designer/copying.py: not a copy).
    FORMS = frozenset({"approval", "escalation", "deferral"})

    approval: str = Field(min_length=20, max_length=200, description=(
        "The sign-off policy, with {threshold} (the scenario's threshold_text filled in), e.g. 'work above "
        "{threshold} needs L2 sign-off (request_approval) before it is closed.'"))
    escalation_title: str = Field(default="Escalations", min_length=4, max_length=40,
                                  description="Title of the escalation policy, e.g. 'Major incident criteria'.")
    escalation: str = Field(min_length=20, max_length=200, description=(
        "The escalation policy, with {categories} (the episode's escalated categories joined by 'and'), e.g. "
        "'{categories} cases must be escalated, never assigned or closed.'"))
    deferral_title: str = Field(default="Deferrals", min_length=4, max_length=40,
                                description="Title of the deferral policy, e.g. 'Backlog rules'.")
    deferral: str = Field(min_length=20, max_length=200, description=(
        "The deferral policy, with {categories}, e.g. '{categories} requests are deferred to the next cycle, "
        "never worked now.'"))


class ReasoningTerms(DomainPart):
    """Words that claim a process bonus when the agent's reasoning names what is in view. A word ending in '*'
    matches any word it starts (block* matches 'blocked'); otherwise the whole word, or its plural with -s."""

    blocked: list[Term] = Field(default_factory=lambda: ["block*"], min_length=1, max_length=4,
                               description="Words for a blocked task, e.g. ['block*', 'stuck'].")
    drift: list[Term] = Field(default_factory=lambda: ["schema*"], min_length=1, max_length=4,
                             description="Words for a changed record schema, e.g. ['schema*', 'renamed'].")
    sla: list[Term] = Field(default_factory=lambda: ["sla"], min_length=1, max_length=4,
                           description="Words for deadline pressure, e.g. ['sla', 'deadline*'].")


class ChaosRates(DomainPart):
    """How turbulent the desk is: per-step chance of each chaos event on the tiers that have chaos."""

    dropout: float = Field(default=0.12, ge=0.02, le=0.25, description=(
        "Per-step chance that a colleague goes away and their work in progress reverts to pending, e.g. 0.12."))
    spike: float = Field(default=0.08, ge=0.02, le=0.25, description=(
        "Per-step chance that an executive makes a task top priority (its SLA is cut, they want an answer), "
        "e.g. 0.08."))
    noise: float = Field(default=0.10, ge=0.02, le=0.25,
                         description="Per-step chance that a low-signal message arrives, e.g. 0.10.")


class WorkflowDomain(Domain):
    KEYS = {"scenarios": "name"}
    RULES = (
        Rule("team_per_skill", ("staff_names", "scenarios"),
             f"staff_names holds at least {TEAM_PER_SKILL} names per skill of the scenario with the most skills.",
             f"The chaos tiers staff {TEAM_PER_SKILL} colleagues per skill."),
        Rule("scenario_categories", ("scenarios",),
             f"Each scenario's skills together handle at least {MIN_CATEGORIES} different categories.",
             "After ECI 4 draws two escalated and one deferred category, hands-on tasks still need categories of "
             "their own."),
    )
    PLACEHOLDERS = (
        Placeholders("scenarios[].threshold_text", ("amount",), ("amount",)),
        Placeholders("title_template", ("category", "who"), ("category",)),
        Placeholders("query_subjects[]", ("tid", "title"), ("tid",)),
        Placeholders("executive_subject", ("tid",), ("tid",)),
        Placeholders("policies.approval", ("threshold",), ("threshold",)),
        *(Placeholders(f"policies.{field}", ("categories",), ("categories",)) for field in ("escalation", "deferral")),
        Placeholders("lookalike_patterns[]", ("stem", "tld"), ("stem",)),
        Placeholders("noise[].subject"), Placeholders("urgent_noise[].subject"),
        Placeholders("phishing_obvious[]", ("tid", "title", "field"), ("tid",)),
        Placeholders("phishing_subtle[]", ("tid", "title"), ("tid",)),
    )
    # Forms of any organisation's desk, in no world of their own: a follow-up 'Any update on {title}? ({tid})',
    # phishing that asks for a login, a look-alike '{stem}-billing.{tld}'.
    FORMS = frozenset({"lookalike_patterns", "title_template", "query_subjects", "executive_subject",
                       "phishing_obvious", "phishing_subtle"})
    agent_role: str = Field(min_length=5, max_length=100, description=(
        "Who the agent is, e.g. 'the operations desk agent at Northwind', 'a service desk analyst'."))
    company: str = Field(min_length=2, max_length=40,
                         description="The organisation's name, e.g. 'Northwind', 'Harborview University'.")
    company_domain: str = Field(min_length=4, max_length=40, pattern=EMAIL_DOMAIN, description=(
        "The e-mail domain of everyone in the organisation, e.g. 'northwind.example'."))
    company_lookalikes: list[MailDomain] = Field(min_length=2, max_length=8, description=(
        "Look-alike domains phishers use for colleagues' addresses, e.g. 'northwlnd.example', "
        "'northwind-secure.example'."))
    lookalike_patterns: list[Pattern] = Field(min_length=1, max_length=5, description=(
        "How phishers disguise a customer's domain: patterns with {stem} (the part before the first dot) and "
        "{tld} (the rest), e.g. '{stem}-billing.{tld}', '{stem}.{tld}.co'."))
    task_noun: str = Field(default="task", min_length=3, max_length=20, description=(
        "What one item of the queue is called, singular, e.g. 'task', 'ticket', 'case'."))
    colleague_noun: str = Field(default="colleague", min_length=3, max_length=20, description=(
        "What a team member is called, e.g. 'colleague', 'resolver', 'nurse'."))
    task_prefix: str = Field(default="T", min_length=1, max_length=4, pattern=r"^[A-Z]+$",
                             description="Capital letters before a task's number, e.g. 'T' (T-123) or 'INC' (INC-123).")
    message_prefix: str = Field(default="M", min_length=1, max_length=4, pattern=r"^[A-Z]+$",
                                description="Capital letters before a message's number, e.g. 'M' (M-412).")
    title_template: str = Field(default="{category} for {who}", min_length=8, max_length=60, description=(
        "A task's title, with {category} (its category, in words) and {who} (the requester: a colleague's "
        "first name, or the customer's organisation), e.g. '{category} for {who}'."))
    away_status: str = Field(default="out of office", min_length=3, max_length=30, description=(
        "How the team list shows a colleague who is away, e.g. 'out of office', 'off shift'."))
    scenarios: list[Scenario] = Field(min_length=1, max_length=8, description=(
        "The desk's lines of work; each episode draws one."))
    staff_names: list[FirstName] = Field(min_length=10, max_length=40, description=(
        "Colleagues' first names, lowercase (the agent types them to assign work), e.g. ['ana', 'ben', 'chen']. "
        "Enough for three per skill of the largest scenario; colleagues also raise tasks on internal desks."))
    contacts: list[FirstName] = Field(min_length=2, max_length=20, description=(
        "First names of outside requesters (customers, suppliers), lowercase, e.g. ['jo', 'sam']."))
    query_subjects: list[Subject] = Field(min_length=2, max_length=6, description=(
        "Subjects of a requester's follow-up about their task, with {tid} (the task id) and optionally {title}, "
        "e.g. 'Any update on {title}? ({tid})'. They need an answer."))
    executive_subject: str = Field(min_length=10, max_length=120, description=(
        "Subject of the executive's priority ping, with {tid}, e.g. '{tid} is now top priority - send me an "
        "update today'. It needs an answer."))
    noise: list[InboxItem] = Field(min_length=MIN_NOISE, max_length=12, description=(
        "Routine internal messages that need no answer (at least two), e.g. facilities: 'Fire drill on "
        "Thursday at 10:00'."))
    urgent_noise: list[InboxItem] = Field(min_length=MIN_URGENT_NOISE, max_length=10, description=(
        "Internal messages that look urgent but need no answer from the desk (at least three), e.g. comms: "
        "'URGENT: all-hands moved to 3pm'."))
    phishing_obvious: list[Subject] = Field(min_length=1, max_length=6, description=(
        "Phishing subjects that name a real task ({tid}, optionally {title}, {field}: the amount field in words) "
        "and ask for credentials, payment or codes; each uses a word of phishing_words, e.g. 'Re: {tid} - "
        "confirm your login and password to release the {field}'."))
    phishing_subtle: list[Subject] = Field(min_length=1, max_length=6, description=(
        "Phishing subjects that read like an ordinary follow-up ({tid}, optionally {title}) and give themselves "
        "away only by the sender's look-alike domain; none uses a phishing word, e.g. '{tid}: please reply "
        "with the current figures'."))
    phishing_words: list[Phrase] = Field(min_length=1, max_length=8, description=(
        "Lowercase words or phrases a shallow phishing filter looks for, e.g. ['password', 'bank details']."))
    roles: Roles = Field(default_factory=Roles)
    actions: ActionNames = Field(default_factory=ActionNames)
    policies: PolicyTexts
    reasoning_terms: ReasoningTerms = Field(default_factory=ReasoningTerms)
    chaos: ChaosRates = Field(default_factory=ChaosRates)

    # ---- facts the engine reads ----------------------------------------------------------------------
    def scenario(self, name: str) -> Scenario | None:
        return next((s for s in self.scenarios if s.name == name), None)

    def junior_may(self, role: str) -> bool:
        """Whether the junior scope may take the action of this role (escalate, close)."""
        return role not in self.roles.senior_only

    def may(self, scope: str, role: str) -> bool:
        return scope == self.roles.senior or self.junior_may(role)

    def permissions(self) -> dict[str, frozenset[str]]:
        """The referee's table: scope -> the action names it may take."""
        names = self.actions.model_dump()
        everything = frozenset(names.values())
        return {self.roles.junior: everything - {names[r] for r in self.roles.senior_only},
                self.roles.senior: everything}

    # ---- drafts ------------------------------------------------------------------------------------------
    @classmethod
    def tidy(cls, data: dict) -> dict:
        """A scenario's skill named like an earlier one, or a category an earlier skill already handles, is
        dropped where the scenario keeps its two skills and each skill a category (a small model writes its
        first skill again later, categories and all). Its escalation and deferral lists keep only
        categories its skills handle, each once, and a deferral that is also escalated is dropped, as long as the
        list keeps its minimum (never a category added): a small model defers a skill's name ('network_ops') or
        one of its escalations, and keeps them when the scenario is rewritten whole.
        A scenario that defers what it also escalates, with too few other categories to defer, has its lists split:
        the escalation keeps its first categories, the deferral the last of its own (a small model lists the same
        categories in both).
        A policy prefix an earlier scenario has is replaced by one made from the scenario's own name (the first
        letters of its first word, else its words' initials): a small model gives every scenario 'IT'.
        A drift that renames the amount field to itself, or to a part of its name, renames it to its next version
        ('priority' -> 'priority_v2'; a small model, repaired, writes the same name again, or renames
        'ticket_priority' to 'priority', which the validator finds visible at reset)."""
        data = dict(data)
        if not isinstance(data.get("scenarios"), list):
            return data
        scenarios = []
        for scenario in data["scenarios"]:
            if isinstance(scenario, dict):
                scenario = dict(scenario)
                if isinstance(scenario.get("skills"), list):
                    scenario["skills"] = _distinct_skills(scenario["skills"])
                handled = {c for skill in scenario.get("skills") or [] if isinstance(skill, dict)
                           for c in skill.get("categories") or [] if isinstance(c, str)}
                for name, least, taken in (("escalate_categories", MIN_ESCALATE, ()),
                                           ("defer_categories", MIN_DEFER, "escalate_categories")):
                    pool = scenario.get(name)
                    if not isinstance(pool, list):
                        continue
                    barred = set(scenario.get(taken) or []) if taken else set()
                    kept = [c for c in dict.fromkeys(pool) if c in handled and c not in barred]
                    if len(kept) >= least:
                        scenario[name] = kept
                scenario = _split_escalate_defer(scenario)
                amount, renamed = scenario.get("amount_field"), scenario.get("renamed_field")
                if (isinstance(amount, str) and isinstance(renamed, str) and renamed.lower() in amount.lower()
                        and len(amount) <= 37):
                    scenario["renamed_field"] = f"{amount}_v2"  # how a versioned API renames a field
            scenarios.append(scenario)
        data["scenarios"] = _distinct_prefixes(scenarios)
        return data

    # ---- semantic checks -----------------------------------------------------------------------------
    def family_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        p += duplicates(self.scenarios, "name", "domain.scenarios")
        p += duplicates(self.scenarios, "policy_prefix", "domain.scenarios")
        p += _name_problems(self.staff_names, "domain.staff_names", LOCAL_PART)
        p += _name_problems(self.contacts, "domain.contacts", LOCAL_PART)
        p += _name_problems(self.company_lookalikes, "domain.company_lookalikes", EMAIL_DOMAIN)
        for j, lookalike in enumerate(self.company_lookalikes):
            if lookalike == self.company_domain:
                p.append(DomainProblem(path=f"domain.company_lookalikes[{j}]",
                                       message="is the company's own domain, not a look-alike"))
        for i, scenario in enumerate(self.scenarios):
            p += self._scenario_problems(i, scenario)
        widest = max((len(s.skills) for s in self.scenarios), default=0)
        if len(self.staff_names) < TEAM_PER_SKILL * widest:
            p.append(self.rule("team_per_skill").broken(
                "domain.staff_names", f"{len(self.staff_names)} names, a scenario with {widest} skills",
                minimum=TEAM_PER_SKILL * widest))
        p += self._text_template_problems()
        p += self._phishing_problems()
        p += names_differ(self.actions.model_dump(), "domain.actions", "action names")
        if self.roles.junior == self.roles.senior:
            p.append(DomainProblem(path="domain.roles.senior", message="must differ from the junior scope's name"))
        if len(set(self.roles.senior_only)) != len(self.roles.senior_only):
            p.append(DomainProblem(path="domain.roles.senior_only", message="lists an action twice"))
        return p

    def _scenario_problems(self, i: int, s: Scenario) -> list[DomainProblem]:
        at = f"domain.scenarios[{i}]"
        p: list[DomainProblem] = []
        p += duplicates(s.skills, "name", f"{at}.skills")
        categories = [c for skill in s.skills for c in skill.categories]
        seen: dict[str, str] = {}
        for k, skill in enumerate(s.skills):
            for j, category in enumerate(skill.categories):
                where = f"{at}.skills[{k}].categories[{j}]"
                if not re.match(IDENT, category):
                    p.append(DomainProblem(path=where, message=f"{category!r} must be a lowercase identifier"))
                if category in seen:
                    p.append(DomainProblem(path=where, message=(
                        f"{category!r} is already handled by skill {seen[category]!r}: each category has one "
                        "skill")))
                seen.setdefault(category, skill.name)
        distinct = len(set(categories))
        if distinct < MIN_CATEGORIES:
            p.append(self.rule("scenario_categories").broken(f"{at}.skills", f"{distinct} categories in {s.name!r}"))
        p += unknown_refs(s.escalate_categories, categories, f"{at}.escalate_categories", "category")
        p += unknown_refs(s.defer_categories, categories, f"{at}.defer_categories", "category")
        for pool, name in ((s.escalate_categories, "escalate_categories"), (s.defer_categories, "defer_categories")):
            for j, category in enumerate(pool):
                if category in pool[:j]:
                    p.append(DomainProblem(path=f"{at}.{name}[{j}]", message=f"{category!r} is listed twice"))
        for j, category in enumerate(s.defer_categories):
            if category in s.escalate_categories:
                p.append(DomainProblem(path=f"{at}.defer_categories[{j}]", message=(
                    f"{category!r} is also an escalation category: a task cannot be both escalated and deferred")))
        if s.amount_field == s.renamed_field:
            p.append(DomainProblem(path=f"{at}.renamed_field", message="must differ from amount_field (the drift "
                                   "renames it)"))
        elif s.renamed_field.lower() in s.amount_field.lower():
            p.append(DomainProblem(path=f"{at}.renamed_field", message=(
                f"is part of amount_field {s.amount_field!r}, which every task record shows: the drift's new name "
                "would be seen before the drift")))
        for name in ("amount_field", "renamed_field"):
            if getattr(s, name) in VIEW_KEYS:
                p.append(DomainProblem(path=f"{at}.{name}", message=(
                    f"{getattr(s, name)!r} is a key every task record already has ({', '.join(VIEW_KEYS)})")))
        if list(s.thresholds) != sorted(set(s.thresholds)) or min(s.thresholds) < 1:
            p.append(DomainProblem(path=f"{at}.thresholds", message=(
                "must be positive, different and increasing (the middle one is the textbook value)")))
        p += _name_problems(s.requesters, f"{at}.requesters", EMAIL_DOMAIN)
        for j, requester in enumerate(s.requesters):
            where = f"{at}.requesters[{j}]"
            if requester in s.requesters[:j]:
                p.append(DomainProblem(path=where, message=f"{requester!r} is listed twice"))
            if requester in self.company_lookalikes:
                p.append(DomainProblem(path=where, message="is one of the company's phishing look-alikes"))
            if requester != self.company_domain:
                for pattern in self.lookalike_patterns:
                    fake = lookalike(pattern, requester)
                    if fake == requester or fake == self.company_domain or fake in s.requesters:
                        p.append(DomainProblem(path=where, message=(
                            f"the look-alike pattern {pattern!r} turns it into {fake!r}, a real sender: phishing "
                            "must come from a domain nobody legitimate uses")))
        return p

    def _text_template_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        for j, pattern in enumerate(self.lookalike_patterns):
            where = f"domain.lookalike_patterns[{j}]"
            if not placeholders_only_ok(pattern):
                p.append(DomainProblem(path=where, message=(
                    "besides {stem} and {tld}, use only lowercase letters, digits, '-' and '.'")))
        for field in ("noise", "urgent_noise"):
            p += duplicates(getattr(self, field), "subject", f"domain.{field}")
        return p

    def _phishing_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        words = [w.lower() for w in self.phishing_words]
        for j, text in enumerate(self.phishing_obvious):
            where = f"domain.phishing_obvious[{j}]"
            if not any(w in text.lower() for w in words):
                p.append(DomainProblem(path=where, message=(
                    f"uses none of the phishing_words ({', '.join(words)}): an obvious lure asks for them")))
        for j, text in enumerate(self.phishing_subtle):
            where = f"domain.phishing_subtle[{j}]"
            if any(w in text.lower() for w in words):
                p.append(DomainProblem(path=where, message=(
                    "uses a phishing word: a subtle lure reads like an ordinary follow-up")))
        # Legitimate messages (which quote task titles) must never trip the shallow filter.
        legit = [("domain.query_subjects", t) for t in self.query_subjects]
        legit += [("domain.executive_subject", self.executive_subject), ("domain.title_template", self.title_template)]
        for i, s in enumerate(self.scenarios):
            for k, skill in enumerate(s.skills):
                where = f"domain.scenarios[{i}].skills[{k}].categories"
                legit += [(where, c.replace("_", " ")) for c in skill.categories]
        for path, text in legit:
            hit = next((w for w in words if w in text.lower()), None)
            if hit:
                p.append(DomainProblem(path=path, message=(
                    f"{text!r} contains the phishing word {hit!r}: legitimate messages must not read like phishing")))
        return p


def lookalike(pattern: str, requester: str) -> str:
    """A look-alike of a customer's e-mail domain (acme.example with '{stem}-billing.{tld}')."""
    stem, _, tld = requester.partition(".")
    return pattern.replace("{stem}", stem).replace("{tld}", tld)


def placeholders_only_ok(pattern: str) -> bool:
    return re.fullmatch(r"[a-z0-9.-]*", pattern.replace("{stem}", "").replace("{tld}", "")) is not None


def _name_problems(values: list[str], path: str, pattern: str) -> list[DomainProblem]:
    p = [DomainProblem(path=f"{path}[{i}]", message=f"{value!r} is not a valid name here (pattern {pattern})")
         for i, value in enumerate(values) if not re.match(pattern, value)]
    return p + duplicate_values(values, path)


def _split_escalate_defer(scenario: dict) -> dict:
    """The scenario with categories it both escalates and defers kept in one list only: the deferral keeps its
    own and enough of the shared ones (its last) for its minimum, the escalation the rest, where both keep their
    minimums; as written otherwise."""
    escalate, defer = scenario.get("escalate_categories"), scenario.get("defer_categories")
    if not (isinstance(escalate, list) and isinstance(defer, list)):
        return scenario
    shared = [c for c in dict.fromkeys(defer) if c in escalate]
    if not shared:
        return scenario
    own = [c for c in dict.fromkeys(defer) if c not in escalate]
    need = max(0, MIN_DEFER - len(own))
    moved = shared[len(shared) - need:] if need else []
    kept = [c for c in dict.fromkeys(escalate) if c not in moved]
    if len(kept) < MIN_ESCALATE or len(own) + len(moved) < MIN_DEFER:
        return scenario
    return {**scenario, "escalate_categories": kept, "defer_categories": [c for c in defer if c in own or c in moved]}


def _distinct_prefixes(scenarios: list) -> list:
    """Scenarios whose policy prefixes are unique: a repeated one is made from the scenario's name ('network_ops'
    -> 'NET', else 'NO', 'NETW'...), left as written where the name gives none that is free."""
    used = {s.get("policy_prefix") for s in scenarios if isinstance(s, dict)}
    seen: set = set()
    out = []
    for scenario in scenarios:
        prefix = scenario.get("policy_prefix") if isinstance(scenario, dict) else None
        if prefix is not None and prefix in seen and isinstance(scenario.get("name"), str):
            words = [w for w in re.findall(r"[a-z]+", scenario["name"].lower()) if w]
            options = [words[0][:3], "".join(w[0] for w in words), words[0][:4], words[0][:5]] if words else []
            fresh = next((o.upper() for o in options if 2 <= len(o) <= 5 and o.upper() not in used), None)
            if fresh is not None:
                scenario = {**scenario, "policy_prefix": fresh}
                used.add(fresh)
        seen.add(scenario.get("policy_prefix") if isinstance(scenario, dict) else None)
        out.append(scenario)
    return out


def _distinct_skills(skills: list) -> list:
    """Skills without a repeated name and without a category an earlier skill handles, where at least two skills,
    each with a category, are left (a draft's tidy: only what it wrote, less its repeats)."""
    kept, names, handled = [], set(), set()
    for skill in skills:
        if not isinstance(skill, dict) or not isinstance(skill.get("categories"), list):
            return skills
        own = [c for c in dict.fromkeys(skill["categories"]) if c not in handled]
        if skill.get("name") in names or not own:
            continue
        kept.append({**skill, "categories": own})
        names.add(skill.get("name"))
        handled.update(own)
    return kept if len(kept) >= 2 else skills
