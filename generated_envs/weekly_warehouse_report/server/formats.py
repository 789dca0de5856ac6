"""How report values are written: the default formats, the customers' hidden house styles (ECI 4+), and the
loose reading that tells a right value in the wrong format from a wrong value."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# Per kind of value: the house-style variants a customer may impose, with the words grader feedback uses.
STYLE_VARIANTS: dict[str, dict[str, str]] = {
    "date": {"dmy_slash": "dates as DD/MM/YYYY (e.g. 05/01/2026)",
             "dmy_text": "dates as DD Mon YYYY (e.g. 05 Jan 2026)"},
    "amount": {"separators": "amounts with thousands separators and two decimals (e.g. 12,345.60)",
               "currency": "amounts prefixed with the currency code (e.g. USD 12345.60)"},
    "name": {"upper": "customer names in upper case (e.g. ACME LENDING)"},
}
DEFAULT_RULES: dict[str, str] = {
    "text": "text exactly as stored in the database",
    "name": "the customer name exactly as stored in the database",
    "date": "dates as YYYY-MM-DD",
    "amount": "amounts with two decimals, a leading minus when negative and no separators (e.g. 12345.60)",
    "count": "counts as whole numbers (e.g. 17)",
    "percent": "percentages with one decimal and a % sign (e.g. 87.5%)",
}


@dataclass(frozen=True)
class HouseStyle:
    """A customer's formatting rules; the default is the documented format. Only ECI 4+ customers differ."""

    date: str = "iso"
    amount: str = "plain"
    name: str = "as_stored"

    def variant(self, kind: str) -> str | None:
        """The non-default variant this style imposes on a kind of value, if any."""
        value = getattr(self, kind, None) if kind in STYLE_VARIANTS else None
        return value if value in STYLE_VARIANTS.get(kind, {}) else None

    def rule(self, kind: str) -> str:
        variant = self.variant(kind)
        if variant is None:
            return DEFAULT_RULES[kind]
        return f"this customer's house style writes {STYLE_VARIANTS[kind][variant]}"

    @property
    def custom_kinds(self) -> list[str]:
        return [kind for kind in STYLE_VARIANTS if self.variant(kind)]


def cents_to_decimal(cents: int) -> Decimal:
    return Decimal(cents).scaleb(-2)


def format_amount(cents: int, style: HouseStyle) -> str:
    plain = f"{cents_to_decimal(cents):.2f}"
    if style.amount == "separators":
        return f"{cents_to_decimal(cents):,.2f}"
    if style.amount == "currency":
        return f"USD {plain}"
    return plain


def format_date(day: dt.date, style: HouseStyle) -> str:
    if style.date == "dmy_slash":
        return f"{day.day:02d}/{day.month:02d}/{day.year}"
    if style.date == "dmy_text":
        return f"{day.day:02d} {MONTHS[day.month - 1]} {day.year}"
    return day.isoformat()


def format_name(name: str, style: HouseStyle) -> str:
    return name.upper() if style.name == "upper" else name


def format_percent(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)}%"


def round_cents(value: Decimal) -> int:
    """A Decimal amount (in currency units) to whole cents, rounding half up."""
    return int((value * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP))


# ---- loose reading: the value behind a string, whatever its format -------------------------------------------
_AMOUNT_NOISE = re.compile(r"[,\s]|USD|\$")
_DATE_PATTERNS = (
    (re.compile(r"^(\d{4})-(\d{2})-(\d{2})$"), ("y", "m", "d")),
    (re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4})$"), ("d", "m", "y")),
)
_TEXT_DATE = re.compile(r"^(\d{1,2}) ([A-Za-z]{3}) (\d{4})$")


def read_amount(text: str) -> int | None:
    """Cents behind an amount written in any of the formats (None when it is not an amount)."""
    cleaned = _AMOUNT_NOISE.sub("", text.strip().upper())
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    return round_cents(value) if value.is_finite() else None


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
        return Decimal(text.strip().rstrip("%").strip()).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    except (InvalidOperation, ValueError):
        return None


def read_count(text: str) -> int | None:
    text = text.strip().replace(",", "")
    return int(text) if text.isdigit() else None


def same_value(kind: str, stored: str, expected: str) -> bool:
    """Whether `stored` holds the expected value in some format (kind-aware, case-insensitive for text)."""
    if kind == "amount":
        return read_amount(stored) is not None and read_amount(stored) == read_amount(expected)
    if kind == "date":
        return read_date(stored) is not None and read_date(stored) == read_date(expected)
    if kind == "percent":
        return read_percent(stored) is not None and read_percent(stored) == read_percent(expected)
    if kind == "count":
        return read_count(stored) is not None and read_count(stored) == read_count(expected)
    return " ".join(stored.split()).casefold() == " ".join(expected.split()).casefold()
