"""The querying domain: a relational database (tables, columns, value generators, foreign keys), the business
questions asked of it with their reference SQL, and the ways its schema drifts.

Each episode builds a fresh SQLite database from the tables' generators, asks one question with its slots
filled from the data, and answers it by executing the question's reference SQL on the canonical (documented)
schema. The agent queries a *drifted* copy of that database: renamed tables and columns, stale copies and decoy
columns with plausible names, soft-deleted rows, a column re-scaled to another unit, a table split in two. Its
final query is executed and its result compared with the reference result.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import Field, model_serializer

from openadapt.families.domain import (
    IDENT,
    Code,
    Domain,
    DomainPart,
    DomainProblem,
    Placeholders,
    Rule,
    dependency_cycle,
    duplicate_values,
    duplicates,
    placeholders,
    unknown_ref,
)

MAX_QUESTION_TABLES = 3  # tables one reference query may read (the T5 budget covers describing them all)
MAX_RESULT_ROWS = 60
MAX_RESULT_COLUMNS = 6
MIN_QUESTIONS = 6
MIN_DISTRACTORS = 3  # ECI 3 plants three distractors
MIN_HIDDEN_KINDS = 2  # ECI 5 plants two hidden constraints: they should not always be the same trick
HIDDEN_KINDS = ("soft_delete", "unit", "split")

# Words SQLite reserves: an identifier spelled like one breaks every unquoted query that names it.
SQL_KEYWORDS = frozenset({
    "abort", "action", "add", "after", "all", "alter", "analyze", "and", "as", "asc", "attach", "autoincrement",
    "before", "begin", "between", "by", "cascade", "case", "cast", "check", "collate", "column", "commit",
    "conflict", "constraint", "create", "cross", "current", "current_date", "current_time", "current_timestamp",
    "database", "default", "deferrable", "deferred", "delete", "desc", "detach", "distinct", "do", "drop", "each",
    "else", "end", "escape", "except", "exclusive", "exists", "explain", "fail", "filter", "first", "following",
    "for", "foreign", "from", "full", "glob", "group", "groups", "having", "if", "ignore", "immediate", "in",
    "index", "indexed", "initially", "inner", "insert", "instead", "intersect", "into", "is", "isnull", "join",
    "key", "last", "left", "like", "limit", "match", "natural", "no", "not", "nothing", "notnull", "null", "nulls",
    "of", "offset", "on", "or", "order", "others", "outer", "over", "partition", "plan", "pragma", "preceding",
    "primary", "query", "raise", "range", "recursive", "references", "regexp", "reindex", "release", "rename",
    "replace", "restrict", "right", "rollback", "row", "rows", "savepoint", "select", "set", "table", "temp",
    "temporary", "then", "ties", "to", "transaction", "trigger", "unbounded", "union", "unique", "update", "using",
    "vacuum", "values", "view", "virtual", "when", "where", "window", "with", "without"
})

_Ident = dict(min_length=2, max_length=40, pattern=IDENT)
Identifier = Annotated[str, Field(**_Ident)]  # a name that reaches SQL as a table or column: never free text


class UnitChange(DomainPart):
    """The column is stored in another unit after a migration (a hidden constraint on ECI 4-5)."""

    name: str = Field(**_Ident, description=(
        "The column's name once it is stored in the new unit, e.g. 'unit_price_cents', 'duration_s'."))
    factor: int = Field(ge=2, le=100_000, description=(
        "Stored value = documented value x factor, a whole number, e.g. 100 for euros -> cents, 60 for "
        "minutes -> seconds. For a real column with 2 decimals the factor must be a multiple of 100, so that "
        "stored values stay exact integers."))
    note: str = Field(min_length=15, max_length=240, description=(
        "The column comment that documents the new unit (the only hint the agent gets), e.g. 'Unit price in "
        "euro cents (integer) since the 2024 pricing-service migration.'"))


class Decoy(DomainPart):
    """A plausible-looking column beside the real one that must not be used (a distractor on ECI 3-5)."""

    name: str = Field(**_Ident, description=(
        "Name of the decoy column, plausible for the same meaning, e.g. 'list_price_usd', 'qty_ordered'."))
    factor: float = Field(default=1.0, gt=0.0, le=100_000.0, description=(
        "How the decoy's values relate to the real column's: a scale (100 = stored in cents, 1.2 = including "
        "VAT), or 1.0 for a stale copy that stopped being maintained (a share of its values are out of date). "
        "Text and date columns always get a stale copy."))
    note: str = Field(min_length=15, max_length=240, description=(
        "The decoy's column comment, saying why it is not the one to use and naming the live column with "
        "{live}, e.g. 'Legacy USD price from the old catalogue feed, not maintained since 2023; the current "
        "price is {live}.'"))


class Column(DomainPart):
    name: str = Field(**_Ident, description=(
        "Column name as documented, a lowercase identifier, e.g. 'order_date', 'unit_price'."))
    type: Literal["integer", "real", "text", "date"] = Field(description=(
        "SQL type: integer, real, text, or date (stored as 'YYYY-MM-DD' text)."))
    comment: str = Field(min_length=3, max_length=200, description=(
        "The data dictionary's comment on the column, specific to this world, e.g. 'Calendar day the order was "
        "placed (warehouse local time)'. Noisy tiers withhold some comments."))
    kind: Literal["key", "ref", "choice", "number", "date", "code"] = Field(description=(
        "How values are generated: 'key' (the table's primary key, 1..rows; exactly one per table, type "
        "integer), 'ref' (a foreign key to another table's key; set `ref`), 'choice' (drawn from `choices`), "
        "'number' (uniform in [low, high]; integer or real with `decimals`), 'date' (uniform between `start` "
        "and `end`), 'code' (a unique label from `pattern`, e.g. 'INV-{n}')."))
    ref: str | None = Field(default=None, max_length=40, description=(
        "For kind 'ref': the documented name of the table whose key this column holds, e.g. 'customers'."))
    choices: list[str] = Field(default_factory=list, max_length=60, description=(
        "For kind 'choice': the values of this world, e.g. ['shipped', 'delivered', 'returned', 'cancelled'] "
        "or 30 company names. Each at most 60 characters."))
    weights: list[float] = Field(default_factory=list, max_length=60, description=(
        "Optional, for kind 'choice': one positive weight per choice (how common each value is)."))
    unique: bool = Field(default=False, description=(
        "For kind 'choice': every row gets a different value (names); needs at least max_rows choices."))
    low: float | None = Field(default=None, description="For kind 'number': the smallest value, e.g. 4.5")
    high: float | None = Field(default=None, description="For kind 'number': the largest value, e.g. 380")
    decimals: int = Field(default=0, ge=0, le=4, description=(
        "For kind 'number' of type real: decimals kept, e.g. 2 for money. 0 for integers."))
    start: str | None = Field(default=None, max_length=10, description="For kind 'date': first day, '2024-01-01'")
    end: str | None = Field(default=None, max_length=10, description="For kind 'date': last day, '2024-12-31'")
    pattern: str | None = Field(default=None, max_length=40, description=(
        "For kind 'code': the label with {n} (the row number, zero-padded to 4 digits), e.g. 'INV-2024-{n}'."))
    nullable: bool = Field(default=False, description=(
        "True when the value can be missing in this world (a phone number not given, a discharge not yet "
        "done): noisy tiers leave a share of it NULL. Never for key or ref columns."))
    renames: list[Identifier] = Field(default_factory=list, max_length=4, description=(
        "Names this column may carry after a schema migration (drift from ECI 2 on), plausible in this world, "
        "e.g. for 'region': ['sales_region', 'territory']. Give one or more for most columns."))
    unit: UnitChange | None = Field(default=None, description=(
        "Optional, numeric non-key columns: the column re-stored in another unit (a hidden constraint)."))
    decoy: Decoy | None = Field(default=None, description=(
        "Optional, non-key columns: a decoy column with a plausible name that must not be used (a distractor)."))

    @model_serializer(mode="wrap")
    def _only_its_generator(self, handler: Any) -> dict[str, Any]:
        """Written out without the generator fields of other kinds (a choice column has no date range)."""
        data = handler(self)
        keep = KIND_FIELDS.get(self.kind, ())
        return {k: v for k, v in data.items() if k not in GENERATOR_FIELDS or k in keep}


KIND_FIELDS = {"key": (), "ref": ("ref",), "choice": ("choices", "weights", "unique"),
               "number": ("low", "high", "decimals"), "date": ("start", "end"), "code": ("pattern",)}
GENERATOR_FIELDS = frozenset(f for fields in KIND_FIELDS.values() for f in fields)


class SoftDelete(DomainPart):
    """Rows kept but marked deleted, to be excluded by every query (a hidden constraint on ECI 4-5)."""

    column: str = Field(**_Ident, description=(
        "The marker column, e.g. 'deleted_at' (style timestamp) or 'is_void' (style flag)."))
    style: Literal["timestamp", "flag"] = Field(description=(
        "'timestamp': deleted rows carry the deletion date, live rows NULL (needs a date column in this "
        "table for the dates); 'flag': deleted rows 1, live rows 0."))
    note: str = Field(min_length=20, max_length=240, description=(
        "The table comment that documents the rule, e.g. 'Orders voided in billing keep their row with "
        "deleted_at set; voided orders are not sales.' May use {table} and {column}."))


class Split(DomainPart):
    """Some columns moved to a side table joined by a key (a hidden constraint on ECI 4-5)."""

    table: str = Field(**_Ident, description="The side table's name, e.g. 'customer_addresses'.")
    key: str = Field(**_Ident, description=(
        "The side table's column holding the main table's key, e.g. 'customer_id'."))
    columns: list[str] = Field(min_length=1, max_length=6, description=(
        "Documented names of the columns that moved to the side table, e.g. ['region', 'city']. Not the key."))
    note: str = Field(min_length=20, max_length=240, description=(
        "Added to the main table's comment: where the columns went, with {side} (and optionally {key}), e.g. "
        "'Address fields moved to {side} in the CRM migration (one row per customer, joined on {key}).'"))
    comment: str = Field(min_length=10, max_length=200, description=(
        "The side table's own comment, e.g. 'Postal address of each customer account.'"))


class Stale(DomainPart):
    """A stale copy of the table left behind by a migration (a distractor on ECI 3-5)."""

    names: list[str] = Field(min_length=1, max_length=3, description=(
        "Plausible names for the stale copy, e.g. ['orders_archive', 'orders_2023']. On adversarial tiers it "
        "may also take the table's documented name while the live table is renamed."))
    note: str = Field(min_length=20, max_length=240, description=(
        "The stale copy's table comment, naming the live table with {live}, e.g. 'Frozen export taken before "
        "the 2024 billing migration; not updated since. Live orders are in {live}.'"))


class Table(DomainPart):
    name: str = Field(**_Ident, description="Table name as documented, e.g. 'orders', 'appointments'.")
    comment: str = Field(min_length=10, max_length=240, description=(
        "What one row is, in this world's words, e.g. 'One row per customer order placed through any "
        "channel.'"))
    min_rows: int = Field(ge=3, le=300, description="Fewest rows an episode generates, e.g. 40")
    max_rows: int = Field(ge=3, le=300, description="Most rows an episode generates, e.g. 80")
    columns: list[Column] = Field(min_length=2, max_length=14, description=(
        "The columns, the key first. Give each a generator and, for most, one or more renames."))
    renames: list[Identifier] = Field(default_factory=list, max_length=4, description=(
        "Names this table may carry after a migration, e.g. for 'customers': ['clients', 'accounts']."))
    soft_delete: SoftDelete | None = Field(default=None, description="Optional hidden constraint: soft deletes.")
    split: Split | None = Field(default=None, description="Optional hidden constraint: columns moved away.")
    stale: Stale | None = Field(default=None, description="Optional distractor: a stale copy of the table.")


class Slot(DomainPart):
    name: str = Field(**_Ident, description="Placeholder name used as {name} in the question and its SQL.")
    table: str | None = Field(default=None, max_length=40, description=(
        "The documented table whose column fills the slot, e.g. 'customers'; or leave empty and give `values`."))
    column: str | None = Field(default=None, max_length=40, description=(
        "The column of `table` whose values (in this episode's data) fill the slot, e.g. 'region'."))
    part: Literal["full", "year", "month"] = Field(default="full", description=(
        "For a date column: 'month' fills 'YYYY-MM', 'year' fills 'YYYY'; otherwise 'full'."))
    values: list[str] = Field(default_factory=list, max_length=20, description=(
        "Fixed options when no column fits, e.g. ['3', '5'] for a top-N. All-numeric options are put into "
        "the SQL unquoted, others as quoted strings."))


class Question(DomainPart):
    id: str = Field(**_Ident, description="Identifier of the question template, e.g. 'revenue_by_category'.")
    text: str = Field(min_length=15, max_length=300, description=(
        "The business question as a user would ask it, with {slot} placeholders, e.g. 'What was the net "
        "revenue from {category} products in {month}?'. Unambiguous: say what counts and, for lists, what "
        "columns and which order."))
    sql: str = Field(min_length=15, max_length=1200, description=(
        "The reference SQLite query over the documented schema, with the same {slot} placeholders (filled as "
        "SQL literals: no quotes around them), e.g. \"SELECT SUM(i.quantity * i.unit_price) FROM order_items i "
        "JOIN products p ON p.id = i.product_id WHERE p.category = {category}\". One SELECT; no '*' columns; "
        "at most 3 tables; a tie-breaker in every ORDER BY ... LIMIT; no ROUND (results are compared to 4 "
        "decimals)."))
    slots: list[Slot] = Field(default_factory=list, max_length=4, description="The placeholders and their values.")
    ordered: bool = Field(default=False, description=(
        "True when the question asks for an order (top N, ranked lists): the row order is then compared."))


class QueryingDomain(Domain):
    KEYS = {"tables": "name"}
    # `_coverage_problems`: every question must read a table with a distractor and a hidden constraint. A small
    # model leaves every optional part null. Not a split: asked of the first table too, a small model moves
    # columns the table does not have and names the side table after another table.
    REQUIRED_IN_FIRST = {"tables.stale": 3, "tables.soft_delete": 3}
    RULES = (
        Rule("question_renames", ("tables", "questions"),
             "Every question reads a table or column that has `renames`.",
             "Schema drift from ECI 2 on renames what questions read."),
        Rule("question_distractors", ("tables", "questions"),
             "Every question reads a table with a `stale` copy or a column with a `decoy`.",
             "ECI 3 plants distractors on what the question uses."),
        Rule("question_hidden", ("tables", "questions"),
             "Every question reads a table with `soft_delete`, a numeric column with a `unit` change, or a table "
             "whose `split` moves a column it uses.", "ECI 4 hides one of them."),
        Rule("distractors", ("tables",),
             f"The tables hold at least {MIN_DISTRACTORS} distractor candidates in all (stale copies plus decoy "
             "columns).", f"ECI 3 plants {MIN_DISTRACTORS}."),
        Rule("hidden_kinds", ("tables",),
             f"The tables use at least {MIN_HIDDEN_KINDS} kinds of hidden constraint among soft_delete, unit and "
             "split.", "ECI 4-5 do not always hide the same trick."),
    )
    PLACEHOLDERS = (
        Placeholders("tables[].soft_delete.note", ("table", "column")),
        Placeholders("tables[].split.note", ("side", "key", "table"), ("side",),
                     says="must contain {side}: name the side table"),
        Placeholders("tables[].stale.note", ("live", "table"), ("live",),
                     says="must contain {live}: name the live table (the agent needs a way to tell which is current)"),
        Placeholders("tables[].columns[].pattern", ("n",)),
        Placeholders("tables[].columns[].decoy.note", ("live",), ("live",),
                     says="must name the live column with {live}"),
        Placeholders("questions[].text", names_from="slots[].name"),
        Placeholders("questions[].sql", names_from="slots[].name"),
    )
    agent_role: str = Field(min_length=3, max_length=80, description=(
        "Who the agent is, e.g. 'the sales operations analyst', 'the clinic's reporting analyst'."))
    database_noun: str = Field(min_length=3, max_length=80, description=(
        "What the database is called in this world, e.g. 'sales database', 'appointment system database'."))
    tables: list[Table] = Field(min_length=3, max_length=12, description=(
        "The documented schema: 3 to 12 tables linked by foreign keys ('ref' columns), with drift options "
        "(renames, stale copies, decoys, soft deletes, unit changes, splits)."))
    questions: list[Question] = Field(min_length=MIN_QUESTIONS, max_length=40, description=(
        "Business questions with their reference SQL, at least 6, of varied shapes (counts, sums, averages, "
        "joins, grouped and ranked lists)."))

    # ---- drafts ------------------------------------------------------------------------------------------
    @classmethod
    def tidy(cls, data: dict) -> dict:
        """Renames that a name of the same namespace already takes (the column's own name, a sibling's, an earlier
        rename) and repeated values of a choice column (with their weights) are dropped: a small model lists
        most columns' own names among their renames ('order_date' -> ['order_date', 'order_date']), each a
        rename that could never happen. What is left is what the draft says; a column left without renames is
        only one fewer drift option. A column whose name an earlier column of its table has is dropped (a small
        model repeats `customer_id`, each time a key), and a
        column's type follows from its kind wherever the kind allows one type only (a 'ref' column of type text). A
        table whose unique names (a choice column with `unique`) are fewer than its `max_rows` gets as many rows as
        it has names: each row takes a different one, so the names are the table (a draft gives 300 products 8
        unique names). A question's slot that neither its text nor its SQL uses is dropped too (a small model
        gives 'Top Selling Products' a `{category}` slot it never uses: a fixed question, not a broken one), a
        placeholder used without a slot gets the one its name points to (`{category}`: the `category` column of a
        table the SQL reads; `{month}`, `{year}`: a date column's part), a slot whose table lacks its column
        moves to the one table that has it (`_slot_table`), and a
        question marked `ordered` whose SQL has no ORDER BY is not ordered: its reference rows come in no order.

        Keys and references are read off the columns' names where the draft contradicts itself (`_tidy_keys`: a
        ref written 'orders.customer_id' names the table `orders`; `customer_id` marked a second key of `orders`
        is a reference to `customers`; a table without a key takes the column named for it, `product_id` in
        `products`). A question asked again in the same words is left as written: the check names it, and the
        designer asks for another question (dropped here, the list falls short of its minimum, and its items,
        rewritten out of sight of one another, repeat the question)."""
        data = dict(data)
        tables = data.get("tables")
        if not isinstance(tables, list):
            return data
        table_names = {t.get("name") for t in tables if isinstance(t, dict)}
        data["tables"] = _tidy_keys([_tidy_table(t, table_names) if isinstance(t, dict) else t for t in tables])
        if isinstance(data.get("questions"), list):
            data["questions"] = [_tidy_question(q, data["tables"]) if isinstance(q, dict) else q
                                 for q in data["questions"]]
        return data

    # ---- lookups ----------------------------------------------------------------------------------------
    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)

    # ---- semantic checks -------------------------------------------------------------------------------
    def family_problems(self) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        p += duplicates(self.tables, "name", "domain.tables")
        p += duplicates(self.questions, "id", "domain.questions")
        for i, table in enumerate(self.tables):
            p += self._table_problems(i, table)
        p += self._name_problems()
        p += self._cycle_problems()
        asked: dict[str, int] = {}
        for i, q in enumerate(self.questions):
            p += self._question_text_problems(i, q)
            first = asked.setdefault(" ".join(q.text.lower().split()), i)
            if first != i:
                p.append(DomainProblem(path=f"domain.questions[{i}]", code=Code.REPEATED_TEXT, value=q.text, message=(
                    f"asks what questions[{first}] asks ({q.text!r}): ask another question of this database")))
        if p:
            return p  # the SQL checks below need a structurally sound schema
        from openadapt.families.querying.database import sql_problems

        found, reads = sql_problems(self)
        p += found
        if p:
            return p
        p += self._coverage_problems(reads)
        return p

    def _table_problems(self, i: int, table: Table) -> list[DomainProblem]:
        at, p = f"domain.tables[{i}]", []
        tables = {t.name for t in self.tables}
        if table.min_rows > table.max_rows:
            p.append(DomainProblem(path=f"{at}.max_rows", message="must be at least min_rows"))
        p += duplicates(table.columns, "name", f"{at}.columns")
        keys = [j for j, c in enumerate(table.columns) if c.kind == "key"]
        if len(keys) != 1:
            p.append(DomainProblem(path=f"{at}.columns", message=(
                f"has {len(keys)} key column(s): exactly one column must have kind 'key' (the primary key)")))
        for j, col in enumerate(table.columns):
            p += self._column_problems(f"{at}.columns[{j}]", table, col, tables)
        if table.soft_delete is not None:
            sd = table.soft_delete
            if sd.style == "timestamp" and not any(c.kind == "date" for c in table.columns):
                p.append(DomainProblem(path=f"{at}.soft_delete.style", message=(
                    "'timestamp' needs a date column in this table to draw deletion dates from; use 'flag'")))
        if table.split is not None:
            sp, names = table.split, {c.name: c for c in table.columns}
            for j, name in enumerate(sp.columns):
                if name not in names:
                    p.append(DomainProblem(path=f"{at}.split.columns[{j}]",
                                           message=f"{name!r} is not a column of {table.name}"))
                elif names[name].kind == "key":
                    p.append(DomainProblem(path=f"{at}.split.columns[{j}]",
                                           message="the key stays in the main table"))
            if len(set(sp.columns)) != len(sp.columns):
                p.append(DomainProblem(path=f"{at}.split.columns", message="lists a column twice"))
            if len(table.columns) - len(set(sp.columns)) < 2:
                p.append(DomainProblem(path=f"{at}.split.columns", message=(
                    "must leave the key and at least one other column in the main table")))
        return p

    def _column_problems(self, at: str, table: Table, col: Column, tables: set[str]) -> list[DomainProblem]:
        p: list[DomainProblem] = []
        numeric = col.type in ("integer", "real")
        need_type = {"key": ("integer",), "ref": ("integer",), "date": ("date",), "code": ("text",),
                     "choice": ("text",), "number": ("integer", "real")}[col.kind]
        if col.type not in need_type:
            p.append(DomainProblem(path=f"{at}.type", message=(
                f"kind {col.kind!r} needs type {' or '.join(need_type)}, not {col.type!r}")))
        if col.kind == "ref":
            if col.ref is None:
                p.append(DomainProblem(path=f"{at}.ref", message="a 'ref' column must name the table it refers to"))
            elif col.ref not in tables:
                p += unknown_ref(col.ref, tables, f"{at}.ref", "table")
            elif col.ref == table.name:
                p.append(DomainProblem(path=f"{at}.ref", message="a table cannot refer to itself"))
        elif col.ref is not None:
            p.append(DomainProblem(path=f"{at}.ref", message="only 'ref' columns name a table"))
        if col.kind == "choice":
            if len(col.choices) < 2:
                p.append(DomainProblem(path=f"{at}.choices", message=(
                    f"has {len(col.choices)} value(s); a 'choice' column needs at least 2 for seed variation")))
            p += duplicate_values(col.choices, f"{at}.choices")
            for k, choice in enumerate(col.choices):
                if not 1 <= len(choice) <= 60:
                    p.append(DomainProblem(path=f"{at}.choices[{k}]", message="must be 1 to 60 characters"))
            if col.weights and (len(col.weights) != len(col.choices) or any(w <= 0 for w in col.weights)):
                p.append(DomainProblem(path=f"{at}.weights", message="needs one positive weight per choice"))
            if col.unique and len(col.choices) < table.max_rows:
                p.append(DomainProblem(path=f"{at}.choices", message=(
                    f"a unique column needs at least max_rows ({table.max_rows}) choices, has {len(col.choices)}")))
        if col.kind == "number":
            if col.low is None or col.high is None or not col.low < col.high:
                p.append(DomainProblem(path=f"{at}.high", message="a 'number' column needs low < high"))
            if col.type == "integer" and col.decimals:
                p.append(DomainProblem(path=f"{at}.decimals", message="an integer column has 0 decimals"))
        if col.kind == "date":
            days = [_date(col.start), _date(col.end)]
            if None in days:
                p.append(DomainProblem(path=f"{at}.start", message="a 'date' column needs ISO start and end dates"))
            elif days[0] >= days[1]:
                p.append(DomainProblem(path=f"{at}.end", message="must be after start"))
        if col.kind == "code" and (not col.pattern or "{n}" not in col.pattern):
            p.append(DomainProblem(path=f"{at}.pattern", message="a 'code' column needs a pattern with {n}"))
        if col.nullable and col.kind in ("key", "ref"):
            p.append(DomainProblem(path=f"{at}.nullable", message="key and ref columns are never NULL"))
        if col.unit is not None:
            if not numeric or col.kind != "number":
                p.append(DomainProblem(path=f"{at}.unit", message="only 'number' columns change unit"))
            elif col.type == "real" and col.unit.factor % (10 ** col.decimals):
                p.append(DomainProblem(path=f"{at}.unit.factor", message=(
                    f"must be a multiple of {10 ** col.decimals} for a column with {col.decimals} decimals "
                    "(stored values must stay exact integers)")))
        if col.decoy is not None and col.kind in ("key", "ref"):
            p.append(DomainProblem(path=f"{at}.decoy", message="key and ref columns get no decoy"))
        return p

    def _name_problems(self) -> list[DomainProblem]:
        """Every name a table or column can carry, in any episode, must be distinct in its namespace and must not
        be an SQL keyword."""
        p: list[DomainProblem] = []
        table_names: dict[str, str] = {}

        def claim(space: dict[str, str], name: str, path: str) -> None:
            if name in SQL_KEYWORDS:
                p.append(DomainProblem(path=path, message=f"{name!r} is an SQL keyword: choose another name"))
            if name in space:
                p.append(DomainProblem(path=path, code=Code.DUPLICATE_NAME, value=name,
                                       message=f"{name!r} is already used by {space[name]}: every name a "
                                       "table or column may take must be unique"))
            else:
                space[name] = path

        for i, t in enumerate(self.tables):
            claim(table_names, t.name, f"domain.tables[{i}].name")
        for i, t in enumerate(self.tables):
            at = f"domain.tables[{i}]"
            for j, name in enumerate(t.renames):
                claim(table_names, name, f"{at}.renames[{j}]")
            if t.stale is not None:
                for j, name in enumerate(t.stale.names):
                    claim(table_names, name, f"{at}.stale.names[{j}]")
            if t.split is not None:
                claim(table_names, t.split.table, f"{at}.split.table")
            columns: dict[str, str] = {}
            for j, c in enumerate(t.columns):
                claim(columns, c.name, f"{at}.columns[{j}].name")
            for j, c in enumerate(t.columns):
                for k, name in enumerate(c.renames):
                    claim(columns, name, f"{at}.columns[{j}].renames[{k}]")
                if c.unit is not None:
                    claim(columns, c.unit.name, f"{at}.columns[{j}].unit.name")
                if c.decoy is not None:
                    claim(columns, c.decoy.name, f"{at}.columns[{j}].decoy.name")
            if t.soft_delete is not None:
                claim(columns, t.soft_delete.column, f"{at}.soft_delete.column")
            if t.split is not None:  # the side table holds the key and the moved columns, under any of their names
                moved = [c for c in t.columns if c.name in t.split.columns]
                side = {name: "a moved column" for c in moved for name in (
                    c.name, *c.renames, *([c.unit.name] if c.unit else []), *([c.decoy.name] if c.decoy else []))}
                claim(side, t.split.key, f"{at}.split.key")
        return p

    def _cycle_problems(self) -> list[DomainProblem]:
        cycle = dependency_cycle({t.name: [c.ref for c in t.columns if c.kind == "ref" and c.ref] for t in self.tables})
        if cycle is None:
            return []
        return [DomainProblem(path="domain.tables", message=(
            f"foreign-key cycle: {' -> '.join(cycle)} (tables are generated parents first)"))]

    def _question_text_problems(self, i: int, q: Question) -> list[DomainProblem]:
        at, p = f"domain.questions[{i}]", []
        p += duplicates(q.slots, "name", f"{at}.slots")
        for j, slot in enumerate(q.slots):
            for field, text in (("text", q.text), ("sql", q.sql)):
                if "{" + slot.name + "}" not in text:
                    p.append(DomainProblem(path=f"{at}.{field}", message=f"does not use slot {{{slot.name}}}"))
            sat = f"{at}.slots[{j}]"
            if (slot.table is None) != (slot.column is None) or (slot.column is None) == (not slot.values):
                p.append(DomainProblem(path=sat, message="give either a table and its column, or fixed values"))
                continue
            if slot.column is not None:
                table, column = slot.table, slot.column
                if table not in {t.name for t in self.tables}:
                    p += unknown_ref(table, [t.name for t in self.tables], f"{sat}.table", "table")
                    continue
                col = next((c for c in self.table(table).columns if c.name == column), None)
                if col is None:
                    p.append(DomainProblem(path=f"{sat}.column", message=f"{column!r} is not a column of {table}"))
                elif slot.part != "full" and col.type != "date":
                    p.append(DomainProblem(path=f"{sat}.part", message=f"'{slot.part}' needs a date column"))
            elif slot.part != "full":
                p.append(DomainProblem(path=f"{sat}.part", message="only column slots take a date part"))
        if re.search(r"\bwith\s+recursive\b", q.sql, re.IGNORECASE):
            p.append(DomainProblem(path=f"{at}.sql", message="recursive queries are not allowed"))
        return p

    def _coverage_problems(self, reads: dict[str, dict[str, list[str]]]) -> list[DomainProblem]:
        """Every tier's mechanics must be able to touch every question (what it reads)."""
        p: list[DomainProblem] = []
        for i, q in enumerate(self.questions):
            at, read = f"domain.questions[{i}]", reads[q.id]
            options = drift_options(self, read)
            shown = ", ".join(f"{t}({', '.join(cols)})" for t, cols in read.items())
            for rule, drift in (("question_renames", "renames"), ("question_distractors", "distractors"),
                                ("question_hidden", "hidden")):
                if not options[drift]:
                    p.append(self.rule(rule).broken(at, f"it reads {shown}"))
        candidates = [t.name for t in self.tables if t.stale] + [
            f"{t.name}.{c.name}" for t in self.tables for c in t.columns if c.decoy]
        if len(candidates) < MIN_DISTRACTORS:
            p.append(self.rule("distractors").broken("domain.tables", f"{candidates or 'none'}"))
        present = {"soft_delete": any(t.soft_delete for t in self.tables),
                   "unit": any(c.unit for t in self.tables for c in t.columns),
                   "split": any(t.split for t in self.tables)}
        kinds = [kind for kind in HIDDEN_KINDS if present[kind]]
        if len(kinds) < MIN_HIDDEN_KINDS:
            p.append(self.rule("hidden_kinds").broken("domain.tables", f"{kinds or 'none'}"))
        return p


def _date(text: str | None) -> dt.date | None:
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


def drift_options(domain: QueryingDomain, read: dict[str, list[str]]) -> dict[str, list[tuple]]:
    """The drift that can touch a question reading `read` ({table: [columns]}), by tier mechanic."""
    renames, distractors, hidden = [], [], []
    for name, cols in read.items():
        table = domain.table(name)
        if table.renames:
            renames.append(("table", name))
        if table.stale:
            distractors.append(("stale", name))
        if table.soft_delete:
            hidden.append(("soft_delete", name, None))
        if table.split and set(table.split.columns) & set(cols):
            hidden.append(("split", name, None))
        for col in table.columns:
            if col.name not in cols:
                continue
            if col.renames:
                renames.append(("column", name, col.name))
            if col.decoy:
                distractors.append(("decoy", name, col.name))
            if col.unit:
                hidden.append(("unit", name, col.name))
    return {"renames": renames, "distractors": distractors, "hidden": hidden}


def _tidy_table(table: dict, table_names: set) -> dict:
    table = dict(table)
    if "renames" in table:
        table["renames"] = _new_names(table["renames"], table_names)
    columns = table.get("columns")
    if not isinstance(columns, list):
        return table
    named = [c.get("name") if isinstance(c, dict) else None for c in columns]
    columns = [c for i, c in enumerate(columns) if named[i] is None or named[i] not in named[:i]]
    taken = {c.get("name") for c in columns if isinstance(c, dict)}
    tidied = []
    for column in columns:
        if isinstance(column, dict):
            column = dict(column)
            if "renames" in column:  # (one not written stays unwritten: None would not parse)
                column["renames"] = _new_names(column["renames"], taken)
            column.update(_distinct_choices(column))
            if _TYPE_OF_KIND.get(column.get("kind")):  # the kind decides the type (only a number may be real)
                column["type"] = _TYPE_OF_KIND[column["kind"]]
        tidied.append(column)
    table["columns"] = tidied
    return _rows_for_unique_names(_tidy_soft_delete(table, taken))


def _tidy_soft_delete(table: dict, taken: set) -> dict:
    """A soft delete dated in a table with no date column is a flag (the check's own advice), and its marker
    column takes a name no column of the table has (a column cannot mark its own deletion: a small model marks
    `productid`), `deleted_at` or `is_deleted` by its style."""
    rule = table.get("soft_delete")
    if not isinstance(rule, dict):
        return table
    rule = dict(rule)
    dated = any(isinstance(c, dict) and c.get("kind") == "date" for c in table["columns"])
    if rule.get("style") == "timestamp" and not dated:
        rule["style"] = "flag"
    if rule.get("column") in taken:
        fresh = "deleted_at" if rule.get("style") == "timestamp" else "is_deleted"
        if fresh not in taken:
            rule["column"] = fresh
    return {**table, "soft_delete": rule}


def _rows_for_unique_names(table: dict) -> dict:
    """A table whose unique names are fewer than its row range is cut to as many rows as it has names."""
    names = [len(c["choices"]) for c in table["columns"] if isinstance(c, dict) and c.get("unique") is True
             and c.get("kind") == "choice" and isinstance(c.get("choices"), list) and len(c["choices"]) >= 3]
    low, high = table.get("min_rows"), table.get("max_rows")
    if not names or not isinstance(low, int) or not isinstance(high, int) or min(names) >= high:
        return table
    return {**table, "max_rows": min(names), "min_rows": min(low, min(names))}


def _id_names(table: str) -> set[str]:
    """The names a column holding `table`'s key goes by: customers -> customer_id, customerid, customers_id."""
    singular = table[:-3] + "y" if table.endswith("ies") else table[:-1] if table.endswith("s") else table
    return {f"{stem}{sep}id" for stem in {table, singular} for sep in ("_", "")}


def _tidy_keys(tables: list) -> list:
    """Keys and references made consistent with the columns' names (see `QueryingDomain.tidy`); a column whose
    name says nothing is left as drafted, for the checks to name."""
    names = {t["name"] for t in tables if isinstance(t, dict) and isinstance(t.get("name"), str)}
    owner = {alias: name for name in names for alias in _id_names(name)}
    out = []
    for table in tables:
        if not isinstance(table, dict) or not isinstance(table.get("columns"), list):
            out.append(table)
            continue
        own = table.get("name")
        columns = [dict(c) if isinstance(c, dict) else c for c in table["columns"]]
        for column in columns:
            if not isinstance(column, dict):
                continue
            ref, named = column.get("ref"), owner.get(str(column.get("name", "")).lower())
            if isinstance(ref, str) and "." in ref and ref.split(".")[0] in names:
                column["ref"] = ref = ref.split(".")[0]
            if column.get("kind") == "ref" and ref not in names - {own} and named and named != own:
                column["ref"] = named
        keys = [c for c in columns if isinstance(c, dict) and c.get("kind") == "key"]
        for column in keys[1:]:
            named = owner.get(str(column.get("name", "")).lower())
            if named and named != own:
                column.update(kind="ref", ref=named)
        if not any(isinstance(c, dict) and c.get("kind") == "key" for c in columns):
            mine = [c for c in columns if isinstance(c, dict) and (str(c.get("name", "")).lower() == "id"
                                                                   or owner.get(str(c.get("name", "")).lower()) == own)]
            if mine:
                mine[0].update(kind="key", type="integer")
                mine[0].pop("ref", None)
        out.append({**table, "columns": columns})
    return out


_TYPE_OF_KIND = {"key": "integer", "ref": "integer", "date": "date", "choice": "text", "code": "text"}


def _new_names(names: Any, taken: set) -> Any:
    """`names` without those already taken (adding the kept ones to `taken`)."""
    if not isinstance(names, list):
        return names
    kept = []
    for name in names:
        if not isinstance(name, str) or name not in taken:
            kept.append(name)
            taken.add(name)
    return kept


def _distinct_choices(column: dict) -> dict:
    choices, weights = column.get("choices"), column.get("weights")
    if not isinstance(choices, list) or len(set(map(str, choices))) == len(choices):
        return {}
    first, seen = [], set()
    for i, choice in enumerate(choices):
        if str(choice) not in seen:
            first.append(i)
            seen.add(str(choice))
    out: dict = {"choices": [choices[i] for i in first]}
    if isinstance(weights, list) and len(weights) == len(choices):
        out["weights"] = [weights[i] for i in first]
    return out


_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)


def _tidy_question(question: dict, tables: list) -> dict:
    slots, text, sql = question.get("slots", []), question.get("text"), question.get("sql")
    if question.get("ordered") is True and isinstance(sql, str) and not _ORDER_BY.search(sql):
        question = {**question, "ordered": False}  # the reference SQL says the rows come in no order
    if not isinstance(slots, list) or not isinstance(text, str) or not isinstance(sql, str):
        return question
    used = [_slot_table(s, sql, tables) if isinstance(s, dict) else s for s in slots
            if not isinstance(s, dict) or not isinstance(s.get("name"), str) or "{" + s["name"] + "}" in text + sql]
    declared = {s.get("name") for s in used if isinstance(s, dict)}
    for name in sorted(placeholders(text + " " + sql)):
        slot = _slot_named(name, sql, tables) if name not in declared and len(used) < 4 else None
        if slot:
            used.append(slot)
    return {**question, "slots": used} if used != slots else question


def _slot_table(slot: dict, sql: str, tables: list) -> dict:
    """A slot whose column is not a column of its table, moved to the one table that has it, among the tables the
    SQL reads if any of those has it: a small model fills {month} from `customers.order_date`, a
    column of `orders`. Unchanged where its table has the column, or where two tables have it."""
    column, table = slot.get("column"), slot.get("table")
    by_name = {t.get("name"): t for t in tables if isinstance(t, dict) and isinstance(t.get("columns"), list)}
    if not isinstance(column, str) or column in _column_names(by_name.get(table)):
        return slot
    read = _words_of(sql)
    holding = [name for name, t in by_name.items() if isinstance(name, str) and column in _column_names(t)]
    holding = [name for name in holding if name.lower() in read] or holding
    return {**slot, "table": holding[0]} if len(holding) == 1 else slot


def _words_of(sql: str) -> set[str]:
    """The identifiers a query names, lower-cased (the tables it reads among them)."""
    return {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}


def _column_names(table: dict | None) -> set[str]:
    columns = table.get("columns") if isinstance(table, dict) else None
    return {c.get("name") for c in columns if isinstance(c, dict)} if isinstance(columns, list) else set()


def _slot_named(name: str, sql: str, tables: list) -> dict | None:
    """The slot a placeholder's name points to: a column of that name ({category}: products.category), or for
    {month} / {year} a date column, in a table the SQL reads first; None where nothing in the schema fits."""
    read = _words_of(sql)
    columns = [(t["name"], c) for t in tables if isinstance(t, dict) and isinstance(t.get("name"), str)
               and isinstance(t.get("columns"), list) for c in t["columns"] if isinstance(c, dict)]
    columns.sort(key=lambda tc: tc[0].lower() not in read)  # tables the SQL names first (a stable sort)
    part = name if name in ("month", "year") else None
    for table, column in columns:
        if part and column.get("kind") == "date" or not part and column.get("name") == name:
            return {"name": name, "table": table, "column": column["name"], "part": part or "full"}
    return None
