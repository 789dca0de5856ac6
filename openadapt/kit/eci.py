"""Environment Complexity Index: what each tier changes, and the seeded mechanics that change it.

Tiers are cumulative, so a higher tier is never easier than a lower one:

1. base task, clean observations
2. + noisy or missing fields
3. + adversarial distractors in the context
4. + hidden constraints the agent must infer from the environment's responses
5. + all of these turned up, and a smaller step budget (declared per tier in the manifest)
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

T = TypeVar("T")

TIERS: tuple[int, ...] = (1, 2, 3, 4, 5)
MIN_TIER, MAX_TIER = TIERS[0], TIERS[-1]


def tier_problem(value: object) -> str | None:
    """Why `value` is not an ECI tier (None when it is one): the one wording every stage uses."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"ECI tier {value!r} is not a whole number (tiers run {MIN_TIER}-{MAX_TIER})"
    if value not in TIERS:
        return f"ECI tier {value} is outside {MIN_TIER}-{MAX_TIER}"
    return None


def check_tier(value: int) -> int:
    problem = tier_problem(value)
    if problem:
        raise ValueError(problem)
    return value


# The one type of an ECI tier, for every pydantic model and signature that holds one.
Tier = Annotated[int, AfterValidator(check_tier),
                 WithJsonSchema({"type": "integer", "minimum": MIN_TIER, "maximum": MAX_TIER})]


def parse_tiers(text: str) -> list[int]:
    """`"3"`, `"1,3,5"`, `"2-4"` or `"all"` -> sorted tiers; ValueError with the one wording otherwise."""
    text = text.strip().lower()
    if text == "all":
        return list(TIERS)
    tiers: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, _, high = part.partition("-")
        try:
            bounds = (int(low), int(high or low))
        except ValueError:
            raise ValueError(f"{part!r} is not an ECI tier: use {MIN_TIER}-{MAX_TIER}, a list like 1,3,5, "
                             "a range like 2-4, or 'all'") from None
        for bound in bounds:
            check_tier(bound)
        tiers.update(range(bounds[0], bounds[1] + 1))
    if not tiers:
        raise ValueError(f"no ECI tier given: use {MIN_TIER}-{MAX_TIER}, a list like 1,3,5, or 'all'")
    return sorted(tiers)

TIER_MEANINGS: dict[int, str] = {
    1: "base task, clean observations",
    2: "noisy or incomplete fields",
    3: "adversarial distractors in the context",
    4: "hidden constraints the agent must infer from the environment's responses",
    5: "all of the above, stronger, with a reduced step budget",
}


class TierProfile(BaseModel):
    """The knobs one tier turns; environments read them instead of branching on the tier number."""

    model_config = ConfigDict(frozen=True)

    eci: Tier
    noise: float = Field(ge=0.0, le=1.0, description="chance a field is perturbed")
    drop: float = Field(ge=0.0, le=1.0, description="chance an unprotected field is withheld")
    distractors: int = Field(ge=0, description="misleading items injected into the context")
    hidden_constraints: bool = Field(description="whether constraints are only revealed by responses")
    depth: int = Field(ge=0, description="how far the cause sits from the symptom (domain-interpreted)")


DEFAULT_PROFILES: dict[int, TierProfile] = {
    1: TierProfile(eci=1, noise=0.0, drop=0.0, distractors=0, hidden_constraints=False, depth=0),
    2: TierProfile(eci=2, noise=0.3, drop=0.3, distractors=0, hidden_constraints=False, depth=0),
    3: TierProfile(eci=3, noise=0.3, drop=0.3, distractors=3, hidden_constraints=False, depth=1),
    4: TierProfile(eci=4, noise=0.3, drop=0.3, distractors=3, hidden_constraints=True, depth=1),
    5: TierProfile(eci=5, noise=0.4, drop=0.4, distractors=5, hidden_constraints=True, depth=2),
}

_DIGITS = re.compile(r"\d+(?:\.\d+)?")

# How a poor scan misreads printed text (a character, or a pair of them, read as another; a space lost) and
# printed figures (a digit read as the letter it resembles: the figure stays recognisable to a careful reader).
OCR_PAIRS = {"rn": "m", "cl": "d", "vv": "w", "li": "h"}
OCR_LETTERS = {
    "l": "1", "I": "l", "o": "0", "O": "0", "e": "c", "a": "o", "s": "5", "S": "5", "B": "8", "g": "q", "m": "rn",
    "h": "b", "t": "f", "u": "v", "i": "l", "n": "u", "c": "e", " ": "",
}
OCR_DIGITS = {"0": "O", "1": "l", "5": "S", "8": "B", "2": "Z", "6": "b"}


class Perturber:
    """Seeded noise, withholding and distractor injection for one episode.

    Every draw comes from the episode's own `random.Random`, so an episode is a pure function of its seed.
    """

    __slots__ = ("rng", "tier")

    def __init__(self, rng: random.Random, tier: TierProfile):
        self.rng = rng
        self.tier = tier

    def chance(self, p: float) -> bool:
        return p > 0.0 and self.rng.random() < p

    def withhold(self, items: Sequence[T], protect: Callable[[T], bool] = lambda _: False) -> list[T]:
        """Drop each unprotected item with the tier's drop rate; order is kept."""
        return [item for item in items if protect(item) or not self.chance(self.tier.drop)]

    def jitter(self, value: float, relative: float = 0.15) -> float:
        """Perturb a number by up to `relative` of itself, with the tier's noise rate."""
        if not self.chance(self.tier.noise):
            return value
        return value * (1.0 + self.rng.uniform(-relative, relative))

    def blur_numbers(self, text: str) -> str:
        """With the tier's noise rate, replace the numbers in a line by '??' (a sensor gap)."""
        if not self.chance(self.tier.noise):
            return text
        return _DIGITS.sub("??", text)

    def truncate(self, text: str, keep_words: int = 2) -> str:
        """With the tier's noise rate, cut a line short after its first `keep_words` words (a lossy shipper)."""
        words = text.split(" ")
        if len(words) <= keep_words + 1 or not self.chance(self.tier.noise):
            return text
        return " ".join(words[: self.rng.randint(keep_words, len(words) - 1)]) + " ...[truncated]"

    def misread(self, text: str, errors: int = 1, rate: float = 1.0, chars: Mapping[str, str] = OCR_LETTERS,
                pairs: Mapping[str, str] = OCR_PAIRS) -> str:
        """With the tier's noise rate (times `rate`), `text` as a poor scan reads it: `errors` of its confusable
        characters or pairs (`chars`, `pairs`: what each is misread as; pairs are tried first) misread."""
        if not self.chance(self.tier.noise * rate):
            return text
        spots = [i for i in range(len(text)) if text[i] in chars or text[i:i + 2] in pairs]
        if not spots:
            return text
        chosen = set(self.rng.sample(spots, min(errors, len(spots))))
        out: list[str] = []
        i = 0
        while i < len(text):
            if i in chosen and text[i:i + 2] in pairs:
                out.append(pairs[text[i:i + 2]])
                i += 2
                continue
            out.append(chars[text[i]] if i in chosen else text[i])
            i += 1
        return "".join(out)

    def missing(self, value: str, placeholder: str = "n/a") -> str:
        """With the tier's drop rate, report a field as missing."""
        return placeholder if self.chance(self.tier.drop) else value

    def inject(self, items: Sequence[T], pool: Sequence[T], count: int | None = None) -> list[T]:
        """Insert `count` (default: the tier's distractor count) items from `pool` at random positions."""
        count = self.tier.distractors if count is None else count
        out = list(items)
        if count <= 0 or not pool:
            return out
        for extra in self.rng.sample(list(pool), min(count, len(pool))):
            out.insert(self.rng.randint(0, len(out)), extra)
        return out
