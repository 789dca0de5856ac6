"""One solver-settings model for every stage that trains: `TrainConfig` and `CurriculumConfig` share
`SolverSettings` (names, bounds, defaults resolved per model kind), with the one `Tier` and `SandboxChoice` types."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from openadapt.curriculum.config import CurriculumConfig
from openadapt.sandbox import SandboxChoice
from openadapt.training.config import SolverSettings, TrainConfig


def test_both_configs_are_the_solver_settings_plus_their_own():
    shared = set(SolverSettings.model_fields)
    assert shared <= set(TrainConfig.model_fields) and shared <= set(CurriculumConfig.model_fields)
    assert issubclass(TrainConfig, SolverSettings) and issubclass(CurriculumConfig, SolverSettings)
    for name in shared - {"wandb_project", "wandb", "warm_start"}:  # the same default everywhere (a curriculum
        # warm-starts where it can: a run it leaves overnight should not stall at a tier it never solves)
        assert TrainConfig.model_fields[name].default == CurriculumConfig.model_fields[name].default, name


def test_the_curriculum_hands_its_settings_to_the_solver_unchanged(tmp_path):
    config = CurriculumConfig(source="seed:incident_triage", output=tmp_path, lr=5e-4, max_turns={1: 2, 3: 3},
                              beta=0.2, num_generations=6, save_steps=7, sandbox="bwrap")
    train = config.train_config("seed:incident_triage", 3, resume=False)
    assert train.settings() == config.settings()
    assert (train.eci, train.output, train.validate_package, train.eval_episodes) == \
        ([3], tmp_path / "train", False, 0)
    assert train.sandbox is SandboxChoice.BWRAP and train.turns_at(3, 10) == 3
    assert train.wandb_project == "openadapt-curriculum"


def test_defaults_resolve_per_model_kind_in_both(tmp_path):
    for model, context, lr in (("tiny", "last", 1e-3), ("some/model", "full", 2e-5)):
        curriculum = CurriculumConfig(source="seed:incident_triage", output=tmp_path, model=model)
        train = TrainConfig(package="seed:incident_triage", output=tmp_path, model=model)
        assert (curriculum.context, curriculum.lr) == (train.context, train.lr) == (context, lr)


def test_one_tier_type_and_one_sandbox_type(tmp_path):
    with pytest.raises(ValidationError, match="outside 1-5"):
        CurriculumConfig(source="seed:incident_triage", output=tmp_path, start_tier=6)
    with pytest.raises(ValidationError, match="outside 1-5"):
        TrainConfig(package="seed:incident_triage", output=tmp_path, eci=[0])
    with pytest.raises(ValidationError, match="outside 1-5"):
        TrainConfig(package="seed:incident_triage", output=tmp_path, max_turns={7: 2})
    for config in (CurriculumConfig(source="s", output=tmp_path, sandbox="process"),
                   TrainConfig(package="s", output=tmp_path, sandbox="process")):
        assert config.sandbox is SandboxChoice.PROCESS
    with pytest.raises(ValidationError):
        CurriculumConfig(source="s", output=tmp_path, sandbox="chroot")


def test_a_curriculum_json_with_the_old_solver_dict_still_loads(tmp_path):
    old = {"source": "seed:incident_triage", "output": str(tmp_path), "lr": 1e-3, "num_generations": 4,
           "solver": {"max_turns": 1, "beta": 0.1, "warmup_prompt_lm": True}}
    config = CurriculumConfig.model_validate(old)
    assert (config.max_turns, config.beta, config.lr, config.num_generations) == (1, 0.1, 1e-3, 4)
    assert CurriculumConfig.model_validate_json(config.model_dump_json()) == config
