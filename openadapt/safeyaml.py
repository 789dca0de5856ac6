"""Untrusted YAML (a package's `openenv.yaml`, a `domain.yaml`), read with bounds that no file can get past.

`yaml.safe_load` builds no objects of Python's, but alone it still lets a file cost what it likes: a few
anchors and aliases expand into exponential data (an alias bomb), thousands of nested brackets exhaust the
recursion of its constructor, `.inf`, `.nan` and 10,000-digit integers pass as numbers. Here the text is
bounded in bytes, scanned event by event (iteratively: no recursion) for anchors, aliases, depth and node count
before anything is built, and the result is walked for numbers that are not finite or not of a sane size. Every
refusal is a `YamlRefused` whose message says what to change.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 24
MAX_NODES = 200_000
MAX_INT = 2**63 - 1

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlRefused(ValueError):
    """The text is not YAML openadapt reads: `reason` says why ("nests deeper than 24 levels"), the message
    names the source too."""

    def __init__(self, source: str, reason: str):
        super().__init__(f"{source} {reason}")
        self.reason = reason


def loads(text: str, source: str = "the file", *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH,
          max_nodes: int = MAX_NODES) -> Any:
    """The data of `text`, or YamlRefused."""
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise YamlRefused(source, f"is larger than {max_bytes // 1024} KiB")
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise YamlRefused(source, "uses YAML anchors or aliases (&name / *name): write every value out")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > max_depth:
                    raise YamlRefused(source, f"nests deeper than {max_depth} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            if isinstance(event, yaml.NodeEvent):
                nodes += 1
                if nodes > max_nodes:
                    raise YamlRefused(source, f"holds more than {max_nodes:,} values")
        data = yaml.load(text, Loader=_Loader)  # noqa: S506  (a safe loader: plain data only)
    except YamlRefused:
        raise
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer past Python's digit limit
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise YamlRefused(source, f"is not valid YAML ({first[:200]})") from None
    _check_values(data, source)
    return data


def load_file(path: Path, source: str | None = None, *, max_bytes: int = MAX_BYTES) -> Any:
    """The data of a YAML file that must be a regular file of UTF-8 text, or YamlRefused."""
    source = source or path.name
    if path.is_symlink() or not path.is_file():
        raise YamlRefused(source, "is missing or not a regular file")
    if path.stat().st_size > max_bytes:
        raise YamlRefused(source, f"is larger than {max_bytes // 1024} KiB")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlRefused(source, f"is not UTF-8 text (byte {exc.start})") from None
    return loads(text, source, max_bytes=max_bytes)


def _check_values(data: Any, source: str) -> None:
    """Refuse numbers no domain means: NaN, infinities, integers past 64 bits (walked without recursion)."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise YamlRefused(source, f"holds the number {value!r}: every number must be finite")
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
            raise YamlRefused(source, f"holds an integer of {value.bit_length()} bits: at most 64")
