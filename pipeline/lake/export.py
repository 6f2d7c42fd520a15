"""`pipeline export`: the warehouse as a hive-partitioned Parquet lake, written incrementally.

Layout (`<lake>/` a folder or any fsspec URL):

    sessions/source=<format>/day=<first day>/part-….parquet      one row per session
    lines/source=…/day=…/, messages/…, tool_calls/…, tool_results/…   the session's rows, same partition
    llm_calls/source=<source>/day=<day of the call>/part-….parquet
    memories/, memory_links/, tasks/, watermarks/                  one folder each, unpartitioned
    _manifest.json                                                 what the last finished export wrote

A session's rows live in the partition of its format and its first day (UTC), so its lines,
messages and tool calls sit together and an engine that filters on `day` reads only those folders.
The partition columns `source` and `day` are not stored in the files: engines read them from the
folder names (hive partitioning); a NULL day is written `__HIVE_DEFAULT_PARTITION__`.

What a second export writes:
- a session that grew: only its new lines (and their messages, tool calls and results), in one new
  file per partition and table for every session that grew there;
- a session read again whole (its file was rewritten), one that moved to another partition (its first
  day changed) or one that is gone: its partitions are rewritten whole;
- `sessions` partitions, `llm_calls` partitions and the small tables: rewritten whole when the
  fingerprint of their rows (count and xor of row hashes) changed;
- a partition that has reached MAX_FILES files in one table is compacted: rewritten as one file.

Files are sorted by (session_id, line_no) and cut into row groups of ROW_GROUP_ROWS rows (at most
ROW_GROUP_BYTES), so a reader that wants one session's lines reads few row groups: the row
groups' min/max statistics on session_id let it skip the rest.
"""

from __future__ import annotations

import datetime as dt
import secrets
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb

from pipeline import config
from pipeline.errors import UsageError
from pipeline.lake import manifest as mf
from pipeline.lake.store import Store, open_store
from pipeline.warehouse import db, memory

SESSION_TABLES = ("lines", "messages", "tool_calls", "tool_results")  # rows keyed by (session_id, line_no)
SMALL_TABLES = ("memories", "memory_links", "tasks", "watermarks")
TABLES = ("sessions", *SESSION_TABLES, "llm_calls", *SMALL_TABLES)
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
MAX_FILES = 16
ROW_GROUP_ROWS = 2048
ROW_GROUP_BYTES = "16MB"
COMPRESSION = "zstd"
DELTA = "lake_delta"  # scratch in-memory database for the new lines of grown sessions

_ORDER = {
    "sessions": "session_id",
    "llm_calls": 'session_id, "at", call_id',
    "memories": "memory_id",
    "memory_links": "memory_id, session_id",
    "tasks": "task_id",
    "watermarks": 'session_id, "at"',
}

Say = Callable[[str], None]


@dataclass
class TableReport:
    rows_written: int = 0
    files_written: int = 0
    bytes_written: int = 0
    partitions_appended: int = 0
    partitions_rewritten: int = 0
    partitions_removed: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "rowsWritten": self.rows_written, "filesWritten": self.files_written, "bytesWritten": self.bytes_written,
            "partitionsAppended": self.partitions_appended, "partitionsRewritten": self.partitions_rewritten,
            "partitionsRemoved": self.partitions_removed,
        }


@dataclass
class ExportReport:
    to: str
    export_id: str
    since: str | None
    seconds: float = 0.0
    lake_bytes: int = 0
    files_deleted: int = 0
    leftovers_removed: int = 0
    tables: dict[str, TableReport] = field(default_factory=lambda: {t: TableReport() for t in TABLES})

    @property
    def bytes_written(self) -> int:
        return sum(t.bytes_written for t in self.tables.values())

    @property
    def files_written(self) -> int:
        return sum(t.files_written for t in self.tables.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "to": self.to, "exportId": self.export_id, "since": self.since, "seconds": round(self.seconds, 3),
            "unchanged": self.files_written == 0 and self.files_deleted == 0,
            "filesWritten": self.files_written, "bytesWritten": self.bytes_written, "filesDeleted": self.files_deleted,
            "leftoversRemoved": self.leftovers_removed, "lakeBytes": self.lake_bytes,
            "tables": {name: t.to_json() for name, t in self.tables.items()},
        }

    def summary(self) -> str:
        if self.files_written == 0 and self.files_deleted == 0:
            return f"the lake at {self.to} was already up to date ({self.seconds:.1f} s)"
        return (f"{self.files_written} file(s), {self.bytes_written / 1e6:.1f} MB written to {self.to} in "
                f"{self.seconds:.1f} s; {self.files_deleted} superseded file(s) removed; lake {self.lake_bytes / 1e6:.1f} MB")


def partition(source: str, day: dt.date | None) -> str:
    """`source=…/day=…`, values escaped as Hive does (`import:x` → `import%3Ax`)."""
    return f"source={quote(source, safe='')}/day={day.isoformat() if day else HIVE_NULL}"


def _day_of(part: str) -> dt.date | None:
    value = part.rsplit("day=", 1)[-1]
    return None if value == HIVE_NULL else dt.date.fromisoformat(value)


def _sql_path(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _columns(con: duckdb.DuckDBPyConnection, table: str, alias: str = "", *, leave_out: tuple[str, ...] = ()) -> str:
    """The table's columns in its own order; JSON ones as text (polars reads Parquet JSON as bytes).
    A column that is also a partition column (llm_calls.source) lives in the folder name only, as
    Hive, Spark and Trino expect."""
    prefix = f"{alias}." if alias else ""
    out = []
    for name, kind, *_ in con.execute(f"DESCRIBE SELECT * FROM {table}").fetchall():
        if name in leave_out:
            continue
        col = f'{prefix}"{name}"'
        out.append(f'CAST({col} AS VARCHAR) AS "{name}"' if kind == "JSON" else col)
    return ", ".join(out)


@dataclass
class _Current:
    part: str
    day: dt.date | None
    lines: int
    rewritten_at: str | None
    row_hash: int


class _Export:
    def __init__(self, con: duckdb.DuckDBPyConnection, store: Store, manifest: mf.Manifest, report: ExportReport,
                 since: dt.date | None, say: Say):
        self.con = con
        self.store = store
        self.old = manifest
        self.new = manifest.model_copy(deep=True)
        self.report = report
        self.since = since
        self.say = say
        self.seq = 0
        self.to_delete: list[tuple[str, str, list[str]]] = []
        self.disk: dict[str, dict[str, list[str]]] = {}
        self.dirty: dict[str, set[str]] = defaultdict(set)
        self._delta_views = False
        self._column_lists: dict[tuple[str, tuple[str, ...]], str] = {}

    def columns(self, table: str, *, leave_out: tuple[str, ...] = ()) -> str:
        """`_columns` of a table, asked of DuckDB once per export: describing a view binds its whole
        query, about 5 ms, and `lines` is asked about once for every partition written."""
        key = (table, leave_out)
        if key not in self._column_lists:
            self._column_lists[key] = _columns(self.con, table, leave_out=leave_out)
        return self._column_lists[key]

    # -- the lake as it is ----------------------------------------------------------------------
    def reconcile(self) -> None:
        """Compare the folders with the manifest: files it does not list come from an export that
        was stopped and are removed; a partition missing a listed file is rewritten whole."""
        for table in TABLES:
            disk = self.store.listing(table)
            known = self.old.tables.get(table, {})
            for part, entry in known.items():
                present = set(disk.get(part, []))
                if any(f.name not in present for f in entry.files):
                    self.dirty[table].add(part)
            for part, names in disk.items():
                if part in self.dirty[table]:
                    continue
                listed = {f.name for f in known[part].files} if part in known else set()
                orphans = [n for n in names if n not in listed]
                if orphans:
                    self.store.delete(table, part, orphans)
                    self.report.leftovers_removed += len(orphans)
                    disk[part] = [n for n in names if n in listed]
            self.disk[table] = disk

    def in_scope(self, day: dt.date | None) -> bool:
        return self.since is None or day is None or day >= self.since

    # -- writing one file -------------------------------------------------------------------------
    def _copy(self, table: str, sql: str, params: list[Any], row_groups: bool) -> tuple[Path, mf.LakeFile] | None:
        self.seq += 1
        name = f"part-{self.report.export_id}-{self.seq:05d}.parquet"
        dest = self.store.staging() / name
        options = f"FORMAT parquet, COMPRESSION {COMPRESSION}"
        if row_groups:
            options += f", ROW_GROUP_SIZE {ROW_GROUP_ROWS}, ROW_GROUP_SIZE_BYTES '{ROW_GROUP_BYTES}'"
        rows = self.con.execute(f"COPY ({sql}) TO {_sql_path(dest)} ({options})", params).fetchall()[0][0]
        if not rows:
            dest.unlink(missing_ok=True)
            return None
        size = dest.stat().st_size
        t = self.report.tables[table]
        t.rows_written += rows
        t.files_written += 1
        t.bytes_written += size
        return dest, mf.LakeFile(name=name, rows=rows, bytes=size)

    def _replace(self, table: str, part: str, written: list[tuple[Path, mf.LakeFile]], fingerprint: str | None) -> None:
        current = self.disk.get(table, {}).get(part, [])
        stale = self.store.replace(table, part, [(p, f.name) for p, f in written], current)
        if stale:
            self.to_delete.append((table, part, stale))
        entries = self.new.table(table)
        t = self.report.tables[table]
        if written:
            entries[part] = mf.Partition(files=[f for _, f in written], fingerprint=fingerprint)
            t.partitions_rewritten += 1
        elif part in entries or current:
            entries.pop(part, None)
            t.partitions_removed += 1
        self.report.files_deleted += len(current)

    def _append(self, table: str, part: str, written: tuple[Path, mf.LakeFile]) -> None:
        self.store.add(table, part, [(written[0], written[1].name)])
        self.new.table(table).setdefault(part, mf.Partition()).files.append(written[1])
        self.report.tables[table].partitions_appended += 1

    # -- sessions and their rows ------------------------------------------------------------------
    def current_sessions(self) -> dict[str, _Current]:
        rows = self.con.execute(
            """
            SELECT session_id, format, CAST(timezone('UTC', first_at) AS DATE), line_count,
                   CAST(rewritten_at AS VARCHAR), hash(s)
            FROM sessions s
            """
        ).fetchall()
        return {
            sid: _Current(partition(fmt, day), day, int(lines), rewritten, int(h))
            for sid, fmt, day, lines, rewritten, h in rows
        }

    def export_sessions(self) -> None:
        cur = self.current_sessions()
        old = self.old.sessions
        rewrite: set[str] = set().union(*(self.dirty[t] for t in ("sessions", *SESSION_TABLES)))
        append: dict[str, dict[str, int]] = defaultdict(dict)
        for sid, c in cur.items():
            o = old.get(sid)
            if o is None:
                if self.in_scope(c.day):
                    append[c.part][sid] = 0
            elif o.part != c.part:  # its first day or format changed: out of the old partition
                rewrite.add(o.part)
                append[c.part][sid] = 0
            elif o.rewritten_at != c.rewritten_at or c.lines < o.lines:  # read again whole
                rewrite.add(c.part)
            elif c.lines > o.lines and self.in_scope(c.day):
                append[c.part][sid] = o.lines
        rewrite.update(o.part for sid, o in old.items() if sid not in cur)
        for part in list(append):
            crowded = any(len(self.new.tables.get(t, {}).get(part, mf.Partition()).files) >= MAX_FILES
                          for t in SESSION_TABLES)
            if crowded:
                rewrite.add(part)
        by_part: dict[str, list[str]] = defaultdict(list)
        for sid, c in sorted(cur.items()):
            by_part[c.part].append(sid)

        for part in sorted(rewrite):
            ids = by_part.get(part, [])
            self.say(f"rewriting {part} ({len(ids)} sessions)")
            for table in SESSION_TABLES:
                written = self._session_rows(table, ids, None) if ids else None
                self._replace(table, part, [written] if written else [], None)
            for sid in ids:
                self.new.sessions[sid] = mf.SessionState(part=part, lines=cur[sid].lines, rewritten_at=cur[sid].rewritten_at)
        for part, todo in sorted(append.items()):
            if part in rewrite:
                continue
            for table in SESSION_TABLES:
                written = self._session_rows(table, sorted(todo), todo)
                if written:
                    self._append(table, part, written)
            for sid in todo:
                self.new.sessions[sid] = mf.SessionState(part=part, lines=cur[sid].lines, rewritten_at=cur[sid].rewritten_at)
        for sid in [s for s in self.new.sessions if s not in cur]:
            del self.new.sessions[sid]

        # The sessions table itself: each partition rewritten when its rows changed.
        prints: dict[str, tuple[int, int]] = {}
        for c in cur.values():
            n, x = prints.get(c.part, (0, 0))
            prints[c.part] = (n + 1, x ^ c.row_hash)
        known = self.new.table("sessions")
        for part in sorted(set(prints) | set(known)):
            if not (self.in_scope(_day_of(part)) or part in rewrite):
                continue
            fingerprint = f"{prints[part][0]}:{prints[part][1]:x}" if part in prints else None
            if part in known and known[part].fingerprint == fingerprint and part not in self.dirty["sessions"]:
                continue
            ids = by_part.get(part, [])
            written = self._copy(
                "sessions", f"SELECT {self.columns('sessions')} FROM sessions WHERE session_id IN ({_marks(ids)}) "
                f"ORDER BY {_ORDER['sessions']}", ids, row_groups=False,
            ) if ids else None
            self._replace("sessions", part, [written] if written else [], fingerprint)

    def _session_rows(self, table: str, ids: list[str], todo: dict[str, int] | None) -> tuple[Path, mf.LakeFile] | None:
        """The partition's rows of one session table: all of them, or (`todo`) each session's lines
        after the given line and the rows derived from those lines."""
        source = table if todo is None else f"{DELTA}.main.{table}"
        if todo is not None and table == SESSION_TABLES[0]:
            self._stage_delta(ids, todo)
        sql = (f"SELECT {self.columns(source)} FROM {source} WHERE session_id IN ({_marks(ids)}) "
               "ORDER BY session_id, line_no")
        return self._copy(table, sql, list(ids), row_groups=True)

    def _stage_delta(self, ids: list[str], todo: dict[str, int]) -> None:
        """Copy the new lines into a scratch in-memory database and define the warehouse's own views
        (pipeline/warehouse/views.py) there, over them: a filter on line numbers does not reach
        through the views' JSON parsing, and parsing every line of a grown session again would
        cost as much as a full export."""
        import pyarrow as pa

        from pipeline.warehouse.views import create_views

        self.con.register("_lake_todo", pa.table({"session_id": list(todo), "from_line": list(todo.values())}))
        try:
            self.con.execute(
                f"CREATE OR REPLACE TABLE {DELTA}.main.lines AS SELECT l.* FROM {db.CATALOG}.main.lines l "
                "JOIN _lake_todo t ON l.session_id = t.session_id AND l.line_no > t.from_line "
                f"WHERE l.session_id IN ({_marks(ids)})", list(ids),
            )
        finally:
            self.con.unregister("_lake_todo")
        if not self._delta_views:
            for name in ("sessions", "llm_calls"):
                self.con.execute(f"CREATE VIEW {DELTA}.main.{name} AS SELECT * FROM {db.CATALOG}.main.{name}")
            self.con.execute(f"USE {DELTA}")
            try:
                create_views(self.con)
            finally:
                self.con.execute(f"USE {db.CATALOG}")
            self._delta_views = True

    # -- llm_calls and the small tables ----------------------------------------------------------
    def export_llm_calls(self) -> None:
        rows = self.con.execute(
            """SELECT source, CAST(timezone('UTC', "at") AS DATE) AS day, count(*), bit_xor(hash(c))
               FROM llm_calls c GROUP BY ALL"""
        ).fetchall()
        prints = {partition(src, day): (src, day, f"{n}:{h:x}") for src, day, n, h in rows}
        known = self.new.table("llm_calls")
        cols = self.columns("llm_calls", leave_out=("source",))
        for part in sorted(set(prints) | set(known)):
            dirty = part in self.dirty["llm_calls"]
            if not (self.in_scope(_day_of(part)) or dirty):
                continue
            if part not in prints:
                self._replace("llm_calls", part, [], None)
                continue
            src, day, fingerprint = prints[part]
            if part in known and known[part].fingerprint == fingerprint and not dirty:
                continue
            where = "source = ? AND " + ('CAST(timezone(\'UTC\', "at") AS DATE) = ?' if day else '"at" IS NULL')
            params: list[Any] = [src, day] if day else [src]
            written = self._copy(
                "llm_calls", f"SELECT {cols} FROM llm_calls WHERE {where} ORDER BY {_ORDER['llm_calls']}", params,
                row_groups=False,
            )
            self._replace("llm_calls", part, [written] if written else [], fingerprint)

    def export_small(self) -> None:
        for table in SMALL_TABLES:
            n, h = self.con.execute(f"SELECT count(*), coalesce(bit_xor(hash(t)), 0) FROM {table} t").fetchall()[0]
            fingerprint = f"{n}:{h:x}"
            known = self.new.table(table)
            if "" in known and known[""].fingerprint == fingerprint and "" not in self.dirty[table]:
                continue
            if not n and "" not in known and not self.disk.get(table):
                continue
            sql = f"SELECT {self.columns(table)} FROM {table} ORDER BY {_ORDER[table]}"
            written = self._copy(table, sql, [], row_groups=False)
            self._replace(table, "", [written] if written else [], fingerprint)


def _marks(ids: Iterable[str]) -> str:
    return ", ".join("?" for _ in ids)


def _new_export_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def parse_since(text: str | None) -> dt.date | None:
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--since {text!r}: expected a date as YYYY-MM-DD") from None


def export_lake(db_file: str | Path | None, to: str, *, since: str | dt.date | None = None,
                say: Say = lambda _msg: None) -> ExportReport:
    """Bring the lake at `to` up to date with the warehouse; returns what was written.

    The warehouse is opened read-only for the whole export, so every table is read at one moment
    (a nightly run waits for the export to finish). `since` limits the day-partitioned tables to
    partitions of that day and later; older partitions already in the lake are left as they are.
    """
    t0 = time.perf_counter()
    since_day = since if isinstance(since, dt.date) or since is None else parse_since(since)
    export_id = _new_export_id()
    store = open_store(to, export_id)
    report = ExportReport(to=store.url, export_id=export_id, since=since_day.isoformat() if since_day else None)
    with store.exclusive():
        manifest = mf.parse(store.read_manifest(), f"{store.url}/{mf.NAME}")
        with db.reading(db_file) as con, memory.at_least(con, memory.EXPORT_MEMORY_LIMIT):
            con.execute(f"ATTACH ':memory:' AS {DELTA}")
            # One read transaction: every table is read at the same moment.
            with db.atomic(con):
                job = _Export(con, store, manifest, report, since_day, say)
                try:
                    job.reconcile()
                    job.export_sessions()
                    job.export_llm_calls()
                    job.export_small()
                except BaseException:
                    store.finish()
                    raise
        job.new.export_id = export_id
        job.new.exported_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        job.new.warehouse = str(config.db_path(db_file).resolve())
        job.new.since = report.since
        job.new.tables = {t: parts for t, parts in job.new.tables.items() if parts}
        changed = (job.new.tables, job.new.sessions) != (manifest.tables, manifest.sessions)
        if changed or report.leftovers_removed or not manifest.export_id:
            store.write_manifest(job.new.to_text())
        for table, part, names in job.to_delete:
            store.delete(table, part, names)
        store.finish()
    report.lake_bytes = sum(p.bytes for parts in job.new.tables.values() for p in parts.values())
    report.seconds = time.perf_counter() - t0
    return report
