"""Family example domains as packages: what a designer-less run may publish (labelled as the family's own
example, never passed off as the user's task), and what tests and docs render."""

from __future__ import annotations

from pathlib import Path

from openadapt.envpkg.render import family_package, write_files
from openadapt.families import get_family
from openadapt.families.yamlio import dump_domain


def example_readme(family, name: str, domain) -> str:
    tiers = "\n".join(f"| {t} | {family.tier_changes.get(t, '')} | {family.step_budget[t]} |"
                      for t in sorted(family.step_budget))
    return (f"# {name}\n\n{domain.summary}\n\nThe example domain `{name}` of the **{family.ref}** family "
            f"({family.summary}), rendered as an OpenEnv package. Its content is `domain.yaml`; the mechanics are "
            f"openadapt's `{family.name}` engine.\n\n| ECI | what the tier changes | step budget |\n|---|---|---|\n"
            f"{tiers}\n")


def example_files(family_name: str, example: str, package_name: str | None = None) -> dict[str, str]:
    family = get_family(family_name)
    domain = family.load_example(example)
    name = package_name or example
    section = family.section(task=f"{domain.title}: {domain.summary.split('. ')[0].rstrip('.')}.")
    header = f"Domain `{example}` of family {family.ref}: the family's own example (not designed for a task)."
    return family_package(name, section, dump_domain(domain, header=header), example_readme(family, name, domain),
                          tags=("openadapt", "example"))


def write_example_package(family_name: str, example: str, dest_root: Path, package_name: str | None = None) -> Path:
    """Render the family's example domain `example` as a package under `dest_root`; returns its directory."""
    files = example_files(family_name, example, package_name)
    dest = dest_root / (package_name or example)
    write_files(files, dest)
    return dest
