"""The expert's brief: what the designer model knows of the task's world, asked for in its own words before any
piece of the domain is written, and out of sight of the worked example.

A small model writes the domain in the register of whatever world it is shown. Asked first, as a practitioner of
the task's world with no example in sight, it names that world's own causes, checks and readings. Free text, not
JSON: constrained answers to the same question are shorter and more generic. The brief then sits in the
conversation before the worked example, so every piece (and every request aside, which keeps the task's part of
the opening message) is written with it in sight.
"""

from __future__ import annotations

import re

from openadapt.designer.deadline import NO_DEADLINE, Deadline
from openadapt.llm.chat import ChatBackend, Completion

SYSTEM = ("You are a senior practitioner of the world the user names. You answer from your own knowledge of the "
          "trade, with its concrete names and facts, and never ask for more information.")
GENERIC_QUESTION = ("name the parts of this world the agent deals with, what goes wrong or must be decided there, "
                    "and what an expert checks and does about each")
MAX_TOKENS = 420
MAX_CHARS = 1600
MIN_CHARS = 80  # shorter than this is no brief (a refusal, a question back)


def brief_messages(task: str, question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"The task: {task}\n\nAs an expert of this world, {question}. One short "
                                        "numbered line each, in this world's own words."}]


def write_brief(backend: ChatBackend, task: str, question: str = "",
                deadline: Deadline = NO_DEADLINE) -> tuple[str | None, Completion]:
    """The cleaned brief (None where the answer holds none), and the completion it came from (for usage)."""
    deadline.check()
    completion = backend.complete(brief_messages(task, question or GENERIC_QUESTION), max_tokens=MAX_TOKENS)
    return clean_brief(completion.text), completion


_ASKS_BACK = re.compile(r"\b(please provide|could you (please )?(provide|share|tell)|i need more information)\b",
                        re.IGNORECASE)


def clean_brief(text: str) -> str | None:
    """Markdown emphasis off, one line per point, lines that ask back dropped, and the text cut where it starts
    repeating itself (a small model can loop on one phrase until `max_tokens`) or at MAX_CHARS, on a line end."""
    lines: list[str] = []
    seen: set[str] = set()
    for raw in text.replace("**", "").replace("__", "").splitlines():
        line = " ".join(raw.split())
        if not line or _ASKS_BACK.search(line):
            continue
        if _loops(line) or line.lower() in seen:
            break
        seen.add(line.lower())
        if sum(len(kept) + 1 for kept in lines) + len(line) > MAX_CHARS:
            break
        lines.append(line)
    brief = "\n".join(lines)
    return brief if len(brief) >= MIN_CHARS else None


def _loops(line: str, shingle: int = 4, times: int = 4) -> bool:
    """Whether a line repeats one run of `shingle` words `times` times or more ('1 hour, 30 minutes, 1 hour...')."""
    words = line.lower().split()
    counts: dict[tuple[str, ...], int] = {}
    for i in range(len(words) - shingle + 1):
        run = tuple(words[i:i + shingle])
        counts[run] = counts.get(run, 0) + 1
        if counts[run] >= times:
            return True
    return False
