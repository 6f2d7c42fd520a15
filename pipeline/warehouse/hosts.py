"""In-memory DuckDB instances kept between connections, so that opening the warehouse costs an
ATTACH and its checks (5.7 ms for a read-only open of the samples' warehouse) instead of a new
DuckDB instance as well (23.9 ms; about 22 ms of it is DuckDB registering its built-in functions).

A host is lent to one `borrowed()` block at a time. The block gets a fresh cursor (its own
session: settings such as TimeZone, temporary objects, USE); at the end the cursor is closed and
everything the block attached is detached, which checkpoints a written file and releases its
lock, exactly as closing an instance did. A host whose state cannot be vouched for afterwards (a
detach that failed, a spill folder left behind) is closed rather than lent again.

Hosts are never shared across a fork: DuckDB's worker threads do not exist in the child, so a
child forgets its parent's hosts (without closing them, which would wait on those threads). A kept
host also keeps those threads alive between blocks: a process that forks without exec (the
papermill server) must open no warehouse first; that server already refuses to fork with threads.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb

# Idle hosts kept per process: enough for a read opened inside a write session; a block that
# finds none idle makes one, and a host given back beyond these is closed.
KEEP = 2

_lock = threading.Lock()
_idle: list[duckdb.DuckDBPyConnection] = []
_abandoned: list[duckdb.DuckDBPyConnection] = []  # a parent's hosts, kept referenced in a forked child


def _forget_after_fork() -> None:
    global _lock
    _abandoned.extend(_idle)
    _idle.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


_LEFT = ("SELECT (SELECT count(*) FROM duckdb_databases() WHERE NOT internal AND database_name <> 'memory') "
         "+ (SELECT count(*) FROM duckdb_tables() WHERE database_name = 'memory') "
         "+ (SELECT count(*) FROM duckdb_views() WHERE database_name = 'memory' AND NOT internal)")


# DuckDB's own memory in a process that reads the warehouse. By default DuckDB keeps every block it has
# read, up to 80 % of the machine: a search over a 6 GB warehouse left the process at 6.3 GB, a cache report
# at 9.3 GB. Capped, it reads the same blocks again from the OS's cache (as fast: the scan's time is the
# reading and decompressing, not the keeping) and spills what a sort or join needs beyond the cap to the
# warehouse's `.tmp` folder. PIPELINE_MEMORY_LIMIT raises it for an analyst's heavy SQL. A writer lowers
# it further while it loads (`pipeline.warehouse.memory`).
MEMORY_LIMIT = "1GB"


def memory_limit() -> str:
    return os.environ.get("PIPELINE_MEMORY_LIMIT") or MEMORY_LIMIT


def _new(temp_directory: str) -> duckdb.DuckDBPyConnection:
    limit = memory_limit()
    try:
        return duckdb.connect(config={"temp_directory": temp_directory, "memory_limit": limit})
    except duckdb.Error as exc:
        from pipeline.errors import UsageError

        raise UsageError(f"PIPELINE_MEMORY_LIMIT={limit!r} is not a memory size DuckDB takes (such as 2GB or 512MB): "
                         f"{str(exc).splitlines()[0]}") from None


def _take(temp_directory: str) -> duckdb.DuckDBPyConnection:
    with _lock:
        host = _idle.pop() if _idle else None
    if host is None:
        return _new(temp_directory)
    try:
        host.execute("SET temp_directory = ?", [temp_directory])
        host.execute("SET memory_limit = ?", [memory_limit()])  # as a new host would have it
    except duckdb.Error:
        host.close()
        return _new(temp_directory)
    return host


def _give_back(host: duckdb.DuckDBPyConnection, attached: list[str], temp_directory: str) -> None:
    try:
        for name in attached:
            host.execute(f"DETACH DATABASE IF EXISTS {name}")
        left = host.execute(_LEFT).fetchall()[0][0]
    except duckdb.Error:
        host.close()
        return
    # Another attached database, or tables and views made in the host's own, would be seen by the
    # next block; DuckDB removes a spill folder it made only when the instance closes.
    if left or Path(temp_directory).exists():
        host.close()
        return
    with _lock:
        if len(_idle) < KEEP:
            _idle.append(host)
            return
    host.close()


@contextlib.contextmanager
def borrowed(temp_directory: str | None = None, attached: list[str] | None = None
             ) -> Iterator[duckdb.DuckDBPyConnection]:
    """A new session on a kept in-memory instance, spilling to `temp_directory` (default: the
    system's temporary folder). A caller that attaches databases appends their names to `attached`;
    they are detached when the block ends, whether it ended well or not."""
    temp_directory = temp_directory or scratch_directory()
    attached = attached if attached is not None else []
    host = _take(temp_directory)
    cursor = host.cursor()
    try:
        yield cursor
    finally:
        cursor.close()
        _give_back(host, attached, temp_directory)


def scratch_directory() -> str:
    """Where a block that attaches no warehouse spills: the system's temporary folder, not the
    folder the user runs from (DuckDB's default for an in-memory database)."""
    return str(Path(tempfile.gettempdir()) / f"pipeline-duckdb-{os.getpid()}.tmp")


def idle() -> int:
    """How many hosts this process keeps now (for tests and the bench)."""
    with _lock:
        return len(_idle)
