"""Value slots (`value_slots`, `tiny` only): the values an observation shows (every run of three characters or
more holding a digit: an id `M-467`, a date, an amount, a time) reach the model as slot tokens, `<v1>`, `<v2>`
... in the order they first appear, and the slot tokens of its reply are written back as those values before the
environment reads the action.

Why: `tiny` writes a value digit by digit, and to copy a run of digits out of an observation that shows a dozen
others of the same shape it must find the right one and keep its place in it for every digit. Imitating the
heuristic, it writes ids of the right shape with other digits (`M-777` for `M-467`), more layers or not. With
slots, writing a value is choosing one token among those in front of it, as writing a component's name already
is. Nothing privileged enters: the slots are read off the observation the agent is shown, a value it does not
show (a sum) is still written in digits, and the environment sees the action the model's reply spells out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from openadapt.envpkg.textenv import TextEnv, TextStep

MAX_SLOTS = 96  # values an observation shows past these stay in digits
# A shorter value ('2', '15') stays in digits: written in a token or two, it is often a constant of the action
# (a level, a count) that the model learns as such, where its slot would move from one observation to the next.
MIN_CHARS = 3
SLOT_TOKENS = tuple(f"<v{i}>" for i in range(1, MAX_SLOTS + 1))
_VALUE = re.compile(r"[\w.:/-]*\d(?:[\w.:/-]|,(?=\d))*")  # "1,234.50" is one value
_EDGE = ".:/-"  # a sentence's full stop or a list's colon after a value is not part of it
SLOT = re.compile(r"<v\d+>")


def _values(text: str) -> list[tuple[int, int]]:
    """The spans of the values in `text`, their edges trimmed."""
    spans = []
    for match in _VALUE.finditer(text):
        start, end = match.span()
        while end > start and text[end - 1] in _EDGE:
            end -= 1
        while start < end and text[start] in _EDGE:
            start += 1
        if end - start >= MIN_CHARS and any(c.isdigit() for c in text[start:end]):
            spans.append((start, end))
    return spans


@dataclass
class Slots:
    """The slots of one observation: each value it shows and the token standing for it."""

    tokens: dict[str, str] = field(default_factory=dict)  # value -> slot token

    @classmethod
    def of(cls, observation: str) -> Slots:
        slots = cls()
        for start, end in _values(observation):
            value = observation[start:end]
            if value not in slots.tokens and len(slots.tokens) < MAX_SLOTS:
                slots.tokens[value] = SLOT_TOKENS[len(slots.tokens)]
        return slots

    def shown(self, text: str) -> str:
        """`text` with every value of these slots as its token (an observation, or an action written from it)."""
        out, last = [], 0
        for start, end in _values(text):
            token = self.tokens.get(text[start:end])
            if token is not None:
                out += [text[last:start], token]
                last = end
        return "".join(out) + text[last:]

    def written(self, text: str) -> str:
        """`text` with every slot token these slots hold as its value; a token they do not hold stays as it is,
        and the action's parser says what is wrong with it."""
        values = {token: value for value, token in self.tokens.items()}
        return SLOT.sub(lambda m: values.get(m.group(0), m.group(0)), text)


class SlottedTextEnv:
    """A `TextEnv` whose observations show value slots and whose actions may write them (see the module)."""

    def __init__(self, env: TextEnv):
        self.env = env
        self.slots = Slots()

    def system_prompt(self) -> str:
        return self.env.system_prompt()  # the same for every episode: it holds no episode's values

    def _shown(self, step: TextStep) -> TextStep:
        self.slots = Slots.of(step.prompt)
        return step.model_copy(update={"prompt": self.slots.shown(step.prompt)})

    def reset(self, seed: int, eci: int) -> TextStep:
        return self._shown(self.env.reset(seed=seed, eci=eci))

    def step(self, completion: str) -> TextStep:
        return self._shown(self.env.step(self.slots.written(completion)))

    def suggest(self, policy: str) -> str:
        """A reference policy's action as the model would write it: its values as the slots it sees."""
        return self.slots.shown(self.env.suggest(policy))
