"""The validator's host side: pick a sandbox, keep a warm worker in it, and turn each candidate package into a
`ValidationReport`.

    with Validator(sandbox="auto") as validator:
        report = validator.validate("generated_envs/my_env")
        print(report.verdict, report.designer_feedback())
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from openadapt import __version__
from openadapt.envpkg.manifest import MANIFEST_FILE
from openadapt.sandbox import SandboxChoice, SandboxInfo, make_sandbox, stage_package
from openadapt.sandbox.base import WorkerDied, WorkerHandle
from openadapt.validator.report import CheckResult, Status, ValidationReport, Verdict

MAX_PACKAGE_BYTES = 20 * 1024 * 1024
MAX_PACKAGE_FILES = 2000
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MEMORY_MB = 1024
DEFAULT_EPISODES = 20
OUTPUT_LIMIT = 1024 * 1024


def package_digest(root: Path) -> str:
    """sha256 over every file's relative path and bytes (caches excluded), in a stable order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() if not path.is_symlink() else os.readlink(path).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts]
    return len(files), sum(p.stat().st_size for p in files)


def _static_failure(package: str, check_id: str, evidence: str, remediation: str, verdict: Verdict,
                    sandbox: SandboxInfo) -> ValidationReport:
    return ValidationReport(
        package=package, verdict=verdict, sandbox=sandbox, openadapt_version=__version__,
        checks=[CheckResult(check_id=check_id, level="static", status=Status.FAIL, evidence=[evidence],
                            remediation=remediation)],
    )


class Validator:
    """Validates packages in a sandbox, keeping one warm worker for all of them (OpenEnv's import is paid once)."""

    def __init__(self, sandbox: SandboxChoice | str = SandboxChoice.AUTO, *, episodes: int = DEFAULT_EPISODES,
                 timeout_s: float = DEFAULT_TIMEOUT_S, memory_mb: int = DEFAULT_MEMORY_MB,
                 docker_image: str | None = None):
        self.episodes = episodes
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self._tmp = Path(tempfile.mkdtemp(prefix="openadapt-validator-"))
        self.sandbox = make_sandbox(sandbox, self._tmp)
        self._docker = None
        if self.sandbox is None:
            from openadapt.sandbox.docker import DEFAULT_IMAGE, DockerRunner

            self._docker = DockerRunner(docker_image or DEFAULT_IMAGE)
        else:
            self.sandbox.prepare()
        self._worker: WorkerHandle | None = None
        self.cold_start_s: float | None = None

    # ---- lifecycle -----------------------------------------------------------------------------------------
    def __enter__(self) -> Validator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        if self.sandbox is not None:
            self.sandbox.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    @property
    def sandbox_info(self) -> SandboxInfo:
        return self._docker.info() if self._docker is not None else self.sandbox.info()

    def _ensure_worker(self) -> WorkerHandle:
        if self._worker is None or not self._worker.alive:
            self._worker = WorkerHandle(self.sandbox)
            self.cold_start_s = self._worker.start_s
        return self._worker

    def warm_up(self) -> float:
        """Start the worker now (cold import of OpenEnv, ~4-6 s); returns how long it took."""
        if self.sandbox is not None:
            self._ensure_worker()
        return self.cold_start_s or 0.0

    # ---- validation ----------------------------------------------------------------------------------------
    def validate(self, path: Path | str, tiers: list[int] | None = None) -> ValidationReport:
        started = time.perf_counter()
        root = Path(path).expanduser()
        label = str(path)
        info = self.sandbox_info
        if not root.is_dir():
            return _static_failure(label, "static.manifest", f"{label} is not a directory",
                                   "pass an environment package directory", Verdict.UNUSABLE, info)
        if not (root / MANIFEST_FILE).is_file():
            return _static_failure(label, "static.manifest", f"{label} has no {MANIFEST_FILE}: not an environment "
                                   "package", "create the package layout (docs/environment-package.md)",
                                   Verdict.UNUSABLE, info)
        files, size = _size(root)
        if files > MAX_PACKAGE_FILES or size > MAX_PACKAGE_BYTES:
            return _static_failure(label, "static.files", f"package has {files} files, {size} bytes (limits "
                                   f"{MAX_PACKAGE_FILES}, {MAX_PACKAGE_BYTES})", "ship only source and templates",
                                   Verdict.FAIL, info)
        digest = package_digest(root)
        request = {"op": "validate", "tiers": tiers or [1, 2, 3, 4, 5], "episodes": self.episodes,
                   "timeout_s": self.timeout_s, "memory_mb": self.memory_mb}
        timings: dict[str, float] = {}
        if self._docker is not None:
            reply = self._docker.run(root.resolve(), request, self.timeout_s + 30)
        else:
            staged = self.sandbox.inbox / digest[:16]
            stage_package(root, staged)
            request.update(package=self.sandbox.inside(staged), scratch=self.sandbox.inside(self.sandbox.scratch))
            try:
                cold = self._worker is None or not self._worker.alive
                worker = self._ensure_worker()
                if cold:
                    timings["worker_start_s"] = worker.start_s
                reply = worker.request(request, self.timeout_s + 30)
            except WorkerDied as exc:
                reply = {"ok": False, "error": str(exc)}
            finally:
                shutil.rmtree(staged, ignore_errors=True)
        report = self._report(label, digest, reply, info)
        timings["total_s"] = round(time.perf_counter() - started, 4)
        if "duration_s" in reply:
            timings["checks_s"] = reply["duration_s"]
        report.timings = timings
        return report

    def _report(self, label: str, digest: str, reply: dict, info: SandboxInfo) -> ValidationReport:
        report = ValidationReport(package=label, package_digest=digest, verdict=Verdict.PASS, sandbox=info,
                                  openadapt_version=__version__)
        if not reply.get("ok"):
            report.verdict = Verdict.ERROR
            report.checks.append(CheckResult(check_id="validator.internal", level="internal", status=Status.ERROR,
                                             evidence=[str(reply.get("error", "no reply"))[:1000]]))
            return report
        report.checks = [CheckResult.model_validate(c) for c in reply["checks"]]
        done = {c.check_id for c in report.checks}
        interrupted = reply.get("interrupted_stage")
        cause = reply.get("killed_for") or reply.get("child_exit")
        if interrupted or cause:
            self._account_for_interruption(report, interrupted, cause, done)
        report.checks.append(self._output_check(reply))
        if reply.get("seccomp"):
            report.sandbox.notes.append(reply["seccomp"])
        manifest = next((c for c in report.checks if c.check_id == "static.manifest"), None)
        if manifest is not None and manifest.status == Status.PASS:
            report.package_name = manifest.measured.get("name")
            report.tiers = manifest.measured.get("tiers", [])
        report.candidate_output = reply.get("output", "")
        if any(c.status in (Status.FAIL, Status.ERROR) for c in report.checks):
            report.verdict = Verdict.FAIL
        return report

    @staticmethod
    def _account_for_interruption(report: ValidationReport, interrupted: str | None, cause: str | None,
                                  done: set[str]) -> None:
        """A child killed mid-check: the running check fails with the cause; the rest are skipped, not failed."""
        from openadapt.validator.checks import REGISTRY

        for chk in REGISTRY:
            if chk.id in done:
                continue
            if chk.id == interrupted or (chk.id == "runtime.resource_bounds" and cause):
                report.checks.append(CheckResult(
                    check_id=chk.id, level=chk.level, status=Status.FAIL,
                    evidence=[f"the package's code was stopped during this check: {cause or 'process died'}"],
                    measured={"killed_for": cause},
                    remediation="keep every call bounded: no infinite loops, sleeps, unbounded memory or output",
                ))
            else:
                report.checks.append(CheckResult(
                    check_id=chk.id, level=chk.level, status=Status.SKIP,
                    evidence=[f"not run: the validation was stopped during {interrupted or 'start-up'} ({cause})"],
                ))
        if interrupted is None and cause:
            report.checks.insert(0, CheckResult(
                check_id="runtime.process", level="runtime", status=Status.FAIL,
                evidence=[f"the validation process ended early: {cause}"],
                remediation="the package must not exit, crash or kill its own process",
            ))

    @staticmethod
    def _output_check(reply: dict) -> CheckResult:
        written = int(reply.get("output_bytes", 0))
        result = CheckResult(check_id="runtime.output_volume", level="runtime", status=Status.PASS,
                             measured={"bytes": written, "limit": OUTPUT_LIMIT})
        if written > OUTPUT_LIMIT:
            result.status = Status.FAIL
            result.evidence = [f"the package printed {written} bytes during validation (limit {OUTPUT_LIMIT})"]
            result.remediation = "log sparingly: environments must not flood stdout/stderr"
        return result


def validate(path: Path | str, tiers: list[int] | None = None, sandbox: SandboxChoice | str = SandboxChoice.AUTO,
             episodes: int = DEFAULT_EPISODES) -> ValidationReport:
    """One-shot validation (starts and stops a worker: for many packages keep a `Validator`)."""
    with Validator(sandbox, episodes=episodes) as validator:
        return validator.validate(path, tiers)
