"""Looking at packages: `info`, `list`, `show`, `render`, `families`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from openadapt.cli.options import JsonOpt, PackageArg
from openadapt.cli.render import describe, grid, kv_table, print_json, show, validation_text

RootOpt = Annotated[Path, typer.Option(metavar="DIR", help="folder of generated packages")]
GENERATED = Path("generated_envs")


def info(package: PackageArg, as_json: JsonOpt = False) -> None:
    """What a package's manifest declares: family or mechanics, tiers, step budgets, reward range, trust."""
    from openadapt.envpkg.loader import resolve

    ref = resolve(package)
    s = ref.manifest.openadapt
    if as_json:
        print_json(s)
        return
    if s.mechanics is None:
        mechanics = [("family", s.family), ("domain", s.domain)]
        trusted = "yes (data only: openadapt's own engine runs its domain)"
    else:
        m = s.mechanics
        mechanics = [("environment", m.environment), ("action", m.action), ("observation", m.observation),
                     ("oracle", m.policies.oracle), ("heuristic", m.policies.heuristic or "-")]
        trusted = "yes (openadapt seed)" if ref.seed else "no: its own code runs only in the sandbox or with --trust"
    show(kv_table(ref.label, [
        ("task", s.task or "-"), ("format", f"v{s.format_version}"), *mechanics,
        ("ECI tiers", ", ".join(map(str, s.eci_tiers))),
        ("step budget", ", ".join(f"ECI {t}: {b}" for t, b in sorted(s.step_budget.items()))),
        ("reward range", f"{s.reward_range[0]} .. {s.reward_range[1]}"),
        ("malformed completion", f"reward {s.malformed_reward}, consumes a step"), ("trusted", trusted)]))


def list_(root: RootOpt = GENERATED, as_json: JsonOpt = False) -> None:
    """Generated packages and their provenance (designer, attempts, verdict, digest, task), by name."""
    from openadapt.designer.catalog import list_packages

    entries = list_packages(root)
    if as_json:
        print_json([e.model_dump(mode="json") for e in entries])
        return
    table = grid(f"{root} ({len(entries)} package{'s' if len(entries) != 1 else ''})",
                 ("name", "designer", "attempts", "verdict", "digest", "task"),
                 [(e.name, e.designer, str(e.attempts), e.verdict, e.digest[:12], e.task or "-") for e in entries],
                 right=("attempts",))
    table.columns[0].no_wrap = True  # a name is never cut; the task wraps at word boundaries
    show(table)


def show_(name: Annotated[str, typer.Argument(metavar="NAME", show_default=False, help="a package name under the "
                                              "root (`openadapt list`)")],
          root: RootOpt = GENERATED, as_json: JsonOpt = False) -> None:
    """A generated package's provenance: task, designer, every attempt and what it failed, validation, digest."""
    from openadapt.designer.catalog import describe_designer, load_provenance

    provenance, files = load_provenance(root, name)
    if as_json:
        print_json(provenance.model_dump(mode="json"))
        return
    p = provenance
    show(kv_table(f"{p.name} (openadapt {p.openadapt_version})", [
        ("task", p.task or "-"), ("designer", describe_designer(p.designer)), ("created", p.created_at or "-"),
        ("validation", validation_text(p.validation)), ("tokens", f"{p.usage.prompt_tokens:,} in, "
                                                                  f"{p.usage.completion_tokens:,} out"),
        ("content digest", p.content_digest or "-"), ("files", ", ".join(files))]))
    show(grid("attempts", ("#", "verdict", "failing checks", "tokens in/out", "design s", "validate s", "notes"),
              [(str(a.attempt), a.verdict or "unusable", ", ".join(a.failing_checks or a.parse_problems[:2]) or "-",
                f"{a.usage.prompt_tokens}/{a.usage.completion_tokens}", f"{a.design_s:.2f}", f"{a.validation_s:.2f}",
                describe(a.notes)) for a in p.attempts], right=("#", "design s", "validate s")))


def render(package: PackageArg,
           check: Annotated[bool, typer.Option("--check", help="write nothing; exit 1 when a file would change")]
           = False, as_json: JsonOpt = False) -> None:
    """Re-render a package's boilerplate from openadapt's templates (after a template change), keeping its
    domain.yaml or custom/ code, README and provenance."""
    from openadapt.envpkg.rerender import rerender

    result = rerender(package, check=check)
    if as_json:
        print_json(result)
    else:
        verb = "would change" if check else "rewritten"
        show(kv_table(f"render {result.package}", [(verb, ", ".join(result.written) or "nothing: up to date"),
                                                   ("unchanged", ", ".join(result.unchanged) or "-"),
                                                   *((f"kept {k}", why) for k, why in result.kept.items())]))
    raise typer.Exit(1 if check and not result.up_to_date else 0)


def families(as_json: JsonOpt = False) -> None:
    """The environment families a designer can write a domain for: name@version, what they model, examples."""
    from openadapt.cli.shell import err
    from openadapt.families import all_families

    with err.status("loading the families", spinner="dots"):
        found = all_families()
    rows = [{"family": f.ref, "summary": f.summary, "examples": list(f.examples())} for f in found]
    if as_json:
        print_json(rows)
        return
    show(grid(f"{len(rows)} families (generate --example FAMILY:EXAMPLE publishes an example)",
              ("family", "what it models", "examples"),
              [(r["family"], r["summary"], ", ".join(r["examples"])) for r in rows]))
