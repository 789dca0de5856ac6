"""Scripted designer replies built from the guess_env fixture (a minimal valid package), for the loopback
chat-completions server."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "guess_env"
NAME = "guess_game"
SPEC = {"task": "Find the hidden number from higher/lower hints.", "environment_class": "GuessEnvironment",
        "action_class": "GuessAction", "observation_class": "GuessObservation", "client_class": "GuessGameEnv",
        "oracle_class": "Oracle", "heuristic_class": "Bisect", "eci_tiers": [1, 2], "step_budget": {"1": 8, "2": 8},
        "reward_range": [-0.2, 1.0], "solved_reward": 0.95, "invalid_action_reward": -0.1,
        "malformed_reward": -0.1, "floor_margin": 0.3}
BUG = ("self._target = rng.randint(0, 99)", "self._target = rng.randint(0, 99)\n        raise KeyError('targets')")


def design_reply(bug: bool = False, prose: str = "Here is the package.", spec: dict | None = None) -> str:
    files = {"spec.json": json.dumps(spec or SPEC, indent=2)}
    for rel in ("models.py", "policies.py", "prompts/system.j2", "prompts/observation.j2", "README.md"):
        files[rel] = (FIXTURE / rel).read_text()
    env = (FIXTURE / "server/guess_env_environment.py").read_text()
    files[f"server/{NAME}_environment.py"] = env.replace(*BUG) if bug else env
    blocks = [f"```{'json' if p.endswith('json') else 'python'} path={p}\n{t.rstrip()}\n```" for p, t in files.items()]
    return prose + "\n\n" + "\n\n".join(blocks) + "\n\nLet me know if you need changes."
