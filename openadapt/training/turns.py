"""GRPO over turns: the `context="last"` trainer.

When every turn of an episode is generated from the latest observation alone (`rollout.run_episodes` with
`context="last"`), the turns of one episode do not form one token sequence, so they cannot be one GRPO sample
with environment tokens masked. `TurnGRPOTrainer` keeps GRPO's unit of comparison, the episode, and trains on
turns:

1. the rollout (`grpo.EnvironmentRollout`, TRL's `rollout_func`) plays `prompts_per_step` groups of
   `num_generations` episodes, every episode of a group on the same seed and tier;
2. TRL's reward functions score each *episode* (the environment's return), and the advantage of an episode is
   TRL's group-relative one (reward minus its group's mean, divided by the group's std unless
   `scale_rewards="none"`), computed exactly as `GRPOTrainer` does;
3. every turn of the episode becomes one training row, `prompt` = the exact tokens that turn was generated from,
   `completion` = the tokens the model wrote, with its episode's advantage (each decision of an episode that
   beat its group is reinforced, each of one that fell behind is discouraged), or with `credit="turn"` the
   change in estimated value the turn made (`credit.py`, scaled by the spread of those changes); a row's
   tokens that an exploration draw wrote (`explore_credit="positive"`) are trained only where the advantage is
   positive (self-imitation: the model did not choose them, so a draw that did badly says nothing against it);
4. the loss is TRL's own (`GRPOTrainer._compute_loss`, the configured `loss_type`, KL to the reference model when
   `beta > 0`), over the generated tokens of every row; with `imitate` a self-imitation term on turns of the
   run's solved episodes is added (`imitation.py`).

Everything after scoring (`_compute_loss`, logging, checkpoints, resume) is TRL's, unchanged; only the assembly of
the training batch is replaced, because TRL assumes one row per generation.
"""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import nanstd, pad, use_adapter


class TurnGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` whose `rollout_func` returns `turn_rows` (episode index, prompt ids, completion ids, the
    [start, end) spans of completion tokens trained only on a positive advantage, the value before and after the
    turn or None) beside TRL's per-episode keys, and with `imitate` the `imitation_rows` its self-imitation term
    trains on; see the module docstring."""

    imitation_weight: float = 0.0  # `imitate` at the step's highest tier, set by each rollout
    step_tier: int = 1  # the highest tier of the step's episodes, set by each rollout

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        device = self.accelerator.device
        mode = "train" if self.model.training else "eval"
        prompts = [x["prompt"] for x in inputs]
        output = self.rollout_func(prompts, self)
        rows: list[tuple[int, list[int], list[int], list[tuple[int, int]], float | None, float | None]] = \
            output.pop("turn_rows")
        self._imitation = self._imitation_batch(output.pop("imitation_rows", None))
        self.imitation_weight = output.pop("imitation_weight", self.imitation_weight)
        self.beta = output.pop("kl_weight", self.beta)  # `beta` per tier: the step's highest tier's coefficient
        self.step_tier = output.pop("step_tier", self.step_tier)
        for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask"):
            output.pop(key, None)
        episodes = len(prompts)
        if sorted({r[0] for r in rows}) != list(range(episodes)):
            raise RuntimeError(f"the rollout returned turns for {len({r[0] for r in rows})} of {episodes} episodes")

        # ---- score the episodes (TRL's reward functions, TRL's group-relative advantage) ----------------------
        completion_texts = output.pop("completion_texts")
        completions = [[{"role": "assistant", "content": t}] for t in completion_texts] \
            if isinstance(prompts[0], list) else completion_texts
        for i, inp in enumerate(inputs):
            for key, values in output.items():
                inp[key] = values[i] if isinstance(values, list) else values
        episode_ids = [[t for r in rows if r[0] == i for t in r[2]] for i in range(episodes)]
        rewards_per_func = self._calculate_rewards(inputs, prompts, completions, episode_ids)
        g = self.num_generations if mode == "train" else self.num_generations_eval
        rewards = (rewards_per_func * self.reward_weights.to(device).unsqueeze(0)).nansum(dim=1)
        grouped = rewards.view(-1, g)
        mean = grouped.mean(dim=1).repeat_interleave(g)
        std = nanstd(grouped, dim=1).repeat_interleave(g) if g > 1 else torch.zeros_like(rewards)
        if self.scale_rewards == "batch":
            std = nanstd(rewards).expand_as(rewards)
        advantages = rewards - mean
        if self.scale_rewards != "none":
            advantages = advantages / (std + 1e-4)
        advantages = torch.nan_to_num(advantages, nan=0.0)

        # ---- one training row per turn ------------------------------------------------------------------------
        pad_id = self._tokenizer.pad_token_id
        prompt_ids = pad([torch.tensor(r[1]) for r in rows], padding_value=pad_id, padding_side="left").to(device)
        prompt_mask = pad([torch.ones(len(r[1]), dtype=torch.long) for r in rows], padding_value=0,
                          padding_side="left").to(device)
        completion_ids = pad([torch.tensor(r[2]) for r in rows], padding_value=pad_id,
                             padding_side="right").to(device)
        completion_mask = pad([torch.ones(len(r[2]), dtype=torch.long) for r in rows], padding_value=0,
                              padding_side="right").to(device)
        if self.mask_truncated_completions:
            stops = [*self.eos_token_ids, pad_id]
            truncated = torch.tensor([not r[2] or r[2][-1] not in stops for r in rows], device=device)
            completion_mask = completion_mask * (~truncated).unsqueeze(1).int()
        row_advantages = advantages[torch.tensor([r[0] for r in rows], device=device)]
        if rows and rows[0][5] is not None:
            row_advantages = self._turn_advantages(rows, mean, g)
        # A drawn span left out of the loss stays in the attention: the tokens after it were written given it.
        # TRL's `tool_mask` is that loss-only mask (its tool-result tokens); zeroing `completion_mask` instead would
        # hide the draw from the rest of the row, train those tokens in a context no rollout produced and let
        # the per-token KL to the reference explode on them.
        tool_mask = torch.ones_like(completion_mask)
        for k, row in enumerate(rows):
            for start, end in row[3] if row_advantages[k] <= 0 else ():
                tool_mask[k, start:end] = 0
        num_items = self.accelerator.gather((completion_mask * tool_mask).sum()).sum()

        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        keep = completion_ids.size(1)
        batch = self.args.per_device_train_batch_size
        result: dict[str, Any] = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask,
                                  "completion_ids": completion_ids, "completion_mask": completion_mask,
                                  "tool_mask": tool_mask, "advantages": row_advantages,
                                  "num_items_in_batch": num_items}
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            generate_every = self.args.steps_per_generation * self.num_iterations
            if self.args.gradient_accumulation_steps % generate_every != 0:
                result["old_per_token_logps"], _, _ = self._get_per_token_logps_and_entropies(
                    self.model, input_ids, attention_mask, keep, batch_size=batch)
            if self.beta != 0.0:
                result["ref_per_token_logps"] = self._reference_logps(input_ids, attention_mask, keep, batch)

        # ---- the metrics GRPOTrainer logs -------------------------------------------------------------------
        metrics = self._metrics[mode]
        generated = completion_mask.sum(dim=1).float()
        if mode == "train":
            self.state.num_input_tokens_seen += int(prompt_mask.sum().item() + generated.sum().item())
        metrics["num_tokens"] = [self.state.num_input_tokens_seen]
        per_episode = torch.tensor([len(ids) for ids in episode_ids], dtype=torch.float)
        metrics["completions/mean_length"].append(per_episode.mean().item())
        metrics["completions/min_length"].append(per_episode.min().item())
        metrics["completions/max_length"].append(per_episode.max().item())
        metrics["turns/rows"].append(float(len(rows)))
        metrics["turns/mean_length"].append(generated.mean().item())
        for i, name in enumerate(self.reward_func_names):
            metrics[f"rewards/{name}/mean"].append(torch.nanmean(rewards_per_func[:, i]).item())
            metrics[f"rewards/{name}/std"].append(nanstd(rewards_per_func[:, i]).item())
        metrics["reward"].append(rewards.mean().item())
        metrics["reward_std"].append(nanstd(rewards).item())
        metrics["frac_reward_zero_std"].append(torch.isclose(std, torch.zeros_like(std)).float().mean().item())
        for name in sorted(self._pending_metrics):
            values = self._pending_metrics[name]
            metrics[name].append(sum(values) / len(values))
        self._pending_metrics.clear()
        self._pending_extra_logs.clear()
        return result

    def _imitation_batch(self, rows: list[tuple[list[int], list[int]]] | None) -> dict[str, Any] | None:
        """`imitate`: the sampled solved turns as one padded batch (prompt left-padded, completion right-padded)."""
        if not rows:
            return None
        device, pad_id = self.accelerator.device, self._tokenizer.pad_token_id
        prompt = pad([torch.tensor(p) for p, _ in rows], padding_value=pad_id, padding_side="left")
        prompt_mask = pad([torch.ones(len(p), dtype=torch.long) for p, _ in rows], padding_value=0,
                          padding_side="left")
        completion = pad([torch.tensor(c) for _, c in rows], padding_value=pad_id, padding_side="right")
        completion_mask = pad([torch.ones(len(c), dtype=torch.long) for _, c in rows], padding_value=0,
                              padding_side="right")
        return {"input_ids": torch.cat([prompt, completion], dim=1).to(device),
                "attention_mask": torch.cat([prompt_mask, completion_mask], dim=1).to(device),
                "completion_mask": completion_mask.to(device), "keep": completion.size(1)}

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> torch.Tensor:
        """GRPO's loss, plus with `imitate` the self-imitation term: `imitation_weight` x the mean per-token
        negative log-likelihood of the sampled solved turns (imitation.py)."""
        loss = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                    num_items_in_batch=num_items_in_batch)
        batch = getattr(self, "_imitation", None)
        if batch is None or not self.imitation_weight or not model.training:
            return loss
        logps = self._get_per_token_logps_and_entropies(
            model, batch["input_ids"], batch["attention_mask"], batch["keep"],
            batch_size=self.args.per_device_train_batch_size)[0]
        mask = batch["completion_mask"].to(logps.dtype)
        nll = -(logps * mask).sum() / mask.sum().clamp(min=1)
        self._metrics["train"]["imitation/nll"].append(nll.item())
        return loss + self.imitation_weight * nll

    def _turn_advantages(self, rows: list[tuple], mean: torch.Tensor, group: int) -> torch.Tensor:
        """credit="turn": each row's change in value (credit.py), scaled by the std of those changes over its
        group's rows (or the step's, or not at all, as `scale_rewards` says). Not by the std of the episodes'
        rewards: a group whose returns are all equal can still hold turns that changed the value, and dividing
        those by a zero spread would blow them up ten-thousandfold."""
        raw = torch.tensor([after - (float(mean[episode]) if before is None else before)
                            for episode, *_, before, after in rows], device=mean.device)
        if self.scale_rewards == "none":
            return raw
        groups = torch.tensor([r[0] // group for r in rows], device=mean.device)
        if self.scale_rewards == "batch" or len(rows) < 2:
            return raw / ((raw.std() if len(rows) > 1 else 0.0) + 1e-4)
        scaled = torch.zeros_like(raw)
        for g in groups.unique():
            where = groups == g
            spread = raw[where].std() if int(where.sum()) > 1 else torch.tensor(0.0)
            scaled[where] = raw[where] / (spread + 1e-4)
        return scaled

    def _reference_logps(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int,
                         batch: int) -> torch.Tensor:
        """Per-token log-probabilities under the reference model (the KL term), as GRPOTrainer computes them."""
        if self.ref_model is not None:
            logps, _, _ = self._get_per_token_logps_and_entropies(self.ref_model, input_ids, attention_mask, keep,
                                                                  batch_size=batch)
            return logps
        model = self.accelerator.unwrap_model(self.model)
        with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
            logps, _, _ = self._get_per_token_logps_and_entropies(self.model, input_ids, attention_mask, keep,
                                                                  batch_size=batch)
        return logps
