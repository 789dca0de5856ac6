"""The GRPO solver: a model, a pool of text environments and TRL's GRPOTrainer, behind the API the curriculum
controller builds on.

    solver = Solver.create(config, tier_plan=plan, callbacks=[my_callback], on_episode=record)
    try:
        summary = solver.train()              # or solver.train(resume=True)
        report = solver.evaluate([1, 2], 200)  # held-out seeds, current weights, greedy
    finally:
        solver.close()

- `Solver.create(config, *, tier_plan=None, callbacks=(), on_episode=None)` locks `config.output` (a second
  run on the same directory is refused), opens one `TextEnvPool` of `prompts_per_step * num_generations`
  environments for the whole run (sandboxed for untrusted packages, so OpenEnv's import is paid once), loads
  the model (building and warming up `tiny`), and builds the `GRPOTrainer` (`solver.trainer`).
- `tier_plan` (a `TierPlan`): `next_tier(rng)` is called once per training episode group to choose its ECI;
  default `FixedTierPlan(config.eci)`.
- `callbacks`: extra `transformers.TrainerCallback`s handed to the GRPOTrainer after the metrics writer
  (so `on_log`/`on_step_end` of a step see that step's row in `solver.last_metrics`) and before the solver's
  own `SaveOnStop`: a callback that sets `control.should_training_stop` in `on_step_end` gets that step
  checkpointed, and `on_save(args, state, control)` runs for every checkpoint, whose directory is
  `args.output_dir/checkpoint-{state.global_step}`, so a callback can write its own state into it.
- `on_episode(EpisodeOutcome)`: called for every finished training episode (every completion of every group),
  in order, from the main process, during the rollout of the step it trains.
- `solver.train(resume=False) -> TrainSummary`: trains up to `config.steps` global steps. With `resume` (or
  `config.resume`) it continues from the latest checkpoint: step count, optimizer, scheduler, RNG.
- `solver.use_package(ref)`: between steps (e.g. from a callback, or between two `train` calls), closes the
  current pool and opens one on another package; the model and optimizer go on. With `tiny`, the vocabulary is
  the one built at creation: words of another package that it lacks read as `<unk>`.
- `solver.evaluate(tiers, episodes) -> EvalReport`: held-out seeds, the current weights, greedy decoding.
- `solver.close()`: closes the pool and releases the run directory (also on `with Solver.create(...)`).
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, Field

from openadapt.envpkg.evaluation import EVAL_SEED_START, EvalReport
from openadapt.envpkg.loader import resolve
from openadapt.training.callbacks import MetricsWriter, SaveOnStop, SummaryOnSave, graceful_interrupt
from openadapt.training.config import TrainConfig, WandbMode, resumed_config
from openadapt.training.envinfo import TrainingError
from openadapt.training.episodes import EpisodeOutcome, FixedTierPlan, TierPlan
from openadapt.training.grpo import EnvironmentRollout, environment_reward_function
from openadapt.training.loading import (
    LoadedModel,
    build_tiny,
    load_pretrained,
    load_saved,
    resolve_model_source,
    warm_start_pretrained,
)
from openadapt.training.modelpolicy import ModelPolicy, evaluate_model
from openadapt.training.pool import TextEnvPool
from openadapt.training.progress import quiet_third_party
from openadapt.training.reference import ReferenceAnchor
from openadapt.training.rundir import RunDir
from openadapt.training.warmup import WarmStartResult, WarmupResult


class TrainSummary(BaseModel):
    """`RUN_DIR/summary.json`."""

    run_dir: str
    package: str
    packages: list[str] = Field(description="every package trained on, in order (use_package)")
    model: str
    model_kind: str
    model_source: str
    global_step: int
    target_steps: int
    stopped: Literal["running", "completed", "interrupted", "stopped_early"]
    resumed_from_step: int | None = None
    started_at: str
    finished_at: str
    train_seconds: float
    seconds_per_step_median: float | None = None
    last_sampled_solve_rate: float | None = Field(default=None, description="mean over the last 10 steps")
    last_reward_mean: float | None = Field(default=None, description="mean over the last 10 steps")
    warmup: WarmupResult | None = None
    warm_start: WarmStartResult | None = None  # the demonstrations imitated before GRPO (`before` is after them)
    before: EvalReport | None = Field(default=None, description="held-out, greedy, the model GRPO started from "
                                      "(for tiny: after the format warm-up, before any reward)")
    after: EvalReport | None = Field(default=None, description="held-out, greedy, the trained model")
    checkpoint: str | None = None
    final_model: str | None = None
    wandb: str
    notes: list[str] = Field(default_factory=list)


def _out_of_memory(exc: BaseException) -> bool:
    return type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower()


def _wandb_mode(config: TrainConfig, notes: list[str]) -> WandbMode:
    """Never block on the network: an online run whose W&B host does not answer logs offline instead."""
    mode = config.wandb
    if mode is WandbMode.ONLINE:
        url = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai"))
        try:
            socket.create_connection((url.hostname or "api.wandb.ai", url.port or 443), timeout=3).close()
        except OSError:
            notes.append("W&B online was asked for but its host is unreachable: logged offline under "
                         f"{config.output}/wandb (upload later with `wandb sync`)")
            mode = WandbMode.OFFLINE
    if mode is not WandbMode.DISABLED:
        os.environ["WANDB_MODE"] = mode.value
        os.environ["WANDB_DIR"] = str(config.output)
        os.environ.setdefault("WANDB_PROJECT", config.wandb_project)
        os.environ.setdefault("WANDB_SILENT", "true")
    return mode


def _require_valid(root: Any, config: TrainConfig) -> None:
    """Refuse to train on a package that fails openadapt's validator (run in the sandbox)."""
    from openadapt.validator import validate

    report = validate(root, list(config.eci), sandbox=config.sandbox)
    if report.exit_code != 0:
        failing = ", ".join(c.check_id for c in report.failing[:6]) or report.verdict.value
        raise TrainingError(f"{root} fails validation ({report.verdict.value}: {failing}); fix it (`openadapt "
                            f"validate {root} --feedback` says how), or skip this check (--skip-validation)")


class Solver:
    def __init__(self, config: TrainConfig, run: RunDir, pool: TextEnvPool, loaded: LoadedModel,
                 rollout: EnvironmentRollout, trainer: Any, metrics: MetricsWriter, stopper: SaveOnStop,
                 wandb_mode: WandbMode, notes: list[str]):
        self.config = config
        self.run = run
        self.pool = pool
        self.loaded = loaded
        self.rollout = rollout
        self.trainer = trainer
        self.metrics = metrics
        self.stopper = stopper
        self.wandb_mode = wandb_mode
        self.notes = notes
        self.packages = [pool.label]
        self.reference: ReferenceAnchor | None = None
        self._closed = False

    # ---- construction -----------------------------------------------------------------------------------
    @classmethod
    def create(cls, config: TrainConfig, *, tier_plan: TierPlan | None = None,
               callbacks: Sequence[Any] = (), on_episode: Callable[[EpisodeOutcome], None] | None = None,
               warmup_progress: Callable[[int, float], None] | None = None,
               warm_start_progress: Callable[[int, float], None] | None = None) -> Solver:
        """Lock the run directory, open the environment pool, load the model, build the GRPOTrainer. A config with
        `resume` trains with the run's recorded settings (`config.resumed_config`; what it did not take is in
        `summary.notes`)."""
        quiet_third_party()
        ref = resolve(config.package)  # a bad package fails before anything is written
        missing = [t for t in config.eci if t not in ref.manifest.openadapt.eci_tiers]
        if missing:
            raise TrainingError(f"{ref.label} does not support ECI {missing[0]} (tiers "
                                f"{ref.manifest.openadapt.eci_tiers})")
        if not config.is_tiny:
            resolve_model_source(config.model)  # a missing path or an unreachable hub id fails here, fast
        if config.validate_package and not ref.trusted:
            _require_valid(ref.root, config)
        run = RunDir(config.output)
        run.lock()
        pool = None
        notes: list[str] = []
        try:
            stored = run.stored_config()
            existing = run.holds_run()
            if existing and stored is not None:
                if stored.package != config.package:
                    raise TrainingError(f"{run.path} holds a run on {stored.package}, not {config.package}; "
                                        "resume it with that package or choose another --output")
                if stored.model != config.model:
                    raise TrainingError(f"{run.path} holds a run of model {stored.model!r}, not {config.model!r}")
                if config.resume:
                    config, notes = resumed_config(stored, config)
            if not existing:
                run.prepare(config, resume=False)
            pool = TextEnvPool(config.package, config.batch_size, trust=config.trust, sandbox=config.sandbox,
                               slots=config.value_slots)
            loaded = cls._load_model(config, run, pool, ref, existing, warmup_progress, warm_start_progress)
            if not existing or config.resume:
                run.record_config(config)  # with what building the model resolved (tiny's tokens per turn)
            wandb_mode = _wandb_mode(config, notes)
            rollout = EnvironmentRollout(config, loaded.tokenizer, tier_plan or FixedTierPlan(config.eci),
                                         on_episode)
            system = pool.envs[0].system_prompt()
            rollout.attach(pool.envs, pool.label, pool.section.eci_tiers, system, pool.section.step_budget)
            metrics = MetricsWriter(run, rollout, config.beta_max)
            stopper = SaveOnStop()
            progress = SummaryOnSave()
            reference = ReferenceAnchor(config.reference_sync_steps, config.reference_mixup,
                                        config.reference_sync_from)
            trainer = cls._trainer(config, run, loaded, rollout,
                                   [metrics, *callbacks, progress, reference, stopper], wandb_mode)
            reference.trainer = trainer  # config validation refused 'tier' where there is no reference model
            if loaded.warm_start is not None and not existing and not config.is_tiny and trainer.ref_model is not None:
                # TRL loads a fully fine-tuned model's reference from its source, as it was before the warm start
                reference.anchor()
            solver = cls(config, run, pool, loaded, rollout, trainer, metrics, stopper, wandb_mode, notes)
            solver.reference = reference
            progress.write = solver._write_progress
            return solver
        except BaseException:
            if pool is not None:
                pool.close()
            run.unlock()
            raise

    @staticmethod
    def _load_model(config: TrainConfig, run: RunDir, pool: TextEnvPool, ref: Any, existing: bool,
                    warmup_progress: Callable[[int, float], None] | None,
                    warm_start_progress: Callable[[int, float], None] | None = None) -> LoadedModel:
        if not config.is_tiny:
            loaded = load_pretrained(config)
            if existing:  # a resumed run: the checkpoint holds the adapter its warm start began
                summary = run.summary() or {}
                loaded.warm_start = WarmStartResult.model_validate(summary["warm_start"]) \
                    if summary.get("warm_start") else None
                return loaded
            return warm_start_pretrained(loaded, config, pool, warm_start_progress) \
                if config.warms_up_on_demonstrations else loaded
        if existing and (run.init_dir / "config.json").exists():
            loaded = load_saved(run.init_dir, "tiny")
            if config.max_completion_length is None:  # a run recorded before the length was fitted
                from openadapt.training.envinfo import action_schema, sample_env
                from openadapt.training.loading import fit_completion_length

                env = pool.envs[0]
                sample = sample_env(env, action_schema(ref, env.system_prompt()), list(config.eci), range(20))
                config.__dict__["max_completion_length"] = fit_completion_length(loaded.tokenizer,
                                                                                 sample.completions)
            summary = run.summary() or {}
            if summary.get("warmup"):
                loaded.warmup = WarmupResult.model_validate(summary["warmup"])
            if summary.get("warm_start"):
                loaded.warm_start = WarmStartResult.model_validate(summary["warm_start"])
            return loaded
        loaded = build_tiny(config, pool, ref, list(pool.section.eci_tiers), progress=warmup_progress,
                            warm_progress=warm_start_progress)
        loaded.model.save_pretrained(run.init_dir)
        loaded.tokenizer.save_pretrained(run.init_dir)
        loaded.model.config._name_or_path = str(run.init_dir)  # TRL loads the KL reference (beta > 0) from here
        return loaded

    @staticmethod
    def _trainer(config: TrainConfig, run: RunDir, loaded: LoadedModel, rollout: EnvironmentRollout,
                 callbacks: list[Any], wandb_mode: WandbMode) -> Any:
        import torch
        from datasets import Dataset
        from transformers import PrinterCallback
        from trl import GRPOConfig, GRPOTrainer

        from openadapt.training.turns import TurnGRPOTrainer

        cuda = torch.cuda.is_available()
        args = GRPOConfig(
            output_dir=str(run.checkpoints), run_name=run.path.name, seed=config.seed,
            learning_rate=config.lr, lr_scheduler_type="constant", max_grad_norm=1.0,
            max_steps=config.steps, per_device_train_batch_size=config.batch_size, gradient_accumulation_steps=1,
            num_generations=config.num_generations, max_completion_length=config.max_completion_length,
            temperature=config.temperature, top_p=1.0, top_k=0, beta=config.beta_max,
            scale_rewards=config.scale_rewards,
            logging_steps=1, save_strategy="steps", save_steps=config.save_steps,
            save_total_limit=config.save_total_limit, report_to=[] if wandb_mode is WandbMode.DISABLED else ["wandb"],
            gradient_checkpointing=config.gradient_checkpointing, bf16=cuda and torch.cuda.is_bf16_supported(),
            use_cpu=not cuda, disable_tqdm=True, disable_dropout=True, shuffle_dataset=False,
            remove_unused_columns=False, dataloader_num_workers=0, log_completions=False,
            use_vllm=config.use_vllm, vllm_mode="colocate", vllm_importance_sampling_correction=False,
        )
        # The dataset only paces TRL's sampler: one placeholder row per episode group; the rollout chooses each
        # group's seed and tier.
        dataset = Dataset.from_dict({"prompt": [f"episode group {k}" for k in range(config.prompts_per_step)]})
        trainer_class = TurnGRPOTrainer if config.context == "last" else GRPOTrainer
        trainer = trainer_class(
            model=loaded.model, reward_funcs=[environment_reward_function(config.reward)], args=args,
            train_dataset=dataset, processing_class=loaded.tokenizer, callbacks=callbacks,
            peft_config=loaded.peft_config, rollout_func=rollout,
        )
        trainer.remove_callback(PrinterCallback)
        return trainer

    # ---- the API ----------------------------------------------------------------------------------------
    @property
    def last_metrics(self) -> dict[str, Any] | None:
        """The metrics row of the last finished step."""
        return self.metrics.last_row

    @property
    def model(self) -> Any:
        return self.trainer.accelerator.unwrap_model(self.trainer.model)

    def use_package(self, ref: str) -> None:
        """Swap the environment package between steps: close the current pool, open one on `ref` (same size,
        same trust and sandbox settings). The model, optimizer and step count go on."""
        new = TextEnvPool(ref, self.config.batch_size, trust=self.config.trust, sandbox=self.config.sandbox,
                          slots=self.config.value_slots)
        old, self.pool = self.pool, new
        old.close()
        self.rollout.attach(new.envs, new.label, new.section.eci_tiers, new.envs[0].system_prompt(),
                            new.section.step_budget)
        self.packages.append(new.label)

    def anchor_reference(self) -> None:
        """With `reference="tier"`: the KL term anchors to the current policy from now on (the curriculum calls
        this at each escalation); otherwise nothing changes."""
        if self.config.reference == "tier" and self.reference is not None:
            self.reference.anchor()

    def evaluate(self, tiers: list[int], episodes: int, seed_start: int = EVAL_SEED_START) -> EvalReport:
        """Greedy decoding with the current weights on held-out seeds (EVAL_SEED_START up), per tier."""
        policy = ModelPolicy(self.model, self.loaded.tokenizer, system_prompt=bool(self.config.system_prompt),
                             max_new_tokens=self.config.max_completion_length, context=self.config.context,
                             name=f"model:{self.run.path}@step{self.trainer.state.global_step}")
        return evaluate_model(policy, self.pool, tiers, episodes, seed_start=seed_start)

    def train(self, resume: bool = False) -> TrainSummary:
        """Train to `config.steps` global steps, writing metrics, checkpoints, the final model and summary.json.
        Raises TrainingError for a directory that already holds a run (without `resume`), nothing to resume, or
        running out of GPU memory (checkpoints up to the last saved step are kept)."""
        config, run = self.config, self.run
        resume = resume or config.resume
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        previous = run.summary() or {}
        checkpoint = None
        resumed_from = None
        if resume:
            run.prepare(config, resume=True)
            checkpoint = run.latest_checkpoint()
            resumed_from = int(checkpoint.name.split("-")[1])
            run.truncate_metrics(resumed_from)
            # The previous segment's final model no longer describes the run: were this segment killed, `eval
            # --policy model:RUN` would load it instead of the newer checkpoints (RunDir: final, else latest).
            shutil.rmtree(run.final_dir, ignore_errors=True)
            if self.reference is not None:
                self.reference.restore(checkpoint)
        elif run.holds_run():
            raise TrainingError(f"{run.path} already holds a run; pass --resume to continue it, or choose "
                                "another --output")
        before = None
        if resume and previous.get("before"):
            before = EvalReport.model_validate(previous["before"])
        elif not resume and config.eval_episodes:
            before = self.evaluate(list(config.eci), config.eval_episodes)
        self.stopper.stop_requested = False
        start_step = resumed_from or 0
        self._segment = (started_at, resumed_from, before, previous if resume else {}, time.perf_counter())
        run.write_summary(self._summary(started_at, start_step, "running", resumed_from, 0.0, before, None,
                                        previous if resume else {}).model_dump(mode="json"))
        clock = time.perf_counter()
        try:
            with graceful_interrupt(self.stopper):
                self.trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        except RuntimeError as exc:
            if _out_of_memory(exc):
                last = run.latest_checkpoint()
                raise TrainingError(
                    f"out of GPU memory training {config.model} ({config.batch_size} completions of up to "
                    f"{config.max_completion_length} tokens per turn): lower --num-generations, prompts per step "
                    "or max completion length, or use a smaller model; "
                    + (f"the last checkpoint is {last}" if last else "no checkpoint was saved yet")) from None
            raise
        except KeyboardInterrupt:
            last = run.latest_checkpoint()
            raise TrainingError("aborted by a second Ctrl-C; "
                                + (f"the last complete checkpoint is {last}" if last else "no checkpoint saved")
                                ) from None
        train_seconds = time.perf_counter() - clock
        state = self.trainer.state
        interrupted = self.stopper.stop_requested
        stopped = "completed" if state.global_step >= config.steps else (
            "interrupted" if interrupted else "stopped_early")
        self.trainer.save_model(str(run.final_dir))
        self.loaded.tokenizer.save_pretrained(run.final_dir)
        after = None
        if config.eval_episodes and not interrupted:
            after = self.evaluate(list(config.eci), config.eval_episodes)
        summary = self._summary(started_at, state.global_step, stopped, resumed_from, train_seconds, before, after,
                                previous if resume else {})
        run.write_summary(summary.model_dump(mode="json"))
        return summary

    def _write_progress(self, step: int) -> None:
        """summary.json while training: status "running", the step of the checkpoint just written, the timing so
        far (a killed run's summary says how far it got; `RunDir.status()` tells running from killed)."""
        started_at, resumed_from, before, previous, clock = self._segment
        summary = self._summary(started_at, step, "running", resumed_from, time.perf_counter() - clock, before,
                                None, previous)
        self.run.write_summary(summary.model_dump(mode="json"))

    def _summary(self, started_at: str, step: int, stopped: str, resumed_from: int | None, seconds: float,
                 before: EvalReport | None, after: EvalReport | None, previous: dict[str, Any]) -> TrainSummary:
        config, run = self.config, self.run
        rows = run.metrics()
        tail = rows[-10:]
        latest = run.latest_checkpoint()
        return TrainSummary(
            run_dir=str(run.path), package=config.package, packages=self.packages, model=config.model,
            model_kind=self.loaded.kind, model_source=self.loaded.source, global_step=step,
            target_steps=config.steps, stopped=stopped, resumed_from_step=resumed_from,
            started_at=previous.get("started_at", started_at),
            finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
            train_seconds=round(seconds + previous.get("train_seconds", 0.0), 2),
            seconds_per_step_median=round(statistics.median(r["seconds_per_step"] for r in rows), 4) if rows
            else None,
            last_sampled_solve_rate=round(statistics.fmean(r["solve_rate"] for r in tail), 4) if tail else None,
            last_reward_mean=round(statistics.fmean(r["reward_mean"] for r in tail), 4) if tail else None,
            warmup=self.loaded.warmup, warm_start=self.loaded.warm_start, before=before, after=after,
            checkpoint=str(latest) if latest else None,
            final_model=str(run.final_dir) if (run.final_dir / "config.json").exists()
            or (run.final_dir / "adapter_config.json").exists() else None,
            wandb=self.wandb_mode.value, notes=self.notes,
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.pool.close()
        if self.wandb_mode is not WandbMode.DISABLED:
            import wandb

            if wandb.run is not None:
                wandb.finish()
        self.run.unlock()

    def __enter__(self) -> Solver:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
