"""The check registry and the context checks share (runs inside the sandbox, in a forked child)."""

from __future__ import annotations

import json
import math
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openadapt.kit.policy import policy_rng
from openadapt.validator.guard import CallGuard
from openadapt.validator.report import CheckResult, Status

STEP_TIMEOUT_S = 2.0  # one reset/step taking longer than this is a hung environment
IMPORT_TIMEOUT_S = 15.0
GUARD_STEPS = 5  # steps tolerated past the declared budget before an episode counts as never-ending
HANG_LIMIT = 1  # after this many calls over their time limit, the checks left that call package code are skipped


class CheckFailed(Exception):
    """Raised by a check: the package does not meet the contract."""

    def __init__(self, *evidence: str, measured: dict[str, Any] | None = None, remediation: str | None = None):
        super().__init__("; ".join(evidence))
        self.evidence = list(evidence)
        self.measured = measured or {}
        self.remediation = remediation


class StepTimeout(Exception):
    pass


@dataclass(frozen=True)
class Check:
    id: str
    level: str
    fn: Callable[[Context], dict[str, Any] | None] | None
    depends_on: tuple[str, ...]
    remediation: str
    applies: Callable[[Context], bool] | None = None
    where: str = "candidate"  # "worker": decided outside the candidate from what the worker observed


REGISTRY: list[Check] = []


def check(check_id: str, *, depends_on: tuple[str, ...] = (), remediation: str = "",
          applies: Callable[[Context], bool] | None = None):
    """Register a check. It returns `measured` (or None) on success and raises CheckFailed otherwise. A check
    whose `applies(ctx)` is false is reported as skipped (not applicable) and does not block its dependents."""

    def register(fn):
        REGISTRY.append(Check(check_id, check_id.split(".")[0], fn, depends_on, remediation, applies))
        return fn

    return register


def worker_check(check_id: str, remediation: str) -> None:
    """Register a check the worker decides (from what it saw outside the candidate): listed with the others,
    never run inside the candidate, so package code cannot forge its result."""
    REGISTRY.append(Check(check_id, check_id.split(".")[0], None, (), remediation, where="worker"))


@dataclass
class Episode:
    seed: int
    eci: int
    actions: list[Any] = field(default_factory=list)
    observations: list[Any] = field(default_factory=list)  # observations[0] is the reset observation
    rewards: list[float] = field(default_factory=list)

    @property
    def final(self) -> Any:
        return self.observations[-1]

    @property
    def total(self) -> float:
        return sum(self.rewards)

    @property
    def solved(self) -> bool:
        return bool(self.final.done and self.final.metadata.get("solved") is True)

    def trace(self) -> str:
        return json.dumps([o.model_dump(mode="json") for o in self.observations], sort_keys=True, default=str)


class Context:
    """What checks share: the package, its loaded classes, cached episodes, and timing measurements."""

    def __init__(self, root: Path, tiers: list[int], episodes: int, *, guard: CallGuard | None = None,
                 timeout_s: float = 120.0, memory_mb: int = 1024):
        self.root = root
        self.requested_tiers = tiers
        self.episodes = episodes
        self.guard = guard if guard is not None else CallGuard()
        self.memory_mb = memory_mb
        self.step_limit_s = STEP_TIMEOUT_S  # one reset() or step()
        # The import gets a larger bound than a step, but never most of the whole validation's.
        self.import_limit_s = min(IMPORT_TIMEOUT_S, max(2.0, 0.25 * timeout_s))
        self.manifest = None  # PackageManifest, set by static.manifest
        self.pkg = None  # LoadedPackage, set by static.imports
        self.family = None  # the Family of a family package, set by static.family
        self.domain = None  # its parsed Domain, set by static.domain
        self.step_seconds: list[float] = []
        self.reset_seconds: list[float] = []
        self.import_seconds: list[float] = []
        self.violations: list[str] = []  # time or memory limits hit by package code, in any check
        self.limit_hits: list[str] = []  # every call that overran its time limit, however the package reacted
        self.memory_exhausted = False  # a MemoryError reached a check: the checks left are skipped
        self._call: list | None = None  # [what, limit, interrupted] of the call in progress
        self._alarm_handler = self._on_alarm  # one bound method, so that "is it still ours" is an identity test
        self._cache: dict[Any, Any] = {}

    # ---- package facts ---------------------------------------------------------------------------------
    @property
    def section(self):
        return self.manifest.openadapt

    @property
    def tiers(self) -> list[int]:
        supported = self.section.eci_tiers
        return [t for t in self.requested_tiers if t in supported] or supported

    @property
    def reward_range(self) -> tuple[float, float]:
        return self.section.reward_range

    @property
    def validation_block(self) -> dict[str, Any]:
        return self.manifest.raw.get("validation") or {}

    def declared_memory_mb(self) -> int:
        return int((self.validation_block.get("resources") or {}).get("memory_mb", 512)) if self.manifest else 512

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # ---- running episodes ------------------------------------------------------------------------------
    def timed(self, fn: Callable[..., Any], *args: Any, bucket: list[float], limit_s: float | None = None,
              label: str | None = None, **kwargs: Any) -> Any:
        """Call into package code under a time limit it cannot swallow; record the duration.

        Three layers: SIGALRM raises StepTimeout inside the call; a call that returns late anyway (the package
        caught the exception, or replaced the handler) still fails here, from the measured duration; a call that
        never returns is killed by the worker, outside this process, from the deadline in the shared guard page.
        The handler is installed once and reinstalled only when package code replaced it (a step costs a few
        microseconds of bookkeeping, not two signal() calls).
        """
        name = label or f"{getattr(fn, '__name__', 'call')}()"
        limit_s = self.step_limit_s if limit_s is None else limit_s
        if signal.getsignal(signal.SIGALRM) is not self._alarm_handler:
            signal.signal(signal.SIGALRM, self._alarm_handler)
        outer_call, self._call = self._call, [name, limit_s, False]
        outer = self.guard.enter(name, limit_s)
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        started = time.perf_counter()
        try:
            result = fn(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            elapsed = time.perf_counter() - started
            self.guard.leave(outer)
            fired = self._call[2]
            self._call = outer_call
            bucket.append(elapsed)
            if fired or elapsed > limit_s:
                self.limit_hits.append(f"{name} ran {elapsed:.1f} s, over its {limit_s:g} s limit")
        if fired or elapsed > limit_s:  # it returned, but only after the limit: the package swallowed the interrupt
            raise StepTimeout(f"{name} did not return within {limit_s:g} s (it returned after {elapsed:.1f} s: "
                              "the package caught the interrupt)")
        return result

    def _on_alarm(self, signum, frame) -> None:
        call = self._call
        if call is None:  # no call in progress: a stray alarm
            return
        call[2] = True
        raise StepTimeout(f"{call[0]} did not return within {call[1]:g} s")

    def run_episode(self, policy: Any, seed: int, eci: int, env: Any = None, max_steps: int | None = None,
                    policy_seed: int | None = None) -> Episode:
        """Play one episode; raises CheckFailed when it does not end within the budget (plus a guard)."""
        env = env if env is not None else self.pkg.make_env()
        episode = Episode(seed, eci)
        obs = self.timed(env.reset, seed=seed, eci=eci, bucket=self.reset_seconds)
        episode.observations.append(obs)
        policy.begin(env, obs, policy_rng(seed if policy_seed is None else policy_seed))
        budget = self.section.step_budget[eci]
        limit = max_steps if max_steps is not None else budget + GUARD_STEPS
        while not obs.done:
            if len(episode.actions) >= limit:
                if max_steps is not None:
                    return episode
                raise CheckFailed(
                    f"ECI {eci}, seed {seed}: no done=True after {limit} steps (declared budget {budget})",
                    measured={"steps": limit, "budget": budget},
                    remediation="end the episode (done=True) when the step budget is spent; let the kit's "
                                "OpenAdaptEnvironment.step handle the budget instead of overriding it",
                )
            action = policy.act(obs)
            obs = self.timed(env.step, action, bucket=self.step_seconds)
            episode.actions.append(action)
            episode.observations.append(obs)
            episode.rewards.append(float(obs.reward) if obs.reward is not None else math.nan)
        return episode

    def episodes_for(self, policy_name: str, eci: int, count: int, make_policy: Callable[[], Any]) -> list[Episode]:
        key = (policy_name, eci, count)
        return self.cached(key, lambda: [self.run_episode(make_policy(), 7000 + i, eci) for i in range(count)])


def package_traceback(exc: BaseException, root: Path, limit_lines: int = 12) -> str | None:
    """The traceback frames that are in the package's own files, plus the exception line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _inside(f.filename, root)]
    if not frames:
        return None
    lines = []
    for frame in frames[-4:]:
        rel = Path(frame.filename).resolve().relative_to(root.resolve())
        lines.append(f'  File "{rel}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    lines.append(f"{type(exc).__name__}: {str(exc)[:300]}")
    return "\n".join(lines[-limit_lines:])


def _inside(filename: str, root: Path) -> bool:
    try:
        Path(filename).resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def peak_rss_mb() -> float:
    return _status_mb("VmHWM:")


def _status_mb(field: str) -> float:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def describe_exception(exc: BaseException, ctx: Context) -> str:
    """The exception in one line, with the cause spelled out where Python's message hides it."""
    text = f"{type(exc).__name__}: {str(exc)[:300]}"
    grown = peak_rss_mb() - ctx.cached("rss_at_start", lambda: 0.0)
    if isinstance(exc, MemoryError):
        return (f"MemoryError: the package exhausted its memory: its allowance is {ctx.memory_mb} MiB of address "
                f"space above the validator's own, and its peak memory had grown by {grown:.0f} MB "
                f"(declared memory_mb {ctx.declared_memory_mb()}); {str(exc)[:120] or 'allocation failed'}")
    if isinstance(exc, RecursionError):
        return f"RecursionError: unbounded recursion in the package ({str(exc)[:200]})"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return (f"{text} (the process is at a resource limit: memory grew by {grown:.0f} MB against an allowance "
                f"of {ctx.memory_mb} MiB, or the package started too many processes or threads)")
    if isinstance(exc, BlockingIOError) and exc.errno == 11:
        return f"{text} (the sandbox's process limit was reached: the package started too many processes)"
    return text


def run_checks(ctx: Context, emit: Callable[[CheckResult], None], announce: Callable[[str], None]) -> None:
    """Run every registered check in order; a check whose dependency did not pass is skipped, not failed."""
    outcome: dict[str, Status] = {}
    for chk in REGISTRY:
        if chk.where != "candidate":
            continue
        blocked = [d for d in chk.depends_on if outcome.get(d) != Status.PASS]
        if blocked:
            result = CheckResult(check_id=chk.id, level=chk.level, status=Status.SKIP,
                                 evidence=[f"skipped: depends on {', '.join(blocked)}, which did not pass"])
        elif (len(ctx.limit_hits) >= HANG_LIMIT or ctx.memory_exhausted) and chk.id != "runtime.resource_bounds":
            what = "overran its time limit" if ctx.limit_hits else "exhausted the memory allowance"
            result = CheckResult(check_id=chk.id, level=chk.level, status=Status.SKIP,
                                 evidence=[f"not run: a call into the package already {what} (see "
                                           "runtime.resource_bounds)"])
        elif chk.applies is not None and not chk.applies(ctx):
            emit(CheckResult(check_id=chk.id, level=chk.level, status=Status.SKIP,
                             evidence=["not applicable to this kind of package"]))
            outcome[chk.id] = Status.PASS  # nothing to hold its dependents back
            continue
        else:
            announce(chk.id)
            result = _run_one(chk, ctx)
        outcome[chk.id] = result.status
        emit(result)


def _run_one(chk: Check, ctx: Context) -> CheckResult:
    started = time.perf_counter()
    result = CheckResult(check_id=chk.id, level=chk.level, status=Status.PASS)
    try:
        result.measured = chk.fn(ctx) or {}
        result.evidence = result.measured.pop("_evidence", [])
    except CheckFailed as exc:
        result.status = Status.FAIL
        result.evidence = exc.evidence
        result.measured = exc.measured
        result.remediation = exc.remediation or chk.remediation
        if exc.__cause__ is not None:
            result.traceback = package_traceback(exc.__cause__, ctx.root)
    except (MemoryError, RecursionError, StepTimeout) as exc:
        result.status = Status.FAIL
        result.evidence = [describe_exception(exc, ctx)]
        if not isinstance(exc, StepTimeout):  # time-limit hits are recorded by Context.timed itself
            ctx.violations.append(f"{chk.id}: {result.evidence[0]}")
        ctx.memory_exhausted = ctx.memory_exhausted or isinstance(exc, MemoryError)
        result.remediation = "keep every reset/step bounded in time and memory (see runtime.resource_bounds)"
        result.traceback = package_traceback(exc, ctx.root)
    except Exception as exc:  # package code raised: the package's bug, reported with its own frames
        result.status = Status.FAIL
        result.evidence = [describe_exception(exc, ctx)]
        result.remediation = chk.remediation
        result.traceback = package_traceback(exc, ctx.root)
    result.duration_s = round(time.perf_counter() - started, 4)
    return result
