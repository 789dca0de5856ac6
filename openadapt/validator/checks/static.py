"""Static checks: the manifest, the files, OpenEnv's own static validation, and that the classes import."""

from __future__ import annotations

import inspect

from openadapt.errors import ManifestError
from openadapt.validator.checks.base import IMPORT_TIMEOUT_S, CheckFailed, Context, StepTimeout, check

REQUIRED_FILES = ("openenv.yaml", "pyproject.toml", "README.md", "models.py", "client.py", "server/app.py",
                  "server/Dockerfile")


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
    named = [f"{ref.split(':')[0].replace('.', '/')}.py" for ref in (s.environment, s.action, s.observation,
                                                                     s.policies.oracle)]
    named += [s.text_protocol.system_template, s.text_protocol.observation_template]
    environment_file = f"server/{ctx.manifest.name}_environment.py"
    missing = [f for f in (*REQUIRED_FILES, environment_file, *named) if not (ctx.root / f).is_file()]
    if missing:
        raise CheckFailed(*(f"missing file: {f}" for f in dict.fromkeys(missing)))
    return {"files": len(list(ctx.root.rglob("*")))}


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


@check("static.imports", depends_on=("static.manifest",),
       remediation="make every module and class the manifest names importable; the traceback shows where")
def imports(ctx: Context):
    from openadapt.envpkg.loader import LoadedPackage, PackageRef, module_prefix
    from openadapt.kit import AgentAction, AgentObservation, OpenAdaptEnvironment, Policy

    ref = PackageRef(ctx.root, ctx.manifest, trusted=False)
    try:
        ctx.pkg = ctx.timed(lambda: LoadedPackage(ref, module_prefix(ref)), bucket=ctx.import_seconds,
                            limit_s=IMPORT_TIMEOUT_S)
    except ManifestError as exc:
        raise CheckFailed(str(exc)) from None
    except (StepTimeout, MemoryError):
        raise
    except Exception as exc:
        raise CheckFailed(f"import failed: {type(exc).__name__}: {str(exc)[:300]}") from exc
    pkg = ctx.pkg
    wrong = []
    for label, cls, base in (("environment", pkg.env_cls, OpenAdaptEnvironment), ("action", pkg.action_cls,
                             AgentAction), ("observation", pkg.observation_cls, AgentObservation),
                             ("oracle", pkg.oracle_cls, Policy)):
        if not (inspect.isclass(cls) and issubclass(cls, base)):
            wrong.append(f"{label} {cls!r} is not a subclass of {base.__module__}.{base.__name__}")
    if pkg.heuristic_cls is not None and not issubclass(pkg.heuristic_cls, Policy):
        wrong.append(f"heuristic {pkg.heuristic_cls!r} is not a Policy")
    if getattr(pkg.env_cls, "observation_type", None) is not pkg.observation_cls:
        wrong.append("the environment's observation_type is not the manifest's observation class")
    if wrong:
        raise CheckFailed(*wrong)
    return {"environment": pkg.env_cls.__name__}
