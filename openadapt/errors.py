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
