"""Wall time to fully validate one environment at all five tiers, in the bwrap sandbox.

Cold: a new Validator (sandbox start, OpenEnv's import inside it) plus the first validation.
Warm: the same worker validating again (fork per candidate); median over --runs validations.

    python benchmarks/validate.py [--package seed:incident_triage] [--runs 20] [--sandbox bwrap]
"""

from __future__ import annotations

import argparse
import statistics
import time

from openadapt.envpkg.loader import SEED_PREFIX, resolve
from openadapt.validator import Validator, Verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="seed:incident_triage")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--sandbox", default="bwrap")
    args = parser.parse_args()
    path = resolve(args.package).root if args.package.startswith(SEED_PREFIX) else args.package

    started = time.perf_counter()
    with Validator(args.sandbox) as validator:
        first = validator.validate(path, [1, 2, 3, 4, 5])
        cold = time.perf_counter() - started
        if first.verdict != Verdict.PASS:
            raise SystemExit(f"validation did not pass:\n{first.designer_feedback()}")
        warm = []
        for _ in range(args.runs):
            t = time.perf_counter()
            report = validator.validate(path, [1, 2, 3, 4, 5])
            warm.append(time.perf_counter() - t)
            assert report.verdict == Verdict.PASS
    slowest = sorted(report.checks, key=lambda c: -c.duration_s)[:5]
    print(f"package: {args.package}  sandbox: {report.sandbox.backend}  checks: {len(report.checks)}  tiers: 1-5")
    print(f"cold (sandbox start + OpenEnv import + first validation): {cold:.2f} s "
          f"(worker start {first.timings.get('worker_start_s', 0):.2f} s)")
    print(f"warm: median {statistics.median(warm):.3f} s, min {min(warm):.3f} s, max {max(warm):.3f} s "
          f"over {len(warm)} validations")
    print("slowest checks (last run): " + ", ".join(f"{c.check_id} {c.duration_s:.3f} s" for c in slowest))
    target = statistics.median(warm) < 1.0
    print(f"target warm median < 1 s: {'MET' if target else 'NOT MET'}")


if __name__ == "__main__":
    main()
