"""Opening the warehouse: readers open the published file, writers a private working file.

DuckDB allows one process writing a database file or any number reading it, never both. So the
warehouse is two files (`pipeline.warehouse.publish` has the whole protocol):

* `--db` (`data/warehouse.duckdb`), the *published* file: what analysts, `pipeline sql`,
  `sessions`, `search`, `read` and notebooks open, always read-only. Only a small write (an ingest
  of little, a reviewer's decision) that finds nobody else on it writes it itself ("in place",
  `pipeline.warehouse.publish`); a reader that opens it during those seconds waits, and an open
  read-only connection never stops anything.
* `<db>.work`, the *working* file: only the process holding the write lock opens it. A writing
  command (`ingest`, `apply`, `tasks confirm|reject|done`, `import-calls`, the nightly driver) runs
  inside `write_session()`: take the write lock (`<db>.write.lock`; wait for it up to `--wait`
  seconds, 600 by default, telling the user who holds it; then stop with exit 1 naming the holder),
  copy the published file into the working file if the last writer published, write, then
  publish: the checkpointed working file is renamed onto the published one (atomic). A connection
  opened before that keeps its consistent old view; the next connection sees the new state.

Within a write session, `writing()` and `reading()` in the same process both open the working file
(a session nests: `apply` called by the nightly driver joins the driver's session and publishes
with it). `connect()` opens exactly the file it is given, for fixtures and tools that manage files
themselves.

Writes that belong together go in `with db.atomic(con):` (as sqlite-utils' `db.atomic()`): all
of them land, or none. It lives in `pipeline.warehouse.transaction` (the migrations, which
`connect` runs, use it too) and is re-exported here, where callers look for it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from pipeline import config
from pipeline.errors import UsageError, WarehouseBusyError, WarehouseLockedError
from pipeline.faults import crash_point
from pipeline.warehouse import hosts
from pipeline.warehouse import publish as publishing
from pipeline.warehouse.lock import HolderLock, describe_holder
from pipeline.warehouse.transaction import Transaction, atomic

if TYPE_CHECKING:
    import polars as pl

__all__ = ["CATALOG", "ROW_GROUP_SIZE", "WRITE_WAIT_SECONDS", "Transaction", "WriteSession", "active_session",
           "atomic", "connect", "execute_parsed", "frame", "one", "opened", "reading", "write_session", "writing"]

# How long a writing command waits for another one to finish (`--wait SECONDS`).
WRITE_WAIT_SECONDS = 600.0

CATALOG = "warehouse"
# DuckDB's default row group (122,880 rows) holds about 300 MB of transcript lines. An ingest
# transaction rarely fills one, so every row took the slow road: transaction-local storage, then
# the WAL, then a checkpoint copy; and one over-long line in a row group kept the whole group's
# text uncompressed. With 2,048 rows (one vector) each insert writes finished, compressed row
# groups straight to the file: ingest ran 1.7x faster and the file shrank from 1.65x to about
# 0.5x the text (bench/run.py). The size is not stored in the file, so every connection that may
# write must attach with it, or a checkpoint would merge the groups back. Only the working file is
# ever written (by `connect`, which sets it); the published file is what it was renamed to.
ROW_GROUP_SIZE = 2048


def _attach_options(read_only: bool) -> str:
    return f"ROW_GROUP_SIZE {ROW_GROUP_SIZE}" + (", READ_ONLY" if read_only else "")


def connect(db: str | Path | None = None, *, read_only: bool = False, shown_as: Path | None = None
            ) -> duckdb.DuckDBPyConnection:
    """Open exactly the file `db` on a DuckDB instance of its own, which the caller closes; a
    read-write open also applies pending migrations.

    Commands use `reading()` and `writing()`, which choose the published or the working file and
    open it on a kept instance (`opened`); `shown_as` is the name messages use for the file (the
    published one, for a working file).
    """
    path, shown = _target(db, read_only, shown_as)
    # The warehouse is attached to an in-memory database, whose spill directory would otherwise be
    # `.tmp` in whatever folder the user runs from; keep it beside the file, as DuckDB does by default.
    con = duckdb.connect(config={"temp_directory": f"{path}.tmp"})
    try:
        _attach(con, path, shown, read_only)
    except BaseException:
        con.close()
        raise
    return con


@contextlib.contextmanager
def opened(db: str | Path | None = None, *, read_only: bool = False, shown_as: Path | None = None
           ) -> Iterator[duckdb.DuckDBPyConnection]:
    """`connect`, for the length of a block, on an in-memory instance kept for the next block
    (pipeline.warehouse.hosts): the file is detached, and so closed and unlocked, when it ends.
    A read-only open waits while a pipeline command writes the file in place (`_wait_in_place`)."""
    path, shown = _target(db, read_only, shown_as)
    attached: list[str] = []
    with hosts.borrowed(f"{path}.tmp", attached) as con:
        if read_only:
            _wait_in_place(lambda: _attach(con, path, shown, read_only, attached), path)
        else:
            _attach(con, path, shown, read_only, attached)
        yield con


# How long a reader waits for a write in place (`pipeline.warehouse.publish`), which is small by design.
READ_WAIT_SECONDS = 600.0


def _wait_in_place(attach: Callable[[], None], path: Path) -> None:
    """Attach; while the file is locked by a pipeline command writing it in place, wait and try again,
    telling the user once. Any other lock (a program that opened the warehouse for writing itself) is
    reported at once, as before."""
    files = publishing.Files(_key(path))  # the writer's lock sits beside the real file, whatever link names it
    deadline = 0.0
    while True:
        try:
            attach()
            return
        except WarehouseBusyError:
            holder = HolderLock(files.write_lock).held_by()
            if not holder or not holder.get("inPlace"):
                raise
            now = time.monotonic()
            if not deadline:
                deadline = now + READ_WAIT_SECONDS
                _stderr(f"the warehouse {path} is being updated in place by {describe_holder(holder)}; "
                        f"waiting for it to finish (a small write: seconds)")
            elif now >= deadline:
                raise WarehouseBusyError(
                    f"the warehouse {path} is still being updated in place by {describe_holder(holder)} after "
                    f"waiting {READ_WAIT_SECONDS:.0f} s; run this again once it has finished") from None
            time.sleep(0.1)


def _target(db: str | Path | None, read_only: bool, shown_as: Path | None) -> tuple[Path, Path]:
    path = config.db_path(db)
    shown = shown_as or path
    if read_only and not path.exists():
        raise UsageError(f"no warehouse at {shown}: run `pipeline ingest PATH` first, or pass --db FILE")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    return path, shown


def _attach(con: duckdb.DuckDBPyConnection, path: Path, shown: Path, read_only: bool,
            attached: list[str] | None = None) -> None:
    try:
        con.execute(f"ATTACH ? AS {CATALOG} ({_attach_options(read_only)})", [str(path)])
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise WarehouseBusyError(publishing.busy_message(shown, exc)) from exc
        raise
    if attached is not None:
        attached.append(CATALOG)
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
            raise UsageError(
                f"the warehouse {shown} predates this version (missing steps: {', '.join(missing)}); "
                "run `pipeline ingest` (or any writing command) once to upgrade it"
            )


@dataclass
class WriteSession:
    """A writer's hold on one warehouse: the write lock, and the working file behind `files.db`."""

    files: publishing.Files
    lock: HolderLock
    copy_method: str = ""  # how the published file was copied to start the working file ("" when it was not)
    copy_seconds: float = 0.0  # and how long that took
    published: int = 0  # 1 when the session replaced the published file (it does so once, at its end)
    publish_seconds: float = 0.0  # and how long that took
    say: Callable[[str], None] = field(default=lambda msg: None)
    owner: int = field(default_factory=threading.get_ident)  # the thread that writes the working file
    in_place: bool = False  # it writes the published file itself (`publish.prepare(..., in_place=True)`)

    @property
    def target(self) -> Path:
        """The file this session writes, and its own thread reads: the working file, or the published one."""
        return self.files.db if self.in_place else self.files.work

    def stop_in_place(self) -> None:
        """A reader took the published file before this session attached it: go on in a working file."""
        started = time.perf_counter()
        self.copy_method = publishing.stop_in_place(self.files) or ""
        self.copy_seconds += time.perf_counter() - started
        self.in_place = False
        self.lock.write(inPlace=False)

    @property
    def concurrency_seconds(self) -> float:
        """What letting readers work during writes cost this session: the copy and the publish."""
        return self.copy_seconds + self.publish_seconds

    def _publish(self) -> bool:
        """Publish the working file as the session ends (or record the file written in place); True if it changed."""
        started = time.perf_counter()
        if self.in_place:
            changed = publishing.finish_in_place(self.files, _checkpoint)
            self.published += int(changed)
            return changed
        if not publishing.publish(self.files, _checkpoint):
            return False
        self.published += 1
        self.publish_seconds += time.perf_counter() - started
        return True


_sessions: dict[Path, WriteSession] = {}


def _key(path: Path) -> Path:
    return path.absolute().resolve()


def _stderr(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def _checkpoint(work: Path) -> None:
    """Open the working file for writing, checkpoint it and close it, as the publish needs: no
    migration runs (the session's own opens ran them; this one only proves that nothing in this
    process still holds the file, and folds a `.wal` left by a crash into it)."""
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH ? AS {CATALOG} ({_attach_options(False)})", [str(work)])
        con.execute(f"CHECKPOINT {CATALOG}")
    finally:
        con.close()


def active_session(db: str | Path | None = None) -> WriteSession | None:
    """The write session this process holds on the warehouse `db`, if any."""
    return _sessions.get(_key(config.db_path(db)))


@contextlib.contextmanager
def write_session(db: str | Path | None = None, *, wait: float | None = None,
                  say: Callable[[str], None] | None = None, in_place: bool = False) -> Iterator[WriteSession]:
    """Hold the warehouse for writing: the write lock, an up-to-date working file, publish at the end.
    With `in_place`, a small write that finds no other process on the published file writes it instead
    (`pipeline.warehouse.publish`): only a caller whose other threads never read the warehouse meanwhile.

    Waits up to `wait` seconds (default 600) for another writer, saying so once through `say`
    (default stderr); then raises WarehouseLockedError (exit 1) naming the holder. Nested sessions
    on the same warehouse in one process join the outer one, which publishes when it ends. The
    working file is published when the session ends, also after an error (what was committed is
    kept and shown); not after KeyboardInterrupt or SystemExit.
    """
    path = config.db_path(db)
    key = _key(path)
    if key in _sessions:
        yield _sessions[key]
        return
    tell = say or _stderr
    files = publishing.Files(key)
    lock = HolderLock(files.write_lock)
    limit = WRITE_WAIT_SECONDS if wait is None else max(0.0, float(wait))

    def waiting(holder: dict | None) -> None:
        tell(f"the warehouse {path} is being written by {describe_holder(holder)}; "
             f"waiting for it to finish (up to {limit:.0f} s, --wait SECONDS)")

    holder = lock.acquire(limit, on_wait=waiting)
    if holder is not None:
        raise WarehouseLockedError(
            f"the warehouse {path} is still being written by {describe_holder(holder)} after waiting {limit:.0f} s; "
            "run this again once it has finished (or wait longer with --wait SECONDS)"
        )
    session = WriteSession(files, lock, say=tell)
    _sessions[key] = session
    try:
        started = time.perf_counter()
        method = publishing.prepare(files, tell, in_place=in_place)
        if method == publishing.IN_PLACE:
            session.in_place = True
            lock.write(inPlace=True)  # readers that find the file locked wait for this writer (`_wait_in_place`)
            crash_point("inplace:writing")
        elif method is not None:
            session.copy_method, session.copy_seconds = method, time.perf_counter() - started
        try:
            yield session
        except Exception:
            with contextlib.suppress(Exception):  # the first error is the one to report
                session._publish()
            raise
        session._publish()
    finally:
        del _sessions[key]
        lock.release()


@contextlib.contextmanager
def reading(db: str | Path | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A short-lived read-only connection: to the published file, or to the working file when this
    thread holds a write session on the warehouse (so a writer reads what it wrote).

    Another thread of the process reads the published file. DuckDB refuses to attach one file read-only
    in one instance while another instance of the same process has it attached for writing: the night's
    secret scans, on a thread while the batches land, once failed a night that way ("Unique file handle
    conflict"), and they need only lines the night published before its batches ran."""
    session = active_session(db)
    if session is not None and session.owner == threading.get_ident():
        with opened(session.target, read_only=True, shown_as=session.files.db) as con:
            yield con
    else:
        with opened(db, read_only=True) as con:
            yield con


@contextlib.contextmanager
def writing(db: str | Path | None = None, *, wait: float | None = None, in_place: bool = False
            ) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection to the working file (or, in place, the published one) inside a write session
    (joined, or its own, which `in_place` asks to write in place when it can)."""
    with write_session(db, wait=wait, in_place=in_place) as session, contextlib.ExitStack() as stack:
        try:
            con = stack.enter_context(opened(session.target, shown_as=session.files.db))
        except WarehouseBusyError:
            if not session.in_place:
                raise
            # A reader opened the published file after `prepare` looked: it keeps it, and this writer copies.
            session.stop_in_place()
            con = stack.enter_context(opened(session.target, shown_as=session.files.db))
        yield con


# Fixed queries, parsed once per process. DuckDB parses a query's text on every execute (a quarter
# of a millisecond for read_lines' query, about 1 ms for show's prompt rules); a parsed statement holds
# no data and no connection (execute copies it). Plans are not kept: every execute binds and plans
# anew on the connection given. Only for a module's own constant query texts, never user input.
_PARSED: dict[str, duckdb.Statement] = {}


def execute_parsed(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> duckdb.DuckDBPyConnection:
    """`con.execute(sql, params)` for a constant query text, which is parsed only the first time."""
    statement = _PARSED.get(sql)
    if statement is None:
        statement = _PARSED[sql] = con.extract_statements(sql)[0]
    return con.execute(statement, params)


def has_tables(con: duckdb.DuckDBPyConnection, *names: str) -> bool:
    """Does this database hold every one of these tables (or views)? A warehouse, or a batch input,
    written by an earlier version may not."""
    found = con.execute(
        "SELECT count(DISTINCT table_name) FROM information_schema.tables "
        "WHERE table_catalog = current_database() AND table_name IN (SELECT unnest(?::VARCHAR[]))",
        [list(names)],
    ).fetchone()
    return found is not None and found[0] == len(set(names))


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
