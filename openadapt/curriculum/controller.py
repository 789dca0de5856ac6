"""The curriculum controller: trains a solver on an environment and raises its ECI tier whenever the windowed
solve rate at the current tier reaches the threshold, with the designer producing the harder tier and the
validator certifying it (docs/curriculum.md states the rule; `rule.py` implements it).

The controller rides on one GRPO run (`openadapt.training.Solver`): it chooses each episode's tier (its
`TierPlan`), hears every finished episode (`on_episode`), decides after every optimizer step (a
`TrainerCallback`), and writes its state into every checkpoint the solver saves, so a resume restarts weights,
optimizer and curriculum from the same step.
"""

from __future__ import annotations

import contextlib
import errno
import json
import random
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from transformers import TrainerCallback

from openadapt.curriculum.config import (  # noqa: F401 - CurriculumConfig, stored_config: the controller's API
    CONFIG_FILE,
    ENVS_DIR,
    EVENTS_FILE,
    TIERS_FILE,
    TRAIN_DIR,
    UNLIMITED_STEPS,
    CurriculumConfig,
    read_config,
    stored_config,
)
from openadapt.curriculum.escalation import EscalationRequest, Escalator, Recertifier
from openadapt.curriculum.rule import Decision, TierWindows, decide, episode_tier
from openadapt.curriculum.sources import DesignTask, check_source, first_version
from openadapt.curriculum.state import (
    CHECKPOINT_STATE,
    STATE_FILE,
    CurriculumError,
    CurriculumState,
    EnvVersion,
    EventLog,
    TierCheck,
    TierEvaluation,
    now,
)
from openadapt.envpkg.evaluation import CHECK_SEED_START
from openadapt.envpkg.loader import resolve
from openadapt.runfiles import read_jsonl, write_atomic
from openadapt.runlock import DirectoryLock
from openadapt.training.episodes import EpisodeOutcome
from openadapt.training.rundir import CHECKPOINT
from openadapt.validator import Validator, Verdict

Listener = Callable[[dict[str, Any]], None]  # receives every event, and a "progress" pseudo-event per step


class CurriculumSummary(BaseModel):
    run_dir: Path
    status: str
    reason: str
    tier: int
    global_step: int
    episodes: int
    train_seconds: float
    escalations: list[dict[str, Any]]
    evaluations: list[TierEvaluation]


class Curriculum:
    """Drives one run directory. Use `run()`; everything else is called by the solver's hooks."""

    def __init__(self, config: CurriculumConfig, *, resume: bool = False, escalator: Escalator | None = None,
                 design: DesignTask | None = None, listener: Listener | None = None):
        """`escalator` makes the harder tier (default: re-certify the package's own tier); `design` turns a
        task-prompt source into a first package (both come from the designer, which the CLI wires in)."""
        self.config = config
        self.rule = config.rule
        self.resume = resume
        self.escalator = escalator or Recertifier()
        self.design = design
        self.listener = listener or (lambda event: None)
        self.root = config.output
        self.events = EventLog(self.root / EVENTS_FILE)
        self.lock = DirectoryLock(self.root, "curriculum run")
        self.state: CurriculumState
        self.windows: TierWindows
        self.solver: Any = None
        self.validator: Validator | None = None
        self._clock = 0.0
        self._last_signal: dict[int, float] = {}

    # ---- the run ----------------------------------------------------------------------------------------
    def run(self) -> CurriculumSummary:
        from openadapt.training.solver import Solver

        if not self.resume:
            check_source(self.config.source)  # bad input fails before anything is written
        self.lock.acquire()
        try:
            self.validator = Validator(self.config.sandbox)
            resuming = self._open()
            version = self.state.current_version
            train = self.config.train_config(version.ref, self.state.tier, resume=resuming)
            self.solver = Solver.create(train, tier_plan=self, callbacks=[_Hooks(self)], on_episode=self.on_episode)
            self._clock = time.monotonic()
            try:
                trained = self.solver.train(resume=resuming)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                self._finish_quietly("failed", "the disk is full")
                raise CurriculumError(f"the disk is full ({exc.filename or 'writing the run'}): the run stopped; "
                                      f"its last complete checkpoint and state are intact in {self.root}; free "
                                      f"space and continue with --resume {self.root}") from None
            except BaseException as exc:
                self._finish_quietly("failed", f"{type(exc).__name__}: {exc}; continue with --resume {self.root}")
                raise
            if trained.stopped == "interrupted":
                self._finish("interrupted", f"stopped by Ctrl-C; continue with --resume {self.root}")
            elif self.state.status == "running":
                self._finish("max_steps", f"reached --max-steps {self.config.max_steps}")
            else:
                self._finish(self.state.status, self.state.reason)
            return self.summary()
        finally:
            if self.solver is not None:
                self.solver.close()
            if self.validator is not None:
                self.validator.close()
            self.lock.release()

    def summary(self) -> CurriculumSummary:
        escalations = [e for e in self.events.read() if e["event"] == "escalated"]
        return CurriculumSummary(run_dir=self.root, status=self.state.status, reason=self.state.reason,
                                 tier=self.state.tier, global_step=self.state.global_step,
                                 episodes=self.state.episodes, train_seconds=round(self.state.train_seconds, 1),
                                 escalations=escalations, evaluations=self.state.evaluations)

    def _open(self) -> bool:
        """Set up a new run or reload a resumed one; True when the solver resumes from a checkpoint."""
        stored = self.root / CONFIG_FILE
        if self.resume:
            if not stored.exists():
                raise CurriculumError(f"{self.root} is not a curriculum run directory (no {CONFIG_FILE})")
            previous = read_config(stored)
            if previous.source != self.config.source:
                raise CurriculumError(f"{self.root} holds a curriculum on {previous.source!r}, not "
                                      f"{self.config.source!r}: resume it with its own source (or pass only "
                                      "--resume RUN_DIR)")
            checkpoint = self._latest_complete_checkpoint()
            if checkpoint is not None:
                self.state = CurriculumState.load(checkpoint / CHECKPOINT_STATE)
                lost = _last_step(self.root / TIERS_FILE) - self.state.global_step
                self._truncate_tiers(self.state.global_step)
                self.state.status, self.state.reason = "running", ""
                self.windows = TierWindows(self.rule.window, self.state.windows)
                self._align_solver_config(self.state.current_version.ref)
                self._emit("resumed", from_checkpoint=checkpoint.name, redone_steps=max(lost, 0))
                return True
            self.state = CurriculumState.load(self.root / STATE_FILE)  # no checkpoint yet: start training afresh
            self._clear_training()
            self.windows = TierWindows(self.rule.window)
            self._emit("resumed", from_checkpoint=None, redone_steps=0)
            return False
        if stored.exists() or (self.root / TRAIN_DIR).exists():
            raise CurriculumError(f"{self.root} already holds a curriculum run; continue it with --resume "
                                  f"{self.root}, or choose another --output")
        # curriculum.json is written last: a start that fails (bad package, designer failure) can be retried
        # in the same directory, and its evidence (validation report, failed designs) stays for inspection.
        self.state = CurriculumState(run_id=secrets.token_hex(6), source=self.config.source,
                                     tier=self.config.start_tier)
        self.windows = TierWindows(self.rule.window)
        self._emit("started", source=self.config.source, tier=self.state.tier, rule=self.rule.model_dump())
        version = first_version(self.config.source, self.root / ENVS_DIR, self.state.tier, self.validator,
                                self.design, self._emit)
        self.state.versions.append(version)
        self.state.save(self.root)
        write_atomic(stored, self.config.model_dump_json(indent=2) + "\n")
        return False

    # ---- solver hooks -----------------------------------------------------------------------------------
    def next_tier(self, rng: random.Random) -> int:
        """TierPlan: the current tier, or with the replay share an earlier one (forgetting shows up)."""
        return episode_tier(self.rule, self.state.tier, rng)

    @property
    def turn_tier(self) -> int:
        """TierPlan: replayed tiers play with the current tier's turn budget."""
        return self.state.tier

    def on_episode(self, outcome: EpisodeOutcome) -> None:
        if not outcome.explored:  # the rule measures the policy: an opening it did not choose is not its solve
            self.windows.record(outcome.eci, outcome.solved)
        self.state.episodes += 1
        if outcome.solve_rate_signal is not None:
            self._last_signal[outcome.eci] = outcome.solve_rate_signal

    def after_step(self, step: int, control: Any) -> None:
        self.state.global_step = step
        self._tick()
        self._log_tiers(step)
        decision = decide(self.rule, self.windows, self.state.tier, self.state.escalated_from)
        if decision in (Decision.ESCALATE, Decision.MASTERED) and not self._confirmed(step):
            decision = Decision.HOLD
        if decision == Decision.ESCALATE:
            self._escalate(control)
        elif decision == Decision.MASTERED:
            self._evaluate(self.state.tier, "escalation")
            self._stop(control, "mastered", f"ECI {self.state.tier} mastered ({self._mastery()})")
        elif decision == Decision.COLLAPSE:
            self._collapse()
        if (self.config.hours is not None and self.state.status == "running"
                and self.state.train_seconds >= self.config.hours * 3600):
            self._stop(control, "time_limit", f"--hours {self.config.hours} of training used")

    def on_checkpoint(self, checkpoint: Path) -> None:
        """Called after the solver wrote checkpoint-N: the state joins it, then becomes the run's state."""
        self._tick()
        self.state.windows = self.windows.to_dict()
        write_atomic(checkpoint / CHECKPOINT_STATE, self.state.to_json())
        self.state.save(self.root)

    # ---- decisions --------------------------------------------------------------------------------------
    def _confirmed(self, step: int) -> bool:
        """With checks (`rule.check_episodes`), a windowed pass is confirmed by the greedy policy on fresh
        validation seeds reaching the threshold; at most one check per `check_every` steps at a tier."""
        episodes, tier = self.rule.check_episodes, self.state.tier
        if not episodes:
            return True
        last = next((c.step for c in reversed(self.state.checks) if c.eci == tier), None)
        if last is not None and step - last < self.rule.check_every:
            return False
        seed_start = CHECK_SEED_START + len(self.state.checks) * episodes  # fresh seeds every time
        report = self.solver.evaluate([tier], episodes, seed_start=seed_start).tier(tier)
        check = TierCheck(eci=tier, step=step, episodes=report.episodes, seed_start=seed_start,
                          solve_rate=report.solve_rate, solve_rate_ci95=report.solve_rate_ci95,
                          windowed_solve_rate=round(self.windows.rate(tier) or 0.0, 4),
                          passed=report.solve_rate >= self.rule.threshold)
        self.state.checks.append(check)
        self._emit("check", **check.model_dump(exclude={"step"}))
        return check.passed

    def _mastery(self) -> str:
        """Why the top tier counts as mastered, for the stop reason."""
        tier = self.state.tier
        text = f"windowed solve rate {self.windows.rate(tier):.2f}"
        if self.rule.check_episodes and self.state.checks:
            check = self.state.checks[-1]
            return f"{text}, greedy check {check.solve_rate:.2f} on {check.episodes} seeds >= {self.rule.threshold}"
        return f"{text} >= {self.rule.threshold}"

    def _escalate(self, control: Any) -> None:
        current, target = self.state.tier, self.state.tier + 1
        rate = self.windows.rate(current) or 0.0
        self._emit("escalation_triggered", tier=current, target=target, windowed_solve_rate=round(rate, 4),
                   window=self.windows.count(current))
        self._evaluate(current, "escalation")
        version = self._harder_version(current, target, rate)
        if version is None:
            self._stop(control, "blocked", f"the escalation to ECI {target} was rejected "
                       f"{self.config.escalation_attempts} time(s); reports under {ENVS_DIR}/rejected/")
            return
        if version.ref != self.state.current_version.ref:
            self.solver.use_package(version.ref)
        self.state.versions.append(version)
        self.state.tier, self.state.escalated_from = target, current
        self.windows.restart(current)  # the tier left behind is measured afresh, by replay only
        self.solver.anchor_reference()
        self._emit("escalated", tier=current, target=target, version=version.version, package=version.ref)
        control.should_save = True  # make the escalation durable at once

    def _harder_version(self, current: int, target: int, rate: float) -> EnvVersion | None:
        previous = self.state.current_version
        number = previous.version + 1
        dest = self.root / ENVS_DIR / f"v{number}-eci{target}"
        if _certified(dest):  # a crash after certifying, before the checkpoint: reuse, don't redo
            self._emit("validation", target=target, verdict="pass", reused=str(dest.relative_to(self.root)))
            return self._version(number, target, dest, previous)
        shutil.rmtree(dest, ignore_errors=True)
        package = resolve(previous.ref).root
        for attempt in range(1, self.config.escalation_attempts + 1):
            request = EscalationRequest(package=package, task=resolve(previous.ref).manifest.openadapt.task,
                                        current=current, target=target, solve_rate=rate, dest=dest,
                                        rejected_root=self.root / ENVS_DIR / "rejected",
                                        max_attempts=self.config.designer_attempts)
            result = self.escalator.escalate(request, self.validator)
            if result.ok:
                self._emit("validation", target=target, verdict="pass", round=attempt, summary=result.validation)
                return self._version(number, target, dest, previous)
            self.state.rejected_escalations += 1
            self._emit("escalation_rejected", target=target, round=attempt, reason=result.reason,
                       failing_checks=result.failing_checks, report=str(result.rejected_dir.relative_to(self.root)))
        return None

    def _version(self, number: int, target: int, dest: Path, previous: EnvVersion) -> EnvVersion:
        validation = json.loads((dest / "validation.json").read_text())
        digest = validation.get("package_digest") or ""
        # A certified copy of a trusted seed is the seed itself (same files): keep training it in-process.
        ref = previous.ref if previous.ref.startswith("seed:") and digest == previous.digest else \
            str((dest / "package").resolve())
        return EnvVersion(version=number, eci=target, ref=ref, folder=str(dest.relative_to(self.root)),
                          digest=digest, step=self.state.global_step, created_at=now())

    def _collapse(self) -> None:
        earlier = self.state.escalated_from
        rate = self.windows.rate(earlier) or 0.0
        self._emit("collapse", tier=earlier, current=self.state.tier, replay_solve_rate=round(rate, 4),
                   step_back=self.rule.step_back)
        self._evaluate(earlier, "collapse")
        if self.rule.step_back:
            self.state.tier = earlier
            self.windows.restart(earlier)
        self.state.escalated_from = None  # reported once per escalation

    def _evaluate(self, tier: int, when: str) -> None:
        if self.config.eval_episodes == 0:
            return
        report = self.solver.evaluate([tier], self.config.eval_episodes).tier(tier)
        evaluation = TierEvaluation(eci=tier, step=self.state.global_step, episodes=report.episodes,
                                    solve_rate=report.solve_rate, solve_rate_ci95=report.solve_rate_ci95,
                                    mean_return=report.mean_return, when=when)
        self.state.evaluations.append(evaluation)
        self._emit("heldout_eval", **evaluation.model_dump(exclude={"step"}))

    def _stop(self, control: Any, status: str, reason: str) -> None:
        self.state.status, self.state.reason = status, reason
        control.should_training_stop = True
        control.should_save = True

    def _finish(self, status: str, reason: str) -> None:
        self._tick()
        self.state.status, self.state.reason = status, reason
        if status in ("max_steps", "time_limit", "mastered"):
            self._final_evaluation()
        self.state.windows = self.windows.to_dict()
        self._sync_last_checkpoint()
        self.state.save(self.root)
        self._emit("stopped", status=status, reason=reason, tier=self.state.tier)

    def _final_evaluation(self) -> None:
        """The held-out rate the run ends with; the same weights were evaluated at this step already when mastery
        ended the run (the same seeds: that result is the final one too, not evaluated twice)."""
        tier, step = self.state.tier, self.state.global_step
        done = [e for e in self.state.evaluations if e.eci == tier and e.step == step]
        if any(e.when == "final" for e in done) or self.config.eval_episodes == 0:
            return
        if not done:
            self._evaluate(tier, "final")
            return
        final = done[-1].model_copy(update={"when": "final"})
        self.state.evaluations.append(final)
        self._emit("heldout_eval", **final.model_dump(exclude={"step"}))

    def _finish_quietly(self, status: str, reason: str) -> None:
        """Record a failed end if the disk lets us; the original error is what the user must see."""
        with contextlib.suppress(Exception):  # e.g. ENOSPC again: state.json stays at the last good checkpoint
            self._finish(status, reason)

    # ---- bookkeeping ------------------------------------------------------------------------------------
    def _tick(self) -> None:
        moment = time.monotonic()
        if self._clock:
            self.state.train_seconds += moment - self._clock
        self._clock = moment

    def _emit(self, kind: str, **fields: Any) -> None:
        self.listener(self.events.append(kind, self.state.global_step, **fields))

    def _log_tiers(self, step: int) -> None:
        row = {"step": step, "tier": self.state.tier, "episodes": self.state.episodes,
               "train_seconds": round(self.state.train_seconds, 2),
               "windowed": {t: round(r, 4) for t in range(1, 6) if (r := self.windows.rate(t)) is not None},
               "counts": {t: n for t in range(1, 6) if (n := self.windows.count(t))},
               "solve_rate_signal": dict(self._last_signal)}
        with (self.root / TIERS_FILE).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
        self.listener({"event": "progress", **row})

    def _truncate_tiers(self, step: int) -> None:
        path = self.root / TIERS_FILE
        if path.exists():
            rows = [r for r in read_jsonl(path) if r["step"] <= step]
            write_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))

    def _checkpoints(self) -> list[Path]:
        folder = self.root / TRAIN_DIR / "checkpoints"
        found = [(int(m.group(1)), p) for p in folder.glob("checkpoint-*") if (m := CHECKPOINT.match(p.name))]
        return [p for _, p in sorted(found)]

    def _latest_complete_checkpoint(self) -> Path | None:
        """The newest checkpoint holding the curriculum state; newer ones (cut off mid-save) are removed, so the
        solver resumes from the same step."""
        for checkpoint in reversed(self._checkpoints()):
            if (checkpoint / CHECKPOINT_STATE).exists() and (checkpoint / "trainer_state.json").exists():
                return checkpoint
            shutil.rmtree(checkpoint)
        return None

    def _sync_last_checkpoint(self) -> None:
        """A checkpoint the solver saved on its own (on Ctrl-C) at the current step gets the state too."""
        checkpoints = self._checkpoints()
        if checkpoints and not (checkpoints[-1] / CHECKPOINT_STATE).exists() and \
                checkpoints[-1].name == f"checkpoint-{self.state.global_step}":
            write_atomic(checkpoints[-1] / CHECKPOINT_STATE, self.state.to_json())

    def _align_solver_config(self, ref: str) -> None:
        """The solver's run records the package it started on; after escalations the curriculum trains on a
        later version, and the checkpoint's curriculum state says which one."""
        path = self.root / TRAIN_DIR / "config.json"
        if path.exists():
            data = json.loads(path.read_text())
            if data.get("package") != ref:
                data["package"] = ref
                write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def _clear_training(self) -> None:
        shutil.rmtree(self.root / TRAIN_DIR, ignore_errors=True)
        (self.root / TIERS_FILE).unlink(missing_ok=True)


class _Hooks(TrainerCallback):
    def __init__(self, curriculum: Curriculum):
        self.curriculum = curriculum

    def on_step_end(self, args, state, control, **kwargs):
        self.curriculum.after_step(state.global_step, control)
        return control

    def on_save(self, args, state, control, **kwargs):
        self.curriculum.on_checkpoint(Path(args.output_dir) / f"checkpoint-{state.global_step}")
        return control


def _certified(dest: Path) -> bool:
    try:
        report = json.loads((dest / "validation.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return report.get("verdict") == Verdict.PASS.value and (dest / "package").is_dir()


def _last_step(path: Path) -> int:
    return max((r["step"] for r in read_jsonl(path)), default=0)
