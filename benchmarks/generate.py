"""Wall time of `openadapt generate` offline, split into design and validation.

    python benchmarks/generate.py [--runs 3]

Each run generates a package for three prompts (one per blueprint family) into a temporary folder. The first
run includes the validator's cold start (sandbox + OpenEnv import); later runs reuse the warm worker, as one
`openadapt generate` process does across its attempts.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from openadapt.designer.generate import GenerateRequest, generate
from openadapt.validator import Validator

PROMPTS = (
    "Train an agent to diagnose failing irrigation pumps on a farm",
    "Process customer refund requests with role-based approval and SLAs",
    "Assemble the weekly sales report PDF for regional managers",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows = []
    started = time.perf_counter()
    with Validator("auto") as validator:
        cold = validator.warm_up()
        for run in range(args.runs):
            for prompt in PROMPTS:
                with tempfile.TemporaryDirectory() as tmp:
                    t = time.perf_counter()
                    result = generate(GenerateRequest(task=prompt, output_root=Path(tmp)), validator=validator)
                    total = time.perf_counter() - t
                assert result.ok, result.reason
                attempt = result.provenance.attempts[-1]
                rows.append((run, result.provenance.designer.blueprint, attempt.design_s, attempt.validation_s, total))
    print(f"validator cold start (sandbox + OpenEnv import): {cold:.2f} s")
    print(f"{'run':>3}  {'blueprint':<22}{'design s':>9}{'validate s':>11}{'total s':>9}")
    for run, blueprint, design, validation, total in rows:
        print(f"{run:>3}  {blueprint:<22}{design:>9.3f}{validation:>11.3f}{total:>9.3f}")
    print(f"median per package: design {statistics.median(r[2] for r in rows):.3f} s, validation "
          f"{statistics.median(r[3] for r in rows):.3f} s, total {statistics.median(r[4] for r in rows):.3f} s; "
          f"wall {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
