"""Package names from task prompts: a few content words, a lowercase identifier."""

from __future__ import annotations

import hashlib
import re

from openadapt.errors import UsageError

STOPWORDS = frozenset((
    "a", "an", "the", "and", "or", "of", "for", "to", "in", "on", "at", "by", "with", "from", "into", "over",
    "under", "about", "as", "is", "are", "be", "been", "being", "this", "that", "these", "those", "it", "its",
    "their", "our", "your", "my", "we", "you", "they", "he", "she", "them", "his", "her", "train", "teach",
    "agent", "agents", "model", "models", "learn", "learns", "learning", "environment", "environments", "env",
    "task", "tasks", "build", "create", "make", "write", "generate", "design", "using", "use", "which", "who",
    "whom", "what", "when", "where", "how", "why", "can", "could", "should", "would", "will", "shall", "may",
    "might", "must", "do", "does", "did", "done", "llm", "llms", "rl", "reinforcement", "policy", "policies",
    "episode", "episodes", "reward", "rewards", "based", "given", "new", "some", "any", "each", "every",
    "run", "runs", "operate", "manage", "handle", "get", "gets", "go", "goes", "off", "out", "help", "assist",
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
NOT_ENGLISH = ("the task prompt does not look like English: openadapt names a package from the prompt's English "
               "words, so pass --name NAME (a lowercase identifier, e.g. --name irrigation_pumps); the designer "
               "reads the prompt as written, and its models work best in English")


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
    """`generated_envs/<name>`: the task's content words. A prompt that is not English gets no name made from
    words it does not have: UsageError asking for --name (never a name mangled from another language)."""
    if not looks_english(task):
        raise UsageError(NOT_ENGLISH)
    words = content_words(task)
    if not words:
        words = ["env", hashlib.sha256(task.encode("utf-8")).hexdigest()[:8]]
    name = "_".join(words)
    return f"{name}_{suffix}" if suffix and not name.endswith(suffix) else name
