"""Self-imitation (`imitate > 0`): a cross-entropy term on the turns of the policy's own solved episodes.

Why: a policy sharpened on tiers where one turn suffices almost never reads before it answers, and the episodes in
which it does read and then solves are few. GRPO's gradient for such an episode is its advantage times the
log-likelihood gradient, averaged with every other turn of the step and pulled back by the KL term; measured, it
moved the model's own chance of reading from 4e-5 to 2e-4 in 870 steps, while the same network trained by plain
cross-entropy on the move learns it in a few hundred steps (benchmarks/capacity_probe.py). Self-imitation
learning (Oh et al., 2018) and expert iteration / rejection-sampling fine-tuning (STaR, ReST) close that gap
with the policy's own successes: every turn of an episode that `solved` (the environment's binary outcome) is
kept, and each step adds `imitate` x the mean per-token negative log-likelihood of a sample of them to GRPO's
loss. Nothing privileged enters: the turns are what the model (or an `explore` draw, which knows nothing of the
answer) wrote, kept only because the environment said the episode solved.

The episodes are kept per tier, the newest `imitate_buffer` of each, and a step samples its `imitate_batch`
episodes evenly over the tiers held (a tier solved all the time does not crowd out the one being learned), or,
with `imitate_focus = f`, a share f from the highest tier held (the one a curriculum is learning: it trains no
tier above it) and the rest evenly over the lower ones, whose turns the model already writes (their NLL is small
and their share of the term mostly keeps them). The buffer lives in memory: a resumed run starts it empty and
refills it from its own steps.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence

from openadapt.training.rollout import EpisodeTrace

Row = tuple[list[int], list[int]]  # (prompt ids, completion ids) of one turn


class SolvedEpisodes:
    """The newest solved episodes per tier, as their turns' training rows."""

    def __init__(self, per_tier: int):
        self.per_tier = per_tier
        self.tiers: dict[int, deque[list[Row]]] = {}

    def add(self, traces: Sequence[EpisodeTrace]) -> int:
        """Keep the solved episodes among `traces`; returns how many."""
        kept = 0
        for trace in traces:
            if trace.solved and trace.rows:
                tier = self.tiers.setdefault(trace.eci, deque(maxlen=self.per_tier))
                tier.append([(list(r.prompt_ids), list(r.completion_ids)) for r in trace.rows])
                kept += 1
        return kept

    def __len__(self) -> int:
        return sum(len(t) for t in self.tiers.values())

    def sample(self, episodes: int, rng: random.Random, focus: float | None = None) -> list[Row]:
        """The rows of `episodes` episodes drawn evenly over the tiers held, or (`focus`) that share of them from
        the highest tier held and the rest evenly over the others; with replacement where a tier holds fewer, in
        a fixed tier order so a seeded `rng` draws the same."""
        held = [self.tiers[t] for t in sorted(self.tiers) if self.tiers[t]]
        if not held or episodes <= 0:
            return []
        if focus is None or len(held) == 1:
            order = [held[k % len(held)] for k in range(episodes)]
        else:
            top = round(episodes * focus)
            lower = held[:-1]
            order = [held[-1]] * top + [lower[k % len(lower)] for k in range(episodes - top)]
        rows: list[Row] = []
        for tier in order:
            rows.extend(tier[rng.randrange(len(tier))])
        return rows
