"""What a designer produces, and how openadapt turns it into a package directory.

A design is the domain-specific part only: a `PackageSpec` (the manifest facts: task, class names, tiers,
budgets, rewards) and the domain files (models, environment logic, oracle and heuristic, prompt templates,
README). The boilerplate (openenv.yaml, pyproject.toml, client.py, server/app.py, Dockerfile, ...) is rendered
here from openadapt's own templates, so it is always right.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path, PurePosixPath

import jinja2
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openadapt import __version__
from openadapt.errors import OpenAdaptError

TEMPLATES = Path(__file__).resolve().parent.parent / "prompts"
BOILERPLATE = {  # package path -> template under prompts/boilerplate
    "openenv.yaml": "openenv.yaml.j2",
    "pyproject.toml": "pyproject.toml.j2",
    "__init__.py": "__init__.py.j2",
    "client.py": "client.py.j2",
    "server/__init__.py": "server_init.py.j2",
    "server/app.py": "server_app.py.j2",
    "server/Dockerfile": "Dockerfile.j2",
    "server/requirements.txt": "requirements.txt.j2",
}
# Domain files a design must contain (besides server/<name>_environment.py).
REQUIRED_DOMAIN_FILES = ("models.py", "policies.py", "prompts/system.j2", "prompts/observation.j2", "README.md")
_IDENT = re.compile(r"^[A-Z][A-Za-z0-9]*$")


class DesignError(OpenAdaptError):
    """A design that cannot become a package (its problems go back to the designer)."""


class PackageSpec(BaseModel):
    """The manifest facts a designer declares; openadapt renders openenv.yaml from them."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1)
    environment_class: str
    action_class: str
    observation_class: str
    client_class: str
    oracle_class: str
    heuristic_class: str | None = None
    eci_tiers: list[int] = Field(default_factory=lambda: [1, 2, 3, 4, 5])
    step_budget: dict[int, int]
    reward_range: tuple[float, float]
    solved_reward: float
    invalid_action_reward: float
    malformed_reward: float
    floor_margin: float = 0.3

    @field_validator("environment_class", "action_class", "observation_class", "client_class", "oracle_class",
                     "heuristic_class")
    @classmethod
    def _class_name(cls, value: str | None) -> str | None:
        if value is not None and not _IDENT.match(value):
            raise ValueError(f"{value!r} is not a CamelCase class name")
        return value

    @model_validator(mode="after")
    def _budgets(self) -> PackageSpec:
        missing = [t for t in self.eci_tiers if t not in self.step_budget]
        if missing:
            raise ValueError(f"step_budget has no entry for tiers {missing}")
        return self


def safe_relative(path: str) -> str:
    """A normalised package-relative POSIX path, or DesignError for anything that could escape the package."""
    if not path or "\\" in path or "\x00" in path:
        raise DesignError(f"refused file path {path!r}")
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(part in ("..", "") for part in pure.parts) or pure.parts[0].startswith("~"):
        raise DesignError(f"refused file path {path!r}: it must stay inside the package")
    return str(pure)


def _environment():
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, autoescape=False)


def template_versions() -> dict[str, str]:
    """Short content hashes of every template openadapt renders (recorded in provenance)."""
    return {str(p.relative_to(TEMPLATES)): hashlib.sha256(p.read_bytes()).hexdigest()[:12]
            for p in sorted(TEMPLATES.rglob("*.j2"))}


def boilerplate(name: str, spec: PackageSpec, tags: list[str]) -> dict[str, str]:
    env = _environment()
    context = {"name": name, "spec": spec, "tags": tags, "openadapt_version": __version__}
    return {path: env.get_template(f"boilerplate/{template}").render(**context)
            for path, template in BOILERPLATE.items()}


def assemble(name: str, spec: PackageSpec, domain_files: dict[str, str], tags: list[str]) -> dict[str, str]:
    """Every file of the package: the design's domain files plus rendered boilerplate (which wins)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise DesignError(f"package name {name!r} must be a lowercase identifier")
    files = {safe_relative(path): text for path, text in domain_files.items()}
    missing = [f for f in (*REQUIRED_DOMAIN_FILES, f"server/{name}_environment.py") if f not in files]
    if missing:
        raise DesignError(f"the design lacks {', '.join(missing)}")
    files.update(boilerplate(name, spec, tags))  # a designer's own boilerplate, if any, is replaced by ours
    return dict(sorted(files.items()))


def write_package(files: dict[str, str], dest: Path) -> None:
    for path, text in files.items():
        target = dest / safe_relative(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def content_digest(files: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for path, text in sorted(files.items()):
        digest.update(path.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()
