"""Checks that run last: the package served over OpenEnv's WebSocket API inside the sandbox (the judge is the
client), and the time and memory every check's calls took, as the judge measured them."""

from __future__ import annotations

import json
import statistics
import threading
import time

from openadapt.validator.checks.base import CheckFailed, Context, check

SERVER_START_TIMEOUT_S = 10.0
WS_EXCHANGE_S = 20.0
STEP_P99_LIMIT_S = 0.25
DEFAULT_MEMORY_MB = 512


@check("runtime.server", depends_on=("runtime.api_contract",),
       remediation="the package must serve reset/step/state over OpenEnv's /ws (server/app.py via create_package_app)")
def server(ctx: Context):
    listener = ctx.server_socket
    if listener is None:
        raise CheckFailed("no listening socket was prepared for the server check (a validator bug)")
    port = listener.getsockname()[1]
    started = time.perf_counter()
    up = ctx.call("serve", label="starting the server", bucket=ctx.import_seconds,
                  limit_s=SERVER_START_TIMEOUT_S + 1.0, fd=listener.fileno(), timeout_s=SERVER_START_TIMEOUT_S)
    if not up.get("started"):
        raise CheckFailed("the server did not start")
    outcome: dict = {}
    exchange = threading.Thread(target=_play_over_ws, args=(port, ctx.tiers[-1], outcome), daemon=True)
    exchange.start()  # the judge keeps answering the package's refused calls while the client waits on it
    try:
        ctx.channel.service(exchange.is_alive, WS_EXCHANGE_S)
        exchange.join(timeout=1.0)
    finally:
        ctx.call("serve_stop", label="stopping the server", bucket=ctx.import_seconds)
    if "error" in outcome or "done" not in outcome:
        raise CheckFailed(outcome.get("error", f"the exchange over /ws did not finish within {WS_EXCHANGE_S:g} s"))
    return {"round_trip_s": round(time.perf_counter() - started, 3)}


def _play_over_ws(port: int, eci: int, outcome: dict) -> None:
    """A reset, a step and a state read over OpenEnv's /ws, as a client does; the result in `outcome`."""
    from websockets.sync.client import connect

    try:
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=5, close_timeout=1) as ws:
            def call(message: dict) -> dict:
                ws.send(json.dumps(message))
                try:
                    reply = json.loads(ws.recv(timeout=5))
                except TimeoutError:
                    raise CheckFailed(f"{message['type']} over /ws got no answer within 5 s") from None
                if reply.get("type") == "error":
                    raise CheckFailed(f"{message['type']} over /ws answered an error: {reply.get('data')}")
                return reply["data"]

            first = call({"type": "reset", "data": {"seed": 3, "eci": eci}})
            if first["observation"].get("eci") != eci:
                raise CheckFailed(f"reset over /ws with eci={eci} gave an observation of tier "
                                  f"{first['observation'].get('eci')}")
            stepped = call({"type": "step", "data": {}})
            state = call({"type": "state"})
            reward = stepped.get("reward")
            if state.get("step_count") != 1 or isinstance(reward, bool) or not isinstance(reward, int | float):
                raise CheckFailed(f"after one step over /ws: state {state}, reward {reward!r}")
        outcome["done"] = True
    except CheckFailed as exc:
        outcome["error"] = str(exc)
    except Exception as exc:  # noqa: BLE001  (the connection itself: the server is not there or broke it)
        outcome["error"] = f"the server on /ws could not be reached: {type(exc).__name__}: {exc}"


@check("runtime.resource_bounds", depends_on=("static.imports",),
       remediation="keep reset/step fast and memory-bounded: precompute in reset, avoid unbounded growth")
def resource_bounds(ctx: Context):
    steps = sorted(ctx.step_seconds)
    resets = sorted(ctx.reset_seconds)
    p99 = steps[min(len(steps) - 1, int(len(steps) * 0.99))] if steps else 0.0
    declared = int((ctx.validation_block.get("resources") or {}).get("memory_mb", DEFAULT_MEMORY_MB))
    grown = ctx.peak_memory_grown_mb()
    measured = {
        "steps": len(steps), "step_median_us": round(statistics.median(steps) * 1e6, 1) if steps else None,
        "step_p99_ms": round(p99 * 1e3, 3), "reset_max_ms": round(max(resets, default=0.0) * 1e3, 3),
        "memory_growth_mb": round(grown, 1), "memory_declared_mb": declared,
    }
    problems = list(dict.fromkeys([*ctx.limit_hits, *ctx.violations]))
    if ctx.player_gone:
        problems.append(f"the package's process ended: {ctx.player_gone}")
    if p99 > STEP_P99_LIMIT_S:
        problems.append(f"step p99 {p99 * 1e3:.1f} ms exceeds {STEP_P99_LIMIT_S * 1e3:.0f} ms")
    if grown > declared:
        problems.append(f"memory grew by {grown:.0f} MB, more than the declared {declared} MB")
    if problems:
        raise CheckFailed(*problems, measured=measured)
    return measured
