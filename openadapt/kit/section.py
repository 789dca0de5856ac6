"""The `openadapt:` section of an environment package's manifest, as a typed model (no file reading here).

Two formats load:

- **v2** (what openadapt writes): the package names a *family* of mechanics (`family: diagnosis@1`) and carries
  its domain as data (`domain: domain.yaml`); or, where no family fits, it names its own mechanics classes under
  `mechanics:` (code in the package's `custom/` module, written by an LLM designer).
- **v1** (hand-written packages of openadapt 0.1): the mechanics classes at the top level of the section. It is
  read into the same model (`mechanics`), so every stage sees one shape.

The facts every stage reads (tiers, step budgets, reward range, malformed/invalid rewards) sit at the top level
in both formats.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openadapt.kit.eci import TIERS, Tier

FORMAT_VERSION = 2
# "module.path:Attribute", module relative to the package root (e.g. "custom.engine:QueueEnvironment").
_REF = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_]\w*$")
_FAMILY = re.compile(r"^(?P<name>[a-z][a-z0-9_]*)@(?P<version>[1-9][0-9]*)$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _ref(value: str) -> str:
    if not _REF.match(value):
        raise ValueError(f"{value!r} is not of the form 'module.path:Name' (module relative to the package)")
    return value


def _inside(value: str) -> str:
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts or "\\" in value:
        raise ValueError(f"{value!r} must be a path inside the package")
    return value


class TemplatesSpec(_Strict):
    """The jinja2 templates (package-relative) that turn observations into an LLM agent's prompts."""

    system_template: str = Field(description="template of the system prompt")
    observation_template: str = Field(description="template rendering one observation")
    action_format: Literal["json"] = Field(
        default="json", description="a completion carries one JSON object that validates as the action class"
    )

    _paths = field_validator("system_template", "observation_template")(_inside)


class PolicyRefs(_Strict):
    """Reference policies (each `module:Class`, constructed with no arguments)."""

    oracle: str = Field(description="privileged reference policy that must solve every tier")
    heuristic: str | None = Field(default=None, description="shallow non-privileged baseline")

    _oracle = field_validator("oracle")(_ref)

    @field_validator("heuristic")
    @classmethod
    def _heuristic(cls, value: str | None) -> str | None:
        return None if value is None else _ref(value)


class Mechanics(_Strict):
    """Mechanics shipped as code in the package (v1 packages, or v2 `custom/` mechanics)."""

    environment: str = Field(description="environment class, e.g. 'custom.engine:QueueEnvironment'")
    action: str = Field(description="action class, e.g. 'custom.models:QueueAction'")
    observation: str = Field(description="observation class")
    policies: PolicyRefs
    text_protocol: TemplatesSpec

    _refs = field_validator("environment", "action", "observation")(_ref)


class PackageSection(_Strict):
    """Everything openadapt's designer, validator, trainer and curriculum read from a package."""

    format_version: Literal[1, 2] = FORMAT_VERSION
    task: str = Field(min_length=1, description="one-line statement of the task the agent solves")
    family: str | None = Field(default=None, description="the mechanics family, 'NAME@VERSION'")
    domain: str | None = Field(default=None, description="package-relative domain file the family reads")
    mechanics: Mechanics | None = Field(default=None, description="mechanics classes shipped in the package")
    eci_tiers: list[Tier] = Field(min_length=1, description="supported Environment Complexity Index tiers")
    step_budget: dict[Tier, int] = Field(description="maximum steps per episode, per tier")
    reward_range: tuple[float, float] = Field(description="range of every per-step reward")
    solved_reward: float = Field(description="terminal reward at or above which the oracle counts as maxed")
    invalid_action_reward: float = Field(description="reward for a schema-valid action the environment rejects")
    malformed_reward: float = Field(description="reward for a completion that does not parse into an action; "
                                    "it consumes a step")

    @model_validator(mode="before")
    @classmethod
    def _read_v1(cls, data: Any) -> Any:
        """v1 kept the mechanics at the top level and the malformed reward inside text_protocol."""
        if not isinstance(data, dict) or data.get("format_version", 1) != 1 or "mechanics" in data:
            return data
        data = dict(data)
        mechanics = {key: data.pop(key) for key in ("environment", "action", "observation", "policies",
                                                     "text_protocol") if key in data}
        protocol = dict(mechanics.get("text_protocol") or {})
        if "malformed_reward" in protocol and "malformed_reward" not in data:
            data["malformed_reward"] = protocol.pop("malformed_reward")
        if protocol:
            mechanics["text_protocol"] = protocol
        data["mechanics"] = mechanics
        data.setdefault("format_version", 1)
        return data

    @field_validator("family")
    @classmethod
    def _family(cls, value: str | None) -> str | None:
        if value is not None and not _FAMILY.match(value):
            raise ValueError(f"{value!r} is not of the form 'name@version' (e.g. 'diagnosis@1')")
        return value

    @field_validator("domain")
    @classmethod
    def _domain(cls, value: str | None) -> str | None:
        return None if value is None else _inside(value)

    @field_validator("eci_tiers")
    @classmethod
    def _tiers(cls, tiers: list[int]) -> list[int]:
        if len(set(tiers)) != len(tiers) or tiers != sorted(tiers):
            raise ValueError("tiers must be listed once each, in increasing order")
        return tiers

    @model_validator(mode="after")
    def _consistent(self) -> PackageSection:
        if (self.family is None) == (self.mechanics is None):
            raise ValueError("name a mechanics family ('family: NAME@VERSION' with 'domain: domain.yaml') or the "
                             "package's own mechanics classes ('mechanics:'), not both or neither")
        if self.family is not None and self.domain is None:
            raise ValueError("a family package names its domain file ('domain: domain.yaml')")
        low, high = self.reward_range
        if not low < high:
            raise ValueError(f"reward_range must be increasing, got {list(self.reward_range)}")
        missing = [t for t in self.eci_tiers if t not in self.step_budget]
        if missing:
            raise ValueError(f"step_budget has no entry for tiers {missing}")
        for tier, budget in self.step_budget.items():
            if budget < 1:
                raise ValueError(f"step_budget[{tier}] must be at least 1")
        for name in ("invalid_action_reward", "solved_reward", "malformed_reward"):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"{name} {value} lies outside reward_range {list(self.reward_range)}")
        return self

    @property
    def family_name(self) -> str | None:
        return None if self.family is None else self.family.split("@")[0]

    @property
    def family_version(self) -> int | None:
        return None if self.family is None else int(self.family.split("@")[1])

    @property
    def all_tiers(self) -> bool:
        return tuple(self.eci_tiers) == TIERS
