"""Keep a constrained reply in the scripts its conversation is written in.

Qwen's small models drift into another script mid-sentence ('(더{name})', '￥{counterpart}'). The checks find it, but
the rewrite drifts again. A grammar can forbid it outright: every negated character class of the reply's GBNF (a
free string's `char`, a pattern's `[^{}]`, the dot) also excludes the scripts a text's check flags
(`families.domain.FOREIGN_SCRIPTS`), unless the conversation itself uses one of them (a task written in Japanese
gets its reply in Japanese).
"""

from __future__ import annotations

import re

from openadapt.families.domain import FOREIGN, FOREIGN_SCRIPTS

_EXCLUDED = "".join(f"\\u{lo:04X}-\\u{hi:04X}" for lo, hi in FOREIGN_SCRIPTS)
# a negated character class of GBNF: '[^' then escaped or plain characters up to the closing ']'
_NEGATED_CLASS = re.compile(r"\[\^((?:\\.|[^\]\\])*)\]")


def uses_foreign_script(texts: list[str]) -> bool:
    return any(FOREIGN.search(text) for text in texts)


def confined(gbnf: str) -> str:
    """The grammar with the foreign scripts excluded from every negated character class."""
    return _NEGATED_CLASS.sub(lambda m: f"[^{m.group(1)}{_EXCLUDED}]", gbnf)
