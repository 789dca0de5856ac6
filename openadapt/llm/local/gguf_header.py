"""A minimal GGUF header reader: the magic, the format version and the `general.*` metadata strings.

Contract: `read_gguf_info(path)` raises `NotGGUFError` unless the file starts with the magic b"GGUF"; it reads
metadata key/values in file order and stops once `general.name` and `general.architecture` are known, or after
`max_keys` entries, so it touches only the first few kilobytes of a model (tokenizer arrays come later). A
header it cannot decode gives `name=None`, not an error: the magic is what makes a file a GGUF.
"""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel

MAGIC = b"GGUF"

# GGUF value types -> struct format of fixed-size scalars (8 = string, 9 = array are handled apart).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_STRING = 1 << 20  # a longer metadata string means we are misreading the header


class NotGGUFError(ValueError):
    pass


class GGUFInfo(BaseModel):
    version: int
    name: str | None = None  # general.name
    architecture: str | None = None  # general.architecture
    metadata: dict[str, str | int | float | bool] = {}  # the general.* scalars read


def is_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def read_gguf_info(path: Path, max_keys: int = 64) -> GGUFInfo:
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise NotGGUFError(f"{path} does not start with the GGUF magic")
        version = _read(f, "<I")
        info = GGUFInfo(version=version)
        # A truncated or unusual header: the magic and version are still true.
        with contextlib.suppress(struct.error, UnicodeDecodeError, ValueError):
            _read_metadata(f, info, version, max_keys)
        return info


def _read_metadata(f: BinaryIO, info: GGUFInfo, version: int, max_keys: int) -> None:
    count_fmt = "<I" if version == 1 else "<Q"  # GGUF v1 used 32-bit counts
    _tensors, n_kv = _read(f, count_fmt), _read(f, count_fmt)
    for _ in range(min(n_kv, max_keys)):
        key = _string(f, count_fmt)
        value_type = _read(f, "<I")
        value = _value(f, value_type, count_fmt)
        if key.startswith("general.") and isinstance(value, str | int | float | bool):
            info.metadata[key] = value
        if key == "general.name":
            info.name = str(value)
        elif key == "general.architecture":
            info.architecture = str(value)
        if info.name and info.architecture:
            return


def _read(f: BinaryIO, fmt: str):
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("unexpected end of file")
    return struct.unpack(fmt, data)[0]


def _string(f: BinaryIO, count_fmt: str) -> str:
    n = _read(f, count_fmt)
    if n > _MAX_STRING:
        raise ValueError("implausible string length")
    return f.read(n).decode("utf-8")


def _value(f: BinaryIO, value_type: int, count_fmt: str):
    if value_type in _SCALARS:
        return _read(f, _SCALARS[value_type])
    if value_type == _STRING:
        return _string(f, count_fmt)
    if value_type == _ARRAY:
        item_type, n = _read(f, "<I"), _read(f, count_fmt)
        if item_type in _SCALARS:  # skip, not read: arrays are tokenizer tables
            f.seek(n * struct.calcsize(_SCALARS[item_type]), 1)
        else:
            for _ in range(n):
                _value(f, item_type, count_fmt)
        return None
    raise ValueError(f"unknown GGUF value type {value_type}")
