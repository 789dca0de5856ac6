"""The validator's host side: pick a sandbox, keep a warm worker in it, and turn each candidate package into a
`ValidationReport`.

    with Validator(sandbox="auto") as validator:
        report = validator.validate("generated_envs/my_env")
        print(report.verdict, report.designer_feedback())

`validate` always returns a report, never raises for anything a package holds: a directory that cannot be a
package (a named pipe, a device, a link out of it, an oversized file) is refused at intake with verdict
`unusable` (exit 2); a failure of the validator itself is verdict `error` (exit 3).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from openadapt import __version__
from openadapt.envpkg.manifest import MANIFEST_FILE
from openadapt.sandbox import PackageRefused, SandboxChoice, SandboxInfo, make_sandbox, stage_package
from openadapt.sandbox.base import SandboxResources, WorkerDied, WorkerHandle
from openadapt.validator.report import CheckResult, Status, ValidationReport, Verdict

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MEMORY_MB = 1024
DEFAULT_DISK_MB = 256  # the sandbox's scratch tmpfs, and the most disk a package may declare
DEFAULT_CPUS = 1.0
DEFAULT_EPISODES = 20
OUTPUT_LIMIT = 1024 * 1024
SCRATCH_PATH = re.compile(r"/tmp/scratch/candidate-[A-Za-z0-9_]+")
MODULE_PREFIX = re.compile(r"openadapt_pkg_[a-z0-9_]+?_[0-9a-f]{10}\.?")


def package_digest(root: Path) -> str:
    """sha256 over every file's relative path and bytes (caches excluded), in a stable order: what
    `stage_package` returns for a package that holds only regular files and directories."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() if not path.is_symlink() else os.readlink(path).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _static_failure(package: str, check_id: str, evidence: list[str], remediation: str, verdict: Verdict,
                    sandbox: SandboxInfo) -> ValidationReport:
    return ValidationReport(
        package=package, verdict=verdict, sandbox=sandbox, openadapt_version=__version__,
        checks=[CheckResult(check_id=check_id, level="static", status=Status.FAIL, evidence=evidence,
                            remediation=remediation)],
    )


class Validator:
    """Validates packages in a sandbox, keeping one warm worker for all of them (OpenEnv's import is paid once)."""

    def __init__(self, sandbox: SandboxChoice | str = SandboxChoice.AUTO, *, episodes: int = DEFAULT_EPISODES,
                 timeout_s: float = DEFAULT_TIMEOUT_S, memory_mb: int = DEFAULT_MEMORY_MB,
                 docker_image: str | None = None, disk_mb: int = DEFAULT_DISK_MB, cpus: float = DEFAULT_CPUS):
        self.episodes = episodes
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.disk_mb = disk_mb
        # The whole sandbox: the worker and its twin (~250 MB each), two candidates, their scratch tmpfs.
        self.resources = SandboxResources(memory_mb=2 * memory_mb + 2 * disk_mb + 1024, pids=512, cpus=cpus,
                                          disk_mb=disk_mb)
        self._tmp = Path(tempfile.mkdtemp(prefix="openadapt-validator-"))
        self._staged = itertools.count()
        try:
            self.sandbox = make_sandbox(sandbox, self._tmp, self.resources)
        except BaseException:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        self._docker = None
        if self.sandbox is None:
            from openadapt.sandbox.docker import DEFAULT_IMAGE, DockerRunner

            self._docker = DockerRunner(docker_image or DEFAULT_IMAGE, self.resources)
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

    def worker_hello(self) -> dict:
        """The sandboxed worker's answer to a ping (started now if it is not running): where it imported openadapt
        from, its uid, whether its twin runs, a hash under its hash seed."""
        if self.sandbox is None:
            raise ValueError("the docker backend runs one container per validation: there is no worker to ping")
        return self._ensure_worker().hello

    def warm_up(self) -> float:
        """Start the worker now (cold import of OpenEnv, ~4-6 s); returns how long it took."""
        if self.sandbox is not None:
            self._ensure_worker()
        return self.cold_start_s or 0.0

    # ---- validation ----------------------------------------------------------------------------------------
    def validate(self, path: Path | str, tiers: list[int] | None = None) -> ValidationReport:
        started = time.perf_counter()
        label = str(path)
        try:
            report = self._validate(Path(path).expanduser(), label, tiers)
        except Exception as exc:  # a bug of the validator's, never the package's: still a report, verdict error
            report = ValidationReport(
                package=label, verdict=Verdict.ERROR, sandbox=self._info_or_unknown(), openadapt_version=__version__,
                checks=[CheckResult(check_id="validator.internal", level="internal", status=Status.ERROR,
                                    evidence=[f"{type(exc).__name__}: {str(exc)[:500]}"])])
        report.timings["total_s"] = round(time.perf_counter() - started, 4)
        return report

    def _info_or_unknown(self) -> SandboxInfo:
        try:
            return self.sandbox_info
        except Exception:  # noqa: BLE001
            return SandboxInfo(backend="unknown", isolated=False)

    def _validate(self, root: Path, label: str, tiers: list[int] | None) -> ValidationReport:
        info = self.sandbox_info
        if not root.is_dir():
            return _static_failure(label, "static.manifest", [f"{label} is not a directory"],
                                   "pass an environment package directory", Verdict.UNUSABLE, info)
        if not os.path.lexists(root / MANIFEST_FILE):
            return _static_failure(label, "static.manifest", [f"{label} has no {MANIFEST_FILE}: not an environment "
                                   "package"], "create the package layout (docs/environment-package.md)",
                                   Verdict.UNUSABLE, info)
        staged = (self.sandbox.inbox if self.sandbox is not None else self._tmp / "docker") / \
            f"pkg-{next(self._staged)}"
        try:
            digest = stage_package(root, staged)
        except PackageRefused as refused:
            return _static_failure(
                label, "static.intake", refused.problems,
                "a package holds only regular files and directories, within the size limits: no named pipes, "
                "sockets or devices, no links out of the package (replace a link by the file itself)",
                Verdict.UNUSABLE, info)
        request = {"op": "validate", "tiers": tiers or [1, 2, 3, 4, 5], "episodes": self.episodes,
                   "timeout_s": self.timeout_s, "memory_mb": self.memory_mb, "disk_mb_cap": self.disk_mb}
        timings: dict[str, float] = {}
        before = self._cgroup_counters()
        try:
            if self._docker is not None:
                from openadapt.sandbox.docker import PACKAGE_MOUNT

                inside = PACKAGE_MOUNT
                reply = self._docker.run(staged.resolve(), request, self.timeout_s + 30)
            else:
                inside = self.sandbox.inside(staged)
                request.update(package=inside, scratch=self.sandbox.inside(self.sandbox.scratch))
                try:
                    cold = self._worker is None or not self._worker.alive
                    worker = self._ensure_worker()
                    if cold:
                        timings["worker_start_s"] = worker.start_s
                    reply = worker.request(request, self.timeout_s + 30)
                except WorkerDied as exc:
                    # The judge ended while the package ran beside it: the package's doing until shown otherwise
                    # (a validator bug still leaves its traceback in the evidence).
                    reply = {"ok": True, "checks": [], "killed_for": f"the validator's worker ended while it "
                             f"validated the package ({exc})", "registry": None}
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        info = self.sandbox_info  # after the worker started: the cgroup placement is known
        hits = {k: v - before.get(k, 0) for k, v in self._cgroup_counters().items() if v - before.get(k, 0) > 0}
        report = self._report(label, digest, reply, info, hits)
        _sanitize(report, inside)
        if "duration_s" in reply:
            timings["checks_s"] = reply["duration_s"]
        for key in ("twin_wait_s", "sweep_s"):  # where a slow validation spent its time, outside the checks
            if reply.get(key):
                timings[key] = reply[key]
        report.timings = timings
        return report

    def _cgroup_counters(self) -> dict[str, int]:
        group = self.sandbox.cgroup if self.sandbox is not None else None
        return group.counters() if group is not None else {}

    def _report(self, label: str, digest: str, reply: dict, info: SandboxInfo,
                cgroup_hits: dict[str, int]) -> ValidationReport:
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
            self._account_for_interruption(report, interrupted, cause, done, reply.get("registry"))
        self._amend_resource_bounds(report, reply, cgroup_hits)
        report.checks.append(self._output_check(reply))
        _describe_bounds(report.sandbox, reply)
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
                                  done: set[str], registry: list | None = None) -> None:
        """A child killed mid-check: the running check fails with the cause; the rest are skipped, not failed.
        `registry` is the worker's list of (id, level, where) (importing the checks here would import OpenEnv)."""
        if registry is None:
            from openadapt.validator.checks import REGISTRY

            registry = [(c.id, c.level, c.where) for c in REGISTRY]
        for check_id, level, where in registry:
            if check_id in done or where != "judge":
                continue
            if check_id == interrupted or (check_id == "runtime.resource_bounds" and cause):
                report.checks.append(CheckResult(
                    check_id=check_id, level=level, status=Status.FAIL,
                    evidence=[f"the package's process ended during this check: {cause or 'it died'}"],
                    measured={"killed_for": cause},
                    remediation="keep every call bounded: no infinite loops, sleeps, unbounded memory or output",
                ))
            else:
                report.checks.append(CheckResult(
                    check_id=check_id, level=level, status=Status.SKIP,
                    evidence=[f"not run: the validation was stopped during {interrupted or 'start-up'} ({cause})"],
                ))
        if interrupted is None and cause:
            report.checks.insert(0, CheckResult(
                check_id="runtime.process", level="runtime", status=Status.FAIL,
                evidence=[f"the validation process ended early: {cause}"],
                remediation="the package must not exit, crash or kill its own process",
            ))

    @staticmethod
    def _amend_resource_bounds(report: ValidationReport, reply: dict, cgroup_hits: dict[str, int]) -> None:
        """What the worker measured outside the candidate: the scratch disk's peak, the peak memory (from the
        kernel's accounting of the child), the sandbox cgroup's limit hits."""
        check = next((c for c in report.checks if c.check_id == "runtime.resource_bounds"), None)
        if check is None or check.status == Status.SKIP:
            return
        disk, memory = reply.get("disk") or {}, reply.get("memory") or {}
        problems = []
        if disk:
            peak, limit_mb, declared = int(disk.get("peak_bytes", 0)), disk.get("limit_mb"), disk.get("declared_mb")
            check.measured.update(disk_peak_mb=round(peak / 2**20, 2), disk_declared_mb=declared,
                                  disk_limit_mb=limit_mb)
            if limit_mb is not None and peak > int(limit_mb) * 2**20:
                bound = (f"a private tmpfs of {disk.get('tmpfs_bytes', 0) / 2**20:.0f} MiB: writes beyond it failed "
                         "with ENOSPC" if disk.get("private_tmpfs") else
                         f"the sandbox's scratch tmpfs bounded it at {disk.get('cap_mb')} MiB")
                problems.append(f"the package wrote {peak / 2**20:.1f} MiB to its scratch directory, over its declared "
                                f"disk_mb {declared}" + (f" (capped at {limit_mb} MiB)" if limit_mb != declared else "")
                                + f"; {bound}")
        if memory.get("peak_rss_mb") is not None:
            check.measured.update(peak_rss_mb=memory["peak_rss_mb"], rss_growth_mb=memory.get("growth_mb"))
            declared_memory = reply.get("declared_memory_mb")
            grown = memory.get("growth_mb") or 0.0
            said = any("memory grew by" in e for e in check.evidence)
            if declared_memory and grown > declared_memory and not said:
                problems.append(f"memory grew by {grown:.0f} MB (the kernel's count of the package's process), more "
                                f"than the declared memory_mb {declared_memory}")
        if cgroup_hits:
            check.measured["cgroup_limit_hits"] = cgroup_hits
            for key, text in (("oom_kills", "the sandbox's cgroup memory limit: the kernel killed {n} process(es)"),
                              ("pids_max_hits", "the sandbox's cgroup process limit refused {n} fork(s)")):
                if cgroup_hits.get(key):
                    problems.append(text.format(n=cgroup_hits[key]))
        if problems:
            check.status = Status.FAIL
            check.evidence = [*problems, *check.evidence]
            check.remediation = check.remediation or "stay within the resources the package declares " \
                                                     "(validation.resources in openenv.yaml)"

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


def _describe_bounds(info: SandboxInfo, reply: dict) -> None:
    """The per-candidate bounds the worker applied, into the report's sandbox section."""
    disk = reply.get("disk") or {}
    if reply.get("rlimits"):
        info.limits["candidate_rlimits"] = reply["rlimits"]
    if disk:
        info.limits["candidate_disk"] = {k: disk.get(k) for k in ("declared_mb", "limit_mb", "tmpfs_bytes",
                                                                   "private_tmpfs")}
        if disk.get("private_tmpfs"):
            info.notes.append(f"the package's scratch was a private tmpfs of {disk['tmpfs_bytes'] / 2**20:.0f} MiB "
                              f"(its declared disk_mb {disk.get('declared_mb')}"
                              + (f", capped at {disk.get('cap_mb')}" if disk.get("limit_mb") != disk.get("declared_mb")
                                 else "") + ")")
        else:
            info.notes.append(f"no private tmpfs for the package's scratch ({disk.get('private_tmpfs_problem')}): the "
                              f"sandbox's shared scratch tmpfs bounds its disk, its declared disk_mb "
                              f"{disk.get('declared_mb')} is enforced by sampling its directory")
    if reply.get("seccomp"):
        info.notes.append(reply["seccomp"])
    elif reply.get("seccomp_listener"):
        info.notes.append("seccomp filter loaded; refused calls were reported to the worker")
    hash_seed = reply.get("hash_seed")
    if isinstance(hash_seed, dict) and hash_seed.get("status") == "skip":
        info.notes.append(f"hash-seed determinism not compared: {hash_seed.get('evidence', [''])[0]}")


def _sanitize(report: ValidationReport, inside: str) -> None:
    """Package-relative paths only: no sandbox-internal directory, scratch name or module prefix in the report."""
    inside = inside.rstrip("/")

    def clean(text: str | None) -> str | None:
        if not text:
            return text
        text = text.replace(inside + "/", "").replace(inside, "the package")
        text = SCRATCH_PATH.sub("<scratch>", text)
        return MODULE_PREFIX.sub("", text)

    for check in report.checks:
        check.evidence = [clean(e) for e in check.evidence]
        check.traceback = clean(check.traceback)
        check.remediation = clean(check.remediation)
    report.candidate_output = clean(report.candidate_output) or ""


def validate(path: Path | str, tiers: list[int] | None = None, sandbox: SandboxChoice | str = SandboxChoice.AUTO,
             episodes: int = DEFAULT_EPISODES) -> ValidationReport:
    """One-shot validation (starts and stops a worker: for many packages keep a `Validator`)."""
    with Validator(sandbox, episodes=episodes) as validator:
        return validator.validate(path, tiers)
