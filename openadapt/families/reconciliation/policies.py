"""Reference policies of the reconciliation family: the privileged oracle and a shallow matching heuristic (the
baseline a trained agent must beat). Both read the domain through the environment, never a catalogue."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from openadapt.families.reconciliation.domain import LATE_DAYS
from openadapt.families.reconciliation.engine import OTHER_FIGURES, parse_line, parse_number
from openadapt.kit import Policy


class ReconciliationOracle(Policy):
    """Reads the planted truth and walks the shortest honest path: list every source, open the records whose
    listed figures disagree because of a detail column, read the terms of every party it will flag (and of the
    party whose variance a rule may accept) on hidden-constraint tiers, flag each discrepancy, submit."""

    name = "oracle"
    privileged = True

    def act(self, observation: Any) -> Any:
        env, case = self.env, self.env.oracle_view()
        t, make = env.domain.tools, env.action_type
        plan = [make(tool=t.listing, source=s.name) for s in env.domain.sources]
        plan += [make(tool=t.inspect, record=r) for r in case.inspect]
        plan += [make(tool=t.terms, party=p) for p in case.terms]
        plan += [make(tool=t.flag, record=f.record, discrepancy=f.discrepancy, resolution=f.resolution)
                 for f in case.truth.values()]
        step = observation.metadata.get("step", 0)
        return plan[step] if step < len(plan) else make(tool=t.submit)


class MatchingHeuristic(Policy):
    """What a shallow agent does: list every source, match records by the reference as printed, open a record
    whose listed amount disagrees with its match, and flag by the manual's surface rules with the usual
    resolution: a figure off beyond the stated tolerance (adding up split records), a transaction missing from a
    source, two records of one party and amount in a source (the later one a duplicate, even when each has its
    own reference). It never reads party terms, ignores records whose reference is blank, and takes a figure it
    cannot read as agreeing."""

    name = "heuristic"

    def begin(self, env: Any, observation: Any, rng: Any) -> None:
        super().begin(env, observation, rng)
        self.domain = env.domain
        self.roles = {s.name: {c.label: c.role for c in s.columns} for s in env.domain.sources}

    def act(self, observation: Any) -> Any:
        d, make, t = self.domain, self.env.action_type, self.domain.tools
        for source, line in zip(d.sources, observation.sources, strict=False):
            if "(not listed yet)" in line:
                return make(tool=t.listing, source=source.name)
        records = self._records(observation)
        opened = {parse_line(line)[1] for line in observation.details}
        for rec_id in self._to_open(records):
            if rec_id not in opened:
                return make(tool=t.inspect, record=rec_id)
        flagged = {line.split(": ")[0] for line in observation.findings}
        for rec_id, kind in self._findings(records).items():
            if rec_id not in flagged:
                return make(tool=t.flag, record=rec_id, discrepancy=kind.id, resolution=kind.resolution)
        return make(tool=t.submit)

    # ---- reading the working papers -------------------------------------------------------------------
    def _records(self, observation: Any) -> dict[str, dict[str, str]]:
        records: dict[str, dict[str, str]] = {}
        for line in [*observation.records, *observation.details]:
            source, rec_id, cells = parse_line(line)
            row = records.setdefault(rec_id, {"_source": source, "_id": rec_id})
            for label, value in cells.items():
                role = self.roles.get(source, {}).get(label)
                if role:
                    row[role] = value
        return records

    def _groups(self, records: dict[str, dict[str, str]]) -> dict[str, dict[str, list[dict[str, str]]]]:
        groups: dict[str, dict[str, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
        for row in records.values():
            ref = row.get("reference") or row["_id"]
            if ref == self.domain.missing_marker:
                continue
            groups[ref][row["_source"]].append(row)
        for group in groups.values():
            for rows in group.values():
                rows.sort(key=lambda r: (r.get("date", ""), r["_id"]))
        return groups

    def _to_open(self, records: dict[str, dict[str, str]]) -> list[str]:
        d, out = self.domain, []
        for kind in d.discrepancies:
            source = d.source(kind.source) if kind.mechanism == "shift" else None
            if source is None or not source.role(kind.role).detail:
                continue
            for group in self._groups(records).values():
                rows, base = group.get(kind.source), self._baseline(group, kind.source, "amount")
                if rows and base is not None and "amount" in rows[0]:
                    value = self._value(rows, kind.source, "amount")
                    if value is not None and abs(value - base) > 0.005:
                        out.append(rows[0]["_id"])
        return list(dict.fromkeys(out))

    def _value(self, rows: list[dict[str, str]], source: str, role: str) -> float | None:
        """A source's figure for one transaction: split records of a splittable source are added up."""
        if role in ("quantity", "amount") and self.domain.source(source).splittable and len(rows) > 1:
            parts = [parse_number(r.get(role, "")) for r in rows]
            return None if None in parts else round(sum(parts), 2)
        return parse_number(rows[0][role]) if role in rows[0] else None

    def _baseline(self, group: dict[str, list[dict[str, str]]], skip: str, role: str) -> float | None:
        for source, rows in group.items():
            if source != skip and rows and role in rows[0]:
                return self._value(rows, source, role)
        return None

    def _others_agree(self, group: dict[str, list[dict[str, str]]], kind: Any, row: dict[str, str]) -> bool:
        """The manual's side condition of a shift: the record's other figures agree (unreadable ones count as
        agreeing)."""
        for role in OTHER_FIGURES[kind.role]:
            mine, base = parse_number(row.get(role, "")), self._baseline(group, kind.source, role)
            if mine is not None and base is not None and abs(mine - base) > 0.005:
                return False
        return True

    def _item_fits(self, kind: Any, row: dict[str, str]) -> bool:
        """Whether the record's item is one the type can strike (a record that shows no item fits)."""
        return not kind.items or "item" not in row or row["item"] in {self.domain.item(i).name for i in kind.items}

    def _late(self, row: dict[str, str]) -> bool:
        return row.get("date", "") >= (self.domain.end - dt.timedelta(days=LATE_DAYS - 1)).isoformat()

    def _findings(self, records: dict[str, dict[str, str]]) -> dict[str, Any]:
        d = self.domain
        found: dict[str, Any] = {}
        names = {s.name for s in d.sources}
        for group in self._groups(records).values():
            present = {s for s, rows in group.items() if rows}
            for kind in d.discrepancies:
                if kind.mechanism == "duplicate":
                    rows = group.get(kind.source, [])
                    for row in rows[1:]:
                        if row.get("amount") == rows[0].get("amount"):
                            found.setdefault(row["_id"], kind)
                elif kind.mechanism == "omit":
                    if set(kind.missing_from) == names - present and kind.flag in present:
                        row = group[kind.flag][0]
                        if self._item_fits(kind, row) and self._late(row) == kind.late:
                            found.setdefault(row["_id"], kind)
                else:
                    rows, flag = group.get(kind.source), group.get(kind.flag)
                    role = kind.role or "amount"
                    if not rows or not flag or role not in rows[0]:
                        continue
                    value, base = self._value(rows, kind.source, role), self._baseline(group, kind.source, role)
                    if value is None or base is None or base == 0 or not self._item_fits(kind, rows[0]):
                        continue
                    if kind.mechanism == "shift":
                        rel = (value - base) / base * (1 if kind.direction == "up" else -1)
                        if rel > kind.tolerance + 1e-9 and self._others_agree(group, kind, rows[0]):
                            found.setdefault(flag[0]["_id"], kind)
                    elif value != base and sorted(f"{value:.2f}") == sorted(f"{base:.2f}"):
                        found.setdefault(flag[0]["_id"], kind)
        # A naive duplicate check: the same party and amount twice in a source.
        for kind in d.discrepancies:
            if kind.mechanism != "duplicate":
                continue
            seen: dict[tuple[str, str], dict[str, str]] = {}
            rows = sorted((r for r in records.values() if r["_source"] == kind.source),
                          key=lambda r: (r.get("date", ""), r["_id"]))
            for row in rows:
                key = (row.get("party", ""), row.get("amount", row.get("quantity", "")))
                if key in seen:
                    found.setdefault(row["_id"], kind)
                else:
                    seen[key] = row
        return found
