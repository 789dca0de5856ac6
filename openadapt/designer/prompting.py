"""Render the designer's prompts (jinja2 templates in openadapt/prompts/designer/) into chat messages."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2

from openadapt.kit.eci import TIER_MEANINGS
from openadapt.kit.section import FORMAT_VERSION

TEMPLATES = Path(__file__).resolve().parent.parent / "prompts"
# A complete, validated package with its own mechanics, shown to the LLM as the worked example.
EXEMPLAR = Path(__file__).resolve().parent / "exemplar" / "code_lock"
EXEMPLAR_FILES = ("custom/models.py", "custom/environment.py", "custom/policies.py", "custom/prompts/system.j2",
                  "custom/prompts/observation.j2")


@lru_cache(maxsize=1)
def _jinja() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=False, autoescape=False)


@lru_cache(maxsize=1)
def exemplar() -> dict[str, str]:
    files = {path: (EXEMPLAR / path).read_text(encoding="utf-8").rstrip() for path in EXEMPLAR_FILES}
    section = (EXEMPLAR / "openenv.yaml").read_text(encoding="utf-8")
    return {"spec.json": _exemplar_spec(section), **files}


def exemplar_tokens() -> int:
    """About how many tokens the exemplar's files take (three characters a token, on the safe side for code): a
    reply budget under it cannot hold a package of the exemplar's size."""
    return -(-sum(len(text) for text in exemplar().values()) // 3)


def _exemplar_spec(manifest: str) -> str:
    import json

    import yaml

    s = yaml.safe_load(manifest)["openadapt"]
    m = s["mechanics"]
    spec = {"task": s["task"], "environment_class": m["environment"].split(":")[1],
            "action_class": m["action"].split(":")[1], "observation_class": m["observation"].split(":")[1],
            "oracle_class": m["policies"]["oracle"].split(":")[1],
            "heuristic_class": m["policies"].get("heuristic", ":").split(":")[1] or None,
            "step_budget": s["step_budget"], "reward_range": s["reward_range"], "solved_reward": s["solved_reward"],
            "invalid_action_reward": s["invalid_action_reward"], "malformed_reward": s["malformed_reward"]}
    return json.dumps(spec, indent=2)


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
