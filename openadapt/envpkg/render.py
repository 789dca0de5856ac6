"""The files openadapt writes around a package's own content (the boilerplate), from its own templates.

A family package is its `domain.yaml` plus this boilerplate and a README; a custom package adds its `custom/`
mechanics. The boilerplate is a pure function of the package name and its manifest section, so the validator can
re-render it and confirm that a family package carries no code of its own (`static.boilerplate`).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path, PurePosixPath

import jinja2

from openadapt.kit.section import PackageSection

TEMPLATES = Path(__file__).resolve().parent / "templates"
BOILERPLATE = {  # package path -> template
    "openenv.yaml": "openenv.yaml.j2",
    "pyproject.toml": "pyproject.toml.j2",
    "__init__.py": "__init__.py.j2",
    "client.py": "client.py.j2",
    "server/__init__.py": "server_init.py.j2",
    "server/app.py": "server_app.py.j2",
    "server/Dockerfile": "Dockerfile.j2",
    "server/requirements.txt": "requirements.txt.j2",
    "validation/runtime.json": "runtime.json.j2",
}
PROBE_PATH = "validation/runtime.json"  # RFC 008's runtime plan: what `openenv validate --level runtime` plays
# Files a family package may hold besides the boilerplate: its content and what describes it.
FAMILY_CONTENT = ("domain.yaml", "README.md", "provenance.json")
DEFAULT_TAGS = ("openadapt",)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def client_class(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Env"


def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, autoescape=False, trim_blocks=True,
                              lstrip_blocks=False)


def template_versions() -> dict[str, str]:
    """Short content hashes of the boilerplate templates (recorded in provenance)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in sorted(TEMPLATES.glob("*.j2"))}


def boilerplate(name: str, section: PackageSection, tags: tuple[str, ...] | list[str] = DEFAULT_TAGS,
                floor_margin: float = 0.3, extra_data: tuple[str, ...] = (),
                task_distribution: dict | None = None) -> dict[str, str]:
    """Every boilerplate file of package `name`, rendered. `task_distribution`: RFC 008's pin of how the task was
    made (`generator_model`, `generator_seed`), for a package a designer model wrote."""
    if not _NAME.match(name):
        raise ValueError(f"package name {name!r} must be a lowercase identifier (letters, digits, underscores)")
    packages = {name: ".", f"{name}.server": "server"}
    data = ["openenv.yaml", "README.md", PROBE_PATH]
    if section.family:
        data.append(section.domain or "domain.yaml")
        oracle = f"openadapt family {section.family}"
    else:
        packages[f"{name}.custom"] = "custom"
        data.append("custom/prompts/*.j2")
        oracle = section.mechanics.policies.oracle.split(":")[0].replace(".", "/") + ".py"
    data.extend(extra_data)
    context = {
        "name": name, "section": section, "tags": list(dict.fromkeys([*tags, *(["family:" + section.family_name]
                                                                               if section.family else [])])),
        "floor_margin": floor_margin, "oracle_location": oracle, "client_class": client_class(name),
        "probe_path": PROBE_PATH, "task_distribution": {k: v for k, v in (task_distribution or {}).items()
                                                        if v is not None},
        "packages": list(packages), "package_dirs": packages, "data_files": data,
    }
    env = _environment()
    return {path: env.get_template(template).render(**context) for path, template in BOILERPLATE.items()}


def safe_relative(path: str) -> str:
    """A normalised package-relative POSIX path; ValueError for anything that could escape the package."""
    if not path or "\\" in path or "\x00" in path:
        raise ValueError(f"refused file path {path!r}")
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(part in ("..", "") for part in pure.parts) or pure.parts[0].startswith("~"):
        raise ValueError(f"refused file path {path!r}: it must stay inside the package")
    return str(pure)


def write_files(files: dict[str, str], dest: Path) -> None:
    for path, text in files.items():
        target = dest / safe_relative(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def content_digest(files: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for path, text in sorted(files.items()):
        digest.update(path.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def family_package(name: str, section: PackageSection, domain_yaml: str, readme: str,
                   tags: tuple[str, ...] | list[str] = DEFAULT_TAGS,
                   task_distribution: dict | None = None) -> dict[str, str]:
    """Every file of a family package: its domain, its README and the boilerplate around them."""
    if section.family is None:
        raise ValueError("family_package() needs a section that names a family")
    files = boilerplate(name, section, tags, task_distribution=task_distribution)
    files[section.domain or "domain.yaml"] = domain_yaml
    files["README.md"] = readme
    return dict(sorted(files.items()))


def custom_package(name: str, section: PackageSection, files: dict[str, str], readme: str,
                   tags: tuple[str, ...] | list[str] = DEFAULT_TAGS,
                   task_distribution: dict | None = None) -> dict[str, str]:
    """Every file of a custom-mechanics package: its `custom/` code and templates, README and boilerplate
    (which wins over any file of the same path the designer wrote)."""
    if section.mechanics is None:
        raise ValueError("custom_package() needs a section with mechanics")
    out = {safe_relative(path): text for path, text in files.items()}
    outside = sorted(p for p in out if not p.startswith("custom/"))
    if outside:
        raise ValueError(f"custom mechanics live under custom/: {', '.join(outside)} is outside it")
    out.setdefault("custom/__init__.py", "")
    out["README.md"] = readme
    out.update(boilerplate(name, section, tags, task_distribution=task_distribution))
    return dict(sorted(out.items()))
