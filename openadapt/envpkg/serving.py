"""Serve a package over OpenEnv's FastAPI/WebSocket stack.

An episode is a WebSocket session (`/ws`): one environment per connection, reset then step on it. OpenEnv's HTTP
`POST /reset` and `POST /step` are stateless: each request gets a fresh environment, so an HTTP `/step` never
continues an HTTP `/reset`. Bad requests get a 4xx answer, never a 500: a reset the environment refuses (an
unsupported `eci`, a bad `seed`) is 422 with the environment's message; an HTTP `/step` (there is no episode for
it to continue) is 409 with the message that says to use `/ws`; an action that does not fit the schema is
OpenEnv's own 422.
"""

from __future__ import annotations

import logging
from pathlib import Path

DEFAULT_MAX_SESSIONS = 16
STATELESS_STEP = ("HTTP /step is stateless: every HTTP request gets a fresh environment, so there is no episode "
                  "for it to continue (OpenEnv's HTTP endpoints keep no session). Play an episode over the "
                  "WebSocket /ws: reset, then step, on one connection (a client: `openadapt.kit.client`, or the "
                  "package's client.py)")
log = logging.getLogger(__name__)


def create_package_app(root: Path | str, max_sessions: int = DEFAULT_MAX_SESSIONS, *, trust: bool = True):
    """The OpenEnv app for the package at `root`: one environment per WebSocket session.

    A package's own `server/app.py` calls this (it is its own code, so trust is implied there);
    `openadapt serve` passes the user's `--trust` choice.
    """
    from openenv.core.env_server.http_server import create_app

    from openadapt.envpkg.loader import load, resolve
    from openadapt.kit.models import EpisodeState

    pkg = load(resolve(str(root)), trust=trust)
    app = create_app(pkg.env_cls, pkg.action_cls, pkg.observation_cls, env_name=pkg.ref.name,
                     max_concurrent_envs=max_sessions, state_cls=EpisodeState)
    routes = pkg.env_cls.http_routes()
    if routes is not None:
        app.include_router(routes)
    answer_bad_requests(app)
    return app


def answer_bad_requests(app) -> None:
    """Map what an environment raises for a bad HTTP request to a 4xx answer with its message."""
    from fastapi import Request
    from fastapi.responses import JSONResponse

    @app.exception_handler(ValueError)
    async def refused(request: Request, exc: ValueError):
        if request.url.path == "/reset":
            return JSONResponse(status_code=422, content={"detail": str(exc)})
        return _internal(request, exc)

    @app.exception_handler(RuntimeError)
    async def no_episode(request: Request, exc: RuntimeError):
        if request.url.path == "/step" and "before reset" in str(exc):
            return JSONResponse(status_code=409, content={"detail": STATELESS_STEP})
        return _internal(request, exc)


def _internal(request, exc: Exception):
    from fastapi.responses import JSONResponse

    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse(status_code=500, content={"detail": f"internal error: {type(exc).__name__}: {exc}"})


def serve_main(app, argv: list[str] | None = None) -> None:
    """`python -m server.app [--host H] [--port P]` for a package's own app."""
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description="Serve this OpenEnv environment (HTTP + WebSocket /ws).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    uvicorn.run(app, host=args.host, port=args.port)
