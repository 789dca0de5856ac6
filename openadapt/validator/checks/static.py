"""Static checks: the manifest, the files, OpenEnv's own static validation (all read as data, in the judge), and
that the classes import (in the player)."""

from __future__ import annotations

from openadapt.errors import ManifestError, UsageError
from openadapt.validator.checks.base import CheckFailed, Context, PackageError, check

REQUIRED_FILES = ("openenv.yaml", "pyproject.toml", "README.md", "client.py", "server/app.py", "server/Dockerfile")
MECHANICS_FILES = ()  # a package with its own mechanics needs only the files its manifest names
# Manifest facts a family package must take from its family unchanged.
FAMILY_FACTS = ("eci_tiers", "step_budget", "reward_range", "solved_reward", "invalid_action_reward",
                "malformed_reward")


@check("static.manifest", remediation="fix openenv.yaml as the message says (docs/environment-package.md)")
def manifest(ctx: Context):
    from openadapt.envpkg.manifest import parse_manifest

    try:
        ctx.manifest = parse_manifest(ctx.root)
    except ManifestError as exc:
        raise CheckFailed(str(exc)) from None
    return {"name": ctx.manifest.name, "tiers": ctx.section.eci_tiers}


@check("static.files", depends_on=("static.manifest",),
       remediation="use the layout `openenv init` makes, plus the files the manifest names")
def files(ctx: Context):
    s = ctx.section
    if s.mechanics is None:
        named = [s.domain]
    else:
        m = s.mechanics
        named = [f"{ref.split(':')[0].replace('.', '/')}.py" for ref in (m.environment, m.action, m.observation,
                                                                         m.policies.oracle)]
        named += [m.text_protocol.system_template, m.text_protocol.observation_template, *MECHANICS_FILES]
    missing = [f for f in (*REQUIRED_FILES, *named) if not (ctx.root / f).is_file()]
    if missing:
        raise CheckFailed(*(f"missing file: {f}" for f in dict.fromkeys(missing)))
    return {"files": len(list(ctx.root.rglob("*")))}


@check("static.family", depends_on=("static.manifest",), applies=lambda ctx: ctx.section.family is not None,
       remediation="name a family openadapt has (`openadapt families`) and keep the facts openadapt rendered")
def family(ctx: Context):
    from openadapt.families import get_family

    s = ctx.section
    try:
        fam = get_family(s.family_name, s.family_version)
    except UsageError as exc:
        raise CheckFailed(str(exc)) from None
    expected = fam.section(s.task, s.domain or "domain.yaml")
    differ = [f"openadapt.{name}: {getattr(s, name)!r} (family {fam.ref} declares {getattr(expected, name)!r})"
              for name in FAMILY_FACTS if getattr(s, name) != getattr(expected, name)]
    if differ:
        raise CheckFailed(*differ)
    ctx.family = fam
    return {"family": fam.ref}


@check("static.domain", depends_on=("static.family",), applies=lambda ctx: ctx.section.family is not None,
       remediation="fix each field the evidence names; the family's schema describes every field "
                   "(docs/families.md)")
def domain(ctx: Context):
    from openadapt.families.domain import DomainError
    from openadapt.families.yamlio import read_domain_file

    try:
        parsed = ctx.family.parse_domain(read_domain_file(ctx.root / ctx.section.domain), source=ctx.section.domain)
    except DomainError as exc:
        raise CheckFailed(*(str(p) for p in exc.problems[:40]), measured={"problems": len(exc.problems)}) from None
    ctx.domain = parsed
    return {"title": parsed.title}


@check("static.boilerplate", depends_on=("static.manifest",), applies=lambda ctx: ctx.section.format_version >= 2,
       remediation="every file but the package's content is openadapt's boilerplate, as openadapt renders it "
                   "(`openadapt render` re-renders it): a family package holds its domain.yaml, README.md and "
                   "provenance.json besides; a custom one its code and templates under custom/")
def boilerplate(ctx: Context):
    """Every file of a format-2 package is accounted for: the boilerplate (what `serve`, Docker and pip run) is
    exactly what openadapt renders, and the rest is the package's content, which the other checks read."""
    from openadapt.envpkg.render import FAMILY_CONTENT
    from openadapt.envpkg.render import boilerplate as render

    try:
        expected = render(ctx.manifest.name, ctx.section, tags=_tags(ctx), floor_margin=_floor_margin(ctx),
                          task_distribution=ctx.validation_block.get("task_distribution"))
    except ValueError as exc:
        raise CheckFailed(str(exc)) from None
    problems = []
    for path, text in expected.items():
        if path == "openenv.yaml":
            continue  # its facts are static.family's; its validation block is the package's own
        target = ctx.root / path
        if not target.is_file() or target.read_text(encoding="utf-8", errors="replace") != text:
            problems.append(f"{path} differs from the boilerplate openadapt renders" if target.is_file()
                            else f"missing file: {path}")
    family = ctx.section.family is not None
    for path in sorted(ctx.root.rglob("*")):
        rel = path.relative_to(ctx.root).as_posix()
        if not path.is_file() or rel in expected:
            continue
        if family and rel not in (*FAMILY_CONTENT, ctx.section.domain):
            problems.append(f"unexpected file in a family package: {rel}")
        elif not family and not rel.startswith("custom/") and rel not in ("README.md", "provenance.json"):
            problems.append(f"unexpected file outside custom/ in a custom package: {rel}")
    if problems:
        raise CheckFailed(*problems[:20])
    return {"files": len(expected)}


def _tags(ctx: Context) -> list[str]:
    tags = ((ctx.validation_block.get("types") or {}).get("tags")) or []
    return [t for t in tags if not str(t).startswith("family:")]


def _floor_margin(ctx: Context) -> float:
    return float(((ctx.validation_block.get("reward") or {}).get("floor_margin")) or 0.3)


@check("static.openenv", depends_on=("static.manifest",),
       remediation="make `openenv validate --level static` pass: fix the `validation:` block of openenv.yaml")
def openenv_static(ctx: Context):
    from openenv.validation.runner import run_validation
    from openenv.validation.types import Level

    try:
        report = run_validation(ctx.root, max_level=Level.STATIC)
    except Exception as exc:  # OpenEnv refuses to recognise the package (its exit code 2)
        raise CheckFailed(f"openenv validate: {type(exc).__name__}: {str(exc)[:300]}") from None
    failing = [c for c in report.results if c.status.value not in ("pass", "skip")]
    if failing or report.verdict.value == "fail":
        raise CheckFailed(*(f"{c.check_id}: {c.status.value}: {'; '.join(c.evidence or [])}" for c in failing),
                          measured={"verdict": report.verdict.value})
    return {"verdict": report.verdict.value, "checks": [c.check_id for c in report.results]}


@check("static.imports", depends_on=("static.manifest", "static.domain"),
       remediation="make every module and class the manifest names importable; the traceback shows where")
def imports(ctx: Context):
    try:
        ctx.facts = facts = ctx.call("load", label="importing the package", bucket=ctx.import_seconds,
                                     limit_s=ctx.import_limit_s)
    except PackageError as exc:
        if exc.kind == "manifest":
            raise CheckFailed(str(exc).split(": ", 1)[-1]) from None
        if exc.kind in ("memory", "recursion"):
            raise
        raise CheckFailed(f"import failed: {str(exc)[:300]}", traceback=exc.traceback) from None
    if facts["wrong"]:
        raise CheckFailed(*facts["wrong"])
    return {"environment": facts["environment"]}
