"""The family-example designer: no model writes anything; the package is a family's own example domain,
labelled as such (its README and provenance say it was not designed for the user's task). It is what
`openadapt generate --example FAMILY:EXAMPLE` publishes, and it never passes off one world under another's
words."""

from __future__ import annotations

from openadapt.designer.base import Candidate, DesignerInfo
from openadapt.envpkg.examples import example_files
from openadapt.errors import UsageError
from openadapt.families import get_family


def parse_example_ref(ref: str) -> tuple[str, str]:
    family, sep, example = ref.partition(":")
    if not sep or not family or not example:
        raise UsageError(f"--example {ref!r}: use FAMILY:EXAMPLE, e.g. diagnosis:incident_triage "
                         "(`openadapt families` lists them)")
    known = get_family(family).examples()
    if example not in known:
        raise UsageError(f"family {family!r} has no example {example!r}; its examples: {', '.join(known)}")
    return family, example


class ExampleDesigner:
    deterministic = True

    def __init__(self, ref: str, name: str):
        self.family, self.example = parse_example_ref(ref)
        self.name = name
        family = get_family(self.family)
        self.info = DesignerInfo(backend="example", family=family.ref, example=self.example)

    def design(self) -> Candidate:
        return Candidate(files=example_files(self.family, self.example, self.name),
                         notes={"family": get_family(self.family).ref, "example": self.example})

    def repair(self, previous: Candidate, feedback: str, attempt: int) -> Candidate:
        return previous
