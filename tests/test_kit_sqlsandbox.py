import sqlite3

import pytest

from openadapt.kit import QueryRejected, ReadOnlySQL


@pytest.fixture
def sql() -> ReadOnlySQL:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"row {i}") for i in range(200)])
    conn.commit()
    return ReadOnlySQL(conn, max_rows=5, max_value_chars=10)


def test_select_returns_a_bounded_text_table(sql):
    result = sql.run("SELECT a, b || ' and a long tail' AS b FROM t WHERE a < 100 ORDER BY a")
    assert result.columns == ("a", "b")
    assert len(result.rows) == 5 and result.truncated
    assert result.rows[0] == ("0", "row 0 a...")
    lines = result.lines()
    assert lines[0] == "a | b" and lines[-1].startswith("... (more rows")
    assert sql.run("SELECT COUNT(*), SUM(a), lower(trim('  X ')) FROM t").rows == (("200", "19900", "x"),)


@pytest.mark.parametrize("statement", [
    "DELETE FROM t", "INSERT INTO t VALUES (1, 'x')", "UPDATE t SET a = 0", "DROP TABLE t",
    "CREATE TABLE u (x)", "PRAGMA table_info(t)", "ATTACH ':memory:' AS other", "BEGIN",
    "SELECT random()", "SELECT date('now')", "SELECT current_timestamp", "SELECT zeroblob(100000000)",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT COUNT(*) FROM r",
])
def test_anything_but_a_deterministic_read_is_forbidden(sql, statement):
    with pytest.raises(QueryRejected) as info:
        sql.run(statement)
    assert info.value.code == "sql_forbidden", info.value.message
    assert sql.run("SELECT COUNT(*) FROM t").rows == (("200",),)  # nothing changed


def test_expensive_queries_are_stopped(sql):
    with pytest.raises(QueryRejected) as info:
        sql.run("SELECT COUNT(*) FROM t x, t y, t z")
    assert info.value.code == "sql_too_slow"
    assert sql.run("SELECT 1").rows == (("1",),)  # the budget is per query


@pytest.mark.parametrize(("statement", "fragment"), [
    ("SELECT 1; SELECT 2", "one statement"), ("SELECT nope FROM t", "no such column"), ("   ", "empty"),
    ("SELECT " + "1 + " * 400 + "1", "longer than"),
])
def test_bad_sql_is_an_error_with_a_reason(sql, statement, fragment):
    with pytest.raises(QueryRejected) as info:
        sql.run(statement)
    assert info.value.code == "sql_error" and fragment in info.value.message
