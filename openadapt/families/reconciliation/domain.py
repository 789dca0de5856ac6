"""The reconciliation domain: the sources whose records must agree, the parties and items they record, the
discrepancies that can be planted in them, how each is resolved, and the party terms that change the rules.

Each episode generates a batch of business transactions (a purchase, a payment, a shipment). Every transaction
leaves one record in each source (a purchase order, a goods receipt and an invoice; a ledger entry and a bank
statement line); the records of one transaction share a matching reference. The engine plants discrepancies by
*mechanism*, with the domain's labels, tolerances and resolutions:

- `shift`: one source's quantity, unit price or amount differs from the other sources' (a price variance, a
  short delivery, an FX difference), beyond a tolerance;
- `transpose`: two adjacent digits of one source's amount are swapped (a keying error);
- `omit`: the transaction is missing from some sources (a missing goods receipt, an unrecorded bank charge, an
  outstanding cheque when `late`);
- `duplicate`: one source holds the record twice (a resubmitted invoice, a double posting).

The agent lists and inspects records, reads party terms, flags each discrepancy (record, type, resolution) and
submits.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from openadapt.families.domain import (
    IDENT,
    Domain,
    DomainPart,
    DomainProblem,
    Placeholders,
    Reference,
    Rule,
    duplicates,
    names_differ,
    unknown_ref,
    unknown_refs,
)

Role = Literal["reference", "party", "item", "quantity", "unit_price", "amount", "date"]
NUMERIC_ROLES = ("quantity", "unit_price", "amount")
MAX_LAG_DAYS = 5
LATE_DAYS = 3  # a `late` omission is dated in the last LATE_DAYS days of the period
MIN_MARGIN = 0.005  # planted variances sit at least this far (relative) from every tolerance boundary
# Strings inside lists: bounded like every other field (domain files are untrusted data).
Ref = Annotated[str, StringConstraints(strip_whitespace=True, min_length=2, max_length=40)]
Memo = Annotated[str, StringConstraints(strip_whitespace=True, min_length=5, max_length=200)]
Alias = Annotated[str, StringConstraints(strip_whitespace=True, min_length=2, max_length=60)]


class Column(DomainPart):
    role: Role = Field(description=(
        "What this column holds: 'reference' (the matching key the sources share, e.g. the PO number), 'party' "
        "(the counterparty), 'item' (what was bought or what kind of transaction it is), 'quantity', "
        "'unit_price', 'amount' (quantity x unit price), or 'date'."))
    label: str = Field(min_length=2, max_length=40, pattern=r"^[^|:\n]+$", description=(
        "The column's heading in this source, in the source's own words, e.g. 'PO number', 'Qty received', "
        "'Value date', 'Amount (EUR)'. No '|' or ':'."))
    detail: bool = Field(default=False, description=(
        "True when the column shows only when a record is opened (an invoice's line details), not in the "
        "source's listing. Keep the columns that matching needs (reference, party, amount, date) listed."))


class Source(DomainPart):
    name: str = Field(min_length=2, max_length=24, pattern=IDENT, description=(
        "Identifier of the source, as the agent types it, e.g. 'invoice', 'goods_receipt', 'bank_statement'."))
    noun: str = Field(min_length=3, max_length=50, description=(
        "What one record of this source is called, singular, e.g. 'supplier invoice', 'goods receipt note', "
        "'bank statement line'."))
    id_prefix: str = Field(min_length=1, max_length=8, pattern=r"^[A-Z][A-Z0-9]*-?$", description=(
        "Prefix of this source's record ids (a 5-digit number follows), e.g. 'INV-', 'GRN-', 'BS'. Unique per "
        "source."))
    id_is_reference: bool = Field(default=False, description=(
        "True for the source whose record id IS the matching reference (a purchase order is known by its PO "
        "number). At most one source; it cannot hold duplicates or be split."))
    columns: list[Column] = Field(min_length=3, max_length=7, description=(
        "The columns this source shows, each role at most once. Every source needs 'reference' and 'date', and "
        "'amount' or 'quantity'. E.g. a goods receipt: PO number (reference), Received on (date), Item (item), "
        "Qty received (quantity)."))
    date_lag: tuple[int, int] = Field(default=(0, 0), description=(
        f"Days (min, max; 0-{MAX_LAG_DAYS}) after the transaction that this source's record is dated, e.g. "
        "[1, 3] for a bank that clears a payment one to three days after it is booked."))
    external: bool = Field(default=False, description=(
        "True when the counterparty or a third party writes these records (a supplier's invoice, the bank's "
        "statement): on noisy tiers they name parties by their aliases, not by your master-data name."))
    ocr: bool = Field(default=False, description=(
        "True when this source's records are read from scanned paper or PDF (invoices, delivery notes): on "
        "noisy tiers their figures carry OCR misreads such as 'S' for '5'."))
    splittable: bool = Field(default=False, description=(
        "True when one transaction can legitimately show up as two records of this source that add up to the "
        "whole (a delivery in two parts, a card settlement in two batches). Adversarial tiers plant such "
        "splits as records that look wrong but match."))
    split_items: list[Ref] = Field(default_factory=list, max_length=12, description=(
        "Ids of the items whose transactions can be split in this source (empty: any), e.g. only "
        "['card_settlement'] on a bank statement."))
    split_memo: str = Field(default="", max_length=160, description=(
        "Memo of each part of a split record (required when splittable), e.g. 'Partial delivery {part} of "
        "{parts} against {reference}'. Placeholders: {part}, {parts}, {reference}."))
    memos: list[Memo] = Field(min_length=1, max_length=6, description=(
        "Routine memos a record of this source carries, shown when it is opened, e.g. 'Received at dock 3 by "
        "the night shift; packaging intact'. They never signal a discrepancy. Placeholders: {party}, {item}, "
        "{reference}, {date}."))

    @field_validator("date_lag")
    @classmethod
    def _lag(cls, value: tuple[int, int]) -> tuple[int, int]:
        if not 0 <= value[0] <= value[1] <= MAX_LAG_DAYS:
            raise ValueError(f"must be [min, max] with 0 <= min <= max <= {MAX_LAG_DAYS}")
        return value

    def role(self, role: str) -> Column | None:
        return next((c for c in self.columns if c.role == role), None)

    def listed(self, role: str) -> bool:
        column = self.role(role)
        return column is not None and not column.detail


class Party(DomainPart):
    id: str = Field(min_length=2, max_length=40, pattern=IDENT, description=(
        "Identifier of the counterparty, as the agent types it to read its terms, e.g. 'nordic_steel'."))
    name: str = Field(min_length=2, max_length=60, pattern=r"^[^|:\n]+$", description=(
        "The party's name as records show it, e.g. 'Nordic Steel AB', 'Harbour Bank plc'."))
    aliases: list[Alias] = Field(default_factory=list, max_length=4, description=(
        "Other spellings the sources use for this party (truncated bank descriptions, abbreviations), e.g. "
        "'NORDIC STL AB', 'Nordic Steel'. Each shares a word with the name. Shown instead of the name on noisy "
        "tiers."))
    items: list[Ref] = Field(default_factory=list, max_length=20, description=(
        "Ids of the items this party trades (empty: any item), e.g. a steel mill sells steel, not toner: "
        "['steel_plate_10', 'steel_bar_40']."))
    terms: str = Field(min_length=20, max_length=300, description=(
        "The routine terms on file for this party, shown when the agent reads them, e.g. 'Net 30 days; "
        "deliveries DAP Gothenburg; account manager Eva Lind'. Never a discrepancy rule."))


class ItemSpec(DomainPart):
    id: str = Field(min_length=2, max_length=24, pattern=IDENT, description=(
        "Short identifier other fields use to refer to this item, e.g. 'steel_plate_10', 'customer_cheque'."))
    name: str = Field(min_length=2, max_length=60, pattern=r"^[^|:\n]+$", description=(
        "What is transacted, as records show it, e.g. 'Hot-rolled steel plate 10 mm', 'Supplier payment by "
        "cheque', 'Monthly account fee'."))
    unit: str = Field(default="", max_length=20, description="the unit a quantity counts, e.g. 'tonne', 'box of 100'")
    price: tuple[float, float] = Field(description=(
        "Range [low, high] of the unit price (or of the whole amount when quantity is always 1), e.g. "
        "[640.0, 720.0]."))
    quantity: tuple[int, int] = Field(default=(1, 1), description=(
        "Range [low, high] of the quantity of one transaction, e.g. [5, 40]; [1, 1] for payments."))

    @field_validator("price")
    @classmethod
    def _price(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not 0.5 <= value[0] <= value[1] <= 10_000_000:
            raise ValueError("must be [low, high] with 0.5 <= low <= high <= 10000000")
        return value

    @field_validator("quantity")
    @classmethod
    def _quantity(cls, value: tuple[int, int]) -> tuple[int, int]:
        if not 1 <= value[0] <= value[1] <= 100_000:
            raise ValueError("must be [low, high] with 1 <= low <= high <= 100000")
        return value


class Resolution(DomainPart):
    id: str = Field(min_length=3, max_length=24, pattern=IDENT, description=(
        "Identifier of the action that settles a discrepancy, e.g. 'request_credit_note', 'post_bank_charge'."))
    description: str = Field(min_length=10, max_length=200, description=(
        "What the resolution does, for the agent's manual, e.g. 'ask the supplier for a credit note for the "
        "overbilled amount and hold the invoice until it arrives'."))


class Discrepancy(DomainPart):
    id: str = Field(min_length=3, max_length=24, pattern=IDENT, description=(
        "The classification label the agent flags, e.g. 'price_variance', 'short_delivery', "
        "'outstanding_cheque'."))
    description: str = Field(min_length=15, max_length=240, description=(
        "How to recognise it, for the agent's manual, in this world's words, e.g. 'the invoice bills a higher "
        "unit price than the purchase order agreed'."))
    mechanism: Literal["shift", "transpose", "omit", "duplicate"] = Field(description=(
        "How the engine plants it: 'shift' (one source's quantity, unit_price or amount differs from the other "
        "sources' beyond the tolerance), 'transpose' (two adjacent digits of one source's amount swapped), "
        "'omit' (the transaction is missing from the sources in missing_from), 'duplicate' (the source holds "
        "the record twice; the later copy is the duplicate)."))
    source: str = Field(default="", max_length=30, description=(
        "shift, transpose, duplicate: the source whose record is wrong, e.g. 'goods_receipt'."))
    role: Literal["", "quantity", "unit_price", "amount"] = Field(default="", description=(
        "shift: the value that differs ('quantity', 'unit_price' or 'amount'); transpose: always 'amount'."))
    direction: Literal["", "up", "down"] = Field(default="", description=(
        "shift: whether the wrong value is higher ('up') or lower ('down') than the other sources'."))
    change: tuple[float, float] = Field(default=(0.0, 0.0), description=(
        "shift: range [low, high] of the relative change planted, e.g. [0.04, 0.15] for 4-15%; low must exceed "
        "the tolerance."))
    tolerance: float = Field(default=0.0, ge=0.0, le=0.2, description=(
        "shift: relative variance accepted without action (0.02 = 2%); a variance at or below it is not a "
        "discrepancy. Adversarial tiers plant such near misses."))
    missing_from: list[Ref] = Field(default_factory=list, max_length=2, description=(
        "omit: the sources the transaction is missing from, e.g. ['goods_receipt']."))
    late: bool = Field(default=False, description=(
        f"omit: True for a timing difference: the transaction is dated in the last {LATE_DAYS} days of the "
        "period, so the sources that record it later (a larger date_lag) have not caught up yet."))
    items: list[Ref] = Field(default_factory=list, max_length=12, description=(
        "Ids of the items it can strike (empty: any), e.g. only ['supplier_cheque'] for an outstanding cheque."))
    flag: str = Field(min_length=2, max_length=30, description=(
        "The source whose record the agent flags, e.g. 'invoice' (the document to act on); for omit, a source "
        "that still holds the transaction."))
    resolution: str = Field(min_length=3, max_length=40, description=(
        "The id of its usual resolution (one of `resolutions`), e.g. 'request_credit_note'."))


class Policy(DomainPart):
    id: str = Field(min_length=3, max_length=40, pattern=IDENT, description=(
        "Identifier of a party-specific rule, e.g. 'backorder_agreement'."))
    applies_to: str = Field(min_length=3, max_length=40, description="the id of the discrepancy type it changes")
    note: str = Field(min_length=30, max_length=300, description=(
        "The clause in one party's terms, shown only when the agent reads that party's terms. A resolution rule "
        "names the resolution in parentheses, e.g. '{party} back-orders short shipments under framework "
        "agreement FA-17: hold the invoice for the balance (hold_for_backorder).' A tolerance rule states it "
        "with {tolerance}, e.g. '{party} prices are indexed to the LME: variances up to {tolerance} are "
        "contractual.' Placeholders: {party}, {tolerance}."))
    resolution: str = Field(default="", max_length=40, description=(
        "Resolution rule: the resolution this party's discrepancies of that type need instead of the usual one."))
    tolerance: float = Field(default=0.0, ge=0.0, le=0.5, description=(
        "Tolerance rule (shift types only): the wider tolerance this party's contract allows, e.g. 0.08."))

    @model_validator(mode="after")
    def _one_effect(self) -> Policy:
        if bool(self.resolution) == bool(self.tolerance):
            raise ValueError("give exactly one of resolution (a resolution rule) or tolerance (a tolerance rule)")
        return self


class ToolNames(DomainPart):
    """What the six actions are called in this world (each keeps its role in the mechanics)."""

    listing: str = Field(default="list_records", pattern=IDENT, description="lists every record of one source")
    inspect: str = Field(default="inspect_record", pattern=IDENT,
                         description="opens one record: all its columns and its memo")
    terms: str = Field(default="read_terms", pattern=IDENT,
                       description="reads one party's terms (where party-specific rules live)")
    flag: str = Field(default="flag_discrepancy", pattern=IDENT,
                      description="records a finding: record, discrepancy type, resolution")
    unflag: str = Field(default="withdraw_flag", pattern=IDENT, description="withdraws the finding on a record")
    submit: str = Field(default="submit_reconciliation", pattern=IDENT,
                        description="ends the episode; the findings are scored")


class ReconciliationDomain(Domain):
    KEYS = {"sources": "name", "parties": "id", "items": "id", "resolutions": "id", "discrepancies": "id"}
    REQUIRED_IN_FIRST = {"parties.aliases": 2}  # `family_problems`: two parties known by aliases
    RULES = (
        Rule("trade_pairs", ("parties", "items", "batch_size"),
             "The parties together must trade at least batch_size + 4 distinct (party, item) pairs (a party's "
             "`items`, or every item when it lists none).",
             "The transactions of a batch differ, and harder tiers add four."),
        Rule("usual_resolutions", ("discrepancies", "resolutions"),
             "The discrepancy types must have at least three different usual resolutions, so that one resolution "
             "for everything is wrong."),
        Rule("aliased_parties", ("parties",),
             "At least two parties need aliases.", "Noisy tiers (ECI 2+) show a party under another spelling."),
        Rule("lookalikes", ("discrepancies", "sources"),
             "Records that look wrong but match are possible of at least two kinds: a shift with a tolerance of at "
             "least 1% (near misses), a splittable source (split records), a duplicate type (look-alike repeats).",
             "Adversarial tiers (ECI 3+) plant them."),
        Rule("policy_types", ("policies", "discrepancies"),
             "The party rules must change at least two different discrepancy types, so that no single type is the "
             "one to watch."),
        Rule("external_party", ("sources",),
             "At least one source with a 'party' column needs external: true.",
             "Noisy tiers (ECI 2+) show parties under aliases on records others write."),
        Rule("scanned_source", ("sources",),
             "At least one source needs ocr: true.", "Noisy tiers (ECI 2+) misread the figures of scanned records."),
        Rule("widened_tolerance", ("policies", "discrepancies"),
             "A tolerance rule (a party rule with a tolerance) applies to a shift discrepancy whose own tolerance is "
             "above 0, and exceeds that tolerance by at least 0.02."),
        Rule("change_beyond_tolerance", ("discrepancies",),
             f"A shift's smallest change (`change`'s low) exceeds its tolerance by at least {2 * MIN_MARGIN}, so "
             "that a planted variance is never within the tolerance."),
    )
    PLACEHOLDERS = (
        Placeholders("sources[].split_memo", ("part", "parts", "reference")),
        Placeholders("sources[].memos[]", ("party", "item", "reference", "date")),
        Placeholders("policies[].note", ("party", "tolerance"), ("party",), says="must name the party with {party}"),
    )
    REFERENCES = {
        "parties.items": Reference("items.id"), "sources.split_items": Reference("items.id"),
        "discrepancies.resolution": Reference("resolutions.id"), "discrepancies.items": Reference("items.id"),
        "discrepancies.flag": Reference("sources.name"), "discrepancies.source": Reference("sources.name"),
        "discrepancies.missing_from": Reference("sources.name"),
        "policies.applies_to": Reference("discrepancies.id"), "policies.resolution": Reference("resolutions.id"),
    }
    agent_role: str = Field(min_length=3, max_length=80, description=(
        "Who the agent is, e.g. 'the accounts-payable clerk', 'the company's treasury accountant'."))
    batch_noun: str = Field(min_length=3, max_length=60, description=(
        "What one episode's set of records is, e.g. 'March payables batch', 'month-end cash reconciliation'."))
    period_start: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description=(
        "First day of the period the records cover, ISO format, e.g. '2026-03-01'."))
    period_days: int = Field(ge=28, le=92, description="length of the period in days, e.g. 31")
    currency: str = Field(min_length=1, max_length=8, description="the currency of every amount, e.g. 'EUR'")
    reference_format: str = Field(min_length=4, max_length=20, pattern=r"^[A-Za-z0-9 #/-]*\{n\}[A-Za-z0-9 #/-]*$",
                                  description=(
        "How a matching reference is written; {n} becomes a 5-digit number, e.g. 'PO-{n}', 'CHQ {n}'."))
    missing_marker: str = Field(default="(blank)", min_length=1, max_length=20, description=(
        "What a source shows for a field left empty (noisy tiers drop references), e.g. '(blank)', '---'."))
    batch_size: int = Field(ge=5, le=10, description=(
        "Transactions in one episode at the first tiers (harder tiers add up to 4), e.g. 7."))
    sources: list[Source] = Field(min_length=2, max_length=3, description=(
        "The two or three sources whose records must agree, e.g. purchase orders, goods receipts, invoices."))
    parties: list[Party] = Field(min_length=5, max_length=30, description=(
        "The counterparties (vendors, customers, payees, the bank itself), with what they trade and their terms."))
    items: list[ItemSpec] = Field(min_length=3, max_length=40, description=(
        "The catalogue: what transactions are about, with price and quantity ranges."))
    resolutions: list[Resolution] = Field(min_length=3, max_length=20, description=(
        "Every action that can settle a discrepancy, including those only party rules call for."))
    discrepancies: list[Discrepancy] = Field(min_length=3, max_length=12, description=(
        "The discrepancy types of this world, each planted by one mechanism, with its label, tolerance, the "
        "record to flag and its usual resolution. Each must be tellable from the others from the records."))
    policies: list[Policy] = Field(min_length=2, max_length=12, description=(
        "Party-specific rules (hidden constraints): on the hardest tiers one party's terms carry one of these, "
        "which changes the right resolution or widens a tolerance, and only reading that party's terms shows it."))
    tools: ToolNames = Field(default_factory=ToolNames)

    @classmethod
    def tidy(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A reference or date column marked `detail` is listed: matching reads both, so the family cannot take
        them as details whatever the draft says. A small model marks every column of both sources a
        detail, and repairs do not undo it; the column stays as written."""
        data = dict(data)
        if isinstance(data.get("sources"), list):
            data["sources"] = [{**s, "columns": [{**c, "detail": False} if isinstance(c, dict) and c.get("detail")
                                                 and c.get("role") in ("reference", "date") else c
                                                 for c in s["columns"]]}
                               if isinstance(s, dict) and isinstance(s.get("columns"), list) else s
                               for s in data["sources"]]
        return data

    # ---- derived facts ---------------------------------------------------------------------------------
    @property
    def start(self) -> dt.date:
        return dt.date.fromisoformat(self.period_start)

    @property
    def end(self) -> dt.date:
        return self.start + dt.timedelta(days=self.period_days - 1)

    def source(self, name: str) -> Source | None:
        return next((s for s in self.sources if s.name == name), None)

    def discrepancy(self, ident: str) -> Discrepancy | None:
        return next((d for d in self.discrepancies if d.id == ident), None)

    def traded_pairs(self) -> list[tuple[str, str]]:
        """Every (party id, item id) a transaction can have."""
        ids = [i.id for i in self.items]
        return [(p.id, item) for p in self.parties for item in (p.items or ids) if item in ids]

    def item(self, ident: str) -> ItemSpec | None:
        return next((i for i in self.items if i.id == ident), None)

    def eligible_pairs(self, d: Discrepancy) -> list[tuple[str, str]]:
        return [pair for pair in self.traded_pairs() if not d.items or pair[1] in d.items]

    def opens(self, source: str) -> bool:
        """Whether a record of `source` whose listed amount disagrees must be opened to classify it: some shift
        planted there changes a detail column."""
        src = self.source(source)
        return any(d.mechanism == "shift" and d.source == source and src.role(d.role) is not None
                   and src.role(d.role).detail for d in self.discrepancies)

    def distractor_kinds(self) -> list[str]:
        """What adversarial tiers can plant in this domain: near misses within a shift's tolerance, splits of a
        splittable source, and look-alike repeats of a duplicate type's source."""
        kinds = []
        if any(d.mechanism == "shift" and d.tolerance >= 2 * MIN_MARGIN for d in self.discrepancies):
            kinds.append("near_miss")
        if any(s.splittable for s in self.sources):
            kinds.append("split")
        if any(d.mechanism == "duplicate" for d in self.discrepancies):
            kinds.append("lookalike")
        return kinds

    # ---- semantic checks ---------------------------------------------------------------------------------
    def family_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        p += duplicates(self.sources, "name", "domain.sources")
        p += duplicates(self.sources, "id_prefix", "domain.sources")
        p += duplicates(self.parties, "id", "domain.parties")
        p += duplicates(self.parties, "name", "domain.parties")
        p += duplicates(self.items, "id", "domain.items")
        p += duplicates(self.items, "name", "domain.items")
        p += duplicates(self.resolutions, "id", "domain.resolutions")
        p += duplicates(self.discrepancies, "id", "domain.discrepancies")
        p += duplicates(self.policies, "id", "domain.policies")
        try:
            self.start  # noqa: B018
        except ValueError:
            p.append(DomainProblem(path="domain.period_start", message=f"{self.period_start!r} is not a real date"))
        p += self._source_problems()
        p += self._party_problems()
        p += self._discrepancy_problems()
        p += self._policy_problems()
        p += self._variety_problems()
        p += names_differ(self.tools.model_dump(), "domain.tools", "tool names")
        return p

    def _source_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        keyed = [i for i, s in enumerate(self.sources) if s.id_is_reference]
        for i in keyed[1:]:
            p.append(DomainProblem(path=f"domain.sources[{i}].id_is_reference",
                                   message="only one source can be keyed by the matching reference"))
        for i, s in enumerate(self.sources):
            at = f"domain.sources[{i}]"
            p += duplicates(s.columns, "role", f"{at}.columns")
            p += duplicates(s.columns, "label", f"{at}.columns")
            roles = {c.role for c in s.columns}
            for role in ("reference", "date"):
                if role not in roles:
                    p.append(DomainProblem(path=f"{at}.columns", message=f"needs a '{role}' column (matching "
                                           "and timing rules read it)"))
            if not roles & {"amount", "quantity"}:
                p.append(DomainProblem(path=f"{at}.columns", message="needs an 'amount' or a 'quantity' column"))
            for j, c in enumerate(s.columns):
                if c.detail and c.role in ("reference", "date"):
                    p.append(DomainProblem(path=f"{at}.columns[{j}].detail",
                                           message=f"the {c.role} column must be listed: matching reads it"))
            if s.splittable and s.id_is_reference:
                p.append(DomainProblem(path=f"{at}.splittable", message="a source keyed by the reference cannot "
                                       "hold two records of one transaction"))
            if s.splittable:
                if not s.split_memo:
                    p.append(DomainProblem(path=f"{at}.split_memo", message="is required when splittable"))
                if not (s.listed("amount") or s.listed("quantity")):
                    p.append(DomainProblem(path=f"{at}.splittable", message="a split must show in a listed "
                                           "amount or quantity column"))
            p += unknown_refs(s.split_items, [i.id for i in self.items], f"{at}.split_items", "item id")
        if len(self.sources) >= 2 and not any(s.role("party") for s in self.sources):
            p.append(DomainProblem(path="domain.sources", message="at least one source must show the 'party'"))
        return p

    def _party_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        ids = [i.id for i in self.items]
        everyone = {party.name.lower() for party in self.parties}
        for i, party in enumerate(self.parties):
            at = f"domain.parties[{i}]"
            p += unknown_refs(party.items, ids, f"{at}.items", "item id")
            words = _words(party.name)
            for j, alias in enumerate(party.aliases):
                if not any(_same_word(a, w) for a in _words(alias) for w in words):
                    p.append(DomainProblem(path=f"{at}.aliases[{j}]", message=f"{alias!r} shares no word with "
                                           f"{party.name!r}: an alias must be recognisable"))
                if alias.lower() in everyone or "|" in alias or ":" in alias:
                    p.append(DomainProblem(path=f"{at}.aliases[{j}]", message=f"{alias!r} is a party name or "
                                           "holds '|' or ':'"))
        return p

    def _discrepancy_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        sources = {s.name: s for s in self.sources}
        resolutions = [r.id for r in self.resolutions]
        items = [i.id for i in self.items]
        for i, d in enumerate(self.discrepancies):
            at = f"domain.discrepancies[{i}]"
            p += unknown_ref(d.resolution, resolutions, f"{at}.resolution", "resolution")
            p += unknown_refs(d.items, items, f"{at}.items", "item id")
            p += unknown_ref(d.flag, sources, f"{at}.flag", "source")
            if d.mechanism == "omit":
                p += unknown_refs(d.missing_from, sources, f"{at}.missing_from", "source")
                p += self._omit_problems(d, at, sources)
            else:
                p += unknown_ref(d.source, sources, f"{at}.source", "source")
                if d.source in sources:
                    p += self._planted_problems(d, at, sources)
            if d.items and not self.eligible_pairs(d):
                p.append(DomainProblem(path=f"{at}.items", message="no party trades any of these items"))
            signature = self._signature(d)
            for j in range(i):
                other = self.discrepancies[j]
                if self._signature(other) == signature and (not d.items or not other.items
                                                             or set(d.items) & set(other.items)):
                    p.append(DomainProblem(path=f"{at}.mechanism", message=(
                        f"cannot be told from domain.discrepancies[{j}] ({other.id!r}): same mechanism, sources "
                        "and direction on overlapping items; give them different sources, directions or items")))
                    break
        return p

    def _signature(self, d: Discrepancy) -> tuple:
        source, direction = d.source, d.direction
        if d.mechanism == "shift" and len(self.sources) == 2 and source != self.sources[0].name:
            # With two sources, "B is lower than A" is the same observation as "A is higher than B".
            source, direction = self.sources[0].name, {"up": "down", "down": "up"}.get(direction, direction)
        return (d.mechanism, source, d.role, direction, tuple(sorted(d.missing_from)), d.late)

    def _omit_problems(self, d: Discrepancy, at: str, sources: dict[str, Source]) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        if not d.missing_from:
            p.append(DomainProblem(path=f"{at}.missing_from", message="an omission needs the sources it is "
                                   "missing from"))
        elif len(set(d.missing_from)) >= len(self.sources):
            p.append(DomainProblem(path=f"{at}.missing_from", message="cannot be missing from every source"))
        if d.flag in d.missing_from:
            p.append(DomainProblem(path=f"{at}.flag", message="must be a source that still holds the transaction"))
        if d.late and d.flag in sources and all(m in sources for m in d.missing_from):
            present = max(sources[d.flag].date_lag)
            if not d.missing_from or min(sources[m].date_lag[0] for m in d.missing_from) <= present:
                p.append(DomainProblem(path=f"{at}.late", message=(
                    "a timing difference needs the sources it is missing from to record later: their date_lag "
                    "minimum must exceed the flagged source's date_lag maximum")))
        for field in ("source", "role", "direction"):
            if getattr(d, field):
                p.append(DomainProblem(path=f"{at}.{field}", message="is not used by an omission: leave it out"))
        return p

    def _planted_problems(self, d: Discrepancy, at: str, sources: dict[str, Source]) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        src = sources[d.source]
        others = [s for s in self.sources if s.name != d.source]
        if d.missing_from or d.late:
            p.append(DomainProblem(path=f"{at}.missing_from", message="only omissions use missing_from and late"))
        if d.mechanism == "duplicate":
            if src.id_is_reference:
                p.append(DomainProblem(path=f"{at}.source", message="a source keyed by the reference cannot hold a "
                                       "record twice"))
            if d.flag != d.source:
                p.append(DomainProblem(path=f"{at}.flag", message="a duplicate is flagged in its own source"))
            return p
        role = d.role or ("amount" if d.mechanism == "transpose" else "")
        if d.mechanism == "transpose" and role != "amount":
            p.append(DomainProblem(path=f"{at}.role", message="a transposition swaps digits of the 'amount'"))
            return p
        if not role:
            p.append(DomainProblem(path=f"{at}.role", message="a shift needs the value it changes"))
            return p
        column = src.role(role)
        if column is None:
            p.append(DomainProblem(path=f"{at}.role", message=f"source {d.source!r} has no {role!r} column"))
        elif column.detail and not (role in ("quantity", "unit_price") and src.listed("amount")
                                    and d.mechanism == "shift"):
            p.append(DomainProblem(path=f"{at}.role", message=(
                f"{role!r} is a detail column of {d.source!r} and no listed amount reflects it: the "
                "discrepancy could never be seen in a listing")))
        if not any(s.listed(role) for s in others):
            p.append(DomainProblem(path=f"{at}.role", message=(
                f"no other source lists {role!r}: there is nothing to compare {d.source!r} against")))
        if d.mechanism == "shift":
            if not d.direction:
                p.append(DomainProblem(path=f"{at}.direction", message="a shift needs 'up' or 'down'"))
            low, high = d.change
            if not 0 < low <= high <= (0.9 if d.direction == "down" else 5.0):
                p.append(DomainProblem(path=f"{at}.change", message="must be [low, high] with 0 < low <= high "
                                       "(high <= 0.9 for 'down')"))
            elif low < d.tolerance + 2 * MIN_MARGIN:
                p.append(self.rule("change_beyond_tolerance").broken(
                    f"{at}.change", f"low {low} against the tolerance {d.tolerance}"))
            if role == "quantity" and not any(self.item(it).quantity[1] >= 2 for _, it in self.eligible_pairs(d)):
                p.append(DomainProblem(path=f"{at}.items", message="a quantity shift needs items whose quantity "
                                       "can be 2 or more"))
        elif d.tolerance or d.direction or any(d.change):
            p.append(DomainProblem(path=f"{at}.tolerance", message="only shifts use tolerance, direction and change"))
        return p

    def _policy_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        kinds = {d.id: d for d in self.discrepancies}
        resolutions = [r.id for r in self.resolutions]
        for i, rule in enumerate(self.policies):
            at = f"domain.policies[{i}]"
            p += unknown_ref(rule.applies_to, kinds, f"{at}.applies_to", "discrepancy type")
            d = kinds.get(rule.applies_to)
            if rule.resolution:
                p += unknown_ref(rule.resolution, resolutions, f"{at}.resolution", "resolution")
                if d is not None and rule.resolution == d.resolution:
                    p.append(DomainProblem(path=f"{at}.resolution", message="must differ from the usual resolution "
                                           f"of {d.id!r} (the rule makes it wrong)"))
                if rule.resolution not in rule.note:
                    p.append(DomainProblem(path=f"{at}.note", message=f"must name the resolution it calls for "
                                           f"({rule.resolution!r})"))
            if rule.tolerance:
                if "{tolerance}" not in rule.note:
                    p.append(DomainProblem(path=f"{at}.note", message="a tolerance rule must state it with "
                                           "{tolerance}"))
                widened = self.rule("widened_tolerance")
                if d is not None and (d.mechanism != "shift" or d.tolerance <= 0):
                    p.append(widened.broken(f"{at}.tolerance", f"{d.id!r} is not a shift with a tolerance"))
                elif d is not None and rule.tolerance < d.tolerance + 0.02:
                    p.append(widened.broken(f"{at}.tolerance",
                                            f"{rule.tolerance} against {d.id!r}'s tolerance {d.tolerance}"))
        return p

    def _variety_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        pairs = self.traded_pairs()
        need = self.batch_size + 4
        rule = self.rule
        if len(pairs) < need:
            p.append(rule("trade_pairs").broken("domain.parties", f"{len(pairs)} pairs, batch_size {self.batch_size}"))
        usual = set(d.resolution for d in self.discrepancies)
        if len(usual) < 3:
            p.append(rule("usual_resolutions").broken("domain.discrepancies", f"{sorted(usual)}"))
        aliased = [x.id for x in self.parties if x.aliases]
        if len(aliased) < 2:
            p.append(rule("aliased_parties").broken("domain.parties", f"aliases for {aliased or 'none'}"))
        kinds = self.distractor_kinds()
        if len(kinds) < 2:
            p.append(rule("lookalikes").broken("domain.discrepancies", f"{kinds or 'none'}"))
        changed = {policy.applies_to for policy in self.policies}
        if len(changed) < 2:
            p.append(rule("policy_types").broken("domain.policies", f"{sorted(changed)}"))
        if not any(s.external and s.role("party") for s in self.sources):
            p.append(rule("external_party").broken("domain.sources", "none"))
        if not any(s.ocr for s in self.sources):
            p.append(rule("scanned_source").broken("domain.sources", "none"))
        return p


def pct(value: float) -> str:
    """0.02 -> '2%', 0.025 -> '2.5%'."""
    return f"{value * 100:.1f}".rstrip("0").rstrip(".") + "%"


def _same_word(a: str, b: str) -> bool:
    """'aldhelms' ~ 'aldhelm', 'hotels' ~ 'hotel', 'conf' ~ 'conference': one starts with the other."""
    return a.startswith(b) or b.startswith(a)


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 3]
