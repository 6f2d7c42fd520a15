"""DuckDB's memory while the warehouse is written in bulk (an ingest, a re-derive on upgrade).

DuckDB would otherwise keep up to 80 % of the machine's memory as its buffer while it loads; the
writers stream in bounded groups, so DuckDB's share is capped and the whole process stays under
about 1 GB however large the warehouse is. PIPELINE_INGEST_MEMORY_LIMIT lowers the cap (tests force an
out-of-memory error with it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import duckdb

from pipeline.errors import UsageError

# DuckDB's share. The rest of an ingest (read buffers, a group's projection, Arrow tables handed to
# DuckDB) stays under about 400 MB.
INGEST_MEMORY_LIMIT = "384MB"


@contextlib.contextmanager
def bounded(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB capped at INGEST_MEMORY_LIMIT, and free to write row groups in parallel, for the block;
    the connection's own settings come back after it."""
    previous = con.execute(
        "SELECT current_setting('memory_limit'), current_setting('preserve_insertion_order'), "
        "current_setting('force_compression')"
    ).fetchall()[0]
    limit = os.environ.get("PIPELINE_INGEST_MEMORY_LIMIT") or INGEST_MEMORY_LIMIT
    try:
        con.execute("SET memory_limit = ?", [limit])
    except duckdb.Error as exc:
        raise UsageError(f"cannot set DuckDB's memory limit to {limit!r} (PIPELINE_INGEST_MEMORY_LIMIT): "
                         f"{str(exc).splitlines()[0]}") from exc
    # Each INSERT is already sorted by (session_id, line_no); letting DuckDB write its row groups in
    # parallel keeps every row group clustered while halving the write time.
    con.execute("SET preserve_insertion_order = false")
    try:
        yield
    finally:
        with contextlib.suppress(duckdb.Error):  # after a fatal error the connection refuses even SET
            con.execute("SET memory_limit = ?", [previous[0]])
            con.execute("SET preserve_insertion_order = ?", [previous[1]])
            con.execute("SET force_compression = ?", [previous[2] or "auto"])


# The lake export writes each table in (session, line) order: sorting a gigabyte of lines ran out at
# 1 GB on the bench's 1 GB warehouse.
EXPORT_MEMORY_LIMIT = "4GB"


@contextlib.contextmanager
def at_least(con: duckdb.DuckDBPyConnection, limit: str) -> Iterator[None]:
    """DuckDB allowed at least `limit` for the block (never less than PIPELINE_MEMORY_LIMIT asks for);
    the connection's own limit comes back after it."""
    previous = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    raised = False
    if not os.environ.get("PIPELINE_MEMORY_LIMIT"):  # an analyst's explicit cap is theirs to keep
        con.execute("SET memory_limit = ?", [limit])
        raised = True
    try:
        yield
    finally:
        if raised:
            with contextlib.suppress(duckdb.Error):
                con.execute("SET memory_limit = ?", [previous])


__all__ = ["EXPORT_MEMORY_LIMIT", "INGEST_MEMORY_LIMIT", "at_least", "bounded"]
