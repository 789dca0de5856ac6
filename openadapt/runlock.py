"""One process per run directory: an exclusive, non-blocking flock on DIR/.lock, released by the kernel when
the process dies (kill -9 included), so a crashed run never leaves a stale lock behind."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

from openadapt.errors import OpenAdaptError


class DirectoryInUse(OpenAdaptError):
    """Another live process holds the run directory."""


class DirectoryLock:
    def __init__(self, folder: Path, what: str = "run"):
        self.folder = Path(folder)
        self.what = what
        self._handle: Any = None

    def acquire(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        handle = open(self.folder / ".lock", "a+")  # noqa: SIM115 - held open for the run's lifetime
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            error = self._in_use(handle)
            handle.close()
            raise error from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        self._handle = handle

    def check_free(self) -> None:
        """Raise DirectoryInUse if a live process holds the directory; take nothing (for checks made before the
        directory is read, such as --resume of a run that has not written its config yet)."""
        path = self.folder / ".lock"
        if not path.exists():
            return
        with open(path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise self._in_use(handle) from None
            fcntl.flock(handle, fcntl.LOCK_UN)

    def _in_use(self, handle: Any) -> DirectoryInUse:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        return DirectoryInUse(f"{self.folder} is in use by another {self.what} ({holder}); wait for it to finish or "
                              "choose another --output")

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> DirectoryLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
