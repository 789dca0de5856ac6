"""Download of the generated report PDFs: `GET /report/{episode_id}.pdf` serves the latest PDF an episode
finalised in this server process.

Every session's environment registers its PDF here at finalize_pdf. The registry is per process, bounded (the
least recently stored PDFs are dropped first) and thread-safe (sessions run on worker threads). Episode ids are
random UUIDs, so a URL is only known to the client whose episode it is (it reads it from `state`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

ROUTE = "/report/{episode_id}.pdf"


class PdfRegistry:
    """Bounded, thread-safe map: episode id -> the bytes of its latest PDF."""

    def __init__(self, capacity: int = 64):
        self.capacity = capacity
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, episode_id: str, data: bytes) -> None:
        with self._lock:
            self._items[episode_id] = data
            self._items.move_to_end(episode_id)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def get(self, episode_id: str) -> bytes | None:
        with self._lock:
            return self._items.get(episode_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


REGISTRY = PdfRegistry()


def router(filename: str = "report.pdf") -> Any:
    """The FastAPI router `openadapt serve` (and a package's `server/app.py`) include beside OpenEnv's routes."""
    from fastapi import APIRouter, HTTPException
    from fastapi.responses import Response

    api = APIRouter(tags=["report"])

    @api.get(ROUTE, summary="The latest PDF finalised in an episode")
    def download_report(episode_id: str) -> Response:
        data = REGISTRY.get(episode_id)
        if data is None:
            raise HTTPException(status_code=404, detail=f"no PDF has been finalised for episode {episode_id!r} "
                                "in this server (or it was evicted)")
        return Response(content=data, media_type="application/pdf",
                        headers={"Content-Disposition": f'inline; filename="{filename}"'})

    return api
