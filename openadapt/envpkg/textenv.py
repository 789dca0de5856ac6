"""Environments seen through their text protocol: prompt in, completion out.

This is the interface the trainer, the evaluator of model policies and the curriculum use. A `TextEnv` turns
observations into prompts and completions into actions with the package's own templates and action class, and
steps the environment. Trusted seed packages run in this process (`LocalTextEnv`); untrusted generated packages
run in a sandbox process (`openadapt.sandbox.remote.SandboxedTextEnvs`) and are never imported here;
`openadapt.training.pool.TextEnvPool` picks one or the other.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from openadapt.envpkg.loader import LoadedPackage


class TextStep(BaseModel):
    """One observation as an agent sees it, plus what the trainer needs."""

    prompt: str
    reward: float = 0.0
    done: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    parse_error: str | None = None  # set when the completion did not parse (the malformed reward applied)
    observation: dict[str, Any] = Field(default_factory=dict)


class TextEnv(Protocol):
    def system_prompt(self) -> str: ...

    def reset(self, seed: int, eci: int) -> TextStep: ...

    def step(self, completion: str) -> TextStep: ...

    def suggest(self, policy: str) -> str: ...


def text_step(pkg_protocol: Any, obs: Any, parse_error: str | None = None) -> TextStep:
    return TextStep(prompt=pkg_protocol.render(obs), reward=float(obs.reward or 0.0), done=bool(obs.done),
                    metadata=dict(obs.metadata), parse_error=parse_error,
                    observation=obs.model_dump(mode="json", exclude={"metadata", "reward", "done"}))


class LocalTextEnv:
    """A trusted package's environment, in this process."""

    def __init__(self, pkg: LoadedPackage):
        self.pkg = pkg
        self.env = pkg.make_env()
        self._obs: Any = None  # the latest observation, what a suggesting policy reads
        self._seed = 0
        self._agents: dict[str, Any] = {}  # per policy name, the one playing the current episode

    def system_prompt(self) -> str:
        return self.pkg.protocol.system_prompt()

    def reset(self, seed: int, eci: int) -> TextStep:
        self._obs, self._seed, self._agents = self.env.reset(seed=seed, eci=eci), seed, {}
        return text_step(self.pkg.protocol, self._obs)

    def step(self, completion: str) -> TextStep:
        parsed = self.pkg.protocol.parse(completion)
        self._obs = self.env.step(parsed.action)
        return text_step(self.pkg.protocol, self._obs, parsed.error)

    def suggest(self, policy: str) -> str:
        """The completion a non-privileged reference policy of the package (`heuristic`) would send now, in the
        protocol's canonical form: a demonstration of what an agent that reads only its observations does. A
        policy that reads hidden state (the oracle) is refused: it is never a source to learn from."""
        if self._obs is None:
            raise ValueError("suggest needs an episode: reset first")
        agent = self._agents.get(policy)
        if agent is None:
            from openadapt.envpkg.evaluation import make_policy
            from openadapt.kit.policy import policy_rng

            agent = make_policy(self.pkg, policy)
            if agent.privileged:
                raise ValueError(f"the {policy} policy reads hidden state: it is never a demonstration source")
            agent.begin(self.env, self._obs, policy_rng(self._seed))
            self._agents[policy] = agent
        return self.pkg.protocol.format_action(agent.act(self._obs))
