"""The custom-mechanics designer: an LLM endpoint writes a package's own mechanics code (`custom/`), for tasks
no family fits. The code is untrusted: it only ever runs in the sandbox (validation, training) unless a user who
reviewed it passes --trust.

The LLM writes `spec.json` (the manifest facts), `custom/models.py`, `custom/environment.py`,
`custom/policies.py`, `custom/prompts/{system,observation}.j2` and a README paragraph; openadapt renders the
boilerplate. A repair reply may send only the files it changes: they are merged over the previous attempt's.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from openadapt.designer.base import Candidate, DesignerInfo, task_distribution
from openadapt.designer.lint import tidy
from openadapt.designer.reply import parse_reply
from openadapt.envpkg.render import custom_package
from openadapt.kit.eci import TIERS
from openadapt.kit.section import PackageSection

SPEC_FILE = "spec.json"
REQUIRED = ("custom/models.py", "custom/environment.py", "custom/policies.py", "custom/prompts/system.j2",
            "custom/prompts/observation.j2")
_CLASS = re.compile(r"^[A-Z][A-Za-z0-9]*$")


class CustomSpec(BaseModel):
    """The manifest facts a designer declares for its own mechanics."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1)
    environment_class: str
    action_class: str
    observation_class: str
    oracle_class: str
    heuristic_class: str | None = None
    step_budget: dict[int, int]
    reward_range: tuple[float, float]
    solved_reward: float
    invalid_action_reward: float
    malformed_reward: float

    @field_validator("environment_class", "action_class", "observation_class", "oracle_class", "heuristic_class")
    @classmethod
    def _class_name(cls, value: str | None) -> str | None:
        if value is not None and not _CLASS.match(value):
            raise ValueError(f"{value!r} is not a CamelCase class name")
        return value

    @model_validator(mode="after")
    def _budgets(self) -> CustomSpec:
        missing = [t for t in TIERS if t not in self.step_budget]
        if missing:
            raise ValueError(f"step_budget has no entry for tiers {missing}")
        return self

    def section(self) -> PackageSection:
        policies = {"oracle": f"custom.policies:{self.oracle_class}"}
        if self.heuristic_class:
            policies["heuristic"] = f"custom.policies:{self.heuristic_class}"
        return PackageSection.model_validate({
            "format_version": 2, "task": self.task,
            "mechanics": {"environment": f"custom.environment:{self.environment_class}",
                          "action": f"custom.models:{self.action_class}",
                          "observation": f"custom.models:{self.observation_class}", "policies": policies,
                          "text_protocol": {"system_template": "custom/prompts/system.j2",
                                            "observation_template": "custom/prompts/observation.j2"}},
            "eci_tiers": list(TIERS), "step_budget": self.step_budget, "reward_range": self.reward_range,
            "solved_reward": self.solved_reward, "invalid_action_reward": self.invalid_action_reward,
            "malformed_reward": self.malformed_reward,
        })


def assemble(name: str, written: dict[str, str], pin: dict | None = None) -> tuple[dict[str, str], list[str]]:
    """The package from the designer's files (spec.json + custom/ + README.md); (files, problems)."""
    written = dict(written)
    problems = []
    spec_text = written.pop(SPEC_FILE, None)
    if spec_text is None:
        return {}, [f"the design has no {SPEC_FILE} (the manifest facts)"]
    try:
        section = CustomSpec.model_validate(json.loads(spec_text)).section()
    except (ValueError, ValidationError) as exc:
        return {}, [f"{SPEC_FILE} is invalid: {str(exc)[:400]}"]
    missing = [f for f in REQUIRED if f not in written]
    if missing:
        return {}, [f"the design lacks {', '.join(missing)}"]
    readme = written.pop("README.md", "").strip() or section.task
    stray = sorted(p for p in written if not p.startswith("custom/"))
    if stray:
        problems.append(f"ignored files outside custom/: {', '.join(stray)} (openadapt renders the boilerplate)")
    code = {p: t for p, t in written.items() if p.startswith("custom/")}
    files = custom_package(name, section, code, f"# {name}\n\n{readme}\n", tags=("openadapt", "generated", "custom"),
                           task_distribution=pin)
    files, lint = tidy(files)
    return files, problems + [f"lint (not fatal): {p}" for p in lint[:10]]


class CustomDesigner:
    """An endpoint LLM writing custom mechanics (the code path)."""

    deterministic = False

    def __init__(self, client: Any, name: str, task: str, messages: Any):
        self.client = client
        self.name = name
        self.task = task
        self._messages = messages  # module with design_messages / repair_messages
        self._written: dict[str, str] = {}  # the designer's own files of the last reply that had any
        self.info = DesignerInfo(backend="openai-compatible", model=client.config.model,
                                 base_url=client.config.base_url)

    def design(self) -> Candidate:
        return self._ask(self._messages.design_messages(self.name, self.task), merge=False)

    def repair(self, previous: Candidate, feedback: str, attempt: int) -> Candidate:
        shown = self._written or {}
        return self._ask(self._messages.repair_messages(self.name, self.task, shown, feedback, attempt - 1),
                         merge=True)

    def _ask(self, messages: list[dict[str, str]], merge: bool) -> Candidate:
        completion = self.client.complete(messages)
        parsed = parse_reply(completion.text, completion.finish_reason)
        candidate = Candidate(usage=completion.usage, retries=completion.retries, problems=list(parsed.problems))
        if parsed.truncated or not parsed.files:
            return candidate
        written = {**self._written, **parsed.files} if merge else dict(parsed.files)
        self._written = written
        files, problems = assemble(self.name, written, task_distribution(self.info))
        candidate.problems += problems
        candidate.files = files
        return candidate
