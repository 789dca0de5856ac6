"""The daily_report seed (report family + its domain) served for real (uvicorn + OpenEnv WebSocket /ws, driven
by the package's own typed client), and the PDF download route `GET /report/{episode_id}.pdf` the report family
adds through `http_routes()`."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from openadapt.envpkg.loader import SEEDS_DIR, load
from openadapt.envpkg.serving import create_package_app
from openadapt.families.report.downloads import PdfRegistry
from openadapt.families.report.pdf import extract_lines
from openadapt.seed_envs.daily_report import DailyReportEnv

PACKAGE_ROOT = SEEDS_DIR / "daily_report"


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    app = create_package_app(PACKAGE_ROOT, max_sessions=2)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-report", daemon=True)
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


def _get(url: str) -> httpx.Response:
    return httpx.get(url, timeout=10.0, trust_env=False)


def test_the_pdf_of_the_current_session_can_be_downloaded(base_url: str) -> None:
    pkg = load("seed:daily_report")
    twin = pkg.make_env()  # same seed and actions in process: the wire must agree with it
    act = DailyReportEnv.action_type
    with DailyReportEnv(base_url=base_url, message_timeout_s=15.0).sync() as env:
        result = env.reset(seed=21, eci=4, task="daily_full")
        twin.reset(seed=21, eci=4, task="daily_full")
        episode_id = env.state().episode_id
        assert _get(f"{base_url}/report/{episode_id}.pdf").status_code == 404  # nothing finalised yet
        ep = twin.oracle_view()
        actions = [act(command="set_field", field=f, value=ep.expected[f]) for f in ep.task.fields]
        actions += [act(command="add_kpi_row", label=r.label, value=r.value) for r in ep.rows]
        actions.append(act(command="finalize_pdf"))
        for action in actions:
            result = env.step(action)
            assert result.observation.model_dump() == twin.step(action).model_dump()
        assert result.observation.pdf_status == "current" and "/report/<episode_id>.pdf" in result.observation.feedback

        response = _get(f"{base_url}/report/{episode_id}.pdf")
        assert response.status_code == 200 and response.headers["content-type"] == "application/pdf"
        printed = extract_lines(response.content)
        assert printed == twin.desk().layout.lines(result.observation.draft, [(r.label, r.value) for r in ep.rows])

        # An edit and a second finalize replace the served PDF with the new version.
        label = ep.rows[-1].label
        for action in (act(command="clear_kpi_rows"),
                       *[act(command="add_kpi_row", label=r.label, value=r.value) for r in ep.rows[:-1]],
                       act(command="add_kpi_row", label=label, value="0.00"),
                       act(command="finalize_pdf")):
            result = env.step(action)
        again = extract_lines(_get(f"{base_url}/report/{episode_id}.pdf").content)
        assert again != printed and again[-1] == f"{len(ep.rows)}. {label}: 0.00"

        env.reset(seed=22, eci=1)  # a new episode does not serve the old one's PDF under its own id
        assert _get(f"{base_url}/report/{env.state().episode_id}.pdf").status_code == 404
    assert _get(f"{base_url}/report/no-such-episode.pdf").status_code == 404


def test_the_registry_is_bounded_and_keeps_the_latest():
    registry = PdfRegistry(capacity=2)
    registry.put("a", b"1")
    registry.put("b", b"2")
    registry.put("a", b"3")  # refreshed: now the most recent
    registry.put("c", b"4")
    assert registry.get("b") is None and registry.get("a") == b"3" and registry.get("c") == b"4"
    assert len(registry) == 2
