"""What every designer produces and how the design loop talks to it.

A designer (an LLM writing a family domain, an LLM writing custom mechanics, the family example when there is
no designer) proposes a `Candidate`: the complete files of a package. The loop (`openadapt.designer.loop`)
stages it, validates it in the sandbox, and, when it fails, hands the feedback back for a repair.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from openadapt.llm.endpoint import Usage


class DesignerInfo(BaseModel):
    """Who designed a package (recorded in provenance; never a key or a secret)."""

    backend: str  # "local", "openai-compatible", "example"
    model: str | None = None
    base_url: str | None = None
    model_sha256: str | None = None
    family: str | None = None  # NAME@VERSION for family packages
    example: str | None = None  # the family example, when no designer wrote the domain
    settings: dict[str, Any] = Field(default_factory=dict)  # sampling settings, seed, threads


def task_distribution(info: DesignerInfo) -> dict[str, Any]:
    """RFC 008's pin of a generated task distribution (`validation.task_distribution` in openenv.yaml): the model
    that wrote it and its sampling seed."""
    return {"generator_model": info.model, "generator_seed": info.settings.get("seed")}


class Candidate(BaseModel):
    """One proposal. `files` is empty when the reply could not be used; `problems` say why."""

    files: dict[str, str] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    retries: list[str] = Field(default_factory=list)
    notes: dict[str, Any] = Field(default_factory=dict)  # e.g. the family chosen and why
    draft: str = ""  # what an unusable reply did contain (a domain that did not parse), kept for the user to read

    @property
    def usable(self) -> bool:
        return bool(self.files)


class Designer(Protocol):
    info: DesignerInfo
    deterministic: bool  # True: a repair would return the same candidate, so the loop stops after one

    def design(self) -> Candidate: ...

    def repair(self, previous: Candidate, feedback: str, attempt: int) -> Candidate: ...
