"""The import contract (docs/architecture.md): every module imports only its own layer or layers below it,
including imports inside functions (they hide cycles, they do not excuse them).

    core <- kit <- families <- llm <- envpkg <- sandbox <- validator <- training <- curriculum <- designer <- cli
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "openadapt"
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("openadapt", "openadapt.errors", "openadapt.runfiles", "openadapt.runlock")),
    ("kit", ("openadapt.kit",)),
    ("families", ("openadapt.families",)),
    ("llm", ("openadapt.llm",)),
    ("envpkg", ("openadapt.envpkg", "openadapt.seed_envs")),
    ("sandbox", ("openadapt.sandbox",)),
    ("validator", ("openadapt.validator",)),
    ("training", ("openadapt.training",)),
    ("curriculum", ("openadapt.curriculum",)),
    ("designer", ("openadapt.designer", "openadapt.prompts", "openadapt.doctor")),
    ("cli", ("openadapt.cli", "openadapt.__main__")),
]


def layer_of(module: str) -> int:
    """The index of the most specific layer prefix that owns `module`."""
    best, best_len = 0, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(module: str, source: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module) for every openadapt import in `source`, relative ones resolved."""
    found = []
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
    return [(line, name) for line, name in found if name == "openadapt" or name.startswith("openadapt.")]


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    own = layer_of(module)
    bad = []
    for line, target in imported(module, source, is_package):
        if target == "openadapt":
            continue  # the package root only holds the version
        if layer_of(target) > own:
            bad.append(f"{module}:{line} imports {target} ({LAYERS[layer_of(target)][0]} is above "
                       f"{LAYERS[own][0]})")
    return bad


def test_every_module_imports_downwards_only():
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        problems += violations(module_name(path), path.read_text(encoding="utf-8"), path.name == "__init__.py")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("module", "source"), [
    ("openadapt.kit.environment", "from openadapt.envpkg.manifest import parse_manifest"),
    ("openadapt.validator.service", "def f():\n    from openadapt.training.pool import TextEnvPool\n"),
    ("openadapt.curriculum.sources", "from openadapt.designer.generate import generate"),
    ("openadapt.sandbox.remote", "from ..validator.service import make_sandbox"),
])
def test_a_reverse_import_is_caught(module, source):
    assert violations(module, source), f"{source!r} in {module} should break the contract"


def test_downward_and_relative_imports_pass():
    assert not violations("openadapt.designer.generate", "from openadapt.validator import Validator\n"
                          "from .loop import run_design\nfrom openadapt.kit.eci import Tier")
    assert not violations("openadapt.kit", "from openadapt.kit.eci import Tier", is_package=True)
