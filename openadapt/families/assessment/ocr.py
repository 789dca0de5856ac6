"""Seeded OCR-style corruption of text, and quote matching against what was shown.

Generic helpers (no domain knowledge); candidates for `openadapt.kit` (the kit's `Perturber` blurs numbers and
cuts lines, but has nothing that garbles words the way a scanner does).
"""

from __future__ import annotations

import random

# Character confusions typical of OCR on printed text; pairs first (they are tried before single characters).
PAIR_CONFUSIONS = {"rn": "m", "cl": "d", "vv": "w", "li": "h"}
CHAR_CONFUSIONS = {
    "l": "1", "I": "l", "o": "0", "O": "0", "e": "c", "a": "o", "s": "5", "S": "5", "B": "8", "g": "q", "m": "rn",
    "h": "b", "t": "f", "u": "v", "i": "l", "n": "u", "c": "e",
}


def ocr_corrupt(text: str, rng: random.Random, rate: float = 0.15) -> str:
    """`text` as a poor scan reads it: each confusable character (or pair) is misread with probability `rate`,
    and now and then a space is lost. Draws only from `rng`."""
    out: list[str] = []
    i = 0
    while i < len(text):
        pair = text[i:i + 2]
        if pair in PAIR_CONFUSIONS and rng.random() < rate:
            out.append(PAIR_CONFUSIONS[pair])
            i += 2
            continue
        ch = text[i]
        if ch in CHAR_CONFUSIONS and rng.random() < rate:
            out.append(CHAR_CONFUSIONS[ch])
        elif ch == " " and rng.random() < rate / 5:
            pass
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def squash(text: str) -> str:
    """Whitespace-normalised text, for comparing quotes with lines."""
    return " ".join(text.split())


def quotes_line(quote: str, line: str, min_chars: int) -> bool:
    """True when `quote` is a verbatim piece of `line` long enough to identify it (at least `min_chars`
    characters, or the whole line when the line is shorter)."""
    q, ln = squash(quote), squash(line)
    return bool(q) and len(q) >= min(min_chars, len(ln)) and q in ln
