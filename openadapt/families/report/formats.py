"""How report values are written: the default formats, a subject's hidden house style (ECI 4+), and the loose
reading that tells a right value in the wrong format from a wrong value.

Amounts are held as whole minor units (cents for a measure with two decimals, units for one with none), so sums
and comparisons are exact. The wording of every rule is built from the domain's measure and nouns.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from openadapt.families.report.domain import ReportDomain

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DECIMALS = {0: "as whole numbers", 1: "with one decimal", 2: "with two decimals", 3: "with three decimals"}
_EXAMPLES = {0: "12345", 1: "12345.6", 2: "12345.60", 3: "12345.600"}
_TENTH = Decimal("0.1")


@dataclass(frozen=True)
class HouseStyle:
    """A subject's formatting rules; the default is the documented format. Only ECI 4+ subjects differ."""

    date: str = "iso"
    amount: str = "plain"
    name: str = "as_stored"

    def variant(self, kind: str) -> str | None:
        value = getattr(self, kind, None) if kind in STYLE_KINDS else None
        return value if value in STYLE_KINDS.get(kind, ()) else None

    @property
    def custom_kinds(self) -> list[str]:
        return [kind for kind in STYLE_KINDS if self.variant(kind)]


# The house-style variants per kind of value (sorted: episodes draw from them in this order).
STYLE_KINDS: dict[str, tuple[str, ...]] = {"amount": ("code", "separators"), "date": ("dmy_slash", "dmy_text"),
                                           "name": ("upper",)}


class Formats:
    """Formatting and loose reading for one domain."""

    def __init__(self, domain: ReportDomain):
        m = domain.record_table.measure
        self.decimals = m.decimals
        self.unit, self.symbol, self.placement = m.unit, m.symbol, m.placement
        self.quantum = Decimal(1).scaleb(-m.decimals)
        example = self.example = _EXAMPLES[m.decimals]
        spelled = _DECIMALS[m.decimals]
        coded = f"{m.unit} {example}" if m.placement == "prefix" else f"{example} {m.unit}"
        placed = "prefixed with" if m.placement == "prefix" else "followed by"
        separated = f"{Decimal(example):,.{m.decimals}f}"
        noun = domain.subject_noun
        self.variants: dict[str, dict[str, str]] = {
            "date": {"dmy_slash": "dates as DD/MM/YYYY (e.g. 05/01/2026)",
                     "dmy_text": "dates as DD Mon YYYY (e.g. 05 Jan 2026)"},
            "amount": {"separators": ("amounts with thousands separators"
                                      + (f" and {spelled.removeprefix('with ')}" if m.decimals else "")
                                      + f" (e.g. {separated})"),
                       "code": f"amounts {placed} the {m.unit_word} (e.g. {coded})"},
            "name": {"upper": f"{noun} names in upper case (e.g. {domain.subject_name_example.upper()})"},
        }
        self.amount_rule = (f"amounts {spelled}, a leading minus when negative and no separators")
        self.defaults: dict[str, str] = {
            "text": "text exactly as stored in the database",
            "name": f"the {noun} name exactly as stored in the database",
            "date": "dates as YYYY-MM-DD",
            "amount": f"{self.amount_rule} (e.g. {example})",
            "count": "counts as whole numbers (e.g. 17)",
            "percent": "percentages with one decimal and a % sign (e.g. 87.5%)",
        }
        self._noise = re.compile("|".join([r"[,\s]", *(re.escape(x.upper()) for x in (m.unit, m.symbol) if x)]))
        self.noun = noun

    # ---- writing ----------------------------------------------------------------------------------------
    def to_decimal(self, minor: int) -> Decimal:
        return Decimal(minor).scaleb(-self.decimals)

    def plain(self, minor: int) -> str:
        return f"{self.to_decimal(minor):.{self.decimals}f}"

    def amount(self, minor: int, style: HouseStyle) -> str:
        plain = self.plain(minor)
        if style.amount == "separators":
            return f"{self.to_decimal(minor):,.{self.decimals}f}"
        if style.amount == "code":
            return f"{self.unit} {plain}" if self.placement == "prefix" else f"{plain} {self.unit}"
        return plain

    def messy(self) -> tuple[str, ...]:
        """How noisy exports write a stored amount (format strings for a Decimal)."""
        d = self.decimals
        symbolled = f"{self.symbol}{{:.{d}f}}" if self.symbol else f"{{:.{d}f}}{self.unit}"
        return (f"{{:,.{d}f}}", symbolled, f"{{:.{d}f}} {self.unit}")

    @staticmethod
    def date(day: dt.date, style: HouseStyle) -> str:
        if style.date == "dmy_slash":
            return f"{day.day:02d}/{day.month:02d}/{day.year}"
        if style.date == "dmy_text":
            return f"{day.day:02d} {MONTHS[day.month - 1]} {day.year}"
        return day.isoformat()

    @staticmethod
    def name(name: str, style: HouseStyle) -> str:
        return name.upper() if style.name == "upper" else name

    @staticmethod
    def percent(value: Decimal) -> str:
        return f"{value.quantize(_TENTH, rounding=ROUND_HALF_UP)}%"

    def round_minor(self, value: Decimal) -> int:
        """A Decimal amount (in the measure's unit) to whole minor units, rounding half up."""
        return int((value * 10 ** self.decimals).quantize(Decimal("1"), rounding=ROUND_HALF_UP))

    def rule(self, kind: str, style: HouseStyle) -> str:
        variant = style.variant(kind)
        if variant is None:
            return self.defaults[kind]
        return f"this {self.noun}'s house style writes {self.variants[kind][variant]}"

    # ---- loose reading: the value behind a string, whatever its format ----------------------------------
    def read_amount(self, text: str) -> int | None:
        cleaned = self._noise.sub("", text.strip().upper())
        try:
            value = Decimal(cleaned)
        except InvalidOperation:
            return None
        return self.round_minor(value) if value.is_finite() else None

    def same_value(self, kind: str, stored: str, expected: str) -> bool:
        """Whether `stored` holds the expected value in some format (kind-aware, case-insensitive for text)."""
        if kind == "amount":
            return self.read_amount(stored) is not None and self.read_amount(stored) == self.read_amount(expected)
        if kind == "date":
            return read_date(stored) is not None and read_date(stored) == read_date(expected)
        if kind == "percent":
            return read_percent(stored) is not None and read_percent(stored) == read_percent(expected)
        if kind == "count":
            return read_count(stored) is not None and read_count(stored) == read_count(expected)
        return " ".join(stored.split()).casefold() == " ".join(expected.split()).casefold()


_DATE_PATTERNS = (
    (re.compile(r"^(\d{4})-(\d{2})-(\d{2})$"), ("y", "m", "d")),
    (re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4})$"), ("d", "m", "y")),
)
_TEXT_DATE = re.compile(r"^(\d{1,2}) ([A-Za-z]{3}) (\d{4})$")


def read_date(text: str) -> dt.date | None:
    text = text.strip()
    for pattern, order in _DATE_PATTERNS:
        match = pattern.match(text)
        if match:
            parts = dict(zip(order, (int(g) for g in match.groups()), strict=True))
            return _date(parts["y"], parts["m"], parts["d"])
    match = _TEXT_DATE.match(text)
    if match and match.group(2).title() in MONTHS:
        return _date(int(match.group(3)), MONTHS.index(match.group(2).title()) + 1, int(match.group(1)))
    return None


def _date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def read_percent(text: str) -> Decimal | None:
    try:
        return Decimal(text.strip().rstrip("%").strip()).quantize(_TENTH, rounding=ROUND_HALF_UP)
    except (InvalidOperation, ValueError):
        return None


def read_count(text: str) -> int | None:
    text = text.strip().replace(",", "")
    return int(text) if text.isdigit() else None
