"""What `openadapt list` and `openadapt show` read: generated packages and their provenance."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from openadapt.designer.provenance import PROVENANCE_FILE, Provenance
from openadapt.errors import UsageError


class CatalogEntry(BaseModel):
    name: str
    task: str
    designer: str
    attempts: int
    verdict: str
    digest: str


def describe_designer(info) -> str:
    if info.backend == "example":
        return f"example {info.family}:{info.example}"
    return f"{info.backend}:{info.model}" + (f" ({info.family})" if info.family else "")


def list_packages(root: Path) -> list[CatalogEntry]:
    if not root.is_dir():
        raise UsageError(f"{root} does not exist: generate a package first (openadapt generate \"...\")")
    entries = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if not (folder / PROVENANCE_FILE).is_file():
            continue
        try:
            p = Provenance.read(folder)
        except UsageError as exc:  # one broken package does not hide the others
            entries.append(CatalogEntry(name=folder.name, task=str(exc), designer="-", attempts=0,
                                        verdict="unreadable", digest=""))
            continue
        designer = describe_designer(p.designer)
        entries.append(CatalogEntry(name=p.name, task=p.task, designer=designer, attempts=len(p.attempts),
                                    verdict=str(p.validation.get("verdict", "?")), digest=p.content_digest or ""))
    return entries


def load_provenance(root: Path, name: str) -> tuple[Provenance, list[str]]:
    folder = root / name
    if not (folder / PROVENANCE_FILE).is_file():
        known = [e.name for e in list_packages(root)] if root.is_dir() else []
        hint = f"; known: {', '.join(known)}" if known else ""
        raise UsageError(f"no generated package {name!r} under {root}{hint}")
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts)
    return Provenance.read(folder), files
