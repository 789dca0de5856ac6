"""Render the designer's prompts (jinja2 templates in openadapt/prompts/designer/) into chat messages."""

from __future__ import annotations

from functools import lru_cache

import jinja2

from openadapt.designer.package import TEMPLATES
from openadapt.envpkg.loader import SEEDS_DIR
from openadapt.envpkg.manifest import FORMAT_VERSION
from openadapt.kit.eci import TIER_MEANINGS

EXEMPLAR_SEED = "incident_triage"
EXEMPLAR_FILES = ("models.py", "server/incident_triage_environment.py", "policies.py", "prompts/system.j2",
                  "prompts/observation.j2")


@lru_cache(maxsize=1)
def _jinja() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=False, autoescape=False)


@lru_cache(maxsize=1)
def exemplar() -> dict[str, str]:
    root = SEEDS_DIR / EXEMPLAR_SEED
    return {path: (root / path).read_text(encoding="utf-8").rstrip() for path in EXEMPLAR_FILES}


def _check_ids() -> list[str]:
    from openadapt.validator.checks import REGISTRY

    return [c.id for c in REGISTRY] + ["runtime.output_volume"]


def _messages(template: str, **context) -> list[dict[str, str]]:
    common = {"format_version": FORMAT_VERSION, "tiers": TIER_MEANINGS, "checks": _check_ids()}
    system = _jinja().get_template("designer/system.j2").render().strip()
    user = _jinja().get_template(f"designer/{template}").render(**common, **context).strip()
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def design_messages(name: str, task: str) -> list[dict[str, str]]:
    return _messages("design.j2", name=name, task=task, exemplar=exemplar())


def repair_messages(name: str, task: str, files: dict[str, str], feedback: str, attempt: int) -> list[dict[str, str]]:
    return _messages("repair.j2", name=name, task=task, files=files, feedback=feedback, attempt=attempt)


def escalation_messages(name: str, task: str, files: dict[str, str], current: int, target: int,
                        solve_rate: float) -> list[dict[str, str]]:
    return _messages("escalate.j2", name=name, task=task, files=files, current=current, target=target,
                     solve_rate=solve_rate)
