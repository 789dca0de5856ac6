"""The offline designer: composes a package from a blueprint when no LLM endpoint is configured.

A blueprint is one of openadapt's seed environments, used as a family template: diagnosis/triage
(`incident_triage`), workflow with drifting schemas and roles (`enterprise_workflow`), document/report assembly
(`daily_report`). The designer picks the family whose keywords best match the prompt, then renders the seed's
domain files under a new package name and class names, carrying the prompt's domain words into the names and
texts (task line, system prompt, entity names). Its mechanics are the seed's, so it is only as domain-true as
words can make it: an LLM endpoint is what writes new domain logic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from openadapt.designer.package import BOILERPLATE, PackageSpec
from openadapt.envpkg.loader import SEEDS_DIR
from openadapt.envpkg.manifest import parse_manifest

STOPWORDS = frozenset((
    "a", "an", "the", "and", "or", "of", "for", "to", "in", "on", "at", "by", "with", "from", "into", "over",
    "under", "about", "as", "is", "are", "be", "been", "being", "this", "that", "these", "those", "it", "its",
    "their", "our", "your", "my", "we", "you", "they", "he", "she", "them", "his", "her", "train", "teach",
    "agent", "agents", "model", "models", "learn", "learns", "learning", "environment", "environments", "env",
    "task", "tasks", "build", "create", "make", "write", "generate", "design", "using", "use", "which", "who",
    "whom", "what", "when", "where", "how", "why", "can", "could", "should", "would", "will", "shall", "may",
    "might", "must", "do", "does", "did", "done", "llm", "llms", "rl", "reinforcement", "policy", "policies",
    "episode", "episodes", "reward", "rewards", "based", "given", "new", "some", "any", "each", "every",
    "run", "runs", "operate", "manage", "handle", "get", "gets", "go", "goes", "off", "out", "help", "assist",
))


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part)


def domain_words(prompt: str, family_keywords: tuple[str, ...] = ()) -> list[str]:
    """Up to three content words of the prompt, in order (the domain the task is about)."""
    words = []
    for word in re.findall(r"[a-z][a-z0-9]+", prompt.lower()):
        if len(word) < 3 or word in STOPWORDS or any(word.startswith(k) for k in family_keywords):
            continue
        if word not in words:
            words.append(word)
    return words[:3] or ["generic"]


@dataclass(frozen=True)
class Blueprint:
    family: str
    seed: str
    suffix: str
    keywords: tuple[str, ...]
    # (text in the seed's files, replacement with {domain} = the prompt's domain words as a phrase)
    phrases: tuple[tuple[str, str], ...] = ()
    # entity names to prefix with the first domain word (read from the seed's catalogue)
    entity_module: str | None = None
    entity_attr: str | None = None

    @property
    def root(self) -> Path:
        return SEEDS_DIR / self.seed

    @property
    def available(self) -> bool:
        return (self.root / "openenv.yaml").is_file()

    def score(self, prompt: str) -> int:
        text = prompt.lower()
        return sum(text.count(k) for k in self.keywords)


BLUEPRINTS: tuple[Blueprint, ...] = (
    Blueprint(
        family="diagnosis/triage", seed="incident_triage", suffix="triage",
        keywords=("diagnos", "triage", "incident", "outage", "failure", "failing", "fault", "root cause", "debug",
                  "alert", "degrad", "troubleshoot", "broken", "malfunction", "anomal", "investigat", "on-call"),
        phrases=(("for a microservice system", "for the {domain} system"),),
        entity_module="server/catalogue.py", entity_attr="SERVICES",
    ),
    Blueprint(
        family="workflow with drifting schemas and roles", seed="enterprise_workflow", suffix="workflow",
        keywords=("workflow", "ticket", "queue", "approv", "escalat", "sla", "schema", "role", "assign", "route",
                  "routing", "process", "refund", "sales", "supply", "hr ", "permission", "inbox", "operations", "desk",
                  "renam", "staff", "shift", "backlog", "dispatch", "handoff"),
    ),
    Blueprint(
        family="document/report assembly", seed="daily_report", suffix="report",
        keywords=("report", "document", "summary", "summar", "pdf", "kpi", "dashboard", "assembl", "invoice",
                  "statement", "newsletter", "memo", "brief", "digest", "filing"),
    ),
)


def choose_blueprint(prompt: str) -> Blueprint:
    """The available blueprint whose keywords occur most in the prompt (diagnosis/triage on a tie or no hit)."""
    ranked = sorted((b for b in BLUEPRINTS if b.available), key=lambda b: -b.score(prompt))
    if not ranked:
        raise FileNotFoundError("no blueprint seed package is installed")
    return ranked[0]


def package_name(prompt: str, blueprint: Blueprint) -> str:
    return "_".join([*domain_words(prompt, blueprint.keywords)[:2], blueprint.suffix])


@dataclass(frozen=True)
class OfflineDesign:
    name: str
    spec: PackageSpec
    files: dict[str, str]
    blueprint: Blueprint
    words: list[str]


def _entities(blueprint: Blueprint) -> list[str]:
    if not blueprint.entity_module:
        return []
    namespace: dict = {}
    source = (blueprint.root / blueprint.entity_module).read_text()
    exec(compile(source, blueprint.entity_module, "exec"), namespace)  # our own seed's data module, trusted
    return list(namespace[blueprint.entity_attr])


def design(prompt: str) -> OfflineDesign:
    blueprint = choose_blueprint(prompt)
    seed_manifest = parse_manifest(blueprint.root)
    section = seed_manifest.openadapt
    name = package_name(prompt, blueprint)
    words = domain_words(prompt, blueprint.keywords)
    camel = _camel(name)
    env_cls, act_cls, obs_cls = (ref.split(":")[1] for ref in (section.environment, section.action,
                                                               section.observation))
    renames = {env_cls: f"{camel}Environment", act_cls: f"{camel}Action", obs_cls: f"{camel}Observation"}
    seed_client = _client_class(blueprint.root)
    renames[seed_client] = f"{camel}Env"
    renames[blueprint.seed] = name
    domain = " ".join(words)
    phrases = [(text, template.format(domain=domain)) for text, template in blueprint.phrases]
    entities = [(e, f"{words[0]}-{e}") for e in _entities(blueprint)] if words != ["generic"] else []

    files: dict[str, str] = {}
    for path in sorted(p for p in blueprint.root.rglob("*") if p.is_file()):
        rel = str(path.relative_to(blueprint.root))
        if "__pycache__" in rel or rel in BOILERPLATE or rel == "README.md":
            continue
        text = path.read_text(encoding="utf-8")
        for before, after in sorted(renames.items(), key=lambda kv: -len(kv[0])):
            text = re.sub(rf"\b{re.escape(before)}\b", after, text)
        for before, after in phrases:
            text = text.replace(before, after)
        for before, after in sorted(entities, key=lambda kv: -len(kv[0])):
            text = re.sub(rf'(?<![\w-]){re.escape(before)}(?![\w-])', after, text)
        files[rel.replace(f"{blueprint.seed}_environment.py", f"{name}_environment.py")] = text

    spec = PackageSpec(
        task=f"{prompt.strip().rstrip('.')}. ({section.task})",
        environment_class=renames[env_cls], action_class=renames[act_cls], observation_class=renames[obs_cls],
        client_class=f"{camel}Env", oracle_class=section.policies.oracle.split(":")[1],
        heuristic_class=section.policies.heuristic.split(":")[1] if section.policies.heuristic else None,
        eci_tiers=list(section.eci_tiers), step_budget=dict(section.step_budget),
        reward_range=section.reward_range, solved_reward=section.solved_reward,
        invalid_action_reward=section.invalid_action_reward,
        malformed_reward=section.text_protocol.malformed_reward,
        floor_margin=float(seed_manifest.raw["validation"]["reward"]["floor_margin"]),
    )
    files["README.md"] = (
        f"{prompt.strip().rstrip('.')}.\n\nComposed offline from the `{blueprint.seed}` blueprint "
        f"({blueprint.family}): its mechanics are that seed environment's, with the prompt's domain words "
        f"({', '.join(words)}) carried into names and texts. An LLM designer writes new domain logic.\n"
    )
    return OfflineDesign(name=name, spec=spec, files=files, blueprint=blueprint, words=words)


def _client_class(root: Path) -> str:
    match = re.search(r"^class (\w+)\(", (root / "client.py").read_text(), re.MULTILINE)
    if not match:
        raise ValueError(f"{root}/client.py defines no client class")
    return match.group(1)
