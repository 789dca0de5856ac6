"""The incident-triage package served for real (uvicorn + OpenEnv WebSocket /ws), driven by its typed client.

Every episode played over the wire is replayed against an in-process twin environment (same seed, same tier,
same order of episodes on the connection): the wire observations and rewards must equal the twin's exactly.
The privileged oracle reads the twin's hidden state; the non-privileged heuristic reads the wire observations.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import uvicorn

import openadapt.seed_envs.incident_triage as incident_triage
from openadapt.envpkg.loader import load, resolve
from openadapt.envpkg.serving import create_package_app
from openadapt.families.diagnosis.policies import DiagnosisOracle, TelltaleHeuristic
from openadapt.kit import MALFORMED_KEY
from openadapt.seed_envs.incident_triage import IncidentTriageEnv

PACKAGE_ROOT = Path(incident_triage.__file__).resolve().parent
PKG = load(resolve("seed:incident_triage"))
TriageAction, TriageObservation = PKG.action_cls, PKG.observation_cls
IncidentTriageEnvironment = PKG.env_cls
DOMAIN = PKG.family.domain
SERVICES = [c.name for c in DOMAIN.components]
FAULTS = {f.id: f for f in DOMAIN.faults}
ROOT_CAUSES = list(FAULTS)
MAX_SESSIONS = 4
COMPONENTS = {"correctness", "efficiency", "quality", "calibration", "penalty"}
STATE_FIELDS = {"episode_id", "step_count", "eci", "seed", "step_budget", "done", "episode_return"}
PRIVILEGED_WORDS = ("root", "fault", "fix", "mitigation", "incident", "supporting", "constrain", "path", "verdict")
INVESTIGATIONS = [TriageAction(tool=tool, component=service)
                  for tool in ("inspect_logs", "query_metrics", "check_dependencies", "read_runbook")
                  for service in SERVICES]


# ---- the server --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    app = create_package_app(PACKAGE_ROOT, max_sessions=MAX_SESSIONS)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # a free port, held from here on: no race with other processes
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-test", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20.0
        while True:
            if not thread.is_alive():
                raise RuntimeError("the uvicorn server thread exited during startup")
            try:
                if httpx.get(f"{url}/health", timeout=1.0, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url}/health did not answer within 20 s")
            time.sleep(0.02)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10.0)
        sock.close()
    assert not thread.is_alive(), "the uvicorn server did not shut down"


def connect(url: str):
    """A connected sync client (use as a context manager)."""
    return IncidentTriageEnv(base_url=url, message_timeout_s=15.0).sync()


def health(url: str) -> int:
    return httpx.get(f"{url}/health", timeout=5.0, trust_env=False).status_code


# ---- replay helpers ----------------------------------------------------------------------------------------
def assert_same(remote, local: TriageObservation) -> None:
    """A wire `StepResult` equals the twin's observation: every field, reward and done flag, exactly."""
    assert isinstance(remote.observation, TriageObservation)
    assert remote.observation.model_dump() == local.model_dump()
    assert remote.reward == local.reward
    assert type(remote.reward) is float
    assert remote.done is local.done


def oracle_driver(twin, local_obs, remote):
    """The privileged oracle reads the twin (the server never hands out its hidden state)."""
    oracle = DiagnosisOracle()
    oracle.begin(twin, local_obs, random.Random(0))
    return lambda local, wire: oracle.act(local)


def heuristic_driver(twin, local_obs, remote):
    """The non-privileged heuristic only sees what came over the wire (and the domain, which is public)."""
    heuristic = TelltaleHeuristic()
    heuristic.begin(twin, local_obs, random.Random(0))
    return lambda local, wire: heuristic.act(wire)


def exhaust_driver(twin, local_obs, remote):
    """Investigate without ever diagnosing, so the step budget ends the episode."""
    rng = random.Random(5)
    return lambda local, wire: rng.choice(INVESTIGATIONS)


def wrong_driver(twin, local_obs, remote):
    """One look, then a confident diagnosis of the wrong fault quoting a line never shown (penalised)."""
    inc = twin.oracle_view()
    wrong = next(cause for cause in ROOT_CAUSES if cause != inc.fault.id)
    steps = iter([
        TriageAction(tool="query_metrics", component=inc.root),
        TriageAction(tool="diagnose_incident", component=inc.root, fault=wrong,
                     fix=FAULTS[wrong].fix, confidence=0.9,
                     evidence=["this line was never in any observation"],
                     reasoning=f"{inc.root} looks like {wrong}."),
    ])
    return lambda local, wire: next(steps)


def play(env, twin: IncidentTriageEnvironment, seed: int, eci: int, driver) -> tuple[list[float], object]:
    """One whole episode over the wire, replayed step by step on the twin: the rewards and the last result."""
    local = twin.reset(seed=seed, eci=eci)
    result = env.reset(seed=seed, eci=eci)
    assert_same(result, local)
    assert result.observation.eci == eci
    assert result.observation.metadata["eci"] == eci
    assert result.observation.metadata["seed"] == seed
    assert result.observation.steps_remaining == twin.section.step_budget[eci]
    assert not result.done
    act = driver(twin, local, env)
    rewards = []
    while not result.done:
        action = act(local, result.observation)
        local = twin.step(action)
        result = env.step(action)
        assert_same(result, local)
        assert result.observation.eci == eci
        assert result.observation.metadata["eci"] == eci
        rewards.append(result.reward)
        assert len(rewards) <= twin.section.step_budget[eci]
    return rewards, result


# ---- tests -------------------------------------------------------------------------------------------------
def test_whole_episodes_with_tier_changes_on_one_connection(base_url: str) -> None:
    twin = IncidentTriageEnvironment()
    plan = [(101, 1, oracle_driver), (102, 5, oracle_driver), (103, 3, heuristic_driver),
            (104, 5, exhaust_driver), (105, 4, oracle_driver), (106, 2, heuristic_driver),
            (107, 3, wrong_driver)]
    solved_so_far: list[bool] = []
    with connect(base_url) as env:
        for seed, eci, driver in plan:
            rewards, final = play(env, twin, seed, eci, driver)
            meta = final.observation.metadata
            assert final.done and meta["eci"] == eci
            assert isinstance(meta["solved"], bool)
            assert set(meta["reward_components"]) == COMPONENTS
            assert sum(meta["reward_components"].values()) == pytest.approx(final.reward, abs=1e-5)
            assert meta["episode_return"] == pytest.approx(sum(rewards), abs=1e-5)
            # The solve-rate signal is the running share of solved episodes on this connection's env.
            solved_so_far.append(meta["solved"])
            assert meta["solve_rate_signal"] == pytest.approx(sum(solved_so_far) / len(solved_so_far))
            assert meta["solve_rate_window"] == len(solved_so_far)
            if driver is oracle_driver:
                assert meta["solved"] and meta["termination"] == "agent"
                assert final.reward >= twin.section.solved_reward
            if driver is exhaust_driver:
                assert not meta["solved"] and meta["termination"] == "budget_exhausted"
                assert len(rewards) == twin.section.step_budget[eci]
                assert final.observation.steps_remaining == 0
            if driver is wrong_driver:
                assert not meta["solved"] and meta["termination"] == "agent"
                components = meta["reward_components"]
                assert components["penalty"] < 0 < components["correctness"] < 0.5
    assert len(set(solved_so_far)) == 2  # the plan covers solved and unsolved episodes


def test_state_over_the_wire_tracks_the_episode_and_hides_the_answer(base_url: str) -> None:
    twin = IncidentTriageEnvironment()
    with connect(base_url) as env:
        twin.reset(seed=21, eci=4)
        env.reset(seed=21, eci=4, episode_id="ws-state-check")
        state = env.state()
        assert state.episode_id == "ws-state-check"
        assert (state.step_count, state.eci, state.seed, state.step_budget) == (0, 4, 21, 10)
        assert not state.done

        rng = random.Random(3)
        for taken in range(1, 4):
            action = rng.choice(INVESTIGATIONS)
            assert_same(env.step(action), twin.step(action))
            assert env.state().step_count == taken

        state = env.state()
        dumped = state.model_dump()
        assert set(dumped) == STATE_FIELDS  # extras would show up here: EpisodeState allows them
        assert not [key for key in dumped if any(word in key.lower() for word in PRIVILEGED_WORDS)]
        incident = twin.oracle_view()
        text = json.dumps(dumped)
        for secret in (incident.fault.id, incident.root, incident.fix):
            assert secret not in text

        # Diagnose (ends the episode); a further step is refused and does not count.
        final = env.step(TriageAction(tool="diagnose_incident", component=incident.root,
                                      fault=incident.fault.id, fix=incident.fix))
        assert final.done
        after = env.step(INVESTIGATIONS[0])
        assert after.done and after.reward == 0.0 and after.observation.error == "episode_over"
        state = env.state()
        assert state.step_count == 4 and state.done
        assert state.episode_return == pytest.approx(final.reward)

        env.reset(seed=22, eci=1)
        fresh = env.state()
        assert fresh.episode_id not in (None, "ws-state-check")
        assert (fresh.step_count, fresh.eci, fresh.done) == (0, 1, False)


def test_unsupported_tier_is_an_error_and_the_server_stays_usable(base_url: str) -> None:
    with connect(base_url) as env:
        env.reset(seed=31, eci=2)
        before = env.state()
        with pytest.raises(RuntimeError, match=r"eci=9 is not a supported tier.*EXECUTION_ERROR"):
            env.reset(seed=31, eci=9)
        # The same connection still works, and the rejected reset left the running episode alone.
        assert env.state() == before
        result = env.reset(seed=32, eci=3)
        assert result.observation.eci == 3 and not result.done
    assert health(base_url) == 200
    twin = IncidentTriageEnvironment()
    with connect(base_url) as other:
        rewards, final = play(other, twin, seed=33, eci=5, driver=oracle_driver)
        assert final.observation.metadata["solved"]


def test_concurrent_clients_get_independent_episodes(base_url: str) -> None:
    assert MAX_SESSIONS > 1
    with connect(base_url) as a, connect(base_url) as b:
        twin_a, twin_b = IncidentTriageEnvironment(), IncidentTriageEnvironment()
        ra, rb = a.reset(seed=41, eci=2), b.reset(seed=42, eci=5)
        assert_same(ra, twin_a.reset(seed=41, eci=2))
        assert_same(rb, twin_b.reset(seed=42, eci=5))
        assert ra.observation.model_dump() != rb.observation.model_dump()
        # Interleaved steps: each connection's env advances alone.
        rng = random.Random(4)
        for _ in range(2):
            action = rng.choice(INVESTIGATIONS)
            assert_same(a.step(action), twin_a.step(action))
        assert (a.state().step_count, b.state().step_count) == (2, 0)
        assert (a.state().eci, b.state().eci) == (2, 5)
        assert a.state().episode_id != b.state().episode_id
        action = rng.choice(INVESTIGATIONS)
        assert_same(b.step(action), twin_b.step(action))
        assert (a.state().step_count, b.state().step_count) == (2, 1)

        # Whole episodes on both connections at the same time, each against its own twin.
        def run(env, twin, seeds, eci):
            finals = [play(env, twin, seed, eci, oracle_driver)[1] for seed in seeds]
            return [final.observation.metadata["solved"] for final in finals]

        with ThreadPoolExecutor(max_workers=2) as pool:
            fa = pool.submit(run, a, twin_a, range(50, 56), 3)
            fb = pool.submit(run, b, twin_b, range(60, 66), 4)
            assert fa.result(timeout=30) == [True] * 6
            assert fb.result(timeout=30) == [True] * 6


def test_malformed_action_costs_a_step_with_the_declared_reward(base_url: str) -> None:
    twin = IncidentTriageEnvironment()
    malformed = TriageAction.model_validate({"metadata": {MALFORMED_KEY: "bad"}})
    with connect(base_url) as env:
        assert_same(env.reset(seed=51, eci=1), twin.reset(seed=51, eci=1))
        result = env.step(malformed)
        assert_same(result, twin.step(malformed))
        assert result.reward == -0.1 == twin.section.malformed_reward
        assert result.observation.error == "malformed_completion"
        assert "bad" in result.observation.feedback
        assert not result.done
        assert result.observation.steps_remaining == twin.section.step_budget[1] - 1
        assert env.state().step_count == 1


# ---- HTTP: stateless, and bad requests are 4xx (issue 13, item 6) --------------------------------------------
def post(url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=15.0, trust_env=False)


def test_http_reset_with_an_unsupported_tier_is_422_with_the_reason(base_url: str) -> None:
    response = post(base_url, "/reset", {"eci": 9})
    assert response.status_code == 422
    assert "eci=9 is not a supported tier" in response.json()["detail"]
    assert post(base_url, "/reset", {"seed": -1}).status_code == 422  # OpenEnv's own request validation
    assert post(base_url, "/reset", {"seed": 3, "eci": 2}).status_code == 200
    assert health(base_url) == 200


def test_http_step_is_stateless_and_says_to_use_the_websocket(base_url: str) -> None:
    assert post(base_url, "/reset", {"seed": 3, "eci": 1}).status_code == 200
    response = post(base_url, "/step", {"action": {"tool": "inspect_logs", "component": SERVICES[0]}})
    assert response.status_code == 409
    detail = response.json()["detail"]
    assert "HTTP /step is stateless" in detail and "/ws" in detail
    assert post(base_url, "/step", {"action": {"tool": 12}}).status_code == 422  # not the action schema


def test_the_readme_websocket_example_plays_an_episode(base_url: str, capsys) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in readme.split("```python\n")[1:] if "websockets.sync.client" in b]
    assert blocks, "the README has no WebSocket example"
    code = blocks[0].split("```")[0].replace("ws://127.0.0.1:8000", base_url.replace("http://", "ws://"))
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example, run as written
    printed = capsys.readouterr().out.split()
    assert float(printed[0]) <= 0.0 and printed[1] == "False"  # an investigation step: no score yet
