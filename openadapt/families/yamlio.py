"""Domain files (`domain.yaml`): read them safely, write them readably.

A domain file is untrusted data: it is read with `yaml.safe_load`, bounded in size, and refused when it uses
anchors/aliases (a few aliases can expand into an exponential amount of data for the validators to walk).
Written domains are plain block YAML in the schema's field order, so a pull request shows a readable diff.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from openadapt import safeyaml
from openadapt.families.domain import Domain, DomainError, DomainProblem

MAX_DOMAIN_BYTES = 256 * 1024


def _refuse(message: str, source: str) -> DomainError:
    return DomainError([DomainProblem(path="domain", message=message)], source)


def parse_domain_yaml(text: str, source: str = "domain.yaml") -> Any:
    try:
        return safeyaml.loads(text, "the domain", max_bytes=MAX_DOMAIN_BYTES)
    except safeyaml.YamlRefused as exc:
        raise _refuse(exc.reason, source) from None


def read_domain_file(path: Path) -> Any:
    try:
        return safeyaml.load_file(path, "the domain", max_bytes=MAX_DOMAIN_BYTES)
    except safeyaml.YamlRefused as exc:
        raise _refuse(exc.reason, str(path)) from None


class _BlockDumper(yaml.SafeDumper):
    """Block style, with short lists and small records of scalars on one line; no aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _short_scalars(values: list[Any]) -> bool:
    return all(isinstance(v, (str, int, float, bool)) and not (isinstance(v, str) and ("\n" in v or len(v) > 40))
               for v in values) and len(repr(values)) <= 90


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.SequenceNode:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=_short_scalars(value))


def _dict(dumper: yaml.SafeDumper, value: dict[str, Any]) -> yaml.MappingNode:
    flow = _short_scalars(list(value.values())) and len(value) <= 4
    return dumper.represent_mapping("tag:yaml.org,2002:map", value.items(), flow_style=flow)


_BlockDumper.add_representer(str, _str)
_BlockDumper.add_representer(list, _list)
_BlockDumper.add_representer(dict, _dict)


def dump_domain(domain: Domain, header: str = "") -> str:
    """The domain as YAML, fields in schema order (defaults included: the file says everything)."""
    data = domain.model_dump(mode="json")
    body = yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=110,
                     default_flow_style=False)
    lines = [f"# {line}".rstrip() for line in header.splitlines()] if header else []
    return "\n".join(lines) + ("\n" if lines else "") + body
