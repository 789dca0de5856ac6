"""WebSocket client for freight_rate:

    with FreightRateEnv(base_url=URL).sync() as env:
        env.reset(seed=1, eci=2)

Its action and observation classes are `FreightRateEnv.action_type` and `.observation_type`."""

from pathlib import Path

from openadapt.envpkg.client import package_client

# The package's own code, so loading it is trusted (as in server/app.py).
FreightRateEnv = package_client(Path(__file__).resolve().parent, "FreightRateEnv", trust=True)
