"""The designer's own rules that a measurement can switch off one at a time. Each is a behaviour the designer
keeps only while a measurement shows it helps: `benchmarks/designer_ablation.py` (whole mode, an endpoint) and
`benchmarks/designer_local.py --off NAME` (pieces mode, the embedded model) run a fixed prompt set with one
switched off and print what changes (published, attempts, requests, seconds); docs/designer.md holds the table."""

from __future__ import annotations

from openadapt.designer.repair import REPAIRS, ROUND_REPAIRS

SWITCHES: dict[str, str] = {
    "state_rules": "whole mode: every rule the domain must meet across its fields is stated in the request, "
                   "before the model writes (else only the fields' own descriptions)",
    "revise": "whole mode: the checks' problems go back for revisions of the whole before the validator sees the "
              "package (else a draft with problems is an unusable attempt at once)",
    **{r.name: f"pieces mode: {r.does}" for r in REPAIRS},
    **{name: f"pieces mode: {does}" for name, does in ROUND_REPAIRS.items()},
}


def checked(off: frozenset[str] | set[str]) -> frozenset[str]:
    """`off` if every name in it is a switch; ValueError naming the unknown ones and the known ones."""
    unknown = sorted(set(off) - set(SWITCHES))
    if unknown:
        raise ValueError(f"unknown designer switch(es) {', '.join(unknown)}; known: {', '.join(SWITCHES)}")
    return frozenset(off)
