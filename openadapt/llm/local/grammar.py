"""JSON schemas in the form llama.cpp's grammars take, and bounded so that a small model cannot run on: the
converter rejects some regex escapes, ignores length bounds beside a pattern, and lets a grammar go on to a
schema's own (large) bounds."""

from __future__ import annotations

import re
from typing import Any

MAX_LIST_ITEMS = 8  # items a constrained list may have (see `bounded`)
MAX_FREE_CHARS = 300  # characters of a string the schema leaves unbounded

# Class escapes llama.cpp's grammar parser does not know, as it knows them (outside and inside a [...] class).
_CLASS_ESCAPES = {"d": ("[0-9]", "0-9"), "w": ("[A-Za-z0-9_]", "A-Za-z0-9_"), "s": ("[ \\t\\n\\r]", " \\t\\n\\r")}


_LITERALS = set("./{}()*+?|$#")  # escaped in a pattern to stand for themselves


def grammar_pattern(pattern: str) -> str:
    """`pattern` with \\d, \\w and \\s spelled out as character classes and an escaped literal (\\.) as a class of
    one: llama.cpp rejects the grammar its own converter makes of those escapes."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in _CLASS_ESCAPES:
                out.append(_CLASS_ESCAPES[nxt][1 if in_class else 0])
            elif nxt in _LITERALS:  # an escaped literal: a class of that one character
                out.append(nxt if in_class else f"[{nxt}]")
            else:
                out.append(ch + nxt)
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
        elif ch == "]" and in_class:
            in_class = False
        out.append(ch)
        i += 1
    return "".join(out)


def bounded_pattern(pattern: str, max_length: int) -> str:
    """A grammar-spelled `pattern` that a JSON string can hold and a small model cannot run on in: every `*` and
    `+` repeats at most `max_length` times, and a negated class leaves out `"` and `\\`. llama.cpp's converter
    ignores maxLength where a string has a pattern, and a negated class lets the model close the string itself
    (then write the rest of the record inside it) or run on until the token limit."""
    out, i, in_class, negated = [], 0, False, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
                if negated:
                    out.append('"\\\\')
        elif ch == "[":
            in_class, negated = True, pattern[i + 1:i + 2] == "^"
        elif ch in "*+":
            ch = f"{{{0 if ch == '*' else 1},{max(1, max_length)}}}"
        out.append(ch)
        i += 1
    return "".join(out)


_ATOM = re.compile(r"\[(?:\\.|[^\]\\])*\]|\\.|[^\\\[\](){}|*+?^$.]")


def sized_pattern(pattern: str, min_length: int, max_length: int) -> str | None:
    """A pattern of single characters and classes, one of them repeated (`^[a-z][a-z0-9_]*$`, an identifier),
    with that repeat bounded so that the string's length is within [min_length, max_length]; None for any other
    pattern. llama.cpp's converter ignores minLength and maxLength beside a pattern, so the reply can fail them."""
    start, end = pattern.startswith("^"), pattern.endswith("$") and not pattern.endswith("\\$")
    body = pattern[int(start):len(pattern) - int(end)]
    atoms, i = [], 0
    while i < len(body):
        atom = _ATOM.match(body, i)
        if atom is None:
            return None
        i = atom.end()
        repeat = body[i] if i < len(body) and body[i] in "*+" else ""
        i += len(repeat)
        atoms.append([atom.group(), repeat])
    repeated = [k for k, (_, repeat) in enumerate(atoms) if repeat]
    if len(repeated) != 1:
        return None
    k, fixed = repeated[0], len(atoms) - 1
    low, high = max(int(atoms[k][1] == "+"), min_length - fixed), max_length - fixed
    if high < max(low, 1):
        return None
    atoms[k][1] = f"{{{low},{high}}}"
    return "^" * start + "".join(a + r for a, r in atoms) + "$" * end


def bounded(schema: Any) -> Any:
    """`schema` in the form llama.cpp's grammars take (patterns through `grammar_pattern` and `bounded_pattern`),
    with every list capped at MAX_LIST_ITEMS (or its minimum, if more) and every free string at MAX_FREE_CHARS: a
    grammar lets a small model go on to the schema's own bound (60 choices of a column), and it does, until the
    token limit cuts the reply. The caps only narrow what the domain allows."""
    if isinstance(schema, list):
        return [bounded(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bounded(v) for k, v in schema.items()}
    if isinstance(out.get("pattern"), str):
        pattern, limit = grammar_pattern(out["pattern"]), out.get("maxLength", MAX_FREE_CHARS)
        out["pattern"] = bounded_pattern(sized_pattern(pattern, out.get("minLength", 0), limit) or pattern, limit)
    if out.get("type") == "array":
        out["maxItems"] = min(out.get("maxItems", MAX_LIST_ITEMS), max(out.get("minItems", 0), MAX_LIST_ITEMS))
    if out.get("type") == "string" and not {"enum", "const", "pattern", "format"} & set(out):
        out["maxLength"] = min(out.get("maxLength", MAX_FREE_CHARS), max(out.get("minLength", 0), MAX_FREE_CHARS))
    return out


def with_text_room(schema: Any) -> Any:
    """`schema` with each free text (no pattern, enum or format) given a quarter more room than its bound, plus 10
    characters, up to MAX_FREE_CHARS: a grammar stops a text at its bound mid-phrase, the parse cuts a longer one
    back to whole sentences or phrases (`chat.cut_text`). A text with placeholders keeps the pattern its own
    bound sizes (stretches sized for the room let a model close the line before its placeholders)."""
    if isinstance(schema, list):
        return [with_text_room(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: with_text_room(v) for k, v in schema.items()}
    if (out.get("type") == "string" and isinstance(out.get("maxLength"), int)
            and not {"enum", "const", "pattern", "format"} & set(out) and out["maxLength"] < MAX_FREE_CHARS):
        out["maxLength"] = min(out["maxLength"] + out["maxLength"] // 4 + 10, MAX_FREE_CHARS)
    return out
