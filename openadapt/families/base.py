"""`Family`: a mechanics engine written once, plus the schema of the domains it runs.

A family bundles, for one kind of agent task (diagnosis, reconciliation, scheduling, ...):

- `domain`: the pydantic `Domain` subclass a designer fills in;
- `environment`: the engine, an `OpenAdaptEnvironment` subclass that reads `self.domain` and holds no domain
  knowledge of its own (it must work with any valid domain of its schema);
- `models(domain)`: the action and observation classes for one domain (the action's choices may come from it);
- `oracle` and `heuristic`: reference policies written against the engine;
- `prompts/`: the agent's system and observation templates (jinja2), fed by `prompt_context(domain)`;
- `examples/`: example domains (YAML), the designer's worked examples and the docs' reference;
- the package facts every stage reads (tiers, step budgets, reward range), declared once here.

`bind(domain, task)` gives a `BoundFamily`: everything the loader, the validator and the trainer need to run
one domain, without any package code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from openadapt.families.domain import Domain, DomainError, DomainProblem, schema_problems
from openadapt.kit.eci import TIERS
from openadapt.kit.section import PackageSection

# Every family is the sub-package of its name here (`get_family` imports it by that name).
FAMILIES_DIR = Path(__file__).resolve().parent
# openadapt's seed packages (data): a seed built on a family is one of its examples.
SEEDS_DIR = FAMILIES_DIR.parent / "seed_envs"



@dataclass(frozen=True, kw_only=True)
class Family:
    """One family, registered by its sub-package (`FAMILY = register_family(Family(...))`). The reward facts
    default to the house rules most families keep: a reward in -0.5..1.0, solved at 0.95 or more, -0.1 for an
    invalid or malformed action; a family declares only where it differs."""

    name: str
    version: int
    summary: str  # one line: what kind of task this family models (shown when a designer chooses a family)
    fits: str  # which tasks belong here and which do not (guidance for the choice)
    brief: str = ""  # what an expert of the task's world is asked before its domain is written (designer/brief.py)
    domain: type[Domain]
    environment: type  # an OpenAdaptEnvironment subclass
    models: Any  # (domain) -> (action class, observation class)
    oracle: type
    heuristic: type
    step_budget: dict[int, int]
    reward_range: tuple[float, float] = (-0.5, 1.0)
    solved_reward: float = 0.95
    invalid_action_reward: float = -0.1
    malformed_reward: float = -0.1
    tier_changes: dict[int, str] = field(default_factory=dict)  # what each tier changes, in this family's terms
    prompt_context: Any = None  # (domain) -> dict for the templates; default: {"domain": domain}

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def root(self) -> Path:
        """The family's folder (its sub-package): prompts/, examples/, README.md."""
        return FAMILIES_DIR / self.name

    @property
    def prompts(self) -> Path:
        return self.root / "prompts"

    def examples(self) -> dict[str, Path]:
        """Example domains shipped with the family, by name: its own, and the seed packages built on it."""
        found = {p.stem: p for p in sorted((self.root / "examples").glob("*.yaml"))}
        for manifest in sorted(SEEDS_DIR.glob("*/openenv.yaml")):
            if f"family: {self.ref}" in manifest.read_text(encoding="utf-8"):
                found[manifest.parent.name] = manifest.parent / "domain.yaml"
        return found

    def section(self, task: str, domain_file: str = "domain.yaml") -> PackageSection:
        """The manifest section of a package of this family."""
        return PackageSection(
            format_version=2, task=task, family=self.ref, domain=domain_file, eci_tiers=list(TIERS),
            step_budget=dict(self.step_budget), reward_range=self.reward_range, solved_reward=self.solved_reward,
            invalid_action_reward=self.invalid_action_reward, malformed_reward=self.malformed_reward,
        )

    def parse_domain(self, data: Any, source: str = "domain") -> Domain:
        """Schema, then semantic checks; DomainError names every failing field."""
        if not isinstance(data, dict):
            raise DomainError([DomainProblem(path="domain", message="must be a mapping of fields")], source)
        try:
            domain = self.domain.model_validate(data)
        except ValidationError as exc:
            raise DomainError(schema_problems(exc), source) from None
        problems = domain.problems()
        if problems:
            raise DomainError(problems, source)
        return domain

    def load_example(self, name: str) -> Domain:
        from openadapt.families.yamlio import read_domain_file

        examples = self.examples()
        if name not in examples:
            raise DomainError([DomainProblem(path="example", message=f"{self.ref} has no example {name!r} "
                                             f"(examples: {', '.join(examples)})")])
        return self.parse_domain(read_domain_file(examples[name]), source=str(examples[name]))

    def bind(self, domain: Domain, section: PackageSection) -> BoundFamily:
        return BoundFamily(self, domain, section)


class BoundFamily:
    """One family running one domain: the classes and prompt facts of a package, built from data alone."""

    def __init__(self, family: Family, domain: Domain, section: PackageSection):
        self.family = family
        self.domain = domain
        self.section = section
        self.action_cls, self.observation_cls = family.models(domain)
        self.env_cls = family.environment.bind(section, domain=domain, action_type=self.action_cls,
                                               observation_type=self.observation_cls)

    @cached_property
    def context(self) -> dict[str, Any]:
        if self.family.prompt_context is not None:
            return dict(self.family.prompt_context(self.domain))
        return {"domain": self.domain}
