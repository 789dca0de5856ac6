"""Turn-level credit (`credit="turn"`): each turn is scored by how much it changed the return the policy could
expect, not by its whole episode's outcome.

With `credit="episode"` every turn of an episode gets the episode's GRPO advantage. On a tier whose shortest honest
episode is "read the right component, then diagnose", that credit cannot tell a good read followed by a wrong
diagnosis from a useless read: both fall behind a first-turn guess that earns partial credit, so reading is
pushed down (docs/history/training.md, "What stops the climb"). Here the value of the state a turn leaves is estimated
the way VinePPO does (Kazemnejad et al., 2024): by playing the current policy on from that state `value_samples` times
(same seed and tier, the turns so far replayed, the rest sampled at the training temperature) and averaging
the returns. For an episode with turns 1..n, return R and group mean b:

    V_0 = b (GRPO's baseline),  V_t = mean return of the continuations after turn t,  V_n = R
    advantage of turn t = V_t - V_(t-1)   (then divided by the spread of these changes: turns.py)

The turns' changes sum to R - b, the episode's own advantage before scaling; what changes is which turn gets
it. Nothing privileged is used: the continuations are the policy's own episodes in the environment, scored by
its reward.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from openadapt.envpkg.textenv import TextEnv
from openadapt.training.rollout import EpisodeSpec, EpisodeTrace, Generator, run_episodes


def turn_values(traces: Sequence[EpisodeTrace], specs: Sequence[EpisodeSpec], envs: Sequence[TextEnv],
                generate: Generator, tokenizer: Any, score: Callable[[EpisodeTrace], float], *, samples: int,
                system_prompt: str | None, stop_ids: Sequence[int] = ()) -> tuple[list[list[float]], int]:
    """For each trace, the estimated value (mean `score` of `samples` continuations) of the state after each of
    its turns but the last (empty for a one-turn episode), and how many continuations were played. The
    continuations run in batches of `len(envs)` on the same environments (their episodes are over)."""
    jobs = [(i, t) for i, trace in enumerate(traces) for t in range(len(trace.turns) - 1)]
    plays = [EpisodeSpec(seed=specs[i].seed, eci=specs[i].eci, max_turns=specs[i].max_turns,
                         prefix=[turn.action for turn in traces[i].turns[:t + 1]])
             for i, t in jobs for _ in range(samples)]
    scores: list[float] = []
    for start in range(0, len(plays), len(envs)):
        chunk = plays[start:start + len(envs)]
        scores += [score(trace) for trace in run_episodes(envs, chunk, generate, tokenizer,
                                                          system_prompt=system_prompt, stop_ids=stop_ids,
                                                          context="last")]
    values: list[list[float]] = [[] for _ in traces]
    for k, (i, _) in enumerate(jobs):
        values[i].append(statistics.fmean(scores[k * samples:(k + 1) * samples]))
    return values, len(plays)


def row_values(values: list[float], final: float) -> list[tuple[float | None, float]]:
    """(value before, value after) for each turn of one episode: before the first turn None (the trainer puts the
    group's mean there), after the last the episode's own score."""
    after = [*values, final]
    return [(None if t == 0 else after[t - 1], after[t]) for t in range(len(after))]
