"""Which sandbox backend runs untrusted package code, and how a package is staged into it.

`SandboxChoice` is the one type for the user's choice (`--sandbox`, `TrainConfig.sandbox`, ...): any other value
is refused with one message, never silently treated as `auto`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from enum import StrEnum
from pathlib import Path

from openadapt.errors import UsageError
from openadapt.sandbox.base import Sandbox, SandboxResources, SandboxUnavailable

# What never travels into a sandbox with a package (caches, VCS data, environments).
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".git", ".venv", "*.egg-info")
MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_PACKAGE_BYTES = 20 * 1024 * 1024
MAX_PACKAGE_FILES = 2000
MAX_DEPTH = 16
MAX_PROBLEMS = 20
NATIVE_SUFFIXES = (".so", ".pyd", ".dylib", ".dll", ".exe")
NATIVE_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe")  # ELF, Mach-O


class SandboxChoice(StrEnum):
    AUTO = "auto"  # docker when an engine answers, else bwrap, else refuse
    DOCKER = "docker"
    BWRAP = "bwrap"
    PROCESS = "process"  # explicit opt-in: NOT isolated

    @classmethod
    def parse(cls, value: str | SandboxChoice) -> SandboxChoice:
        try:
            return cls(value)
        except ValueError:
            raise UsageError(f"unknown sandbox {value!r}: use one of {', '.join(c.value for c in cls)}") from None


def make_sandbox(choice: SandboxChoice | str, workdir: Path,
                 resources: SandboxResources | None = None) -> Sandbox | None:
    """The backend for `choice`; None means docker (which runs one container per validation)."""
    from openadapt.sandbox import bwrap, docker
    from openadapt.sandbox.process import ProcessSandbox

    choice = SandboxChoice.parse(choice)
    if choice is SandboxChoice.PROCESS:
        return ProcessSandbox(workdir, resources)
    if choice is SandboxChoice.BWRAP:
        return bwrap.BwrapSandbox(workdir, resources)
    if choice is SandboxChoice.DOCKER:
        docker.connect()
        return None
    try:
        docker.connect()
        return None
    except SandboxUnavailable as no_docker:
        problem = bwrap.available()
        if problem is None:
            return bwrap.BwrapSandbox(workdir, resources)
        raise SandboxUnavailable(
            f"no sandbox available: {no_docker}; and {problem}. Install bubblewrap (or start Docker), or pass "
            "--sandbox process to run WITHOUT isolation"
        ) from None


BYTECODE_SUFFIXES = (".pyc", ".pyo")


class PackageRefused(UsageError):
    """A package directory holds something no package may (a named pipe, a device, a link out of the package,
    an oversized file): it is not staged, no code of it runs."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def _ignored(name: str) -> bool:
    """Never staged and never read on any path: Python's caches (openadapt imports packages with its own
    `sys.pycache_prefix`, so a package's __pycache__ is not run in the sandbox or under --trust) and tool folders."""
    return name in ("__pycache__", ".git", ".venv") or name.endswith(".egg-info")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    return "not a regular file or directory"


def stage_package(source: Path, dest: Path) -> str:
    """Copy a package where the sandbox can read it (readable by the sandbox's uid, writable by nobody there),
    refusing what no package may hold; returns the sha256 of the staged files (relative path and bytes).

    Only regular files and directories are copied. A symbolic link that stays inside the package is copied as
    the file it names; one that leaves the package, dangles or names a directory is refused, as are named
    pipes, sockets, devices, hard links, compiled native code (ELF, PE, Mach-O, extension modules), control
    characters in names, and files over the size limits. Files are
    opened with O_NOFOLLOW|O_NONBLOCK and checked again after opening, so a file swapped for a pipe or a link
    while staging is refused too (never read, never blocked on). Raises PackageRefused with every problem.
    """
    source = Path(source)
    root = Path(os.path.realpath(source))
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    problems: list[str] = []
    staged: list[tuple[str, bytes]] = []
    budget = {"files": 0, "bytes": 0}

    def refuse(message: str) -> None:
        if len(problems) < MAX_PROBLEMS:
            problems.append(message)

    def copy_file(path: str, rel: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            refuse(f"{rel}: cannot be read ({exc.strerror})")
            return
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                refuse(f"{rel} is {_kind(info.st_mode)}")
                return
            if info.st_nlink > 1:
                refuse(f"{rel} is a hard link ({info.st_nlink} names): ship a plain copy of the file")
                return
            if info.st_size > MAX_FILE_BYTES:
                refuse(f"{rel} is {info.st_size} bytes (limit {MAX_FILE_BYTES} per file)")
                return
            budget["files"] += 1
            budget["bytes"] += info.st_size
            if budget["files"] > MAX_PACKAGE_FILES or budget["bytes"] > MAX_PACKAGE_BYTES:
                return  # reported once, after the walk
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        finally:
            os.close(fd)
        if rel.endswith(NATIVE_SUFFIXES) or data.startswith(NATIVE_MAGIC):
            refuse(f"{rel} is compiled native code: a package ships source, data and templates (native code would "
                   "run beyond the validator's audit hooks)")
            return
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o644)
        staged.append((rel, data))

    def walk(folder: str, rel_folder: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            refuse(f"{rel_folder or '.'}: directories nested deeper than {MAX_DEPTH}")
            return
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            refuse(f"{rel_folder or '.'}: cannot be listed ({exc.strerror})")
            return
        for entry in entries:
            if _ignored(entry.name):
                continue
            rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
            if any(ord(c) < 32 or c == "\x7f" for c in entry.name):
                refuse(f"{rel!r}: control characters in a file name")
                continue
            try:
                entry.name.encode("utf-8")
            except UnicodeEncodeError:
                refuse(f"{ascii(rel)}: a file name that is not UTF-8 (rename it)")
                continue
            if entry.name.endswith(BYTECODE_SUFFIXES):
                refuse(f"{rel} is compiled bytecode: a package ships its Python source (bytecode would run under "
                       "--trust without the source the validator read)")
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError as exc:
                refuse(f"{rel}: cannot be read ({exc.strerror})")
                continue
            if stat.S_ISLNK(info.st_mode):
                link(entry.path, rel)
            elif stat.S_ISDIR(info.st_mode):
                (dest / rel).mkdir(exist_ok=True)
                (dest / rel).chmod(0o755)
                walk(entry.path, rel, depth + 1)
            elif stat.S_ISREG(info.st_mode):
                copy_file(entry.path, rel)
            else:
                refuse(f"{rel} is {_kind(info.st_mode)}")

    def link(path: str, rel: str) -> None:
        target = os.readlink(path)
        resolved = os.path.realpath(path)
        if resolved != str(root) and not resolved.startswith(str(root) + os.sep):
            refuse(f"symlink {rel} -> {target} points outside the package")
        elif not os.path.exists(resolved):
            refuse(f"symlink {rel} -> {target} points to nothing")
        elif os.path.isdir(resolved):
            refuse(f"symlink {rel} -> {target} links a directory: ship the files themselves")
        else:
            copy_file(resolved, rel)

    walk(str(root), "", 0)
    if budget["files"] > MAX_PACKAGE_FILES or budget["bytes"] > MAX_PACKAGE_BYTES:
        refuse(f"the package has {budget['files']} files, {budget['bytes']} bytes (limits {MAX_PACKAGE_FILES} "
               f"files, {MAX_PACKAGE_BYTES} bytes): ship only source, data and templates")
    if problems:
        shutil.rmtree(dest, ignore_errors=True)
        raise PackageRefused(problems)
    dest.chmod(0o755)
    digest = hashlib.sha256()
    for rel, data in sorted(staged):
        digest.update(rel.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()
