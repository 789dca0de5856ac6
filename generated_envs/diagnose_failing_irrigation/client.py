"""WebSocket client for diagnose_failing_irrigation:

    with DiagnoseFailingIrrigationEnv(base_url=URL).sync() as env:
        env.reset(seed=1, eci=2)

Its action and observation classes are `DiagnoseFailingIrrigationEnv.action_type` and `.observation_type`."""

from pathlib import Path

from openadapt.envpkg.client import package_client

# The package's own code, so loading it is trusted (as in server/app.py).
DiagnoseFailingIrrigationEnv = package_client(Path(__file__).resolve().parent, "DiagnoseFailingIrrigationEnv", trust=True)
