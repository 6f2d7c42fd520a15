"""A batch's input: everything the batch kernel and the three transcript tools read, as files.

The nightly planner writes it into the batch folder (`<batch>/input/`) while it holds the
warehouse; the batch kernel (`notebooks/consolidate.ipynb`, through `batch.run_batch`), its engine,
the tools (`tools`, `toolbox`) and quote verification (`contract`, `quotes`) then read only these
files, never the warehouse. A running batch therefore never needs the warehouse file: it cannot
trip over the driver's writes or an analyst's connection, and it can run on a machine that has no
warehouse at all (the scale-out).

    input/sessions.parquet      the batch's rows of `sessions` (the views read their ingest state)
    input/lines.parquet         every line of those sessions, (session_id, line_no, text)
    input/watermarks.parquet    their watermarks            } what list_sessions needs for
    input/memory_links.parquet  their links to memories     } newFromLine and linkedMemories
    input/memories.parquet      the memories linked to them }
    input/secret_scans.parquet  what earlier secret scans of these sessions found, and up to which
    input/secret_values.parquet line (the batch detects secrets on the later lines only)
    input/batch.json            {sessionIds, createdAt, warehouse, rows}: written last, marks the input complete

Lines are kept from line 1, not only from each session's `newFromLine`: `read_lines` may read any
line, a quote may come from any line of a session, and the rules engine looks at earlier lines to
tell a recurring error from a new one and a kept promise from an open one. Kept the same, the batch
answers exactly as it would against the warehouse.

`BatchInput.reading()` gives a DuckDB connection in which these files are views named as the
warehouse's tables, with the analyst views (`messages`, `tool_calls`, `tool_results`) over them:
the tools' SQL runs on it unchanged. The in-memory database and its views are made once per
`BatchInput` (about 40 ms, which every tool call used to pay); each `reading()` is a cursor of it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from pipeline import config
from pipeline.consolidator import tools
from pipeline.errors import UsageError
from pipeline.faults import crash_point
from pipeline.warehouse import db as warehouse
from pipeline.warehouse.views import TRANSCRIPT_VIEWS

__all__ = ["INPUT_DIR", "BatchInput", "discard", "snapshot", "write_input", "write_inputs"]

INPUT_DIR = "input"
MARKER = "batch.json"
_IN_BATCH = "session_id IN (SELECT unnest($ids::VARCHAR[]))"
# What each small file holds: one query per table, the batch's ids bound as $ids.
_TABLES: dict[str, str] = {
    "sessions": f"SELECT * FROM sessions WHERE {_IN_BATCH} ORDER BY session_id",
    "watermarks": f"SELECT * FROM watermarks WHERE {_IN_BATCH}",
    "memory_links": f"SELECT * FROM memory_links WHERE {_IN_BATCH}",
    "memories": f"SELECT * FROM memories WHERE memory_id IN (SELECT memory_id FROM memory_links WHERE {_IN_BATCH})",
    # What earlier scans found of secrets in these sessions' lines: the batch scans only the rest.
    "secret_scans": f"SELECT * FROM secret_scans WHERE {_IN_BATCH}",
    "secret_values": f"SELECT * FROM secret_values WHERE {_IN_BATCH}",
    # Every claim a reviewer took back, so the rules engine leaves it out of its answer.
    "dropped_memories": "SELECT kind, claim FROM dropped_memories WHERE len($ids::VARCHAR[]) >= 0",
}
# The lines of every batch of a night in ONE pass over `lines`, each batch's in its own partition:
# a query per batch would read the whole table once per batch (a session's lines share row groups
# with other sessions', so filtering by session skips little). Not sorted: sorting a first night's
# lines would cost more than the few row groups a batch's tools read in addition.
_LINES = """
    SELECT m.batch, l.session_id, l.line_no, l.text
    FROM lines l JOIN (SELECT unnest($sessions::VARCHAR[]) AS session_id, unnest($batches::INTEGER[]) AS batch) m
    USING (session_id)
"""
_VIEWS = (*_TABLES, "lines")
# Small row groups keep one session's lines in few groups, which a session filter then picks out.
_PARQUET = "FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 2048"


def _literal(path: Path) -> str:
    """A file path as a SQL string literal (COPY and CREATE VIEW take no bound parameters)."""
    return "'" + str(path).replace("'", "''") + "'"


def _files(paths: Sequence[Path]) -> str:
    """read_parquet's argument for these files, as a SQL list (never a glob: a folder may hold '[' or '*')."""
    return "[" + ", ".join(_literal(p) for p in paths) + "]"


def _lines_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("lines*.parquet"))


def _rows(con: duckdb.DuckDBPyConnection, paths: Sequence[Path]) -> int:
    return int(con.execute(f"SELECT count(*) FROM read_parquet({_files(paths)})").fetchall()[0][0])


def write_input(con: duckdb.DuckDBPyConnection, session_ids: Sequence[str], folder: Path, *,
                db: Path | None = None) -> BatchInput:
    """Write the input of the batch `session_ids` from the warehouse connection `con` into `folder`."""
    return write_inputs(con, [(session_ids, folder)], db=db)[0]


def write_inputs(con: duckdb.DuckDBPyConnection, batches: Sequence[tuple[Sequence[str], Path]], *,
                 db: Path | None = None) -> list[BatchInput]:
    """Write the inputs of several batches (session ids, input folder) from the warehouse connection `con`
    (the warehouse file `db`, recorded in each batch.json for people).

    Unknown sessions are refused before anything is written. Each batch's files are written into a
    temporary folder beside its `folder` that replaces it at the end, so `folder` holds a complete
    input or none: a killed planner leaves nothing a batch could mistake for its input.
    """
    planned = [(list(dict.fromkeys(ids)), Path(folder)) for ids, folder in batches]
    if not planned:
        return []
    if any(not ids for ids, _ in planned):
        raise UsageError("a batch needs at least one session")
    every = [sid for ids, _ in planned for sid in ids]
    if len(set(every)) != len(every):
        raise ValueError("a session may belong to one batch only")
    tools.list_sessions(con, every)  # raises ToolError (a UsageError) naming unknown sessions
    partial = [folder.with_name(folder.name + ".partial") for _, folder in planned]
    staging = Path(os.path.commonpath([folder.parent for _, folder in planned])) / ".input-staging"
    for tmp in (*partial, staging):
        shutil.rmtree(tmp, ignore_errors=True)
    for tmp in partial:
        tmp.mkdir(parents=True)
    con.execute(f"COPY ({_LINES}) TO {_literal(staging)} ({_PARQUET}, PARTITION_BY (batch))",
                {"sessions": every, "batches": [n for n, (ids, _) in enumerate(planned) for _ in ids]})
    crash_point("batch-input:staged")
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    out = []
    for n, ((ids, folder), tmp) in enumerate(zip(planned, partial, strict=True)):
        rows: dict[str, int] = {}
        for name, query in _TABLES.items():
            con.execute(f"COPY ({query}) TO {_literal(tmp / f'{name}.parquet')} ({_PARQUET})", {"ids": ids})
            rows[name] = _rows(con, [tmp / f"{name}.parquet"])
        written = sorted((staging / f"batch={n}").glob("*.parquet"))
        for i, part in enumerate(written):  # one file, unless DuckDB chose to split a large partition
            part.replace(tmp / ("lines.parquet" if i == 0 else f"lines.{i}.parquet"))
        if not written:  # sessions without a single line: an empty file, with the columns
            con.execute(f"COPY (SELECT session_id, line_no, text FROM lines LIMIT 0) TO "
                        f"{_literal(tmp / 'lines.parquet')} ({_PARQUET})")
        rows["lines"] = _rows(con, _lines_files(tmp))
        marker = {"sessionIds": ids, "createdAt": created, "warehouse": str(db) if db else None,
                  "rows": rows}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        tmp.replace(folder)
        out.append(BatchInput(folder, tuple(ids), created))
    shutil.rmtree(staging, ignore_errors=True)
    return out


def discard(batch_folder: Path) -> None:
    """Remove a batch's input and whatever a killed writer of it left (the batch has landed, or it
    never ran and is planned again): the warehouse holds all of it."""
    for path in (batch_folder / INPUT_DIR, batch_folder / f"{INPUT_DIR}.partial", batch_folder / ".input-staging",
                 batch_folder.parent / ".input-staging"):
        shutil.rmtree(path, ignore_errors=True)


def snapshot(db: str | Path | None, session_ids: Sequence[str], folder: Path) -> BatchInput:
    """Write a batch's input from the warehouse `db`, opened read-only for as long as it takes.

    What `pipeline consolidate` and the notebook do when they are given a warehouse rather than an
    input folder.
    """
    with warehouse.reading(db) as con:
        return write_input(con, session_ids, folder, db=config.db_path(db).absolute())


@dataclass(frozen=True)
class BatchInput:
    """A complete input folder and the sessions it holds."""

    folder: Path
    session_ids: tuple[str, ...]
    created_at: str

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> BatchInput:
        path = Path(folder)
        try:
            marker = json.loads((path / MARKER).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UsageError(
                f"no batch input in {path} ({MARKER} is missing: the folder was not written, or its writer "
                "was interrupted); give the batch a warehouse (--db) instead, or plan it again"
            ) from None
        except (OSError, ValueError) as exc:
            raise UsageError(f"the batch input {path / MARKER} cannot be read: {exc}") from None
        ids = marker.get("sessionIds") if isinstance(marker, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise UsageError(f"the batch input {path / MARKER} has no list of sessionIds")
        return cls(path, tuple(ids), str(marker.get("createdAt") or ""))

    def check(self, session_ids: Sequence[str]) -> None:
        """Refuse sessions this input does not hold (a wrong invocation)."""
        missing = [s for s in session_ids if s not in self.session_ids]
        if missing:
            raise UsageError(
                f"session(s) not in the batch input {self.folder}: {', '.join(missing)}; "
                f"it holds {', '.join(self.session_ids)}"
            )

    def bytes(self) -> int:
        return sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file())

    @contextlib.contextmanager
    def reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection on which the input looks like the warehouse to the tools' queries."""
        con = self._views.cursor()
        try:
            yield con
        finally:
            con.close()

    @functools.cached_property
    def _views(self) -> duckdb.DuckDBPyConnection:
        """The views' database, made by the first reading(). The files it reads never change once the
        marker is written (a folder written again is loaded again, as a new BatchInput)."""
        con = duckdb.connect()
        try:
            with contextlib.suppress(duckdb.Error):  # refused inside a Jupyter kernel; harmless
                con.execute("SET enable_progress_bar = false")
            con.execute("SET GLOBAL TimeZone = 'UTC'")  # GLOBAL: the cursors have it too
            for name in _VIEWS:
                files = _lines_files(self.folder) if name == "lines" else [self.folder / f"{name}.parquet"]
                if not files or not files[0].exists():
                    continue  # an input written by an earlier version: its batch scans every line
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_files(files)})")
            for ddl in TRANSCRIPT_VIEWS:
                con.execute(ddl)
        except BaseException:
            con.close()
            raise
        return con

    def describe(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "sessionIds": list(self.session_ids), "createdAt": self.created_at}
