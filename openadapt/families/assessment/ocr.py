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


def ocr_corrupt(text: str, rng: random.Random, errors: int = 3) -> str:
    """`text` as a poor scan reads it: `errors` confusable characters (or pairs) misread, and sometimes a space
    lost. Positions are drawn from `rng` only."""
    spots = [i for i in range(len(text)) if text[i] in CHAR_CONFUSIONS or text[i:i + 2] in PAIR_CONFUSIONS
             or text[i] == " "]
    if not spots:
        return text
    chosen = set(rng.sample(spots, min(errors, len(spots))))
    out: list[str] = []
    i = 0
    while i < len(text):
        if i in chosen:
            pair = text[i:i + 2]
            if pair in PAIR_CONFUSIONS:
                out.append(PAIR_CONFUSIONS[pair])
                i += 2
                continue
            if text[i] != " ":  # a chosen space is simply lost
                out.append(CHAR_CONFUSIONS[text[i]])
        else:
            out.append(text[i])
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
