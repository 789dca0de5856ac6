"""The KL reference a curriculum can move.

GRPO's `beta` term anchors the policy to a reference model, by default the model GRPO started from (for `tiny`,
the format warm-up's). In a curriculum that anchor pulls a mastered tier's policy back toward the warm-up's
random actions while the next tier is learned. `reference="tier"` re-anchors the KL term to the policy as it
stood when the current tier began (the curriculum calls `ReferenceAnchor.anchor` at each escalation), so the
term holds what the earlier tiers taught instead. With `reference_sync_steps` the reference also trails the
policy: every that many steps it moves `reference_mixup` of the way toward it (TRL's soft update, the one its
`sync_ref_model` makes, here only on steps whose highest tier is `reference_sync_from` or above). A moved
reference is saved into every checkpoint and a resume restores it with the rest of the checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

REFERENCE_FILE = "reference.safetensors"


class ReferenceAnchor(TrainerCallback):
    """Moves the GRPOTrainer's KL reference to the current policy and keeps it with the checkpoints."""

    def __init__(self, sync_steps: int | None = None, mixup: float = 0.1, sync_from: int = 1) -> None:
        self.trainer: Any = None  # set once the GRPOTrainer exists (it takes this callback at construction)
        self.moved = False
        self.sync_steps, self.mixup, self.sync_from = sync_steps, mixup, sync_from

    def anchor(self) -> None:
        """The reference becomes a copy of the current policy's weights."""
        policy = self.trainer.accelerator.unwrap_model(self.trainer.model)
        reference = self.trainer.accelerator.unwrap_model(self.trainer.ref_model)
        reference.load_state_dict(policy.state_dict())
        self.moved = True

    def restore(self, checkpoint: Path) -> bool:
        """Load the reference a checkpoint saved; False when it holds none (the reference never moved)."""
        from safetensors.torch import load_model

        path = checkpoint / REFERENCE_FILE
        if self.trainer.ref_model is None or not path.exists():
            return False
        load_model(self.trainer.accelerator.unwrap_model(self.trainer.ref_model), str(path))
        self.moved = True
        return True

    def on_step_end(self, args, state, control, **kwargs):
        tier = getattr(self.trainer, "step_tier", 1)  # TurnGRPOTrainer's; config refuses sync_from > 1 without it
        if self.sync_steps and state.global_step % self.sync_steps == 0 and tier >= self.sync_from:
            from trl.trainer.callbacks import SyncRefModelCallback

            unwrap = self.trainer.accelerator.unwrap_model
            SyncRefModelCallback.sync_target_model(unwrap(self.trainer.model), unwrap(self.trainer.ref_model),
                                                   self.mixup)
            self.moved = True
        return control

    def on_save(self, args, state, control, **kwargs):
        if self.moved:
            from safetensors.torch import save_model

            checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            save_model(self.trainer.accelerator.unwrap_model(self.trainer.ref_model),
                       str(checkpoint / REFERENCE_FILE))
        return control
