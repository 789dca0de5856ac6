"""What a training run is asked to do.

- `SolverSettings`: how the solver learns (model, GRPO settings, turns, warm-up, checkpoints, sandbox). One model
  for every stage that trains: `TrainConfig` (one `openadapt train` run) and the curriculum's `CurriculumConfig`
  both extend it, so a setting has one name, one bound and one default everywhere.
- `TrainConfig`: the settings plus what one run trains on (package, tiers, steps, run directory), written to
  `RUN_DIR/config.json` with every default resolved.
- `resumed_config(stored, requested)`: what a `--resume` runs with: the run's recorded settings, except the few a
  resume may change (how long, how often to save, logging, evaluation).

Fields left at `None` are resolved from the model kind when the settings are built (`tiny`: the CPU path, a
model trained from scratch over the package's vocabulary; anything else: a pretrained model with LoRA).
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openadapt.kit.eci import Tier
from openadapt.sandbox.choice import SandboxChoice
from openadapt.training.tiny import TinySize

TINY = "tiny"
TINY_WARMUP, TINY_WARMUP_MIN = 400, 100
# Settings a `--resume` cannot change: the checkpoint's model was built and warmed up with them.
FROZEN = frozenset({"package", "model", "tiny_size", "value_slots", "vocab_seeds", "vocab_min_count", "lora",
                    "warmup_steps", "warmup_lr", "warmup_prompt_lm", "warm_start", "demonstrations",
                    "warm_start_episodes", "warm_start_steps", "warm_start_lr"})


class WandbMode(StrEnum):
    ONLINE = "online"
    OFFLINE = "offline"
    DISABLED = "disabled"


def default_wandb_mode() -> WandbMode:
    """Online only when a W&B key is configured; otherwise disabled (a run never waits on the network)."""
    return WandbMode.ONLINE if os.environ.get("WANDB_API_KEY") else WandbMode.DISABLED


class LoraSettings(BaseModel):
    """LoRA adapter for a real (hub or local) model; ignored for `tiny`, which trains all its weights."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    target_modules: list[str] | Literal["all-linear"] = "all-linear"


ScaleRewards = Literal["group", "batch", "none"]
KlReference = Literal["initial", "tier"]


class SolverSettings(BaseModel):
    """How the GRPO solver learns, shared by `openadapt train` and the curriculum.

    The reward GRPO sees is the environment's own: `reward="return"` (default) is the episode return, the sum of
    every per-step reward of the episode (malformed or rejected actions cost reward, and the terminal step
    carries the score); `reward="final"` is the terminal step's reward alone."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default=TINY, description="'tiny', a preset ('qwen2.5-coder-0.5b'), a hub id, or a local "
                       "model directory")
    lr: float | None = Field(default=None, gt=0, description="learning rate (tiny 1e-3, LoRA 2e-5)")
    num_generations: int | None = Field(default=None, ge=2, description="completions per prompt group (GRPO's "
                                        "G; tiny 4, real models 8)")
    prompts_per_step: int | None = Field(default=None, ge=1, description="episode groups per optimizer step "
                                         "(tiny 8, real models 4)")
    max_completion_length: int | None = Field(default=None, ge=8, description="tokens per generated turn (tiny: "
                                              "fitted to the package when the model is built, the longest "
                                              "schema-valid action with every field filled plus 15%, at least 48; "
                                              "real models 128)")
    max_turns: int | dict[Tier, int] | None = Field(
        default=None, description="model turns per training episode: a number, or one per tier ({1: 2, 3: 4}, "
        "a tier without one gets the largest); None: the environment's own step budget per tier, which always "
        "ends an episode too. Held-out evaluation uses the environment's budget alone")
    context: Literal["full", "last"] | None = Field(
        default=None, description="what the model sees at each turn: 'full' the whole conversation so far (one "
        "GRPO sample per episode, environment tokens masked), 'last' the system prompt and the latest observation "
        "only (one sample per turn, each with its episode's advantage; valid where an observation carries "
        "everything the episode has shown, as openadapt's families' case files do). Default: tiny 'last', real "
        "models 'full'")
    train_turns: int | None = Field(default=None, ge=1, description="context='last': the loss trains on at "
                                    "most this many turns of an episode, drawn at random when it has more (the "
                                    "same expected gradient for a fraction of the cost on long episodes); None: "
                                    "every turn")
    temperature: float = Field(default=1.0, gt=0)
    scale_rewards: ScaleRewards = Field(
        default="group", description="how GRPO scales an episode's advantage (reward minus its group's mean): "
        "'group' divides by the group's std (TRL's default), 'batch' by the step's, 'none' not at all (Dr. GRPO: "
        "a group whose rewards barely differ then moves the policy barely)")
    beta: float | dict[Tier, float] | None = Field(
        default=None, description="KL coefficient against the reference model (tiny 0.1: it keeps the warm-up's "
        "spread over tools and holds the earlier tiers; real models 0). A number, or one per tier ({1: 0.1, 4: 0.0}; "
        "a tier without one takes the nearest lower tier's, the first given below them all): a step uses the "
        "coefficient of the highest tier it trains on. Per tier needs context 'last'")
    reference_sync_steps: int | None = Field(
        default=None, ge=1, description="every this many steps the KL reference moves `reference_mixup` of the way "
        "toward the policy (TRL's soft update, as its sync_ref_model; TR-DPO): the term then resists fast change "
        "(forgetting, a broken format) but lets a move the policy keeps learning become the anchor's too. None: "
        "the reference moves only as `reference` says. Needs beta > 0 and a fully fine-tuned model")
    reference_mixup: float = Field(default=0.1, gt=0.0, le=1.0, description="reference_sync_steps: the share of "
                                   "the way the reference moves toward the policy at each sync")
    reference_sync_from: Tier = Field(default=1, description="reference_sync_steps: the lowest tier whose steps "
                                      "sync (below it the reference stays put). From ECI 1 a trailing reference let "
                                      "the tiny model's entropy collapse (0.22 -> 0.007 in 1,200 steps) and ECI 1 "
                                      "stall at 0.23, where the fixed anchor to the warm-up's spread mastered it")
    reference: KlReference | None = Field(
        default=None, description="what the KL term (beta) anchors the policy to: the model GRPO started from "
        "('initial'), or in a curriculum the policy as it stood at the last escalation ('tier': the term then holds "
        "what the earlier tiers taught, where 'initial' pulls it back toward the warm-up's random actions; needs "
        "beta > 0 and a fully fine-tuned model). Default: 'tier' where that holds (tiny), else 'initial'")
    explore: float = Field(
        default=0.0, ge=0.0, le=1.0, description="chance that a training episode's first turn (or its tier's "
        "`explore_turn`), when its turn limit leaves room for another, opens with a value of the action's first "
        "choice field (a family's tool) drawn uniformly, the model writing the rest: exploration of actions a "
        "sharpened policy no longer samples (a policy trained where one turn suffices stops investigating). It "
        "knows nothing of the answer; the reply is trained on as the model's own")
    explore_choices: list[str] | dict[Tier, list[str]] | None = Field(
        default=None, description="the values `explore` draws from (default: every value of the choice field), "
        "e.g. a family's reading tools without its final answer; or one list per tier ({1: [inspect_logs], 4: "
        "[read_runbook]}; an episode takes its own tier's, else the nearest lower tier's). A value the action does "
        "not offer is an error")
    explore_turn: int | dict[Tier, int] = Field(
        default=1, description="the turn an exploration draw opens (1: the first), or one per tier ({1: 1, 4: 2}; "
        "an episode takes its own tier's, else the nearest lower tier's): a later turn explores what follows the "
        "moves the policy already makes (a runbook read after its log read). The episode's turn limit must leave "
        "room for a turn after it")
    explore_fields: list[str] | dict[Tier, list[str]] | None = Field(
        default=None, description="enum fields of the action (a diagnosis's `fix`) whose value, in an explored "
        "episode (with chance `explore_field_chance`), is drawn too at the first turn after the explored one "
        "that writes the field and is not the drawn choice again: from the values that turn's observation "
        "mentions, in proportion to how often (none mentioned: the model's own value stands). The reply is cut "
        "before its value and the model writes the rest again given the drawn one; the drawn tokens are trained "
        "like the opening (`explore_credit`). One list per tier as for `explore_choices` ({1: [], 4: [fix]}). "
        "Knows nothing of the answer: a fix a runbook note names is one the agent was shown")
    explore_field_chance: float = Field(default=0.5, ge=0.0, le=1.0, description="explore_fields: the chance "
                                        "that an explored episode draws them")
    explore_targets: dict[str, str] | None = Field(
        default=None, description="action fields an explored opening fills too, each with a value drawn from a "
        "list the observation of the explored turn shows, in proportion to how often the rest of the observation "
        "mentions each (uniformly where none is mentioned): {'component': 'components'} opens "
        "`{\"tool\": \"inspect_logs\", \"component\": \"<one of the components listed>\"` (which tool on "
        "what). Knows nothing of the answer, like the choice itself")
    explore_credit: Literal["all", "positive"] = Field(
        default="all", description="how drawn tokens (an explored opening, a drawn field value) are trained: "
        "with their episode's advantage whatever its sign, as if the model had written them ('all'), or only "
        "where it is positive ('positive', self-imitation): the model did not choose a drawn opening, so an "
        "episode that opened with one and fell behind its group says nothing against what the model would "
        "choose, while 'all' pushes the drawn choice down in every such episode. The model's own tokens are "
        "trained either way; context 'last' only")
    credit: Literal["episode", "turn"] = Field(
        default="episode", description="context 'last': what each turn of an episode is trained with: its episode's "
        "GRPO advantage ('episode'), or the change it made to the return the policy can expect ('turn'), valued "
        "by playing the policy on from the state after each turn `value_samples` times (VinePPO): a useful read "
        "followed by a wrong answer is then credited, the answer blamed. Costs those extra episodes on every "
        "multi-turn episode")
    value_samples: int = Field(default=4, ge=1, description="credit 'turn': continuations that value each state")
    imitate: float | dict[Tier, float] = Field(
        default=0.0, description="context 'last': weight of a self-imitation term added to GRPO's loss, the "
        "mean per-token negative log-likelihood of turns sampled from the run's own solved episodes (imitation.py; "
        "the environment's `solved` outcome picks them, nothing else). A number, or one per tier ({1: 0, 2: 3.0}; "
        "a tier without one takes the nearest lower tier's): a step uses the weight of the highest tier it trains "
        "on. 0: off. "
        "From a tier's start its solved episodes are mostly lucky guesses, which the term copies (measured from "
        "ECI 1: entropy 0.23 -> 0.02 in 100 steps, the sampled solve rate stuck near 0.14)")
    imitate_buffer: int = Field(default=256, ge=1, description="imitate: solved episodes kept per tier (the newest)")
    imitate_batch: int = Field(default=16, ge=1, description="imitate: solved episodes sampled a step, evenly over "
                               "the tiers held unless imitate_focus says otherwise")
    imitate_focus: float | None = Field(default=None, ge=0.0, le=1.0, description="imitate: share of each sample "
                                        "drawn from the highest tier held (the one a curriculum is learning), the "
                                        "rest evenly over the lower tiers; unset: evenly over all")
    reward: Literal["return", "final"] = "return"
    seed: int = Field(default=0, ge=0, description="draws training seeds, tiers and the model init")
    wandb: WandbMode = Field(default_factory=default_wandb_mode)
    wandb_project: str = "openadapt"
    warmup_steps: int | None = Field(default=None, ge=0, description="format warm-up steps on random "
                                     "schema-valid actions before GRPO (tiny: 400, or for a run of fewer "
                                     "steps that many, at least 100; real models 0)")
    warmup_lr: float = Field(default=3e-3, gt=0)
    warm_start: Literal["heuristic", "auto", "off"] | None = Field(default=None, description=(
        "'heuristic': before GRPO, imitate solved episodes of the package's non-privileged policy on training "
        "seeds, at the run's tiers (tiny: cross-entropy on the action tokens; a real model: TRL's SFTTrainer, on "
        "its LoRA adapter where it trains one; the oracle is never a source); 'auto': the same where the model is "
        "tiny and the package ships a heuristic that solves some episodes, else nothing; default 'off' (a "
        "curriculum: 'auto')"))
    demonstrations: Path | None = Field(default=None, description="a JSONL of solved episodes to imitate instead "
                                        "of the heuristic's (one episode a line: eci, solved, turns of prompt and "
                                        "completion)")
    warm_start_episodes: int = Field(default=256, ge=1, description="solved demonstrations per tier")
    warm_start_steps: int = Field(default=800, ge=1, description="imitation steps of 16 demonstrated turns")
    warm_start_lr: float | None = Field(default=None, gt=0, description="the imitation's learning rate (tiny: "
                                        "warmup_lr; a real model: 2e-4 on a LoRA adapter, 1e-5 on full weights)")
    warmup_prompt_lm: bool | None = Field(default=None, description="the warm-up also does next-token prediction "
                                          "on the prompts' own text, no answers and no reward (tiny: yes)")
    save_steps: int = Field(default=10, ge=1, description="checkpoint every N steps (and at the end): a kill "
                            "loses at most the steps since the last one")
    save_total_limit: int = Field(default=2, ge=1)
    system_prompt: bool | None = Field(default=None, description="put the package's system prompt in the "
                                       "conversation (tiny: no, it cannot read instructions; real models: yes)")
    vocab_seeds: int = Field(default=200, ge=1, description="tiny: training seeds played at random to collect "
                             "the vocabulary")
    vocab_min_count: int = Field(default=10, ge=1, description="tiny: an observation word needs this many "
                                 "occurrences in the sample to get a token (the rest, mostly one-off numbers, read "
                                 "as <unk>); every word of the system prompt and of the action schema has one")
    tiny_size: TinySize = Field(default_factory=TinySize)
    value_slots: bool = Field(default=False, description="tiny: the values an observation shows (ids, dates, "
                              "amounts) reach the model as slot tokens, which its reply may write for them "
                              "(openadapt.training.slots)")
    lora: LoraSettings | None = Field(default_factory=LoraSettings, description="None: full fine-tuning")
    gradient_checkpointing: bool | None = None
    use_vllm: bool = Field(default=False, description="generate rollouts with TRL's vLLM engine (GPU only, vLLM "
                           "installed; TRL's vllm_* settings, temperature and max_completion_length apply)")
    sandbox: SandboxChoice = SandboxChoice.AUTO

    @field_validator("imitate", "beta")
    @classmethod
    def _weights(cls, value: float | dict[int, float] | None, info: Any) -> float | dict[int, float] | None:
        if value is None:
            return value
        values = list(value.values()) if isinstance(value, dict) else [value]
        if not values or any(v < 0 for v in values):
            raise ValueError(f"{info.field_name} must be a weight >= 0, or one per tier")
        return value

    @field_validator("explore_choices")
    @classmethod
    def _choices(cls, value: list[str] | dict[int, list[str]] | None) -> list[str] | dict[int, list[str]] | None:
        lists = list(value.values()) if isinstance(value, dict) else [value] if value is not None else []
        if (isinstance(value, dict) and not value) or any(not choices for choices in lists):
            raise ValueError("explore_choices must name at least one value (per tier: for each tier given)")
        return value

    @field_validator("max_turns", "explore_turn")
    @classmethod
    def _turns(cls, value: int | dict[int, int] | None, info: Any) -> int | dict[int, int] | None:
        values = [value] if isinstance(value, int) else list((value or {}).values())
        if any(v < 1 for v in values):
            raise ValueError(f"{info.field_name} must be at least 1")
        return value

    @model_validator(mode="after")
    def _resolve(self) -> SolverSettings:
        tiny = self.is_tiny
        defaults = {
            "lr": 1e-3 if tiny else 2e-5, "num_generations": 4 if tiny else 8, "prompts_per_step": 8 if tiny else 4,
            "max_completion_length": None if tiny else 256, "context": "last" if tiny else "full",
            "beta": 0.1 if tiny else 0.0, "warmup_steps": self._default_warmup(), "warmup_prompt_lm": tiny,
            "system_prompt": not tiny, "gradient_checkpointing": not tiny,
            "warm_start": "off",
        }
        for name, value in defaults.items():
            if getattr(self, name) is None:
                self.__dict__[name] = value  # resolved, not "set": model_fields_set keeps what was asked for
        if self.warm_start_lr is None:
            self.__dict__["warm_start_lr"] = self.warmup_lr if tiny else 2e-4 if self.lora is not None else 1e-5
        movable = self.kl_term and (tiny or self.lora is None)
        if self.reference is None:
            self.__dict__["reference"] = "tier" if movable else "initial"
        if self.explore_credit == "positive" and self.context != "last":
            raise ValueError("explore_credit 'positive' masks an explored opening's tokens in its own training row: "
                             "it needs context 'last'")
        if self.imitates and self.context != "last":
            raise ValueError("imitate trains on the turns of solved episodes as rows of their own: it needs context "
                             "'last'")
        if self.warm_start == "auto" and not (tiny and self.context == "last"):
            # a pretrained model starts from what it already does: its warm start is asked for, never automatic
            self.__dict__["warm_start"] = "off"
        if self.value_slots and not tiny:
            raise ValueError("value_slots gives the tiny model's vocabulary slot tokens; a pretrained model reads "
                             "and writes values in its own tokens")
        if self.warms_up_on_demonstrations and self.context != "last":
            raise ValueError("the warm start imitates each turn from its own observation: it needs context 'last'")
        if self.credit == "turn" and self.context != "last":
            raise ValueError("credit 'turn' trains each turn as its own row: it needs context 'last'")
        if self.reference == "tier" and not movable:
            raise ValueError("reference 'tier' moves the KL reference model: it needs beta > 0 and a fully "
                             "fine-tuned model (tiny, or lora None); a LoRA run's reference is fixed, the model GRPO "
                             "began from")
        if self.reference_sync_steps and not movable:
            raise ValueError("reference_sync_steps moves the KL reference model: it needs beta > 0 and a fully "
                             "fine-tuned model (tiny, or lora None); a LoRA run's reference is fixed, the model GRPO "
                             "began from")
        if self.reference_sync_steps and self.reference_sync_from > 1 and self.context != "last":
            raise ValueError("reference_sync_from reads each step's tier from the turn trainer: it needs context "
                             "'last'")
        if isinstance(self.beta, dict) and self.context != "last":
            raise ValueError("beta per tier is set by each step's rollout: it needs context 'last'")
        return self

    def _default_warmup(self) -> int:
        return TINY_WARMUP if self.is_tiny else 0

    @property
    def is_tiny(self) -> bool:
        return self.model == TINY

    @property
    def batch_size(self) -> int:
        """Episodes (completions in GRPO's sense) per optimizer step."""
        return self.prompts_per_step * self.num_generations

    def turns_at(self, tier: int, budget: int | None = None) -> int | None:
        """The turn limit of a training episode at `tier` (None: the environment's budget ends it), capped by the
        environment's own step budget `budget` when given."""
        turns = self.max_turns.get(tier, max(self.max_turns.values())) if isinstance(self.max_turns, dict) \
            else self.max_turns
        if turns is None:
            return budget
        return min(turns, budget) if budget else turns

    @property
    def warms_up_on_demonstrations(self) -> bool:
        return self.demonstrations is not None or self.warm_start in ("heuristic", "auto")

    @property
    def imitates(self) -> bool:
        return any(self.imitate.values()) if isinstance(self.imitate, dict) else self.imitate > 0

    @property
    def kl_term(self) -> bool:
        """The KL term is on at some tier (TRL then keeps a reference model)."""
        return bool(self.beta_max)

    @property
    def beta_max(self) -> float:
        """The largest KL coefficient of any tier: what TRL is configured with, so that it builds the reference."""
        return max(self.beta.values()) if isinstance(self.beta, dict) else float(self.beta or 0.0)

    def beta_at(self, tier: int) -> float:
        """The KL coefficient of a step whose highest tier is `tier`."""
        return float(_at_tier(self.beta or 0.0, tier))

    def imitate_at(self, tier: int) -> float:
        """The self-imitation weight of a step whose highest tier is `tier`."""
        return float(_at_tier(self.imitate, tier))

    def explore_turn_at(self, tier: int) -> int:
        """The turn an exploration draw opens in an episode at `tier`."""
        return int(_at_tier(self.explore_turn, tier))

    def explore_choices_at(self, tier: int) -> list[str] | None:
        """The values an exploration draw picks from in an episode at `tier` (None: every value)."""
        return _at_tier(self.explore_choices, tier)

    def explore_fields_at(self, tier: int) -> list[str]:
        """The fields an explored episode at `tier` may have drawn too (`explore_fields`)."""
        return list(_at_tier(self.explore_fields, tier) or [])

    def settings(self) -> dict[str, Any]:
        """These settings as keyword arguments (for the config of the run they drive)."""
        return {name: getattr(self, name) for name in SolverSettings.model_fields}


def read_settings_file(path: Path) -> dict[str, Any]:
    """Solver settings from a YAML (or JSON) mapping of `SolverSettings` fields; a missing or unreadable file, or
    a name that is no setting, is a ValueError of one line. The values are checked with the rest of the config."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not YAML or JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a mapping of solver settings (name: value), not {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in SolverSettings.model_fields)
    if unknown:
        raise ValueError(f"{path}: no such solver setting {', '.join(unknown)} (settings: "
                         f"{', '.join(sorted(SolverSettings.model_fields))})")
    return data


def _at_tier(value: Any, tier: int) -> Any:
    """A per-tier setting at `tier`: its own, else the nearest lower tier's, else (below them all) the first's."""
    if not isinstance(value, dict):
        return value
    below = [t for t in value if t <= tier]
    return value[max(below)] if below else value[min(value)]


class TrainConfig(SolverSettings):
    """One GRPO run: the solver settings plus what it trains on and where it writes."""

    package: str = Field(description="environment package directory, or seed:NAME")
    eci: list[Tier] = Field(default_factory=lambda: [1], description="tiers of the default fixed-tier plan")
    steps: int = Field(default=200, ge=1, description="optimizer steps (the run's global step count)")
    output: Path = Field(description="the run directory")
    resume: bool = False
    eval_episodes: int = Field(default=100, ge=0, description="held-out seeds per tier for the before/after "
                               "evaluation in summary.json (0: skip)")
    trust: bool = Field(default=False, description="run an untrusted package in this process, not the sandbox")
    validate_package: bool = Field(default=True, description="validate a package that is not an openadapt seed "
                                   "(in the sandbox) before training on it; the curriculum, which certifies its "
                                   "versions itself, turns this off")

    @field_validator("eci")
    @classmethod
    def _tiers(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("at least one ECI tier is needed")
        return sorted(set(value))

    @classmethod
    def build(cls, **settings: Any) -> TrainConfig:
        """A config from settings a user gave (flags; `None` means not given), the run directory defaulting to
        runs/PACKAGE-TIMESTAMP; a validation error is one `UsageError` line."""
        from pydantic import ValidationError

        from openadapt.errors import settings_error
        from openadapt.training.rundir import check_run_dir, default_run_dir

        given = {k: v for k, v in settings.items() if v is not None}
        if given.get("output") is None and given.get("package"):
            from openadapt.envpkg.loader import resolve

            given["output"] = default_run_dir(resolve(given["package"]).name)
        if given.get("output") is not None:
            check_run_dir(Path(given["output"]), resume=bool(given.get("resume")))
        try:
            return cls(**given)
        except ValidationError as exc:
            raise settings_error(exc, "training settings") from None

    def _default_warmup(self) -> int:
        """tiny's default warm-up scales with a short run (a 30-step smoke run does not spend minutes on it)."""
        return min(TINY_WARMUP, max(TINY_WARMUP_MIN, self.steps)) if self.is_tiny else 0


def resumed_config(stored: TrainConfig, requested: TrainConfig) -> tuple[TrainConfig, list[str]]:
    """The config a resumed run trains with, and one note per setting it changes.

    A resume continues the run it finds: every setting the request did not set explicitly
    (`requested.model_fields_set`) is the run's recorded one, so a model half-trained with one turn budget,
    learning rate or warm-up does not silently go on with the defaults. A setting the request did set and that
    differs is taken (a longer `steps`, another save interval, a new learning rate) and noted; one the checkpoint
    depends on (`FROZEN`: the model, its vocabulary, its warm-up) is refused with a TrainingError. A caller that
    fills every field with its own defaults (a CLI) must pass only what the user gave."""
    from openadapt.training.errors import TrainingError

    asked = requested.model_fields_set - {"output", "resume"}
    changed = sorted(n for n in asked if getattr(requested, n) != getattr(stored, n))
    frozen = [n for n in changed if n in FROZEN]
    if frozen:
        name = frozen[0]
        raise TrainingError(f"{stored.output} was trained with {name}={_show(getattr(stored, name))}; a resume cannot "
                            f"change it (asked for {_show(getattr(requested, name))}): start a new run instead")
    taken = {n: getattr(requested, n) for n in changed}
    merged = TrainConfig.model_validate({**stored.model_dump(), **taken, "resume": requested.resume,
                                         "output": requested.output})
    notes = [f"resume changes {n} from {_show(getattr(stored, n))} to {_show(getattr(requested, n))}"
             for n in changed]
    return merged, notes


def _show(value: Any) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return str(value)
