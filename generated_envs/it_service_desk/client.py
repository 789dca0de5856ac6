"""WebSocket client for it_service_desk:

    with ItServiceDeskEnv(base_url=URL).sync() as env:
        env.reset(seed=1, eci=2)

Its action and observation classes are `ItServiceDeskEnv.action_type` and `.observation_type`."""

from pathlib import Path

from openadapt.envpkg.client import package_client

# The package's own code, so loading it is trusted (as in server/app.py).
ItServiceDeskEnv = package_client(Path(__file__).resolve().parent, "ItServiceDeskEnv", trust=True)
