"""Errors that reach the user as one clear line (the CLI maps them to exit codes)."""


class OpenAdaptError(Exception):
    """Base class: a problem the user can fix, reported without a traceback."""

    exit_code = 1


class UsageError(OpenAdaptError):
    """Bad input on the command line (unknown seed, tier out of range, ...)."""

    exit_code = 2


class ManifestError(UsageError):
    """An environment package's manifest is missing or invalid."""


class UntrustedPackageError(UsageError):
    """Code from outside openadapt's own seeds was about to run without a sandbox."""


def first_problem(exc: Exception) -> str:
    """The first problem of a pydantic `ValidationError`, named by its field path (`num_generations`,
    `rule.threshold`), and how many more there are: one line."""
    errors = exc.errors() if hasattr(exc, "errors") else []
    if not errors:
        return " ".join(str(exc).split())
    first = errors[0]
    field = ".".join(str(part) for part in first.get("loc", ()))
    message = str(first.get("msg", "")).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{field}: {message}{more}" if field else f"{message}{more}"


def settings_error(exc: Exception, what: str = "settings") -> UsageError:
    """One clear line for a validation error of a settings model (`TrainConfig`, `CurriculumConfig`): every
    command that builds such a model from flags reports its problems this way."""
    return UsageError(f"invalid {what}: {first_problem(exc)}")
