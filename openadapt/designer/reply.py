"""Parse a designer LLM's reply into files, surviving real output: prose around fenced blocks, paths given in
the info string or in a heading above the fence, a forgotten closing fence, a truncated reply (detected and
reported), and paths that would escape the package (refused)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from openadapt.envpkg.render import safe_relative

_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_PATH_IN_INFO = re.compile(r"(?:path|file|title|filename)\s*[=:]\s*[\"']?([^\s\"']+)")
_PATH_TOKEN = re.compile(r"([\w./-]+\.(?:py|j2|md|json|yaml|yml|toml|txt))\b")
_HEADING = re.compile(r"^\s*(?:#{1,6}\s*|\*\*|`|[Ff]ile\s*:\s*|[Pp]ath\s*:\s*)+[`*]*\s*([\w./-]+\.\w+)[`*:]*\s*$")


@dataclass
class ParsedReply:
    files: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    truncated: bool = False


def _path_for(info: str, previous: str) -> str | None:
    match = _PATH_IN_INFO.search(info) or _PATH_TOKEN.search(info)
    if match:
        return match.group(1)
    heading = _HEADING.match(previous)
    return heading.group(1) if heading else None


def parse_reply(text: str, finish_reason: str | None = "stop") -> ParsedReply:
    result = ParsedReply()
    lines = text.splitlines()
    i, previous = 0, ""
    while i < len(lines):
        opening = _FENCE.match(lines[i].strip())
        if not opening:
            if lines[i].strip():
                previous = lines[i]
            i += 1
            continue
        marker, info = opening.group(1), opening.group(2).strip()
        path = _path_for(info, previous)
        body, i = [], i + 1
        closed = False
        while i < len(lines):
            if lines[i].strip() == marker or (lines[i].strip().startswith(marker[0] * 3)
                                               and not lines[i].strip().strip(marker[0])):
                closed = True
                i += 1
                break
            body.append(lines[i])
            i += 1
        previous = ""
        if not closed:
            if finish_reason == "length":
                result.truncated = True
                result.problems.append(f"the reply was cut off inside {path or 'a code block'} "
                                       "(token limit): write shorter files")
                break
            result.problems.append(f"{path or 'a code block'} has no closing fence; its content was taken to the end")
        if path is None:
            result.problems.append("a code block without a file path was ignored (put the path in the info "
                                   "string: ```python path=models.py)")
            continue
        try:
            path = safe_relative(path)
        except ValueError as exc:
            result.problems.append(str(exc))
            continue
        result.files[path] = "\n".join(body).rstrip() + "\n"
    if finish_reason == "length" and not result.truncated:
        result.truncated = True
        result.problems.append("the reply hit the token limit before it ended")
    if not result.files:
        result.problems.append("the reply contains no files in fenced blocks with paths")
    return result
