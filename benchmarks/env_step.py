"""Step and reset latency of openadapt environments, in-process and over OpenEnv's WebSocket transport.

Four cases, each driven by the same loop (reset when an episode ends, otherwise step):

- incident triage in-process: `IncidentTriageEnvironment.step` on investigation actions (random tool x
  service, drawn before the clock starts), with `reset` timed separately when an episode ends;
- incident triage over /ws: the same through the package's real app (`create_package_app`) and the typed
  sync client `IncidentTriageEnv(...).sync()`;
- echo in-process and over /ws: a minimal OpenEnv `Environment` defined below (same episode length rule),
  served with `openenv.core.env_server.http_server.create_app`, as the floor of the stack.

Servers run in a forked child process by default (`--server process`), so that the client does not share a
GIL with the server; `--server thread` runs them in this process. Times come from `time.perf_counter_ns`
around each call alone; steps/s is calls per second of time spent inside those calls.

    python benchmarks/env_step.py                # about 10-20 s
    python benchmarks/env_step.py --steps 100000 --ws-steps 5000
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import platform
import random
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TARGET_MEDIAN_US = 50.0
ECHO_EPISODE_STEPS = 10


# ---- the measurement loop -----------------------------------------------------------------------------------
@dataclass
class Timings:
    case: str
    transport: str
    steps_ns: list[int]
    resets_ns: list[int]


def drive(reset: Callable[..., Any], step: Callable[[Any], Any], reset_kwargs: Callable[[int], dict[str, Any]],
          actions: list[Any], steps: int, warmup: int) -> tuple[list[int], list[int]]:
    """Step through episodes; time each `step` and each `reset` call on its own. Results must have `.done`."""
    clock = time.perf_counter_ns
    step_ns: list[int] = []
    reset_ns: list[int] = []
    episode = 0
    done = True
    total = warmup + steps
    gc.collect()
    for i in range(total):
        if done:
            kwargs = reset_kwargs(episode)
            episode += 1
            t0 = clock()
            reset(**kwargs)
            elapsed = clock() - t0
            if i >= warmup:
                reset_ns.append(elapsed)
        action = actions[i % len(actions)]
        t0 = clock()
        result = step(action)
        elapsed = clock() - t0
        if i >= warmup:
            step_ns.append(elapsed)
        done = result.done
    return step_ns, reset_ns


# ---- incident triage ----------------------------------------------------------------------------------------
def _triage():
    from openadapt.envpkg.loader import load

    return load("seed:incident_triage")


def triage_actions(count: int, seed: int = 0) -> list[Any]:
    pkg = _triage()
    services = [c.name for c in pkg.family.domain.components]
    pool = [pkg.action_cls(tool=tool, component=service)
            for tool in ("inspect_logs", "query_metrics", "check_dependencies", "read_runbook")
            for service in services]
    rng = random.Random(seed)
    return [rng.choice(pool) for _ in range(count)]


def triage_reset_kwargs(eci: int | None) -> Callable[[int], dict[str, Any]]:
    """Seeds 1, 2, ...; the tier is fixed by --eci or cycles 1-5 per episode."""
    return lambda episode: {"seed": episode + 1, "eci": eci if eci else 1 + episode % 5}


def triage_package_root() -> Path:
    import openadapt.seed_envs.incident_triage as pkg

    return Path(pkg.__file__).resolve().parent


# ---- the echo reference environment -------------------------------------------------------------------------
@cache
def echo_classes():
    """The echo action/observation/environment/client (built lazily: importing openenv takes seconds)."""
    from openenv.core import EnvClient
    from openenv.core.client_types import StepResult
    from openenv.core.env_server import Action, Environment, Observation, State

    class EchoAction(Action):
        message: str = ""

    class EchoObservation(Observation):
        echoed: str = ""

    class EchoEnvironment(Environment[EchoAction, EchoObservation, State]):
        """Echoes the message back; an episode lasts ECHO_EPISODE_STEPS steps."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._state = State(episode_id=None, step_count=0)

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
            self._state = State(episode_id=episode_id or f"echo-{seed}", step_count=0)
            return EchoObservation(echoed="", reward=0.0, done=False)

        def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
            self._state.step_count += 1
            return EchoObservation(echoed=action.message, reward=float(len(action.message)),
                                   done=self._state.step_count >= ECHO_EPISODE_STEPS)

        @property
        def state(self) -> State:
            return self._state

    class EchoClient(EnvClient[EchoAction, EchoObservation, State]):
        def _step_payload(self, action: EchoAction) -> dict[str, Any]:
            return action.model_dump(exclude_defaults=True)

        def _parse_result(self, payload: dict[str, Any]) -> StepResult[EchoObservation]:
            obs = EchoObservation.model_validate(
                {**payload.get("observation", {}), "reward": payload.get("reward"),
                 "done": payload.get("done", False)})
            return StepResult(observation=obs, reward=obs.reward, done=obs.done)

        def _parse_state(self, payload: dict[str, Any]) -> State:
            return State.model_validate(payload)

    return EchoAction, EchoObservation, EchoEnvironment, EchoClient


def build_app(kind: str):
    if kind == "triage":
        from openadapt.envpkg.serving import create_package_app

        return create_package_app(triage_package_root(), max_sessions=4)
    from openenv.core.env_server.http_server import create_app

    action_cls, observation_cls, env_cls, _ = echo_classes()
    return create_app(env_cls, action_cls, observation_cls, env_name="echo", max_concurrent_envs=4)


# ---- serving ------------------------------------------------------------------------------------------------
def _serve(kind: str, sock: socket.socket) -> None:
    import uvicorn

    uvicorn.Server(uvicorn.Config(build_app(kind), log_level="warning", lifespan="on")).run(sockets=[sock])


def _wait_healthy(url: str, alive: Callable[[], bool], timeout_s: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        if not alive():
            raise RuntimeError(f"the server for {url} exited during startup")
        try:
            if httpx.get(f"{url}/health", timeout=1.0, trust_env=False).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url}/health did not answer within {timeout_s:.0f} s")
        time.sleep(0.02)


@contextmanager
def serving(kinds: list[str], mode: str) -> Iterator[dict[str, str]]:
    """Start one server per kind on free 127.0.0.1 ports; yields {kind: base_url}."""
    socks, urls, stops, alive = {}, {}, [], {}
    for kind in kinds:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        socks[kind] = sock
        urls[kind] = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        for kind in kinds:
            if mode == "process":
                # Fork before any client thread exists: the child inherits the imported modules and the socket.
                proc = multiprocessing.get_context("fork").Process(target=_serve, args=(kind, socks[kind]),
                                                                   name=f"bench-{kind}", daemon=True)
                proc.start()
                socks[kind].close()
                alive[kind] = proc.is_alive
                stops.append(lambda proc=proc: (proc.terminate(), proc.join(10)))
            else:
                import uvicorn

                server = uvicorn.Server(uvicorn.Config(build_app(kind), log_level="warning", lifespan="on"))
                thread = threading.Thread(target=server.run, kwargs={"sockets": [socks[kind]]},
                                          name=f"bench-{kind}", daemon=True)
                thread.start()
                alive[kind] = thread.is_alive

                def stop(server=server, thread=thread, sock=socks[kind]):
                    server.should_exit = True
                    thread.join(10)
                    sock.close()

                stops.append(stop)
        for kind in kinds:
            _wait_healthy(urls[kind], alive[kind])
        yield urls
    finally:
        for stop in reversed(stops):
            stop()
        for sock in socks.values():
            sock.close()


# ---- the cases ----------------------------------------------------------------------------------------------
def bench_triage_inprocess(args) -> Timings:
    IncidentTriageEnvironment = _triage().env_cls  # noqa: N806  (the seed's bound environment class)

    env = IncidentTriageEnvironment()
    steps, resets = drive(env.reset, env.step, triage_reset_kwargs(args.eci),
                          triage_actions(4096), args.steps, args.warmup)
    return Timings("incident_triage", "in-process", steps, resets)


def bench_triage_ws(args, url: str) -> Timings:
    from openadapt.seed_envs.incident_triage import IncidentTriageEnv

    with IncidentTriageEnv(base_url=url, message_timeout_s=30.0).sync() as env:
        steps, resets = drive(env.reset, env.step, triage_reset_kwargs(args.eci),
                              triage_actions(4096), args.ws_steps, min(args.warmup, 100))
    return Timings("incident_triage", "/ws sync client", steps, resets)


def echo_actions() -> list[Any]:
    action_cls = echo_classes()[0]
    return [action_cls(message=f"hello {i}") for i in range(64)]


def bench_echo_inprocess(args) -> Timings:
    env = echo_classes()[2]()
    steps, resets = drive(env.reset, env.step, lambda episode: {"seed": episode}, echo_actions(),
                          args.steps, args.warmup)
    return Timings("echo", "in-process", steps, resets)


def bench_echo_ws(args, url: str) -> Timings:
    client_cls = echo_classes()[3]
    with client_cls(base_url=url, message_timeout_s=30.0).sync() as env:
        steps, resets = drive(env.reset, env.step, lambda episode: {"seed": episode}, echo_actions(),
                              args.ws_steps, min(args.warmup, 100))
    return Timings("echo", "/ws sync client", steps, resets)


# ---- report -------------------------------------------------------------------------------------------------
def summarize(samples_ns: list[int]) -> tuple[int, float, float, float]:
    ordered = sorted(samples_ns)
    n = len(ordered)
    rate = n / (sum(ordered) / 1e9) if ordered else float("nan")
    median = statistics.median(ordered) / 1e3 if ordered else float("nan")
    p90 = ordered[min(n - 1, int(0.9 * n))] / 1e3 if ordered else float("nan")
    return n, rate, median, p90


def report(results: list[Timings]) -> dict[tuple[str, str, str], float]:
    header = f"{'environment':<16} {'transport':<16} {'op':<6} {'n':>7} {'ops/s':>10} {'median us':>10} {'p90 us':>10}"
    print(header)
    print("-" * len(header))
    medians = {}
    for t in results:
        for op, samples in (("step", t.steps_ns), ("reset", t.resets_ns)):
            n, rate, median, p90 = summarize(samples)
            medians[(t.case, t.transport, op)] = median
            print(f"{t.case:<16} {t.transport:<16} {op:<6} {n:>7} {rate:>10,.0f} {median:>10.1f} {p90:>10.1f}")
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000, help="timed in-process steps per case")
    parser.add_argument("--ws-steps", type=int, default=None,
                        help="timed steps per case over /ws (default: steps/10)")
    parser.add_argument("--warmup", type=int, default=500, help="untimed steps before measuring")
    parser.add_argument("--eci", type=int, choices=range(1, 6), default=None,
                        help="incident-triage tier (default: cycle 1-5 per episode)")
    parser.add_argument("--server", choices=("process", "thread"), default="process",
                        help="run the servers in a forked child process (default) or a thread of this one")
    parser.add_argument("--skip-ws", action="store_true", help="measure in-process only")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the in-process target is missed")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    args.ws_steps = args.ws_steps if args.ws_steps is not None else max(1, args.steps // 10)
    if args.server == "process" and "fork" not in multiprocessing.get_all_start_methods():
        args.server = "thread"

    t0 = time.perf_counter()
    import openenv.core.env_server  # noqa: F401  (the slow import, paid once and reported)

    import_s = time.perf_counter() - t0
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
          f"openenv import {import_s:.1f} s; servers: {'none' if args.skip_ws else args.server}; "
          f"tier: {args.eci or 'cycling 1-5'}; steps: {args.steps} in-process, {args.ws_steps} over /ws\n")

    results = [bench_triage_inprocess(args), bench_echo_inprocess(args)]
    if not args.skip_ws:
        with serving(["triage", "echo"], args.server) as urls:
            results.append(bench_triage_ws(args, urls["triage"]))
            results.append(bench_echo_ws(args, urls["echo"]))
    results.sort(key=lambda t: (t.case != "incident_triage", t.transport != "in-process"))

    medians = report(results)
    met = medians[("incident_triage", "in-process", "step")] < TARGET_MEDIAN_US
    print(f"\ntarget: incident_triage in-process step median < {TARGET_MEDIAN_US:.0f} us: "
          f"{'MET' if met else 'NOT MET'} ({medians[('incident_triage', 'in-process', 'step')]:.1f} us)")
    if not args.skip_ws:
        inproc = medians[("incident_triage", "in-process", "step")]
        wire = medians[("incident_triage", "/ws sync client", "step")]
        echo_wire = medians[("echo", "/ws sync client", "step")]
        print(f"/ws costs {wire / inproc:,.0f}x an in-process triage step; "
              f"triage over /ws is {wire - echo_wire:+,.0f} us per step against the echo env over /ws")
    print(f"total {time.perf_counter() - t0:.1f} s")
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
