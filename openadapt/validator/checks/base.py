"""The check registry and the context checks share. Checks run in the judge (the sandbox's worker process), which
never imports the candidate's code: every call into the package is a request to the player, timed here."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from openadapt.validator.checks.remote import InvalidAction, Obs, RemoteEnv, RemotePolicy, reward_of
from openadapt.validator.report import CheckResult, Status

STEP_TIMEOUT_S = 2.0  # one reset/step taking longer than this is a hung environment
IMPORT_TIMEOUT_S = 15.0
GUARD_STEPS = 5  # steps tolerated past the declared budget before an episode counts as never-ending
OBSERVATION_LIMIT = 1024 * 1024  # bytes of JSON: an observation is a prompt's worth of data, not a dataset


class CheckFailed(Exception):
    """Raised by a check: the package does not meet the contract."""

    def __init__(self, *evidence: str, measured: dict[str, Any] | None = None, remediation: str | None = None,
                 traceback: str | None = None):
        super().__init__("; ".join(evidence))
        self.evidence = list(evidence)
        self.measured = measured or {}
        self.remediation = remediation
        self.traceback = traceback


class StepTimeout(Exception):
    """A call into the package overran its time limit (it returned late, or the player was killed for it)."""


class PackageError(Exception):
    """Package code raised inside the player: what it raised (`kind`: exception, memory, recursion, manifest) and
    the traceback cut to the package's own frames."""

    def __init__(self, reply: dict[str, Any]):
        super().__init__(str(reply.get("error") or "the package failed"))
        self.kind = str(reply.get("kind") or "exception")
        self.type = str(reply.get("type") or "")  # the exception's class name
        self.traceback = reply.get("traceback")


class PlayerGone(Exception):
    """The player ended (killed at a limit, crashed, or killed by something the package started)."""


class Channel(Protocol):
    """The judge's line to a player: one request, its reply or an exception, within `limit_s`."""

    def call(self, request: dict[str, Any], limit_s: float, label: str) -> tuple[dict[str, Any], float]: ...

    def peak_memory_mb(self) -> float: ...


@dataclass(frozen=True)
class Check:
    id: str
    level: str
    fn: Callable[[Context], dict[str, Any] | None] | None
    depends_on: tuple[str, ...]
    remediation: str
    applies: Callable[[Context], bool] | None = None
    where: str = "judge"  # "after": decided once the player has ended, from what the worker observed


REGISTRY: list[Check] = []


def check(check_id: str, *, depends_on: tuple[str, ...] = (), remediation: str = "",
          applies: Callable[[Context], bool] | None = None):
    """Register a check. It returns `measured` (or None) on success and raises CheckFailed otherwise. A check
    whose `applies(ctx)` is false is reported as skipped (not applicable) and does not block its dependents."""

    def register(fn):
        REGISTRY.append(Check(check_id, check_id.split(".")[0], fn, depends_on, remediation, applies))
        return fn

    return register


def after_check(check_id: str, remediation: str) -> None:
    """Register a check decided after the player ended, from what the worker saw (escape attempts, the twin)."""
    REGISTRY.append(Check(check_id, check_id.split(".")[0], None, (), remediation, where="after"))


def remediation_of(check_id: str) -> str:
    return next(c.remediation for c in REGISTRY if c.id == check_id)


@dataclass
class Episode:
    seed: int
    eci: int
    actions: list[dict[str, Any]] = field(default_factory=list)
    observations: list[Obs] = field(default_factory=list)  # observations[0] is the reset observation
    rewards: list[float] = field(default_factory=list)

    @property
    def final(self) -> Obs:
        return self.observations[-1]

    @property
    def total(self) -> float:
        return sum(self.rewards)

    @property
    def solved(self) -> bool:
        return bool(self.final.done and self.final.metadata.get("solved") is True)


class Context:
    """What checks share: the package's facts, the player channel, cached episodes, and the time every call took
    as the judge measured it."""

    def __init__(self, root: Path, tiers: list[int], episodes: int, *, channel: Channel | None = None,
                 timeout_s: float = 120.0, memory_mb: int = 1024):
        self.root = root
        self.requested_tiers = tiers
        self.episodes = episodes
        self.channel = channel
        self.memory_mb = memory_mb
        self.step_limit_s = STEP_TIMEOUT_S  # one reset() or step()
        # The import gets a larger bound than a step, but never most of the whole validation's.
        self.import_limit_s = min(IMPORT_TIMEOUT_S, max(2.0, 0.25 * timeout_s))
        self.manifest = None  # PackageManifest, set by static.manifest
        self.family = None  # the Family of a family package, set by static.family
        self.domain = None  # its parsed Domain, set by static.domain
        self.facts: dict[str, Any] | None = None  # what the player said of the loaded package (static.imports)
        self.step_seconds: list[float] = []
        self.reset_seconds: list[float] = []
        self.import_seconds: list[float] = []
        self.policy_seconds: list[float] = []
        self.violations: list[str] = []  # time or memory limits hit by package code, in any check
        self.limit_hits: list[str] = []  # every call that overran its time limit, however the package reacted
        self.memory_exhausted = False  # the package ran out of memory: the checks left are skipped
        self.player_gone: str | None = None  # why the player ended before the checks did
        self.server_socket: Any = None  # a listening socket the player serves the package on (runtime.server)
        self.twin_factory: Callable[[], Context] | None = None  # the same package in a second interpreter
        self.hash_seeds = ("?", "?")  # PYTHONHASHSEED of the player and of the twin
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

    @property
    def action_schema(self) -> dict[str, Any]:
        return self.facts["action_schema"]

    @property
    def has_heuristic(self) -> bool:
        return bool(self.facts and self.facts.get("heuristic"))

    def twin(self) -> Context:
        """A context on the twin player (another interpreter, another hash seed), the package loaded there."""
        if self.twin_factory is None:
            raise CheckFailed("the second interpreter (another PYTHONHASHSEED) is not running, so the episodes could "
                              "not be compared")
        return self.twin_factory()

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # ---- calls into the package --------------------------------------------------------------------------
    def call(self, op: str, *, label: str, bucket: list[float], limit_s: float | None = None,
             **fields: Any) -> dict[str, Any]:
        """One request to the player, timed here. A call that returns after its limit fails as one that never
        returned (the player is killed then): the measured time is the judge's, not the package's word."""
        if self.player_gone:
            raise PlayerGone(self.player_gone)
        limit_s = self.step_limit_s if limit_s is None else limit_s
        try:
            reply, elapsed = self.channel.call({"op": op, **fields}, limit_s, label)
        except StepTimeout as exc:
            self.limit_hits.append(str(exc))
            raise
        except PlayerGone as exc:
            self.player_gone = str(exc)
            raise
        bucket.append(elapsed)
        if elapsed > limit_s:
            self.limit_hits.append(f"{label} ran {elapsed:.1f} s, over its {limit_s:g} s limit")
            raise StepTimeout(f"{label} did not return within {limit_s:g} s (it returned after {elapsed:.1f} s)")
        if not reply.get("ok"):
            error = PackageError(reply)
            if error.kind == "refused":
                raise RuntimeError(f"the player refused {op}: {error}")  # a validator bug
            self.memory_exhausted = self.memory_exhausted or error.kind == "memory"
            raise error
        return reply

    def observation(self, reply: dict[str, Any], where: str) -> Obs:
        if "too_big" in reply:
            size, biggest = reply["too_big"], reply.get("biggest")
            field_note = f"; field {biggest[1]!r} holds {biggest[0]:,} bytes" if biggest else ""
            raise CheckFailed(f"{where}: the observation is {size:,} bytes of JSON (limit {OBSERVATION_LIMIT:,})"
                              f"{field_note}", measured={"observation_bytes": size, "limit": OBSERVATION_LIMIT},
                              remediation="keep observations prompt-sized: show a window or a summary of large "
                                          "data, never the whole of it")
        return Obs(reply["obs"], reply.get("type", ""), bool(reply.get("type_ok", True)))

    def make_env(self) -> RemoteEnv:
        reply = self.call("make", label="the environment's constructor", bucket=self.reset_seconds)
        return RemoteEnv(self, int(reply["env"]), reply.get("rubric") or [])

    def oracle(self) -> RemotePolicy:
        return RemotePolicy(self, "oracle")

    def heuristic(self) -> RemotePolicy:
        return RemotePolicy(self, "heuristic")

    # ---- episodes ------------------------------------------------------------------------------------------
    def act_and_step(self, env: RemoteEnv, policy: Any, obs: Obs) -> tuple[Obs, dict[str, Any]]:
        """One step of `policy`. A payload the package's action class refuses (a judge agent's guess at a
        pattern, say) is sent again with the refused fields left at their defaults; {} is always an action."""
        payload = dict(policy.act(obs))
        for _ in range(len(payload) + 1):
            try:
                return env.step(payload)
            except InvalidAction as exc:
                if isinstance(policy, RemotePolicy):
                    raise CheckFailed(f"the package's {policy.name} acted with an action its own action class "
                                      f"refuses: {exc}") from None
                dropped = [f for f in exc.fields if f in payload]
                if not dropped:
                    break
                for name in dropped:
                    payload.pop(name)
        return env.step({})

    def run_episode(self, policy: Any, seed: int, eci: int, env: RemoteEnv | None = None,
                    max_steps: int | None = None, policy_seed: int | None = None) -> Episode:
        """Play one episode; raises CheckFailed when it does not end within the budget (plus a guard)."""
        env = env if env is not None else self.make_env()
        episode = Episode(seed, eci)
        obs = env.reset(seed=seed, eci=eci)
        episode.observations.append(obs)
        policy.begin(env, obs, seed if policy_seed is None else policy_seed)
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
            obs, action = self.act_and_step(env, policy, obs)
            episode.actions.append(action)
            episode.observations.append(obs)
            episode.rewards.append(reward_of(obs))
        return episode

    def episodes_for(self, policy_name: str, eci: int, count: int, make_policy: Callable[[], Any]) -> list[Episode]:
        key = (policy_name, eci, count)
        return self.cached(key, lambda: [self.run_episode(make_policy(), 7000 + i, eci) for i in range(count)])

    def peak_memory_grown_mb(self) -> float:
        return self.channel.peak_memory_mb() - float(self._cache.get("rss_at_start", 0.0)) if self.channel else 0.0


def describe_error(exc: PackageError, ctx: Context) -> str:
    """What the package raised, with the cause spelled out where Python's message hides it."""
    text = str(exc)
    grown = ctx.peak_memory_grown_mb()
    if exc.kind == "memory":
        return (f"MemoryError: the package exhausted its memory: its allowance is {ctx.memory_mb} MiB of address "
                f"space above the validator's own, and its peak memory had grown by {grown:.0f} MB "
                f"(declared memory_mb {ctx.declared_memory_mb()}); {text.removeprefix('MemoryError: ')[:120]}")
    if exc.kind == "recursion":
        return f"RecursionError: unbounded recursion in the package ({text[:200]})"
    if "can't start new thread" in text:
        return (f"{text} (the process is at a resource limit: memory grew by {grown:.0f} MB against an allowance "
                f"of {ctx.memory_mb} MiB, or the package started too many processes or threads)")
    if text.startswith("BlockingIOError") and "Errno 11" in text:
        return f"{text} (the sandbox's process limit was reached: the package started too many processes)"
    return text


def trace_text(episode: Episode) -> str:
    return json.dumps([o.data for o in episode.observations], sort_keys=True, default=str)


def finite(value: float) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def run_checks(ctx: Context, emit: Callable[[CheckResult], None], announce: Callable[[str], None]) -> None:
    """Run every registered check in order; a check whose dependency did not pass is skipped, not failed."""
    outcome: dict[str, Status] = {}
    for chk in REGISTRY:
        if chk.where != "judge":
            continue
        blocked = [d for d in chk.depends_on if outcome.get(d) != Status.PASS]
        stopped = ctx.limit_hits or ctx.memory_exhausted or ctx.player_gone
        if blocked:
            result = CheckResult(check_id=chk.id, level=chk.level, status=Status.SKIP,
                                 evidence=[f"skipped: depends on {', '.join(blocked)}, which did not pass"])
        elif stopped and chk.id != "runtime.resource_bounds":
            what = ("overran its time limit" if ctx.limit_hits else "exhausted the memory allowance"
                    if ctx.memory_exhausted else f"ended the package's process ({ctx.player_gone})")
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
        cause = exc.__cause__
        result.traceback = exc.traceback or (cause.traceback if isinstance(cause, PackageError) else None)
    except (StepTimeout, PlayerGone) as exc:
        result.status = Status.FAIL
        result.evidence = [str(exc)]
        result.remediation = "keep every reset/step bounded in time and memory (see runtime.resource_bounds)"
    except PackageError as exc:  # package code raised: the package's bug, reported with its own frames
        result.status = Status.FAIL
        result.evidence = [describe_error(exc, ctx)]
        if exc.kind in ("memory", "recursion"):
            ctx.violations.append(f"{chk.id}: {result.evidence[0]}")
            result.remediation = "keep every reset/step bounded in time and memory (see runtime.resource_bounds)"
        else:
            result.remediation = chk.remediation
        result.traceback = exc.traceback
    result.duration_s = round(time.perf_counter() - started, 4)
    return result
