"""A domain text's placeholders held by the grammar: the `{name}`s a text may use, and those it must use, as the
family declares them (`Domain.PLACEHOLDERS`, which its check reads too), compiled into the pattern its piece is asked
for under.

A small model writes placeholders the family does not fill and leaves out required ones, and asked again it repeats
the mistake. Under the pattern neither can be written. A declaration whose names come from the domain's own data (an
assessment's slot names) is left to the check: they are not known before they are written.
"""

from __future__ import annotations

import re
from typing import Any

from openadapt.designer.pieces import (
    Piece,
    is_model,
    kind_branches,
    list_item_model,
    split_by_kind,
)
from openadapt.families.base import Family
from openadapt.families.domain import COMPARED
from openadapt.llm.local.grammar import MAX_FREE_CHARS, bounded_pattern

_INDEX = re.compile(r"\[\d+\]")
Rule = tuple[tuple[str, ...], tuple[str, ...]]  # (allowed, required), each sorted


def family_rules(family: Family) -> dict[str, Rule]:
    """The placeholder rule of each text field of `family` by template path (`domain.faults[].evidence[]`, with
    `#kind` where it holds for records of one kind only)."""
    return {f"domain.{p.at}" + (f"#{p.kind}" if p.kind else ""): (tuple(sorted(p.allowed)), tuple(sorted(p.required)))
            for p in family.domain.PLACEHOLDERS if p.names_from is None}


PLACEHOLDER_CHARS = 12  # room kept for each placeholder written (`{component}` is 11 characters)


def text_pattern(rule: Rule, max_length: int = MAX_FREE_CHARS, min_length: int = 0, digits: bool = True) -> str:
    """A grammar-ready pattern for a text of at most `max_length` characters under `rule`: any character but a brace, or
    an allowed placeholder; each required placeholder at least once (two in either order; of three or more none is
    enforced: the orders are not spelled out). The stretches of text before, between and after the required ones share
    the length: each bounded on its own to the whole length, they let a small model run to the token limit without
    writing the placeholder. A text with no required placeholder holds `min_length` characters or placeholders
    (llama.cpp ignores minLength beside a pattern). Without `digits`, the text holds no figure (`Domain.NO_DIGITS`);
    it never holds a slot (`families.domain.SLOT`)."""
    allowed, required = rule
    required = required if len(required) <= 2 else ()
    # The pattern is of the JSON-encoded text, as the grammar writes it: a raw line break is no JSON, and there is
    # no quote (bounded_pattern leaves `"` and `\` out of the class): allowed escaped, quotes can loop to the limit.
    # Nor a slot left to fill ('<pod-name>'): `<` opens only a comparison.
    banned = r"{}\n\r\t" + ("" if digits else "0-9")
    compared = COMPARED if digits else COMPARED.replace("0-9", "")
    char = f"([^<{banned}]|< ?[{compared}])"
    free = char if not allowed else f"({char}|[{{](" + "|".join(allowed) + ")[}])"
    # room kept for the placeholders written, where any may be
    room = max(len(required) + 1, max_length - PLACEHOLDER_CHARS * max(1, len(required)) * bool(allowed))
    # the stretches split the room evenly, so the whole stays within the bound (a small model fills every stretch)
    stretch = max(1, room // (len(required) + 1))
    run = f"{free}{{0,{stretch}}}"
    # One required placeholder comes first or after a space or a mark, never glued inside a word where its stretch
    # ran out. (Two keep the plain stretches: so constrained, a small model loops on the placeholders.)
    lead = f"({run}{_BEFORE_PLACEHOLDER})?" if len(required) == 1 else run
    body = (lead + "".join(f"[{{]{name}[}}]{run}" for name in required) if required else
            f"{free}{{{min(min_length, stretch)},{stretch}}}")
    if len(required) == 2:
        first, second = required
        body = f"({body}|{run}[{{]{second}[}}]{run}[{{]{first}[}}]{run})"
    return f"^{body}$"


_BEFORE_PLACEHOLDER = r"[^A-Za-z0-9{}\n\r\t]"  # what may come right before a required placeholder: no letter or digit


def rule_for(family: Family, path: str, kind: str | None = None) -> Rule | None:
    """The rule of the text at a concrete domain path (`domain.faults[2].evidence[0]`), if the family has one; a
    list of lines that `Domain.NAMED_LINES` has written with names in the placeholders' place requires none. With the
    `kind` of the record the text belongs to, that kind's rule where the family's kinds differ (a scheduling
    `site_ends_by` rule names {site} and {time}, a `staff_excludes_type` one {staff} and {task_type})."""
    top = path.removeprefix("domain.").split(".")[0].split("[")[0]
    rules, template = family_rules(family), _INDEX.sub("[]", path)
    rule = (rules.get(f"{template}#{kind}") if kind else None) or rules.get(template)
    return (rule[0], ()) if rule is not None and top in family.domain.NAMED_LINES else rule


def with_placeholders(schema: dict[str, Any], family: Family, path: str,
                      stands_for: str | None = None, kind: str | None = None) -> dict[str, Any]:
    """`schema` (a bounded JSON schema, changed in place and returned) with a pattern on every text the family has
    a placeholder rule for. `path` is the domain path the schema's object stands for (`domain`, `domain.faults[]`,
    `domain.texts`), or, with `stands_for`, the path of that one property of it (the `items` of a list of lines
    asked for whole, the `text` of one text asked for alone); `kind`: the kind of the record whose text is asked
    for again (`rule_for`). A record whose texts' rule depends on its kind, asked for whole, is one alternative
    per kind (`pieces.split_by_kind`)."""
    defs = schema.get("$defs", {})

    def visit(node: dict[str, Any], at: str, of_kind: str | None = None) -> None:
        branches = kind_branches(node)
        if branches:  # one alternative per kind already (`pieces.split_by_kind`): each under its kind's rules
            for value, branch in branches:
                visit(branch, at, value)
            return
        for name, prop in node.get("properties", {}).items():
            constrain(prop, at if node is schema and name == stands_for else f"{at}.{name}", of_kind or kind)
        if of_kind is None and kind is None and stands_for is None and texts_by_kind(node, at):
            split_by_kind(node)
            visit(node, at)

    def texts_by_kind(node: dict[str, Any], at: str) -> bool:
        """A record with a `kind` and a text whose rule depends on it (a scheduling hidden rule): asked for whole,
        it becomes one alternative per kind, so that once the grammar has written the kind its text must name what
        that kind names."""
        props, rules = node.get("properties", {}), family_rules(family)
        kinds = props.get("kind", {}).get("enum") or []
        return len(kinds) > 1 and any(f"{_INDEX.sub('[]', at)}.{name}#{k}" in rules for name in props
                                      for k in kinds)

    def constrain(prop: dict[str, Any], at: str, of_kind: str | None) -> None:
        # `X | None` is an anyOf, whose $ref is held to the rules as a plain $ref is
        ref = prop.get("$ref") or next((p["$ref"] for p in [*prop.get("allOf", []), *prop.get("anyOf", [])]
                                        if "$ref" in p), None)
        if ref:
            visit(defs[ref.rsplit("/", 1)[-1]], at)
        elif prop.get("type") == "array" and isinstance(prop.get("items"), dict):
            constrain(prop["items"], f"{at}[]", of_kind)
        elif prop.get("type") == "string" and not {"enum", "const", "pattern"} & set(prop):
            rule = rule_for(family, at, of_kind)
            if rule is not None:
                # already bounded (no `*` or `+` left): bounded_pattern only keeps `"` and `\` out of its classes
                digits = _INDEX.sub("[]", at).removeprefix("domain.") not in family.domain.NO_DIGITS
                prop["pattern"] = bounded_pattern(text_pattern(rule, prop.get("maxLength", MAX_FREE_CHARS),
                                                               prop.get("minLength", 0), digits), 1)

    visit(schema, path)
    return schema


def piece_schema(schema: dict[str, Any], family: Family, piece: Piece) -> dict[str, Any]:
    """`with_placeholders` for the schema of one piece of the domain (a list's keys have no texts)."""
    if piece.keys:
        return schema
    if piece.field is None:
        return with_placeholders(schema, family, "domain")
    if piece.index is not None:
        return with_placeholders(schema, family, f"domain.{piece.field}[]")
    if piece.part is not None:
        return with_placeholders(schema, family, f"domain.{piece.field}.{piece.part}", stands_for="items")
    values = set(piece.model.model_fields) == {"items"} and list_item_model(
        family.domain.model_fields[piece.field].annotation) is None and not is_model(
        family.domain.model_fields[piece.field].annotation)
    return with_placeholders(schema, family, f"domain.{piece.field}", stands_for="items" if values else None)
