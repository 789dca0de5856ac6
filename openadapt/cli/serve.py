"""Running one package by hand or for clients: `serve` and `play`."""

from __future__ import annotations

from typing import Annotated

import typer

from openadapt.cli.options import PackageArg, TierOpt, TrustOpt
from openadapt.cli.render import kv_table
from openadapt.cli.shell import err, out

QUIT = {"quit", "exit", ":q"}


def serve(
    package: PackageArg,
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port")] = 8000,
    max_sessions: Annotated[int, typer.Option(min=1, help="concurrent WebSocket sessions")] = 16,
    trust: TrustOpt = False,
) -> None:
    """Serve a package over OpenEnv's HTTP and WebSocket API.

    An episode is a WebSocket session on /ws (one environment per session): reset with {"seed": N, "eci": K},
    then step. HTTP POST /reset and /step are stateless (each request gets a fresh environment): use them to
    check a reply's shape, the WebSocket to play. Bad requests are answered with HTTP 4xx."""
    import uvicorn

    from openadapt.envpkg.loader import resolve
    from openadapt.envpkg.serving import create_package_app

    ref = resolve(package)
    application = create_package_app(ref.root, max_sessions=max_sessions, trust=trust or ref.trusted)
    err.print(f"serving {ref.label} on http://{host}:{port} (WebSocket /ws, up to {max_sessions} sessions; "
              'reset with {"seed": N, "eci": K}); Ctrl-C stops', markup=False)
    uvicorn.run(application, host=host, port=port, log_level="warning")


def play(
    package: PackageArg,
    eci: TierOpt = 1,
    seed: Annotated[int | None, typer.Option(min=0, help="episode seed (random if omitted)")] = None,
    trust: TrustOpt = False,
) -> None:
    """Play one episode by hand: you see the exact prompt an LLM sees and type its reply (a JSON action); `quit`
    ends it."""
    from openadapt.envpkg.loader import load
    from openadapt.envpkg.play import PlaySession

    session = PlaySession(load(package, trust=trust), eci, seed)
    out.rule("system prompt")
    out.print(session.system_prompt, markup=False)
    while not session.done:
        out.rule(f"step {session.observation.metadata.get('step', 0)}")
        out.print(session.prompt(), markup=False)
        reply = _read_reply()
        if reply in QUIT:
            raise typer.Exit(0)
        if reply:
            obs, parse_error = session.submit(reply)
            if parse_error:
                out.print(f"[yellow]not an action[/yellow]: {parse_error}")
            out.print(f"reward {obs.reward:+.3f}" + (f"  error: {obs.error}" if obs.error else ""), markup=False)
    meta = session.observation.metadata
    out.rule("episode over")
    out.print(session.prompt(), markup=False)
    out.print(kv_table("result", [("solved", meta["solved"]),
                                  ("episode return", f"{session.total:+.4f}"),
                                  ("reward components", meta["reward_components"])]))


def _read_reply() -> str:
    try:
        return input("your reply> ").strip()
    except EOFError:
        err.print("input closed; episode abandoned")
        raise typer.Exit(1) from None
