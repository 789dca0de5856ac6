"""The `openadapt:` section of an environment package's `openenv.yaml`.

OpenEnv's own `validation:` block says what OpenEnv's validator needs; this section says what openadapt's
stages need: which classes to load, the ECI tiers and their step budgets, the oracle and reference policies,
and the text protocol an LLM agent speaks. It is parsed without importing any package code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from openadapt.errors import ManifestError

MANIFEST_FILE = "openenv.yaml"
FORMAT_VERSION = 1
ECI_TIERS = (1, 2, 3, 4, 5)

# "module.path:Attribute", module relative to the package root (e.g. "server.triage_environment:TriageEnv").
_REF = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_]\w*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_ref(value: str) -> str:
    if not _REF.match(value):
        raise ValueError(f"{value!r} is not of the form 'module.path:Name' (module relative to the package)")
    return value


class TextProtocol(_Strict):
    """How an LLM agent talks to the environment."""

    system_template: str = Field(description="jinja2 template (package-relative) for the system prompt")
    observation_template: str = Field(description="jinja2 template (package-relative) rendering one observation")
    action_format: Literal["json"] = Field(
        default="json", description="a completion carries one JSON object that validates as the action class"
    )
    malformed_reward: float = Field(
        description="reward for a completion that does not parse into an action; it consumes a step"
    )

    @field_validator("system_template", "observation_template")
    @classmethod
    def _relative(cls, value: str) -> str:
        path = Path(value)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(f"{value!r} must be a path inside the package")
        return value


class Policies(_Strict):
    """Reference policies shipped with the package (each `module:Class`, constructed with no arguments)."""

    oracle: str = Field(description="privileged reference policy that must solve every tier")
    heuristic: str | None = Field(default=None, description="shallow non-privileged baseline")

    _oracle = field_validator("oracle")(_check_ref)

    @field_validator("heuristic")
    @classmethod
    def _heuristic_ref(cls, value: str | None) -> str | None:
        return None if value is None else _check_ref(value)


class OpenAdaptSection(_Strict):
    """Everything openadapt's designer, validator, trainer and curriculum read from a package."""

    format_version: Literal[1] = FORMAT_VERSION
    task: str = Field(min_length=1, description="one-line statement of the task the agent solves")
    environment: str = Field(description="environment class, e.g. 'server.triage_environment:TriageEnvironment'")
    action: str = Field(description="action class, e.g. 'models:TriageAction'")
    observation: str = Field(description="observation class, e.g. 'models:TriageObservation'")
    eci_tiers: list[int] = Field(min_length=1, description="supported Environment Complexity Index tiers")
    step_budget: dict[int, int] = Field(description="maximum steps per episode, per tier")
    reward_range: tuple[float, float] = Field(description="range of every per-step reward")
    solved_reward: float = Field(description="terminal reward at or above which the oracle counts as maxed")
    invalid_action_reward: float = Field(description="reward for a schema-valid action the environment rejects")
    policies: Policies
    text_protocol: TextProtocol

    _refs = field_validator("environment", "action", "observation")(_check_ref)

    @field_validator("eci_tiers")
    @classmethod
    def _tiers(cls, tiers: list[int]) -> list[int]:
        bad = [t for t in tiers if t not in ECI_TIERS]
        if bad:
            raise ValueError(f"tiers {bad} are outside 1-5")
        if len(set(tiers)) != len(tiers) or tiers != sorted(tiers):
            raise ValueError("tiers must be listed once each, in increasing order")
        return tiers

    @model_validator(mode="after")
    def _consistent(self) -> OpenAdaptSection:
        low, high = self.reward_range
        if not low < high:
            raise ValueError(f"reward_range must be increasing, got {list(self.reward_range)}")
        missing = [t for t in self.eci_tiers if t not in self.step_budget]
        if missing:
            raise ValueError(f"step_budget has no entry for tiers {missing}")
        for tier, budget in self.step_budget.items():
            if budget < 1:
                raise ValueError(f"step_budget[{tier}] must be at least 1")
        for name in ("invalid_action_reward", "solved_reward"):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"{name} {value} lies outside reward_range {list(self.reward_range)}")
        if not low <= self.text_protocol.malformed_reward <= high:
            raise ValueError("text_protocol.malformed_reward lies outside reward_range")
        return self


class PackageManifest(BaseModel):
    """The parts of `openenv.yaml` openadapt relies on."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str | None = None
    app: str
    openadapt: OpenAdaptSection
    raw: dict[str, Any] = Field(repr=False)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", value):
            raise ValueError(f"{value!r} must be a lowercase Python identifier (letters, digits, underscores)")
        return value


def _field_path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "openenv.yaml"


def parse_manifest(root: Path) -> PackageManifest:
    """Read and validate `root/openenv.yaml`; every problem is a ManifestError naming the field."""
    source = root / MANIFEST_FILE
    if not source.is_file():
        raise ManifestError(f"{root} is not an environment package: it has no {MANIFEST_FILE}")
    try:
        raw = yaml.safe_load(source.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source}: not valid YAML ({str(exc).splitlines()[0]})") from exc
    if not isinstance(raw, dict):
        raise ManifestError(f"{source}: must be a YAML mapping")
    if "openadapt" not in raw:
        raise ManifestError(f"{source}: field 'openadapt' is missing (the openadapt section of the manifest)")
    try:
        return PackageManifest.model_validate(
            {"name": raw.get("name"), "version": raw.get("version"), "app": raw.get("app"),
             "openadapt": raw["openadapt"], "raw": raw}
        )
    except ValidationError as exc:
        problems = [
            f"field '{_field_path(err['loc'])}': {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()
        ]
        raise ManifestError(f"{source}: " + "; ".join(problems)) from None
