"""db.atomic(): one transaction helper for every write that must land whole or not at all."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from pipeline.errors import NestedTransactionError
from pipeline.warehouse import db

PACKAGE = Path(__file__).resolve().parents[2] / "pipeline"


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    c.execute("CREATE TABLE t (x INTEGER)")
    yield c
    c.close()


def rows(con: duckdb.DuckDBPyConnection) -> list[int]:
    return [r[0] for r in con.execute("SELECT x FROM t ORDER BY x").fetchall()]


def test_the_block_commits_when_it_ends(con: duckdb.DuckDBPyConnection) -> None:
    with db.atomic(con):
        con.execute("INSERT INTO t VALUES (1), (2)")
    with db.atomic(con):
        con.execute("INSERT INTO t VALUES (3)")
    assert rows(con) == [1, 2, 3]


@pytest.mark.parametrize("exc", [ValueError("bad row"), KeyboardInterrupt()])
def test_the_block_rolls_back_when_it_raises(con: duckdb.DuckDBPyConnection, exc: BaseException) -> None:
    con.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(type(exc)), db.atomic(con):
        con.execute("INSERT INTO t VALUES (2)")
        raise exc
    assert rows(con) == [1]
    with db.atomic(con):  # and the connection is usable again
        con.execute("INSERT INTO t VALUES (3)")
    assert rows(con) == [1, 3]


def test_rollback_ends_the_transaction_early(con: duckdb.DuckDBPyConnection) -> None:
    with db.atomic(con) as tx:
        con.execute("INSERT INTO t VALUES (1)")
        tx.rollback()
        tx.rollback()  # a second call does nothing
        assert not tx.open
    assert rows(con) == []


def test_a_nested_block_is_refused_and_the_outer_one_goes_on(con: duckdb.DuckDBPyConnection) -> None:
    with db.atomic(con):
        con.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(NestedTransactionError, match="does not nest"), db.atomic(con):
            con.execute("INSERT INTO t VALUES (2)")
        con.execute("INSERT INTO t VALUES (3)")
    assert rows(con) == [1, 3]


def test_a_transaction_begun_by_hand_is_not_joined(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("BEGIN TRANSACTION")
    with pytest.raises(NestedTransactionError), db.atomic(con):
        pass
    con.execute("ROLLBACK")


def test_no_other_module_writes_its_own_begin_commit_or_rollback() -> None:
    # A statement handed to DuckDB, not any string: "BEGIN" is also what a PEM private key opens with,
    # and the secret scanner looks for it.
    statement = re.compile(r"""\.(?:execute|sql)\(\s*f?["'](BEGIN|COMMIT|ROLLBACK)\b""", re.IGNORECASE)
    assert statement.search('con.execute("BEGIN")') and statement.search("self.con.sql('rollback')")
    assert not statement.search('needles=("BEGIN", "PuTTY-User-Key-File")')
    found = [f"{p.relative_to(PACKAGE)}:{n}" for p in sorted(PACKAGE.rglob("*.py")) if p.name != "transaction.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if statement.search(line)]
    assert found == [], "use db.atomic(con) instead of hand-written transactions"
