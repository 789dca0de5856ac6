"""The reconciliation engine: find, classify and resolve the discrepancies planted between two or three sources.

Each episode is generated from the domain by the seed: a batch of transactions, one record per source each
(records of one transaction share a matching reference), and k discrepancies planted by mechanism (shift,
transpose, omit, duplicate). The tiers turn the `TierProfile` knobs:

- noise / drop: scanned sources carry OCR misreads in their figures, parties show under aliases, references go
  missing (the agent must match by party, item, amount and date);
- distractors: records that look wrong but are not (variances within tolerance, a transaction split in two
  records that add up, a look-alike repeat with its own reference);
- hidden_constraints: a party's terms carry a rule (a different resolution, a wider tolerance) that only reading
  its terms reveals (up to `depth` such rules);
- depth: more discrepancies and a larger batch.

Nothing here knows what the sources, parties or discrepancies are: the domain says.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

from openadapt.families.domain import fill
from openadapt.families.engine import FamilyEnvironment, per_domain
from openadapt.families.reconciliation.domain import (
    LATE_DAYS,
    MAX_LAG_DAYS,
    MIN_MARGIN,
    Discrepancy,
    ItemSpec,
    Party,
    Policy,
    ReconciliationDomain,
    Source,
    pct,
)
from openadapt.kit import Outcome, TierProfile
from openadapt.kit.eci import OCR_DIGITS

CONSTRAINT_RATE = 0.6  # share of hidden-constraint-tier episodes in which one party's terms carry a rule
OCR_RATE = 0.5  # x tier.noise: chance a figure of a scanned source is misread
ALIAS_RATE = 1.0  # x tier.noise: chance a party cell shows an alias
DROP_RATE = 0.5  # x tier.drop: chance a droppable record's reference is left empty
MAX_FINDINGS = 12
DUPLICATE_GAP = (3, 9)  # days after the original that a duplicate copy is dated
SPLIT_GAP = (1, 5)
OCR_MISREADS = OCR_DIGITS  # a scanned figure: a digit read as the letter it resembles ('S' for '5')
# A shift changes one figure; the record's other figures still agree with the other sources (the amount follows a
# changed quantity or unit price, so only an amount shift leaves both of them agreeing).
OTHER_FIGURES = {"quantity": ("unit_price",), "unit_price": ("quantity",), "amount": ("quantity", "unit_price")}


@dataclass
class Txn:
    """One business transaction: what every source should agree on."""

    n: int
    party: Party
    item: ItemSpec
    quantity: int
    unit_price: float
    date: dt.date
    reference: str
    kind: str = "ordinary"  # ordinary | planted | near_miss | split | lookalike | policy
    clone_of: int | None = None  # a look-alike repeat: the transaction it repeats

    @property
    def amount(self) -> float:
        return round(self.quantity * self.unit_price, 2)


@dataclass
class Record:
    id: str
    source: str
    txn: int
    values: dict[str, Any]  # role -> true value as this source holds it
    memo: str
    shown: dict[str, str] = field(default_factory=dict)  # role -> what the agent sees (after noise)


@dataclass
class Finding:
    record: str
    discrepancy: str
    resolution: str

    def line(self) -> str:
        return f"{self.record}: {self.discrepancy} -> {self.resolution}"


@dataclass
class Plant:
    """One planted discrepancy."""

    kind: Discrepancy
    txn: Txn
    record: str = ""  # the record the agent must flag
    varied: str = ""  # the record whose value was changed (shift, transpose)
    role: str = ""
    resolution: str = ""


@dataclass
class Rule:
    """A party-specific rule in force this episode (a hidden constraint)."""

    policy: Policy
    party: Party
    txn: Txn | None = None  # tolerance rule: the transaction whose variance it accepts
    record: str = ""  # tolerance rule: that variance's record

    def text(self) -> str:
        tolerance = pct(self.policy.tolerance) if self.policy.tolerance else ""
        return fill(self.policy.note, party=self.party.name, tolerance=tolerance)


@dataclass
class Case:
    """The privileged truth of one episode (what the oracle reads; never served)."""

    txns: list[Txn]
    records: dict[str, Record]
    listing: dict[str, list[str]]  # source -> record ids in listing order
    plants: list[Plant]
    rules: list[Rule] = field(default_factory=list)
    near_misses: list[str] = field(default_factory=list)
    varied: list[tuple[str, str]] = field(default_factory=list)  # (record, role) of every changed figure
    inspect: list[str] = field(default_factory=list)  # records an honest agent must open
    terms: list[str] = field(default_factory=list)  # parties whose terms an honest agent must read
    min_steps: int = 0

    @property
    def truth(self) -> dict[str, Finding]:
        return {p.record: Finding(p.record, p.kind.id, p.resolution) for p in self.plants}

    @property
    def constrained(self) -> bool:
        return bool(self.rules)


@dataclass
class Verdict:
    detection: float = 0.0
    classification: float = 0.0
    resolution: float = 0.0
    efficiency: float = 0.0
    penalty: float = 0.0
    solved: bool = False


# ---- text helpers shared with the policies -----------------------------------------------------------------
def money(value: float) -> str:
    return f"{value:,.2f}"


def parse_number(text: str) -> float | None:
    """A figure as a source shows it ('1,250.00', '40 tonne'); None when it cannot be read (OCR misreads)."""
    token = text.split(" ")[0].replace(",", "")
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def record_line(source: Source, record: Record, detail: bool) -> str:
    columns = [c for c in source.columns if detail or not c.detail]
    cells = [f"{c.label}: {record.shown[c.role]}" for c in columns]
    head = f"[{source.name}] {record.id}" + (" opened" if detail else "")
    tail = [f"Memo: {record.memo}"] if detail else []
    return " | ".join([head, *cells, *tail])


def parse_line(line: str) -> tuple[str, str, dict[str, str]]:
    """(source, record id, {label: value}) of a record line."""
    head, *cells = line.split(" | ")
    source, _, rest = head.partition("] ")
    values = {}
    for cell in cells:
        label, _, value = cell.partition(": ")
        values[label] = value
    return source.lstrip("["), rest.split(" ")[0], values


def rule_lines(domain: ReconciliationDomain) -> list[str]:
    """The discrepancy manual: each type's recognisable facts, from the domain (for the system prompt)."""
    nouns = {s.name: s.noun for s in domain.sources}
    lines = []
    for d in domain.discrepancies:
        facts = []
        if d.mechanism == "shift":
            source = domain.source(d.source)
            more = "higher" if d.direction == "up" else "lower"
            fact = f"the {nouns[d.source]}'s {source.role(d.role).label} is {more} than the other sources'"
            same = [source.role(r).label for r in OTHER_FIGURES[d.role] if source.role(r) is not None]
            if same:
                fact += f" while its {' and '.join(same)} agree with them"
            facts.append(fact)
            if d.tolerance > 0:
                facts.append(f"a variance up to {pct(d.tolerance)} is accepted and is not a discrepancy")
            else:
                facts.append("any variance counts")
        elif d.mechanism == "transpose":
            facts.append(f"the {nouns[d.source]}'s amount has two adjacent digits swapped (the difference is a "
                         "multiple of 9)")
        elif d.mechanism == "omit":
            present = [nouns[s.name] for s in domain.sources if s.name not in d.missing_from]
            facts.append(f"the transaction is in the {' and '.join(present)} but has no "
                         f"{' or '.join(nouns[m] for m in d.missing_from)}")
            facts.append(f"dated in the last {LATE_DAYS} days of the period" if d.late else
                         f"dated before the last {LATE_DAYS} days of the period")
        else:
            facts.append(f"the {nouns[d.source]} appears twice for one transaction (same reference, party and "
                         "amount); the later copy is the duplicate")
        if d.items:
            facts.append(f"only for: {', '.join(domain.item(i).name for i in d.items)}")
        lines.append(f"{d.id}: {d.description.rstrip('.')}. Recognise it: {'; '.join(facts)}. Flag the "
                     f"{nouns[d.flag]}{' (the later copy)' if d.mechanism == 'duplicate' else ''}. Usual "
                     f"resolution: {d.resolution}.")
    return lines


class ReconciliationEnvironment(FamilyEnvironment):
    domain: ClassVar[ReconciliationDomain]
    REWARD = (
        ("detection", 0.0, 0.40, "share of planted discrepancies flagged on the right record"),
        ("classification", 0.0, 0.20, "share flagged with the right type"),
        ("resolution", 0.0, 0.25, "share flagged with the right resolution"),
        ("efficiency", 0.0, 0.15, "correctness x precision x steps beyond the shortest honest path"),
        ("penalty", -0.50, 0.0, "-0.15 per false flag"),
    )

    # ---- the domain, indexed once per class -----------------------------------------------------------
    @per_domain
    def _index(cls) -> dict[str, Any]:
        d = cls.domain
        return {
            "sources": {s.name: s for s in d.sources},
            "parties": {p.id: p for p in d.parties},
            "items": {i.id: i for i in d.items},
            "pairs": d.traded_pairs(),
            "rules": rule_lines(d),
            # A transposition must stand clear of every tolerance an amount comparison can apply (a type's, or
            # a party rule's), so that it never reads as an accepted variance.
            "amount_tolerance": max([x.tolerance for x in d.discrepancies if x.role == "amount"]
                                    + [x.tolerance for x in d.policies
                                       if d.discrepancy(x.applies_to) and d.discrepancy(x.applies_to).role
                                       == "amount"] or [0.0]),
        }

    # ---- episode generation ---------------------------------------------------------------------------
    def generate(self, rng: random.Random, tier: TierProfile) -> None:
        d, ix = self.domain, self._index()
        deeper = int(tier.depth > 0)
        k = rng.randint(1 + deeper, 2 + deeper)
        # Hidden-constraint tiers: up to `depth` party rules, each in force with CONSTRAINT_RATE.
        chances = [rng.random() < CONSTRAINT_RATE for _ in range(max(1, tier.depth) if tier.hidden_constraints else 0)]
        policies = rng.sample(d.policies, sum(chances))
        targets = [d.discrepancy(ident) for ident in dict.fromkeys(x.applies_to for x in policies if x.resolution)]
        kinds = rng.sample(d.discrepancies, k)
        kinds = [*targets, *(x for x in kinds if x not in targets)][:max(k, len(targets))]
        self._refs: set[str] = set()
        self._ids: set[str] = set()
        self._last_ordinary = d.period_days - 1 - LATE_DAYS - MAX_LAG_DAYS - DUPLICATE_GAP[1] - 1
        pairs = rng.sample(ix["pairs"], d.batch_size + 2 * tier.depth)
        txns = [self._txn(i, pair, rng) for i, pair in enumerate(pairs)]
        case = Case(txns=txns, records={}, listing={}, plants=[])
        free = list(txns)

        for kind in kinds:
            txn = self._claim(kind, free, txns, rng)
            if txn is not None:
                txn.kind = "planted"
                case.plants.append(Plant(kind=kind, txn=txn, resolution=kind.resolution))
        # Distractors: records that look wrong but match.
        near, splits, lookalikes = [], [], []
        options = d.distractor_kinds()
        for _ in range(tier.distractors):
            choice = rng.choice(options)
            if choice == "near_miss":
                kind = rng.choice([x for x in d.discrepancies if x.mechanism == "shift"
                                   and x.tolerance >= 2 * MIN_MARGIN])
                txn = self._pick(free, rng, lambda t, kind=kind: self._fits(kind, t)
                                 and self._change(kind, t, near=True, probe=True) is not None)
                if txn is not None:
                    txn.kind = "near_miss"
                    near.append((kind, txn))
            elif choice == "split":
                source = rng.choice([s for s in d.sources if s.splittable])
                txn = self._pick(free, rng, lambda t, s=source: self._splittable(s, t))
                if txn is not None:
                    txn.kind = "split"
                    splits.append((source, txn))
            else:
                template = self._pick(free, rng, lambda t: True)
                if template is not None:
                    clone = Txn(n=len(txns), party=template.party, item=template.item, quantity=template.quantity,
                                unit_price=template.unit_price, date=self._date(rng), reference=self._ref(rng),
                                kind="lookalike", clone_of=template.n)
                    template.kind = "lookalike"
                    txns.append(clone)
                    lookalikes.append(clone)
        # The party rules in force this episode, if any.
        for policy in policies:
            self._apply_policy(case, policy, free, rng)

        # Records: one per transaction and source, unless the transaction is omitted from that source.
        missing = {p.txn.n: set(p.kind.missing_from) for p in case.plants if p.kind.mechanism == "omit"}
        by_txn: dict[int, dict[str, Record]] = {}
        for txn in txns:
            by_txn[txn.n] = {}
            for source in d.sources:
                if source.name in missing.get(txn.n, ()):
                    continue
                rec = self._record(source, txn, rng)
                by_txn[txn.n][source.name] = rec
        self._plant(case, by_txn, rng)
        for kind, txn in near:
            rec = by_txn[txn.n][kind.source]
            self._set(rec, kind.role, self._change(kind, txn, near=True, rng=rng))
            case.near_misses.append(rec.id)
            case.varied.append((rec.id, kind.role))
        for rule in case.rules:
            if rule.txn is not None:
                kind = d.discrepancy(rule.policy.applies_to)
                rec = by_txn[rule.txn.n][kind.source]
                self._set(rec, kind.role, self._change(kind, rule.txn, band=(kind.tolerance, rule.policy.tolerance),
                                                       rng=rng))
                rule.record = rec.id
                case.varied.append((rec.id, kind.role))
        extra: list[Record] = []
        for source, txn in splits:
            extra += self._split(source, txn, by_txn, rng)
        for p in case.plants:
            if p.kind.mechanism == "duplicate":
                original = by_txn[p.txn.n][p.kind.source]
                copy = self._record(ix["sources"][p.kind.source], p.txn, rng)
                copy.values = dict(original.values)
                copy.values["date"] = min(original.values["date"] + dt.timedelta(days=rng.randint(*DUPLICATE_GAP)),
                                          d.end - dt.timedelta(days=LATE_DAYS))
                extra.append(copy)
                p.record = copy.id
        records = [r for recs in by_txn.values() for r in recs.values()] + extra
        self._display(records, txns, case, rng)
        for source in d.sources:
            ids = [r.id for r in records if r.source == source.name]
            rng.shuffle(ids)
            case.listing[source.name] = ids
        case.records = {r.id: r for r in records}
        self._honest_path(case, tier)
        self._case = case
        self._verdict = Verdict()
        self._listed: list[str] = []
        self._shown_ids: set[str] = set()
        self._records_seen: list[str] = []
        self._details: list[str] = []
        self._opened: set[str] = set()
        self._terms: list[str] = []
        self._read: set[str] = set()
        self._findings: dict[str, Finding] = {}
        self._controls = [self._control_line(source, case) for source in d.sources]

    def _control_line(self, source: Source, case: Case) -> str:
        """A source's control figures, as its system reports them: how many records, and their total."""
        records = [case.records[i] for i in case.listing[source.name]]
        line = f"{source.name}: {len(records)} {source.noun} records"
        if source.role("amount") is not None:
            line += f", control total {money(sum(r.values['amount'] for r in records))} {self.domain.currency}"
        return line

    # -- transactions --
    def _date(self, rng: random.Random) -> dt.date:
        return self.domain.start + dt.timedelta(days=rng.randint(0, self._last_ordinary))

    def _ref(self, rng: random.Random) -> str:
        while True:
            ref = fill(self.domain.reference_format, n=rng.randint(10000, 99999))
            if ref not in self._refs:
                self._refs.add(ref)
                return ref

    def _txn(self, n: int, pair: tuple[str, str], rng: random.Random) -> Txn:
        ix = self._index()
        item = ix["items"][pair[1]]
        return Txn(n=n, party=ix["parties"][pair[0]], item=item, quantity=rng.randint(*item.quantity),
                   unit_price=round(rng.uniform(*item.price), 2), date=self._date(rng), reference=self._ref(rng))

    @staticmethod
    def _pick(free: list[Txn], rng: random.Random, ok) -> Txn | None:
        candidates = [t for t in free if ok(t)]
        if not candidates:
            return None
        txn = rng.choice(candidates)
        free.remove(txn)
        return txn

    def _claim(self, kind: Discrepancy, free: list[Txn], txns: list[Txn], rng: random.Random) -> Txn | None:
        """A free transaction the discrepancy can be planted on; one is made (replacing a free one) if none fits."""
        txn = self._pick(free, rng, lambda t: self._fits(kind, t))
        if txn is not None or not free:
            return txn
        used = {(t.party.id, t.item.id) for t in txns}
        eligible = self.domain.eligible_pairs(kind)
        fresh = [pair for pair in eligible if pair not in used] or eligible
        for _ in range(8):
            made = self._txn(0, rng.choice(fresh), rng)
            if self._fits(kind, made):
                old = rng.choice(free)
                made.n = old.n
                txns[txns.index(old)] = made
                free.remove(old)
                return made
        return None

    def _fits(self, kind: Discrepancy, txn: Txn) -> bool:
        if kind.items and txn.item.id not in kind.items:
            return False
        if kind.mechanism == "shift":
            return self._change(kind, txn, probe=True) is not None
        if kind.mechanism == "transpose":
            return self._transposed(kind, txn.amount) is not None
        return True

    def _splittable(self, source: Source, txn: Txn) -> bool:
        if source.split_items and txn.item.id not in source.split_items:
            return False
        if source.listed("quantity"):
            return txn.quantity >= 2
        return txn.amount >= 2.0

    # -- values --
    def _change(self, kind: Discrepancy, txn: Txn, near: bool = False, band: tuple[float, float] | None = None,
                probe: bool = False, rng: random.Random | None = None) -> float | None:
        """The planted value of `kind.role` for `txn`: beyond the tolerance (a discrepancy), within it (`near`),
        or inside `band` (a variance a party rule accepts). `probe` only says whether one exists."""
        base = {"quantity": txn.quantity, "unit_price": txn.unit_price, "amount": txn.amount}[kind.role]
        sign = 1 if kind.direction == "up" else -1
        if band is not None:
            low, high = band[0] + MIN_MARGIN, band[1] - MIN_MARGIN
        elif near:
            low, high = MIN_MARGIN / 2, kind.tolerance - MIN_MARGIN
        else:
            low, high = kind.change
        if high < low:
            return None
        if kind.role == "quantity":
            lo_units = max(1, math.ceil(base * low - 1e-9))
            hi_units = math.floor(base * high + 1e-9) if (near or band) else max(lo_units, round(base * high))
            if sign < 0:
                hi_units = min(hi_units, base - 1)
            if hi_units < lo_units or (not near and not band and lo_units / base <= kind.tolerance):
                return None
            if probe:
                return float(lo_units)
            return float(base + sign * rng.randint(lo_units, hi_units))
        lowest = round(base * (1 + sign * low), 2)
        if abs(lowest - base) < 0.01 or lowest <= 0:
            return None
        if probe:
            return lowest
        for _ in range(20):
            value = round(base * (1 + sign * rng.uniform(low, high)), 2)
            rel = abs(value - base) / base
            swapped = sorted(f"{value:.2f}") == sorted(f"{base:.2f}")  # would read as a transposition
            if value > 0 and low - 1e-9 <= rel <= high + 1e-9 and value != base and not swapped:
                return value
        return lowest

    def _transposed(self, kind: Discrepancy, amount: float) -> float | None:
        whole, cents = f"{amount:.2f}".split(".")
        floor = self._index()["amount_tolerance"]
        for i in range(min(3, len(whole) - 1)):
            if whole[i] == whole[i + 1] or (i == 0 and whole[1] == "0"):
                continue
            swapped = whole[:i] + whole[i + 1] + whole[i] + whole[i + 2:]
            value = float(f"{swapped}.{cents}")
            if abs(value - amount) / amount > floor + 2 * MIN_MARGIN:
                return value
        return None

    @staticmethod
    def _set(rec: Record, role: str, value: float) -> None:
        if role == "quantity":
            rec.values["quantity"] = int(value)
            rec.values["amount"] = round(int(value) * rec.values["unit_price"], 2)
        elif role == "unit_price":
            rec.values["unit_price"] = value
            rec.values["amount"] = round(rec.values["quantity"] * value, 2)
        else:
            rec.values["amount"] = value

    # -- records --
    def _record_id(self, source: Source, txn: Txn, rng: random.Random) -> str:
        if source.id_is_reference:
            self._ids.add(txn.reference)
            return txn.reference
        while True:
            ident = f"{source.id_prefix}{rng.randint(10000, 99999)}"
            if ident not in self._ids and ident not in self._refs:
                self._ids.add(ident)
                return ident

    def _record(self, source: Source, txn: Txn, rng: random.Random) -> Record:
        date = min(txn.date + dt.timedelta(days=rng.randint(*source.date_lag)), self.domain.end)
        values = {"reference": txn.reference, "party": txn.party.name, "item": txn.item.name,
                  "quantity": txn.quantity, "unit_price": txn.unit_price, "amount": txn.amount, "date": date}
        memo = fill(rng.choice(source.memos), party=txn.party.name, item=txn.item.name, reference=txn.reference,
                    date=date.isoformat())
        return Record(id=self._record_id(source, txn, rng), source=source.name, txn=txn.n, values=values, memo=memo)

    def _plant(self, case: Case, by_txn: dict[int, dict[str, Record]], rng: random.Random) -> None:
        d = self.domain
        for p in case.plants:
            kind, recs = p.kind, by_txn[p.txn.n]
            if kind.mechanism == "omit":
                if kind.late:
                    flag = recs[kind.flag]
                    flag.values["date"] = d.end - dt.timedelta(days=rng.randint(0, LATE_DAYS - 1))
                    for name, rec in recs.items():
                        if name != kind.flag:
                            rec.values["date"] = min(rec.values["date"], flag.values["date"])
                p.record = recs[kind.flag].id
            elif kind.mechanism in ("shift", "transpose"):
                rec = recs[kind.source]
                value = (self._change(kind, p.txn, rng=rng) if kind.mechanism == "shift"
                         else self._transposed(kind, p.txn.amount))
                role = kind.role or "amount"
                self._set(rec, role, value)
                p.varied, p.role = rec.id, role
                case.varied.append((rec.id, role))
                p.record = recs[kind.flag].id

    def _split(self, source: Source, txn: Txn, by_txn: dict[int, dict[str, Record]],
               rng: random.Random) -> list[Record]:
        whole = by_txn[txn.n].pop(source.name)
        self._ids.discard(whole.id)
        parts = []
        if source.listed("quantity"):
            first = rng.randint(1, txn.quantity - 1)
            quantities = [first, txn.quantity - first]
            amounts = [round(first * txn.unit_price, 2)]
            amounts.append(round(whole.values["amount"] - amounts[0], 2))
        else:
            quantities = [txn.quantity, txn.quantity]
            first = round(whole.values["amount"] * rng.uniform(0.3, 0.7), 2)
            amounts = [first, round(whole.values["amount"] - first, 2)]
        date = whole.values["date"]
        for i in range(2):
            rec = self._record(source, txn, rng)
            rec.values = dict(whole.values, quantity=quantities[i], amount=amounts[i],
                              date=date + dt.timedelta(days=rng.randint(*SPLIT_GAP) if i else 0))
            rec.memo = fill(source.split_memo, part=i + 1, parts=2, reference=txn.reference)
            parts.append(rec)
        return parts

    def _apply_policy(self, case: Case, policy: Policy, free: list[Txn], rng: random.Random) -> None:
        d = self.domain
        kind = d.discrepancy(policy.applies_to)
        if policy.resolution:
            plant = next((p for p in case.plants if p.kind is kind and p.resolution == kind.resolution), None)
            if plant is not None:
                plant.resolution = policy.resolution
                case.rules.append(Rule(policy, plant.txn.party))
            return
        # A tolerance rule on a party with no planted discrepancy of that type: its variance is acceptable.
        planted = {p.txn.party.id for p in case.plants if p.kind is kind}
        band = (kind.tolerance, policy.tolerance)
        txn = self._pick(free, rng, lambda t: t.party.id not in planted and self._fits(kind, t)
                         and self._change(kind, t, band=band, probe=True) is not None)
        if txn is not None:
            txn.kind = "policy"
            case.rules.append(Rule(policy, txn.party, txn=txn))

    # -- what the agent sees --
    def _display(self, records: list[Record], txns: list[Txn], case: Case, rng: random.Random) -> None:
        d, ix, p = self.domain, self._index(), self.perturb
        pairs = [(t.party.id, t.item.id) for t in txns]
        duplicated = {pl.txn.n for pl in case.plants if pl.kind.mechanism == "duplicate"}
        for rec in records:
            source = ix["sources"][rec.source]
            txn = txns[rec.txn]
            unique = pairs.count((txn.party.id, txn.item.id)) == 1
            droppable = (not source.id_is_reference and source.listed("party") and unique
                         and txn.kind in ("ordinary", "planted", "near_miss", "policy")
                         and rec.txn not in duplicated)
            for column in source.columns:
                role, value = column.role, rec.values[column.role]
                if role == "reference":
                    text = d.missing_marker if droppable and p.chance(p.tier.drop * DROP_RATE) else value
                elif role == "party":
                    text = value
                    if source.external and txn.party.aliases and p.chance(p.tier.noise * ALIAS_RATE):
                        text = rng.choice(txn.party.aliases)
                elif role == "date":
                    text = value.isoformat()
                elif role == "item":
                    text = value
                else:
                    text = str(value) if role == "quantity" else money(value)
                    if source.ocr:
                        text = p.misread(text, rate=OCR_RATE, chars=OCR_MISREADS, pairs={})
                    if role == "quantity" and txn.item.unit:
                        text = f"{text} {txn.item.unit}"
                rec.shown[role] = text

    def _honest_path(self, case: Case, tier: TierProfile) -> None:
        """The shortest path an agent without privileged state can justify: list every source, open every record
        whose listed figures disagree because of a detail column, read the terms of every party whose records
        it would flag (hidden-constraint tiers), flag, submit."""
        case.inspect = list(dict.fromkeys(rec_id for rec_id, _ in case.varied
                                          if self.domain.opens(case.records[rec_id].source)))
        if tier.hidden_constraints:
            parties = [p.txn.party.id for p in case.plants] + [r.party.id for r in case.rules if r.record]
            case.terms = list(dict.fromkeys(parties))
        case.min_steps = len(self.domain.sources) + len(case.inspect) + len(case.terms) + len(case.plants) + 1

    # ---- stepping -------------------------------------------------------------------------------------
    def apply(self, action: Any) -> Outcome:
        t = self.domain.tools
        if action.tool is None:
            names = ", ".join(t.model_dump().values())
            return Outcome(f"Say which tool to use: one of {names}.", error="missing_tool")
        if action.tool == t.listing:
            return self._list(action)
        if action.tool == t.terms:
            return self._read_terms(action)
        if action.tool == t.submit:
            return self._submit()
        if not action.record:
            return Outcome(f"{action.tool} needs a record id.", error="missing_record")
        record = action.record.strip()
        if record not in self._shown_ids:
            return Outcome(f"No listed record {record[:40]!r}: list its source first and use an id it shows.",
                           error="unknown_record")
        if action.tool == t.inspect:
            return self._inspect(record)
        if action.tool == t.unflag:
            if record not in self._findings:
                return Outcome(f"{record} has no finding to withdraw.", error="not_flagged")
            del self._findings[record]
            return Outcome(f"Finding on {record} withdrawn; {len(self._findings)} finding(s) recorded.")
        # flag
        if action.discrepancy is None or action.resolution is None:
            return Outcome(f"{action.tool} needs a discrepancy type and a resolution.", error="incomplete_flag")
        if record not in self._findings and len(self._findings) >= MAX_FINDINGS:
            return Outcome(f"At most {MAX_FINDINGS} findings: withdraw one first.", error="too_many_flags")
        replaced = record in self._findings
        self._findings[record] = Finding(record, action.discrepancy, action.resolution)
        return Outcome(f"Finding on {record} {'updated' if replaced else 'recorded'}; {len(self._findings)} "
                       "finding(s) recorded.")

    def _list(self, action: Any) -> Outcome:
        if action.source is None:
            names = ", ".join(s.name for s in self.domain.sources)
            return Outcome(f"{action.tool} needs a source: one of {names}.", error="missing_source")
        if action.source in self._listed:
            return Outcome(f"{action.source} is already listed: nothing new.")
        self._listed.append(action.source)
        source, case = self._index()["sources"][action.source], self._case
        ids = case.listing[action.source]
        self._shown_ids.update(ids)
        self._records_seen.extend(record_line(source, case.records[i], detail=False) for i in ids)
        return Outcome(f"{action.tool} {action.source}: {len(ids)} record(s).")

    def _inspect(self, record: str) -> Outcome:
        if record in self._opened:
            return Outcome(f"{record} is already open: nothing new.")
        self._opened.add(record)
        rec = self._case.records[record]
        self._details.append(record_line(self._index()["sources"][rec.source], rec, detail=True))
        return Outcome(f"{record} opened.")

    def _read_terms(self, action: Any) -> Outcome:
        if action.party is None:
            return Outcome(f"{action.tool} needs a party id.", error="missing_party")
        if action.party in self._read:
            return Outcome(f"The terms of {action.party} are already read: nothing new.")
        self._read.add(action.party)
        party, case = self._index()["parties"][action.party], self._case
        line = f"{party.id} ({party.name}): {party.terms}"
        for rule in case.rules:
            if rule.party is party:
                line += " " + rule.text()
        self._terms.append(line)
        return Outcome(f"Terms of {action.party} read.")

    def _submit(self) -> Outcome:
        case, verdict = self._case, Verdict()
        truth = case.truth
        k = len(truth)
        found = [r for r in self._findings if r in truth]
        typed = [r for r in found if self._findings[r].discrepancy == truth[r].discrepancy]
        resolved = [r for r in found if self._findings[r].resolution == truth[r].resolution]
        false = [r for r in self._findings if r not in truth]
        if k:
            verdict.detection = 0.40 * len(found) / k
            verdict.classification = 0.20 * len(typed) / k
            verdict.resolution = 0.25 * len(resolved) / k
        correctness = (verdict.detection + verdict.classification + verdict.resolution) / 0.85
        precision = len(found) / len(self._findings) if self._findings else 0.0
        steps, budget = self._state.step_count, self._state.step_budget
        slack = budget - case.min_steps
        wasted = max(0, steps - case.min_steps)
        pace = 1.0 if wasted == 0 else (max(0.0, 1.0 - wasted / slack) if slack > 0 else 0.0)
        verdict.efficiency = 0.15 * correctness * precision * pace
        verdict.penalty = -min(0.50, 0.15 * len(false))
        verdict.solved = len(typed) == k and len(resolved) == k and not false
        self._verdict = verdict
        summary = (f"Reconciliation submitted with {len(self._findings)} finding(s): "
                   + ("every discrepancy found, classified and resolved." if verdict.solved else "not all correct."))
        return Outcome(summary, terminal=True, solved=verdict.solved)

    # ---- views ----------------------------------------------------------------------------------------
    def observe(self) -> dict[str, Any]:
        d = self.domain
        listed = set(self._listed)
        return {
            "briefing": (f"{d.batch_noun}: period {d.start.isoformat()} to {d.end.isoformat()}, amounts in "
                         f"{d.currency}."),
            "sources": [f"{line} ({'listed' if s.name in listed else 'not listed yet'})"
                        for s, line in zip(d.sources, self._controls, strict=True)],
            "records": list(self._records_seen),
            "details": list(self._details),
            "terms": list(self._terms),
            "findings": [f.line() for f in self._findings.values()],
        }

    def oracle_view(self) -> Case:
        return self._case

    def secret_values(self) -> list[str]:
        """None: nothing here may stay unseen until the end. The agent must see the records it flags, and a party
        rule once it reads that party's terms, before it flags; what it never sees is whether a finding is right.
        The opening (control figures only) holds no record, rule or resolution: the family's tests check it."""
        return []

    def hidden_texts(self) -> list[str]:
        """What only an action reveals (the listed records' ids, the party rules): never in the opening."""
        return [p.record for p in self._case.plants] + [rule.text() for rule in self._case.rules]
