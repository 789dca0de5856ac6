"""Package names from task prompts: a few content words, a lowercase identifier.

An English prompt is named from its own words. A prompt in another language is named from the words of the
designer model's English translation of it; where the model gives no usable English, from a transliteration.
The prompt itself is never changed: the designer reads it as written.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from openadapt.llm.chat import ChatBackend

STOPWORDS = frozenset((
    "a", "an", "the", "and", "or", "of", "for", "to", "in", "on", "at", "by", "with", "from", "into", "over",
    "under", "about", "as", "is", "are", "be", "been", "being", "this", "that", "these", "those", "it", "its",
    "their", "our", "your", "my", "we", "you", "they", "he", "she", "them", "his", "her", "train", "trainer",
    "trainers", "teach",
    "agent", "agents", "model", "models", "learn", "learns", "learning", "environment", "environments", "env",
    "task", "tasks", "build", "create", "make", "write", "generate", "design", "using", "use", "which", "who",
    "whom", "what", "when", "where", "how", "why", "can", "could", "should", "would", "will", "shall", "may",
    "might", "must", "do", "does", "did", "done", "llm", "llms", "rl", "reinforcement", "policy", "policies",
    "episode", "episodes", "reward", "rewards", "based", "given", "new", "some", "any", "each", "every",
    "run", "runs", "operate", "manage", "handle", "get", "gets", "go", "goes", "off", "out", "help", "assist",
    "machine", "intelligent", "smart", "ai",
))
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# Function words: English ones, and frequent ones of other languages written in Latin letters (none of them an
# English word), to tell an English prompt from one in German, French, Spanish, Italian, Dutch or Portuguese.
ENGLISH_WORDS = frozenset((
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "at", "by", "for", "with", "from", "into", "that",
    "which", "who", "whose", "is", "are", "be", "it", "its", "this", "these", "their", "when", "where", "whether",
))
OTHER_WORDS = frozenset((
    "der", "das", "und", "ein", "eine", "einen", "einem", "einer", "auf", "mit", "ist", "zu", "von", "den", "dem",
    "nicht", "sich", "le", "la", "les", "un", "une", "des", "et", "du", "dans", "pour", "sur", "avec", "est", "aux",
    "el", "los", "las", "una", "y", "del", "para", "con", "por", "en", "il", "gli", "di", "che", "per", "della",
    "het", "een", "van", "voor", "met", "os", "uma", "em", "com", "da", "nas", "nos",
))
# A translator's instruction and one worked pair: asked only to translate, a small model adds words and loses the
# trade's nouns; with these it keeps more of a task's meaning (benchmarks/naming.py).
TRANSLATE = ("You are a professional translator. Translate the user's text into English faithfully: keep the exact "
             "meaning of every noun, verb and adjective, add nothing. Reply with the English translation only.")
TRANSLATED = [("Entraîne un agent à réparer les pompes en panne d'une ferme",
               "Train an agent to repair the broken-down pumps of a farm")]
TRANSLATION_TOKENS = 96
NAME_WORD_CHARS = 20  # a transliterated run of syllables is cut, so a name stays readable

NameSource = Literal["--name", "example", "task", "designer", "transliteration"]


@dataclass(frozen=True)
class PackageName:
    """A package name and where it came from; `english` is the model's translation it was made from, if any."""

    name: str
    source: NameSource
    english: str | None = None


def looks_english(text: str) -> bool:
    """Whether `text` reads as English: mostly ASCII letters, and not more foreign function words than English
    ones (a prompt of a few words without any is taken as English)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    if sum(not c.isascii() for c in letters) > 0.2 * len(letters):
        return False  # another script: Chinese, Cyrillic, Greek, Arabic...
    words = re.findall(r"[^\W\d_]+", text.lower())
    english = sum(w in ENGLISH_WORDS for w in words)
    other = sum(w in OTHER_WORDS for w in words)
    return not (other >= 2 and other > english)


def content_words(text: str, limit: int = 3) -> list[str]:
    """Up to `limit` content words of an English text, in order."""
    words: list[str] = []
    for word in re.findall(r"[a-z][a-z0-9]+", text.lower()):
        if len(word) >= 3 and word not in STOPWORDS and word not in words:
            words.append(word)
    return words[:limit]


def package_name(task: str, suffix: str = "") -> str:
    """The name of an English task: its content words (`env_<hash>` where it has none)."""
    words = content_words(task)
    if not words:
        words = ["env", hashlib.sha256(task.encode("utf-8")).hexdigest()[:8]]
    name = "_".join(words)
    return f"{name}_{suffix}" if suffix and not name.endswith(suffix) else name


def english_translation(task: str, backend: ChatBackend) -> str | None:
    """The designer model's English translation of `task`, on one line; None when it gave none that reads as
    English with content words. Greedy, so the same prompt gets the same name."""
    pairs = [m for source, english in TRANSLATED for m in ({"role": "user", "content": source},
                                                            {"role": "assistant", "content": english})]
    reply = backend.complete([{"role": "system", "content": TRANSLATE}, *pairs, {"role": "user", "content": task}],
                             max_tokens=TRANSLATION_TOKENS, temperature=0.0)
    english = " ".join(reply.text.split()).strip(" \"'")
    return english if english and looks_english(english) and content_words(english) else None


def transliterated_name(task: str) -> str:
    """A name from the task's words written in ASCII (anyascii): accents dropped, other scripts romanised,
    syllables of a script without spaces split where the romanisation capitalises them."""
    from anyascii import anyascii

    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", anyascii(task))
    words = [w[:NAME_WORD_CHARS] for w in content_words(spaced, limit=12) if w not in OTHER_WORDS]
    return package_name(" ".join(words[:3]) or task)


def name_package(task: str, backend: ChatBackend | None) -> PackageName:
    """The name of a task nobody named: its own words when it is English, else its English translation's (by
    `backend`, the designer's model), else a transliteration's."""
    if looks_english(task):
        return PackageName(package_name(task), "task")
    english = english_translation(task, backend) if backend is not None else None
    if english is not None:
        return PackageName(package_name(english), "designer", english)
    return PackageName(transliterated_name(task), "transliteration")
