"""Serve a package over OpenEnv's FastAPI/WebSocket stack."""

from __future__ import annotations

from pathlib import Path

DEFAULT_MAX_SESSIONS = 16


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
    return app


def serve_main(app, argv: list[str] | None = None) -> None:
    """`python -m server.app [--host H] [--port P]` for a package's own app."""
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description="Serve this OpenEnv environment (HTTP + WebSocket /ws).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    uvicorn.run(app, host=args.host, port=args.port)
