"""Text checks shared by rewards that read an agent's free text: stuffing and grounding."""

from __future__ import annotations

from collections.abc import Iterable


def mentions(text: str, terms: Iterable[str]) -> list[str]:
    """The terms (case-insensitive) that occur in `text`, each once, in the order given."""
    lowered = text.lower()
    return [term for term in dict.fromkeys(terms) if term.lower() in lowered]


def is_stuffed(text: str, vocabulary: Iterable[str], limit: int = 3) -> bool:
    """True when `text` names `limit` or more distinct vocabulary terms: listing every answer to collect
    keyword credit instead of committing to one."""
    return len(mentions(text, vocabulary)) >= limit


def grounded(quotes: Iterable[str], seen_text: str, min_chars: int = 12) -> tuple[list[str], list[str]]:
    """Split quoted evidence into (grounded, invented): a quote is grounded when it has at least `min_chars`
    characters and occurs verbatim in what the agent was shown."""
    good, bad = [], []
    for quote in quotes:
        quote = quote.strip()
        if not quote:
            continue
        (good if len(quote) >= min_chars and quote in seen_text else bad).append(quote)
    return good, bad
