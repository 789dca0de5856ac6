"""Step an environment by hand through the same text protocol an LLM agent uses."""

from __future__ import annotations

from openadapt.envpkg.loader import LoadedPackage
from openadapt.errors import UsageError


class PlaySession:
    """One episode driven by typed completions; each reply is parsed exactly as a model's would be."""

    def __init__(self, pkg: LoadedPackage, eci: int, seed: int | None):
        if eci not in pkg.section.eci_tiers:
            raise UsageError(f"tier {eci} is not supported by {pkg.ref.label} (tiers {pkg.section.eci_tiers})")
        self.pkg = pkg
        self.env = pkg.make_env()
        self.observation = self.env.reset(seed=seed, eci=eci)
        self.total = 0.0

    @property
    def system_prompt(self) -> str:
        return self.pkg.protocol.system_prompt()

    def prompt(self) -> str:
        return self.pkg.protocol.render(self.observation)

    @property
    def done(self) -> bool:
        return self.observation.done

    def submit(self, completion: str):
        """Parse and step; returns (observation, parse error or None)."""
        parsed = self.pkg.protocol.parse(completion)
        self.observation = self.env.step(parsed.action)
        self.total += self.observation.reward or 0.0
        return self.observation, parsed.error
