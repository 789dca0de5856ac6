"""Quote matching against what was shown: does an agent's quote identify a line of the document?

(The OCR-style garbling of lines is the kit's `Perturber.misread`.)
"""

from __future__ import annotations


def squash(text: str) -> str:
    """Whitespace-normalised text, for comparing quotes with lines."""
    return " ".join(text.split())


def quotes_line(quote: str, line: str, min_chars: int) -> bool:
    """True when `quote` is a verbatim piece of `line` long enough to identify it (at least `min_chars`
    characters, or the whole line when the line is shorter)."""
    q, ln = squash(quote), squash(line)
    return bool(q) and len(q) >= min(min_chars, len(ln)) and q in ln
