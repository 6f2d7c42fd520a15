"""One transaction helper, as sqlite-utils' `db.atomic()`: `with atomic(con):` around writes that
belong together, so that all of them land or none do. Every write transaction of the package goes
through it (`pipeline.warehouse.db` re-exports it as `db.atomic`).

Transactions do not nest: DuckDB has no savepoints, so `atomic()` inside an open transaction is
refused with NestedTransactionError rather than silently joined (an inner block that looked
committed could still be rolled back by the outer one). Open one block around the whole unit of
work, and let the functions it calls write without opening their own.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator

import duckdb

from pipeline.errors import NestedTransactionError

__all__ = ["Transaction", "atomic"]

# Connections inside an atomic() block: a nested block is refused before DuckDB sees a second
# BEGIN, which would abort the outer transaction.
_open: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()
_NESTED = ("a transaction is already open on this connection, and db.atomic() does not nest: "
           "open one atomic() block around the whole unit of work")


class Transaction:
    """The open transaction of an `atomic()` block. `rollback()` ends it early, undoing its
    writes; the block then goes on outside any transaction and nothing is committed at its end."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.open = True

    def rollback(self) -> None:
        if self.open:
            self.open = False
            self.con.execute("ROLLBACK")


@contextlib.contextmanager
def atomic(con: duckdb.DuckDBPyConnection) -> Iterator[Transaction]:
    """One transaction around the block: committed when the block ends, rolled back when it raises
    (KeyboardInterrupt included) or calls `rollback()`. Refused inside an open transaction."""
    if con in _open:
        raise NestedTransactionError(_NESTED)
    try:
        con.execute("BEGIN TRANSACTION")
    except duckdb.TransactionException as exc:  # a transaction begun by hand, outside atomic()
        raise NestedTransactionError(_NESTED) from exc
    tx = Transaction(con)
    _open.add(con)
    try:
        yield tx
    except BaseException:
        tx.rollback()
        raise
    else:
        if tx.open:
            tx.open = False
            con.execute("COMMIT")
    finally:
        _open.discard(con)
