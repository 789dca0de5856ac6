"""Read-only SQL for agents: run one agent-written SELECT against an environment's SQLite database, safely.

An agent that can query a database learns far more than one that picks from a menu, but its SQL is untrusted
text. `ReadOnlySQL` lets it read and nothing else, and keeps every query small and fast:

- an authorizer allows only SELECT, reads and an allow-list of deterministic functions (no clock, no random:
  an episode stays a pure function of its seed), and denies writes, schema changes, PRAGMA, ATTACH and
  recursive CTEs; `PRAGMA query_only` backs this up;
- one statement per call (sqlite3 refuses more), a bounded statement length, value length, compound-select and
  expression depth (`Connection.setlimit`);
- a progress handler aborts a query after a fixed number of virtual-machine instructions (a cross join of every
  table, say), so a step's cost is bounded whatever the agent writes;
- at most `max_rows` rows come back, each value cut to `max_value_chars`.

Build the database first (inserts need no authorizer), then wrap the connection: wrapping locks it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

SAFE_FUNCTIONS = frozenset({
    "abs", "avg", "cast", "coalesce", "count", "group_concat", "hex", "ifnull", "iif", "instr", "length", "like",
    "glob", "lower", "ltrim", "max", "min", "nullif", "printf", "format", "replace", "round", "rtrim", "sign",
    "string_agg", "substr", "substring", "sum", "total", "trim", "typeof", "upper",
})
_READ_STATEMENTS = frozenset({"SELECT", "WITH", "VALUES"})
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ})
_AUTH_ACTIONS = (
    "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX",
    "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT", "PRAGMA",
    "TRANSACTION", "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE",
    "DROP_VTABLE", "SAVEPOINT", "RECURSIVE",
)
_ACTION_NAMES = {getattr(sqlite3, f"SQLITE_{name}"): name.lower().replace("_", " ") for name in _AUTH_ACTIONS}


class QueryRejected(Exception):
    """The query was refused or failed; `code` is machine-readable (sql_forbidden, sql_too_slow, sql_error)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    truncated: bool

    def lines(self, sep: str = " | ") -> list[str]:
        """The result as text: a header line, one line per row, and a note when rows were cut."""
        out = [sep.join(self.columns)] + [sep.join(row) for row in self.rows]
        if self.truncated:
            out.append(f"... (more rows not shown: only the first {len(self.rows)} are returned)")
        return out


def _cell(value: object, limit: int) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, bytes):
        text = value.hex()
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ReadOnlySQL:
    """Runs untrusted single SELECT statements on `conn` (which it locks read-only)."""

    def __init__(self, conn: sqlite3.Connection, *, max_rows: int = 20, max_value_chars: int = 80,
                 max_sql_chars: int = 1000, max_vm_steps: int = 200_000,
                 functions: frozenset[str] = SAFE_FUNCTIONS):
        self.conn = conn
        self.max_rows = max_rows
        self.max_value_chars = max_value_chars
        self.max_sql_chars = max_sql_chars
        self.functions = functions
        self._tick = 1000
        self._max_ticks = max(1, max_vm_steps // self._tick)
        self._ticks = 0
        self._denied: str | None = None
        conn.execute("PRAGMA query_only = ON")
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 100_000)
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, max_sql_chars)
        conn.setlimit(sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 4)
        conn.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 64)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.set_authorizer(self._authorize)
        conn.set_progress_handler(self._progress, self._tick)

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and arg2 is not None and arg2.lower() in self.functions:
            return sqlite3.SQLITE_OK
        if self._denied is None:
            what = _ACTION_NAMES.get(action, f"operation {action}")
            self._denied = f"function {arg2}()" if action == sqlite3.SQLITE_FUNCTION else what
        return sqlite3.SQLITE_DENY

    def _progress(self) -> int:
        self._ticks += 1
        return 1 if self._ticks > self._max_ticks else 0

    def run(self, sql: str) -> QueryResult:
        """Execute one SELECT; raises QueryRejected with a code and a one-line reason."""
        sql = sql.strip()
        if not sql:
            raise QueryRejected("sql_error", "the query is empty")
        if len(sql) > self.max_sql_chars:
            raise QueryRejected("sql_error", f"the query is longer than {self.max_sql_chars} characters")
        self._ticks = 0
        self._denied = None
        try:
            cursor = self.conn.execute(sql)
            fetched = cursor.fetchmany(self.max_rows + 1)
            columns = tuple(d[0] for d in cursor.description or ())
            cursor.close()
        except sqlite3.Error as exc:
            raise self._rejection(exc, sql) from None
        except sqlite3.Warning as exc:  # e.g. "You can only execute one statement at a time."
            raise QueryRejected("sql_error", str(exc)) from None
        rows = tuple(tuple(_cell(v, self.max_value_chars) for v in row) for row in fetched[: self.max_rows])
        return QueryResult(columns, rows, truncated=len(fetched) > self.max_rows)

    def _rejection(self, exc: sqlite3.Error, sql: str) -> QueryRejected:
        message = str(exc)
        if self._denied is not None or "not authorized" in message or "query_only" in message:
            first = sql.split(None, 1)[0].upper() if sql.split() else ""
            what = f"{first} statements are" if first not in _READ_STATEMENTS else f"{self._denied or 'writing'} is"
            return QueryRejected("sql_forbidden", f"{what} not allowed: only read-only SELECT queries using "
                                 "plain columns, operators and common functions")
        if "interrupted" in message:
            return QueryRejected("sql_too_slow", "the query was stopped: it did too much work (avoid cross joins "
                                 "of whole tables)")
        return QueryRejected("sql_error", message)
