"""The shell every command runs in: one error handler, help that reads well, and the two consoles.

- `OpenAdaptGroup.main` is the one place errors become exit codes: a usage error (click's own, or a library
  `UsageError`) is one line on stderr and exit 2; any other `OpenAdaptError` is one line and its own code; Ctrl-C is
  "interrupted" and exit 130; no sandbox is one line and exit 3; an `OSError` of a path the user gave (not a
  directory, exists) is one line and exit 2, one of the machine (disk full, permission denied) exit 1.
  With `--json` on the command line the error is a JSON object on stdout instead, so a script always reads JSON.
- Nothing here imports more than typer and rich: a usage error answers before any heavy library loads.
- Help: the usage line reads `PACKAGE`, not `{package}`; flags show no `<bool>`; a docstring's single line breaks
  are joined, so a description never breaks mid-sentence (paragraphs stay).
"""

from __future__ import annotations

import errno
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from openadapt.errors import OpenAdaptError

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)

INTERRUPTED = 130


class Interrupted(OpenAdaptError):
    """Ctrl-C: reported as one line, exit 130 (what shells expect of a process stopped by SIGINT)."""

    exit_code = INTERRUPTED


def _base(name: str) -> type:
    """click's exception class `name`, as the click this typer uses defines it (typer >= 0.2x vendors click)."""
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == name)


ClickUsageError, ClickException = _base("UsageError"), _base("ClickException")


def exit_code_of(exc: BaseException) -> tuple[int, str | None]:
    """(exit code, one-line message or None) for anything a command can end with."""
    if isinstance(exc, typer.Exit):
        return exc.exit_code, None
    if type(exc).__name__ == "NoArgsIsHelpError":
        return exc.exit_code, None  # the help is the message, already shown
    if isinstance(exc, ClickUsageError):
        return 2, _click_message(exc)
    if isinstance(exc, ClickException):
        return exc.exit_code, exc.format_message()
    if isinstance(exc, KeyboardInterrupt | typer.Abort):
        return INTERRUPTED, "interrupted"
    if isinstance(exc, OpenAdaptError):
        return exc.exit_code, str(exc)
    from openadapt.sandbox.base import SandboxUnavailable  # cheap: no backend is imported

    if isinstance(exc, SandboxUnavailable):
        return NO_SANDBOX, str(exc)
    if isinstance(exc, OSError) and exc.errno in _OS_EXIT_CODES:
        where = f": {exc.filename}" if exc.filename else ""
        return _OS_EXIT_CODES[exc.errno], f"{exc.strerror or exc}{where}"
    raise exc  # a bug: its traceback is what a report needs


NO_SANDBOX = 3
# A path the user gave that cannot be used is a usage error (2); a machine that cannot go on is 1.
_OS_EXIT_CODES = {errno.ENOTDIR: 2, errno.EISDIR: 2, errno.EEXIST: 2, errno.ENAMETOOLONG: 2, errno.ENOSPC: 1,
                  errno.EACCES: 1, errno.EPERM: 1, errno.EROFS: 1, errno.EDQUOT: 1, errno.EMFILE: 1}


def _click_message(exc: Any) -> str:
    message = " ".join(exc.format_message().split())
    command = exc.ctx.command_path if exc.ctx is not None else "openadapt"
    return f"{message} (see `{command} --help`)"


def report(code: int, message: str | None, as_json: bool) -> None:
    if message is None:
        return
    if as_json:
        sys.stdout.write(json.dumps({"error": message, "exit_code": code}) + "\n")
    else:
        err.print(f"[red]error:[/red] {message}" if code != INTERRUPTED else message, markup=code != INTERRUPTED,
                  soft_wrap=True)


class _Readable:
    """Help text conventions shared by the group and its commands."""

    def _tidy(self) -> None:
        self.help = reflow(self.help)
        for param in self.params:
            if param.param_type_name == "option" and getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""  # no `<bool>` after a flag

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
            option.help = "show this help and exit"
        return option

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)  # type: ignore[misc]
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


def reflow(text: str | None) -> str | None:
    """Join the single line breaks of each paragraph (rich help would keep them and break mid-sentence)."""
    if not text:
        return text
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


class OpenAdaptCommand(_Readable, TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._tidy()


class OpenAdaptGroup(_Readable, TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._tidy()

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted("interrupted") from None

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """Run the command line; every error ends here (see the module docstring)."""
        argv = list(sys.argv[1:] if args is None else args)
        try:
            result = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            code, message = (result if isinstance(result, int) else 0), None
        except BaseException as exc:  # noqa: BLE001 - the one handler; bugs are re-raised by exit_code_of
            code, message = exit_code_of(exc)
        report(code, message, as_json="--json" in argv)
        if standalone_mode:
            sys.exit(code)
        return code


def new_app(name: str, help: str) -> typer.Typer:
    return typer.Typer(name=name, help=help, cls=OpenAdaptGroup, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False, rich_markup_mode="rich",
                       context_settings={"help_option_names": ["--help", "-h"], "max_content_width": 120})


def command(app: typer.Typer, fn, *, name: str | None = None, panel: str | None = None) -> None:
    """Register `fn` as a command of `app` with the shell's command class."""
    app.command(name=name, cls=OpenAdaptCommand, rich_help_panel=panel)(fn)

