"""Opening the warehouse, and the one way to write it in a transaction.

Only one process may hold the DuckDB file read-write; any number may read it when nobody writes.
Read-only callers open short-lived connections so that they block the nightly writer as little as
possible. A lock conflict becomes a message that names the process holding the file.

Writes that belong together go in `with db.atomic(con):` (as sqlite-utils' `db.atomic()`): all
of them land, or none. It lives in `pipeline.warehouse.transaction` (the migrations, which
`connect` runs, use it too) and is re-exported here, where callers look for it.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from pipeline import config

if TYPE_CHECKING:
    import polars as pl
from pipeline.errors import UsageError, WarehouseBusyError
from pipeline.warehouse.transaction import Transaction, atomic

__all__ = ["CATALOG", "ROW_GROUP_SIZE", "Transaction", "atomic", "connect", "frame", "one", "reading", "writing"]

_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (?P<prog>.*?) \(PID (?P<pid>\d+)\)")


def _busy_message(path: Path, exc: Exception) -> str:
    match = _LOCK_HOLDER.search(str(exc))
    who = f"{match['prog']} (PID {match['pid']})" if match else "another process"
    return (
        f"the warehouse {path} is in use by {who}. Close that program's connection "
        f"(an open notebook kernel or DuckDB shell keeps it), or wait for it to finish, then run this again."
    )


CATALOG = "warehouse"
# DuckDB's default row group (122,880 rows) holds about 300 MB of transcript lines. An ingest
# transaction rarely fills one, so every row took the slow road: transaction-local storage, then
# the WAL, then a checkpoint copy; and one over-long line in a row group kept the whole group's
# text uncompressed. With 2,048 rows (one vector) each insert writes finished, compressed row
# groups straight to the file: ingest ran 1.7x faster and the file shrank from 1.65x to about
# 0.5x the text (bench/run.py). The size is not stored in the file, so every connection that may
# write must attach with it, or a checkpoint would merge the groups back.
ROW_GROUP_SIZE = 2048


def _attach_options(read_only: bool) -> str:
    return f"ROW_GROUP_SIZE {ROW_GROUP_SIZE}" + (", READ_ONLY" if read_only else "")


def connect(db: str | Path | None = None, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; a read-write open also applies pending migrations."""
    path = config.db_path(db)
    if read_only and not path.exists():
        raise UsageError(f"no warehouse at {path}: run `pipeline ingest PATH` first, or pass --db FILE")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    # The warehouse is attached to an in-memory database, whose spill directory would otherwise be
    # `.tmp` in whatever folder the user runs from; keep it beside the file, as DuckDB does by default.
    con = duckdb.connect(config={"temp_directory": f"{path}.tmp"})
    try:
        con.execute(f"ATTACH ? AS {CATALOG} ({_attach_options(read_only)})", [str(path)])
    except duckdb.IOException as exc:
        con.close()
        if "lock" in str(exc).lower():
            raise WarehouseBusyError(_busy_message(path, exc)) from exc
        raise
    con.execute(f"USE {CATALOG}")
    # DuckDB draws its own progress bar on long statements; ours (rich, on stderr) is the one users
    # see. Inside a Jupyter kernel DuckDB refuses to touch the setting (it wants ipywidgets): keep it.
    with contextlib.suppress(duckdb.Error):
        con.execute("SET enable_progress_bar = false")
    # Times come back in UTC whatever the machine's zone, as every JSON document of the tools
    # writes them; a query that wants a local day converts explicitly (timezone('Asia/Tokyo', "at")).
    with contextlib.suppress(duckdb.Error):
        con.execute("SET TimeZone = 'UTC'")
    if not read_only:
        from pipeline.warehouse.migrations import migrate

        migrate(con)
    else:
        from pipeline.warehouse.migrations import pending

        missing = pending(con)
        if missing:
            con.close()
            raise UsageError(
                f"the warehouse {path} predates this version (missing steps: {', '.join(missing)}); "
                "run `pipeline ingest` (or any writing command) once to upgrade it"
            )
    return con


@contextlib.contextmanager
def reading(db: str | Path | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A short-lived read-only connection."""
    con = connect(db, read_only=True)
    try:
        yield con
    finally:
        con.close()


@contextlib.contextmanager
def writing(db: str | Path | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(db, read_only=False)
    try:
        yield con
    finally:
        con.close()


def one(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> tuple | None:
    """First row or None. Fetches everything: DuckDB 2 refuses new work while a result is half read."""
    rows = con.execute(sql, params).fetchall() if params is not None else con.execute(sql).fetchall()
    return rows[0] if rows else None


def frame(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> pl.DataFrame:
    """A query's result as a polars DataFrame, inside whatever transaction `con` has open."""
    with warnings.catch_warnings():
        # The DB-API path copies once; it is the one that sees the caller's open transaction.
        warnings.simplefilter("ignore", UserWarning)
        cur = con.execute(sql, params) if params is not None else con.execute(sql)
        import polars as pl  # here, so that commands that never build a frame start faster

        return pl.from_arrow(cur.to_arrow_table())  # type: ignore[return-value]
