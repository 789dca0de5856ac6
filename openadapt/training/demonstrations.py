"""Demonstrations for a warm start: solved episodes of a policy that reads only its observations.

A model that never solves an episode gives GRPO no signal: every group scores alike. The field's answer is a
supervised start from demonstrations, then reinforcement learning. The demonstrations here are the package's own
non-privileged policy (`heuristic`) played through the text protocol, each turn recorded as the prompt the agent
saw and the canonical completion of the action it took, and kept only where the environment's binary outcome says
the episode solved; or a user's JSONL of such episodes. The privileged oracle, which reads the hidden answer, is
never a source (`TextEnv.suggest` refuses it).

A user's file holds one episode a line:

    {"eci": 1, "solved": true, "turns": [{"prompt": "...", "completion": "{\"tool\": ...}"}, ...]}

where `prompt` is the observation as the package renders it (what `openadapt play` shows) and `completion` the
action's JSON; lines that are not solved are skipped.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from openadapt.envpkg.textenv import TextEnv
from openadapt.training.errors import TrainingError

SAFETY_TURNS = 200  # an environment must end its episodes within its budget; this only stops a broken one
NON_PRIVILEGED = ("heuristic",)  # policies a warm start may learn from (the oracle reads the hidden answer)


class Turn(BaseModel):
    prompt: str
    completion: str


class Demonstration(BaseModel):
    """One episode as the agent played it."""

    eci: int = Field(ge=1, le=5)
    seed: int | None = None
    solved: bool
    turns: list[Turn] = Field(min_length=1)


class DemonstrationSource(BaseModel):
    """What a warm start learnt from (recorded in the run's summary)."""

    policy: str  # 'heuristic', or 'file' for a user's JSONL
    path: str | None = None  # the user's file
    played: int = 0  # episodes played (a file: lines read)
    solved: int = 0  # of them, solved: the ones kept
    per_tier: dict[int, int] = Field(default_factory=dict)  # solved episodes kept, per tier
    seeds: tuple[int, int] | None = None  # the first and last training seed played


def play(env: TextEnv, policy: str, seed: int, eci: int) -> Demonstration:
    """One episode of `policy` through `env`'s text protocol."""
    step = env.reset(seed=seed, eci=eci)
    turns: list[Turn] = []
    while not step.done and len(turns) < SAFETY_TURNS:
        completion = env.suggest(policy)
        turns.append(Turn(prompt=step.prompt, completion=completion))
        step = env.step(completion)
    return Demonstration(eci=eci, seed=seed, solved=bool(step.metadata.get("solved")), turns=turns)


def collect(env: TextEnv, tiers: list[int], seeds: range, per_tier: int,
            policy: str = "heuristic") -> tuple[list[Demonstration], DemonstrationSource]:
    """Up to `per_tier` solved episodes of `policy` per tier, from `seeds` in order (training seeds, below the
    held-out ones). TrainingError for a privileged policy; a package without that policy raises from `suggest`."""
    if policy not in NON_PRIVILEGED:
        raise TrainingError(f"a warm start learns from a policy that reads only its observations "
                            f"({', '.join(NON_PRIVILEGED)}); {policy!r} is not one")
    kept: list[Demonstration] = []
    played, last = 0, None
    for eci in tiers:  # every tier plays the seeds from the first
        have = 0
        for seed in seeds:
            if have >= per_tier:
                break
            episode = play(env, policy, seed, eci)
            played, last = played + 1, seed if last is None else max(last, seed)
            if episode.solved:
                kept.append(episode)
                have += 1
    counts = Counter(d.eci for d in kept)
    return kept, DemonstrationSource(policy=policy, played=played, solved=len(kept), per_tier=dict(sorted(
        counts.items())), seeds=(seeds.start, last) if last is not None else None)


def load_file(path: Path) -> tuple[list[Demonstration], DemonstrationSource]:
    """A user's demonstrations (see the module docstring); TrainingError naming the first bad line."""
    if not path.is_file():
        raise TrainingError(f"--demonstrations {path}: no such file")
    kept: list[Demonstration] = []
    lines = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        lines += 1
        try:
            episode = Demonstration.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise TrainingError(f"--demonstrations {path}, line {number}: not an episode ({str(exc).splitlines()[0]}); "
                                'each line is {"eci": 1, "solved": true, "turns": [{"prompt": ..., "completion": '
                                "...}]}") from None
        if episode.solved:
            kept.append(episode)
    if not kept:
        raise TrainingError(f"--demonstrations {path}: none of its {lines} episodes is solved")
    counts = Counter(d.eci for d in kept)
    return kept, DemonstrationSource(policy="file", path=str(path), played=lines, solved=len(kept),
                                     per_tier=dict(sorted(counts.items())))
