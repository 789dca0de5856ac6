"""Checks that run last: the package served over OpenEnv's WebSocket API inside the sandbox, and the time and
memory every check's episodes took."""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time

from openadapt.validator.checks.base import CheckFailed, Context, check, peak_rss_mb

SERVER_START_TIMEOUT_S = 10.0
STEP_P99_LIMIT_S = 0.25
DEFAULT_MEMORY_MB = 512


@check("runtime.server", depends_on=("runtime.api_contract",),
       remediation="the package must serve reset/step/state over OpenEnv's /ws (server/app.py via create_package_app)")
def server(ctx: Context):
    import uvicorn
    from websockets.sync.client import connect

    from openadapt.envpkg.serving import create_package_app

    app = create_package_app(ctx.root, max_sessions=2)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    started = time.perf_counter()
    thread.start()
    try:
        while not srv.started:
            if time.perf_counter() - started > SERVER_START_TIMEOUT_S or not thread.is_alive():
                raise CheckFailed("the server did not start")
            time.sleep(0.005)
        eci = ctx.tiers[-1]
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=5, close_timeout=1) as ws:
            def call(message: dict) -> dict:
                ws.send(json.dumps(message))
                reply = json.loads(ws.recv(timeout=5))
                if reply.get("type") == "error":
                    raise CheckFailed(f"{message['type']} over /ws answered an error: {reply.get('data')}")
                return reply["data"]

            first = call({"type": "reset", "data": {"seed": 3, "eci": eci}})
            if first["observation"].get("eci") != eci:
                raise CheckFailed(f"reset over /ws with eci={eci} gave an observation of tier "
                                  f"{first['observation'].get('eci')}")
            stepped = call({"type": "step", "data": {}})
            state = call({"type": "state"})
            if state.get("step_count") != 1 or not isinstance(stepped.get("reward"), (int, float)):
                raise CheckFailed(f"after one step over /ws: state {state}, reward {stepped.get('reward')!r}")
    finally:
        # uvicorn notices should_exit within 0.1 s and then drains: no need to wait for it here (the server runs
        # in this short-lived child, which exits after the last check).
        srv.should_exit = srv.force_exit = True
        thread.join(timeout=0.01)
    return {"round_trip_s": round(time.perf_counter() - started, 3)}


@check("runtime.resource_bounds", depends_on=("static.imports",),
       remediation="keep reset/step fast and memory-bounded: precompute in reset, avoid unbounded growth")
def resource_bounds(ctx: Context):
    steps = sorted(ctx.step_seconds)
    resets = sorted(ctx.reset_seconds)
    p99 = steps[min(len(steps) - 1, int(len(steps) * 0.99))] if steps else 0.0
    declared = int((ctx.validation_block.get("resources") or {}).get("memory_mb", DEFAULT_MEMORY_MB))
    grown = peak_rss_mb() - ctx.cached("rss_at_start", lambda: 0.0)
    measured = {
        "steps": len(steps), "step_median_us": round(statistics.median(steps) * 1e6, 1) if steps else None,
        "step_p99_ms": round(p99 * 1e3, 3), "reset_max_ms": round(max(resets, default=0.0) * 1e3, 3),
        "memory_growth_mb": round(grown, 1), "memory_declared_mb": declared,
    }
    problems = list(dict.fromkeys([*ctx.limit_hits, *ctx.violations]))
    if p99 > STEP_P99_LIMIT_S:
        problems.append(f"step p99 {p99 * 1e3:.1f} ms exceeds {STEP_P99_LIMIT_S * 1e3:.0f} ms")
    if grown > declared:
        problems.append(f"memory grew by {grown:.0f} MB, more than the declared {declared} MB")
    if problems:
        raise CheckFailed(*problems, measured=measured)
    return measured
