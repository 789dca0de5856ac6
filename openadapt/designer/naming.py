"""Package names from task prompts: a few content words, a lowercase identifier."""

from __future__ import annotations

import hashlib
import re

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


def content_words(text: str, limit: int = 3) -> list[str]:
    """Up to `limit` content words of an English text, in order."""
    words: list[str] = []
    for word in re.findall(r"[a-z][a-z0-9]+", text.lower()):
        if len(word) >= 3 and word not in STOPWORDS and word not in words:
            words.append(word)
    return words[:limit]


def package_name(task: str, suffix: str = "") -> str:
    """`generated_envs/<name>`: the task's content words (or a digest when it has none in ASCII)."""
    words = content_words(task)
    if not words:
        words = ["env", hashlib.sha256(task.encode("utf-8")).hexdigest()[:8]]
    name = "_".join(words)
    return f"{name}_{suffix}" if suffix and not name.endswith(suffix) else name
