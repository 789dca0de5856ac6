"""`reference="tier"`: the KL term's reference model moves to the policy when asked (the curriculum asks at each
escalation), the moved reference is saved with the checkpoints, and a resume restores it; a run without a
reference model to move is refused up front."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from pydantic import ValidationError  # noqa: E402
from test_training import make_config  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from openadapt.training.reference import REFERENCE_FILE  # noqa: E402
from openadapt.training.solver import Solver  # noqa: E402


def weights(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)


class AnchorAt(TrainerCallback):
    """Moves the reference at the end of one step and keeps the policy's weights of that moment."""

    def __init__(self, step: int):
        self.step, self.solver, self.policy = step, None, None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            with torch.no_grad():  # a policy unlike the initial model whatever one step of GRPO did
                for parameter in self.solver.model.parameters():
                    parameter.add_(0.01)
            self.solver.anchor_reference()
            self.policy = weights(self.solver.model)
        return control


class RecordReference(TrainerCallback):
    def __init__(self):
        self.solver, self.at_start = None, None

    def on_train_begin(self, args, state, control, **kwargs):
        self.at_start = weights(self.solver.trainer.ref_model)
        return control


def test_a_tier_reference_moves_to_the_policy_is_checkpointed_and_restored_on_resume(tmp_path):
    path = tmp_path / "run"
    hook = AnchorAt(step=1)
    with Solver.create(make_config(path, steps=2, beta=0.1, reference="tier", lr=5e-2),
                       callbacks=[hook]) as solver:
        hook.solver = solver
        initial = weights(solver.trainer.ref_model)
        solver.train()
        moved = weights(solver.trainer.ref_model)
    assert same(moved, hook.policy) and not same(moved, initial)  # the policy of step 1, not the start
    saved = path / "checkpoints" / "checkpoint-2" / REFERENCE_FILE
    assert saved.exists()

    record = RecordReference()
    with Solver.create(make_config(path, steps=3, beta=0.1, reference="tier", lr=5e-2, resume=True),
                       callbacks=[record]) as solver:
        record.solver = solver
        solver.train()
    assert same(record.at_start, moved)  # restored from checkpoint-2, not rebuilt from the initial model


def test_the_initial_reference_stays_the_initial_model(tmp_path):
    hook = AnchorAt(step=1)
    with Solver.create(make_config(tmp_path / "run", steps=2, beta=0.1, lr=5e-2, reference="initial"),
                       callbacks=[hook]) as solver:
        hook.solver = solver
        initial = weights(solver.trainer.ref_model)
        solver.train()
        assert same(weights(solver.trainer.ref_model), initial)  # the policy moved; the reference did not
        assert not same(weights(solver.model), initial)
    assert not list((tmp_path / "run" / "checkpoints").glob(f"*/{REFERENCE_FILE}"))


def test_the_default_reference_is_tier_where_it_can_move_and_initial_elsewhere(tmp_path):
    assert make_config(tmp_path / "a", beta=0.1).reference == "tier"
    assert make_config(tmp_path / "b", beta=0.0).reference == "initial"
    assert make_config(tmp_path / "c", model="qwen2.5-coder-0.5b").reference == "initial"


def test_a_tier_reference_without_a_reference_model_is_refused_before_anything_is_built(tmp_path):
    with pytest.raises(ValidationError, match="reference 'tier' moves the KL reference model"):
        make_config(tmp_path / "run", beta=0.0, reference="tier")
    with pytest.raises(ValidationError, match="needs beta > 0"):
        make_config(tmp_path / "run", model="qwen2.5-coder-0.5b", beta=0.1, reference="tier")


class Nudge(TrainerCallback):
    """Moves every weight of the policy at the end of each step (before TRL's sync, which is the last callback),
    so the policy differs from the initial model whatever a few steps of GRPO on a random model did."""

    def __init__(self):
        self.solver = None

    def on_step_end(self, args, state, control, **kwargs):
        with torch.no_grad():
            for parameter in self.solver.model.parameters():
                parameter.add_(0.01)
        return control


def synced_run(path, steps: int, mixup: float, **settings) -> tuple[dict, dict, dict]:
    """(initial, policy, reference) weights after `steps` steps with the reference synced every step."""
    nudge = Nudge()
    with Solver.create(make_config(path, steps=steps, beta=0.1, lr=5e-2, reference="initial",
                                   reference_sync_steps=1, reference_mixup=mixup, **settings),
                       callbacks=[nudge]) as solver:
        nudge.solver = solver
        initial = weights(solver.trainer.ref_model)
        solver.train()
        return initial, weights(solver.model), weights(solver.trainer.ref_model)


def test_a_synced_reference_trails_the_policy_and_is_checkpointed(tmp_path):
    """`reference_sync_steps`: TRL's soft update moves the reference toward the policy (mixup 1.0: onto it), and
    the moved reference is saved with the checkpoint a resume loads."""
    initial, policy, reference = synced_run(tmp_path / "run", steps=2, mixup=1.0)
    assert not same(reference, initial) and all(torch.allclose(reference[k], policy[k]) for k in policy)
    assert (tmp_path / "run" / "checkpoints" / "checkpoint-2" / REFERENCE_FILE).exists()


def test_a_half_synced_reference_sits_between_the_anchor_and_the_policy(tmp_path):
    initial, policy, reference = synced_run(tmp_path / "run", steps=1, mixup=0.5)
    moved = [k for k in policy if not torch.equal(policy[k], initial[k])]
    assert moved and all(torch.allclose(reference[k], (initial[k] + policy[k]) / 2, atol=1e-6) for k in moved)


def test_a_synced_reference_needs_a_reference_model(tmp_path):
    with pytest.raises(ValidationError, match="reference_sync_steps moves the KL reference model"):
        make_config(tmp_path / "run", beta=0.0, reference_sync_steps=10)


def test_a_reference_synced_from_a_tier_stays_put_below_it(tmp_path):
    """`reference_sync_from=3`: steps at ECI 1 leave the reference where it was (from ECI 1 a trailing reference
    let the tiny model's entropy collapse); steps at ECI 3 move it."""
    initial, policy, reference = synced_run(tmp_path / "low", steps=1, mixup=1.0, reference_sync_from=3, eci=[1])
    assert same(reference, initial) and not same(policy, initial)
    initial, policy, reference = synced_run(tmp_path / "high", steps=1, mixup=1.0, reference_sync_from=3, eci=[3],
                                            max_turns=2)
    assert not same(reference, initial) and all(torch.allclose(reference[k], policy[k]) for k in policy)
    with pytest.raises(ValidationError, match="reference_sync_from reads each step's tier"):
        make_config(tmp_path / "full", beta=0.1, reference_sync_steps=5, reference_sync_from=3, context="full")
