"""WebSocket client for hospital_pharmacy:

    with HospitalPharmacyEnv(base_url=URL).sync() as env:
        env.reset(seed=1, eci=2)

Its action and observation classes are `HospitalPharmacyEnv.action_type` and `.observation_type`."""

from pathlib import Path

from openadapt.envpkg.client import package_client

# The package's own code, so loading it is trusted (as in server/app.py).
HospitalPharmacyEnv = package_client(Path(__file__).resolve().parent, "HospitalPharmacyEnv", trust=True)
