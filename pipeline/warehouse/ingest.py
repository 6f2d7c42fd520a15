"""Incremental ingest of transcript files: the one place the `lines` table is written.

A file is read in bounded chunks from the byte where the previous ingest stopped, split on `\\n`
only (every other byte, `\\r` included, stays in the line), and appended to `lines` in
(session_id, line_no) order. Files are taken in transactions of about GROUP_BYTES of new data: a
crash leaves every file either as the previous ingest left it or read up to a line boundary.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.errors import IngestAborted, UsageError
from pipeline.faults import crash_point
from pipeline.warehouse import derive, formats, memory
from pipeline.warehouse.transaction import atomic
from pipeline.warehouse.writeback import background_writeback

CHUNK_BYTES = 16 * 1024 * 1024
GROUP_BYTES = 128 * 1024 * 1024  # new bytes per transaction
FLUSH_BYTES = 64 * 1024 * 1024  # lines buffered before one INSERT + JSON projection
HASH_BYTES = 4096


@dataclass
class FileResult:
    path: str
    session_id: str | None
    new_lines: int = 0
    new_bytes: int = 0
    problems: int = 0
    action: str = "unchanged"  # new | appended | rewritten | unchanged | error
    message: str | None = None


@dataclass
class IngestReport:
    files: list[FileResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[FileResult]:
        return [f for f in self.files if f.action == "error"]

    @property
    def new_lines(self) -> int:
        return sum(f.new_lines for f in self.files)

    @property
    def new_bytes(self) -> int:
        return sum(f.new_bytes for f in self.files)

    @property
    def problems(self) -> int:
        return sum(f.problems for f in self.files)

    def summary(self) -> str:
        changed = sum(1 for f in self.files if f.action in ("new", "appended", "rewritten"))
        text = (
            f"{len(self.files)} files ({changed} changed), {self.new_lines:,} new lines, "
            f"{self.new_bytes / 1e6:,.1f} MB, {self.problems} parse problems"
        )
        if self.errors:
            text += f", {len(self.errors)} not stored (named above; the next ingest tries them again)"
        if self.warnings:
            text += f", {len(self.warnings)} warnings"
        return text

    def to_json(self) -> dict:
        return {
            "files": len(self.files),
            "newLines": self.new_lines,
            "newBytes": self.new_bytes,
            "problems": self.problems,
            "warnings": self.warnings,
            "errors": [{"path": f.path, "message": f.message} for f in self.errors],
            "changed": [
                {"path": f.path, "sessionId": f.session_id, "action": f.action, "newLines": f.new_lines,
                 "problems": f.problems}
                for f in self.files
                if f.action != "unchanged"
            ],
        }


def discover(paths: Sequence[str | os.PathLike[str]], warnings: list[str] | None = None) -> list[Path]:
    """Every `*.jsonl` under each directory, and each file named directly, in a stable order.

    Symbolic links to folders are followed (a `~/.claude` kept in a dotfiles repository is one), and
    each real file is taken once, under the first path it is found by; a link back into a folder
    already being read (a loop) is reported in `warnings` and not followed again. A broken link named
    `*.jsonl` is kept so that reading it fails loudly; a folder with no transcript at all is reported
    in `warnings`.
    """
    notes: list[str] = [] if warnings is None else warnings
    found: list[Path] = []
    seen: set[Path] = set()
    seen_files: set[tuple[int, int]] = set()
    for raw in paths:
        # `..` resolved by name (links are followed, not resolved): `pipeline ingest ../x` and
        # `pipeline ingest /abs/x` store the same paths
        path = Path(os.path.abspath(raw))
        if path.is_dir():
            candidates: Iterable[Path] = _walk(path, notes)
            if not candidates:
                notes.append(f"{path}: no *.jsonl files in this folder")
        elif path.exists() or path.is_symlink():
            candidates = [path]
        else:
            raise UsageError(f"{raw}: no such file or directory")
        for c in candidates:
            if c in seen:
                continue
            seen.add(c)
            try:
                st = c.stat()
            except OSError:
                found.append(c)  # a broken link: reading it names the problem
                continue
            key = (st.st_dev, st.st_ino)
            if key in seen_files:
                continue  # the same file reached through a second link
            seen_files.add(key)
            found.append(c)
    return found


def _walk(root: Path, notes: list[str]) -> list[Path]:
    """The `*.jsonl` files under `root`, following links to folders, each folder read once."""
    out: list[Path] = []
    read: set[tuple[int, int]] = set()
    # (folder, the real paths of the folders above it and of itself): a link to one of those is a loop
    stack: list[tuple[Path, tuple[str, ...]]] = [(root, (os.path.realpath(root),))]
    while stack:
        folder, chain = stack.pop()
        try:
            st = folder.stat()
            if (st.st_dev, st.st_ino) in read:
                continue
            read.add((st.st_dev, st.st_ino))
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            notes.append(f"{folder}: cannot read this folder ({exc.strerror or exc}); its transcripts were not ingested")
            continue
        subfolders = []
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if is_dir:
                # only a link needs resolving: a plain folder's real path is its parent's plus its name
                link = entry.is_symlink()
                real = os.path.realpath(entry.path) if link else os.path.join(chain[-1], entry.name)
                if link and real in chain:
                    notes.append(f"{entry.path}: a link back to {real}, a folder it is inside (a loop); not followed")
                    continue
                subfolders.append((Path(entry.path), (*chain, real)))
            elif entry.name.endswith(".jsonl"):
                out.append(Path(entry.path))
        stack.extend(reversed(subfolders))
    return sorted(out)


def _advice(step: str, exc: duckdb.Error, files: list[str] | None) -> str:
    """What failed, in which step, and what to do about it, for a person."""
    exc = _first_error(exc)
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, duckdb.OutOfMemoryException):
        todo = ("free some memory (close other programs) and run the same ingest again; "
                "it goes on from here")
    elif isinstance(exc, duckdb.IOException) or "No space left" in detail:
        todo = "check the disk the warehouse is on (free space, permissions) and run the same ingest again"
    else:
        todo = "run the same ingest again; if it fails the same way, report it with this message"
    where = f" (files: {', '.join(files[:5])}{' …' if len(files) > 5 else ''})" if files else ""
    return f"DuckDB failed while {step}{where}: {detail}. What to do: {todo}."


def _first_error(exc: duckdb.Error) -> duckdb.Error:
    """The error that aborted the transaction. A statement run after it (a clean-up in a `finally`)
    fails with "transaction is aborted", which Python chains to the first one as its context."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, duckdb.Error) and "transaction is aborted" not in str(seen):
            return seen
        seen = seen.__context__
    return exc


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_at(path: Path, offset: int, length: int) -> bytes:
    with path.open("rb") as fh:
        fh.seek(offset)
        return fh.read(length)


HEAD_BLOCK = 256 * 1024


def _head(path: Path, buf: bytearray, limit_bytes: int = 8 * 1024 * 1024) -> formats.Head:
    """The first complete lines of the file, for format sniffing (a bounded read), read into `buf`.

    The head is valid until `buf` is read into again. A buffer kept from file to file is the point:
    a new one per file cost more in fresh pages than the sniff itself (17 ms against 77 ms to read the
    heads of the bench corpus's 320 files). Lines are cut as they are found, up to SNIFF_LINES."""
    bounds: list[tuple[int, int]] = []
    filled = start = 0
    with path.open("rb") as fh:
        while len(bounds) < formats.SNIFF_LINES and filled < limit_bytes:
            if len(buf) < filled + HEAD_BLOCK:
                buf.extend(bytes(filled + HEAD_BLOCK - len(buf)))
            with memoryview(buf) as view, view[filled : filled + HEAD_BLOCK] as block:
                got = fh.readinto(block)
            if not got:
                break
            filled += got
            while len(bounds) < formats.SNIFF_LINES:
                end = buf.find(b"\n", start, filled)
                if end < 0:
                    break
                bounds.append((start, end))
                start = end + 1
    return formats.Head(buf, bounds)


def _newlines(data: bytes, end: int) -> np.ndarray:
    """Positions of every \\n in data[:end], in one vectorised pass (a byte mask of the chunk, 16 MB
    at most, then its nonzero positions)."""
    return np.flatnonzero(np.frombuffer(data, dtype=np.uint8, count=end) == 10)


# The largest buffer an Arrow string view can point into (its offsets are 32-bit).
_VIEW_LIMIT = 2**31 - 1


def _split(data: bytes, end: int | None = None) -> tuple[pa.Array, list[int]]:
    """Split the complete lines of data[:end] (data[end-1] is \\n) into an Arrow string array.

    The lines are not copied: each is a string view into `data` that leaves its newline out (a
    contiguous string array had to be copied without the newlines first, two thirds of this split's
    time). Returns the array and the 0-based indexes of lines that were not valid UTF-8 (stored with
    replacement characters).
    """
    end = len(data) if end is None else end
    newlines = _newlines(data, end)
    n = len(newlines)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = newlines[:-1] + 1
    texts = _contiguous(data, starts, end) if len(data) > _VIEW_LIMIT else _views(data, starts, newlines - starts)
    if not data.isascii():
        # Arrow checks the UTF-8 of the lines in place; decoding them to a str to check it took 6 to 20
        # times as long on the real transcripts' largest files.
        try:
            texts.validate(full=True)
        except pa.ArrowInvalid:
            return _split_slow(data[:end], n)
    return texts, []


def _views(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """An Arrow string-view array over `data`: line i is data[starts[i]:starts[i] + lengths[i]].

    A view is 16 bytes: the length, then either the whole string (12 bytes at most, zero-padded) or
    its first 4 bytes, the index of the buffer (0, the only one) and the offset in it."""
    n = len(starts)
    raw = np.frombuffer(data, dtype=np.uint8)
    views = np.zeros((n, 16), dtype=np.uint8)
    views[:, 0:4] = lengths.astype(np.int32).view(np.uint8).reshape(n, 4)
    head = raw[np.minimum(starts[:, None] + np.arange(12), len(data) - 1)]  # data holds at least the n newlines
    short = lengths <= 12
    if short.any():
        inline = np.arange(12)[None, :] < lengths[short][:, None]
        views[short, 4:16] = np.where(inline, head[short], 0)
    far = ~short
    views[far, 4:8] = head[far, 0:4]
    views[far, 12:16] = starts[far].astype(np.int32).view(np.uint8).reshape(-1, 4)
    return pa.Array.from_buffers(pa.string_view(), n, [None, pa.py_buffer(views), pa.py_buffer(data)])


def _contiguous(data: bytes, starts: np.ndarray, end: int) -> pa.Array:
    """The lines as one contiguous large string array, for a buffer too large for string views.
    Line i starts at its old start minus the i newlines dropped before it; bytes after `end` (a
    held-back partial line) have no newline and trail harmlessly after the last offset."""
    n = len(starts)
    compact = data.replace(b"\n", b"")
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[:n] = starts - np.arange(n, dtype=np.int64)
    offsets[n] = end - n
    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(compact)])


def _split_slow(chunk: bytes, n: int) -> tuple[pa.Array, list[int]]:
    texts: list[str] = []
    bad: list[int] = []
    for i, raw in enumerate(chunk.split(b"\n")[:n]):
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(raw.decode("utf-8", "replace"))
            bad.append(i)
    return pa.array(texts, type=pa.string_view()), bad


def _chunks(path: Path, offset: int) -> Iterator[tuple[bytes, int, int]]:
    """Yield (data, end, held) from `offset` on: data[:end] is complete lines, `held` the bytes of
    an unfinished last line (kept for the next block, or held back at the end of the file)."""
    with path.open("rb") as fh:
        fh.seek(offset)
        carry = b""
        while True:
            block = fh.read(CHUNK_BYTES)
            if not block:
                break
            data = carry + block if carry else block
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            carry = data[cut + 1 :]
            yield data, cut + 1, len(carry)
        if carry:
            yield b"", 0, len(carry)


_FINISH_SCHEMA = pa.schema([
    ("session_id", pa.string()), ("size", pa.int64()), ("lines", pa.int64()), ("held", pa.int64()),
    ("hh", pa.string()), ("hl", pa.int64()), ("th", pa.string()), ("tl", pa.int64()),
    ("now", pa.timestamp("us", tz="UTC")), ("bad_utf8", pa.int64()), ("problems", pa.int64()),
])


_NEW_SESSION_SCHEMA = pa.schema([
    ("session_id", pa.string()), ("path", pa.string()), ("format", pa.string()), ("parent_session_id", pa.string()),
    ("slug", pa.string()), ("cwd", pa.string()), ("claimed", pa.string()),
])


class Ingester:
    """Ingest files into one open read-write connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, progress: Callable[[int], None] | None = None):
        self.con = con
        self.progress = progress or (lambda _n: None)
        self.step = "reading the files"  # what the current transaction is doing, for an error message
        self._sniffed: dict[Path, formats.Identity] = {}
        self._head_buf = bytearray()

    # -- identity -------------------------------------------------------------------------------
    def _sniff(self, path: Path) -> formats.Identity:
        return formats.sniff_head(_head(path, self._head_buf))

    def _load_known(self) -> dict[str, dict]:
        """Every stored session by path, in one query (a per-file lookup would dominate re-ingests)."""
        keys = ("session_id", "size_bytes", "line_count", "head_hash", "head_len", "tail_hash", "tail_len",
                "format", "state", "held_back_bytes")
        rows = self.con.execute(f"SELECT path, {', '.join(keys)} FROM sessions").fetchall()
        known: dict[str, dict] = {}
        for r in rows:
            known[r[0]] = dict(zip(keys, r[1:], strict=True))
        for r in rows:  # a path stored with `..` in it (older versions kept them) is the same file
            known.setdefault(os.path.normpath(r[0]), known[r[0]])
        return known

    def _load_owners(self) -> None:
        # Which file holds each session id, kept in memory: a query per new file would dominate an
        # ingest of many small files. Reloaded after a rollback, which may undo new sessions.
        self._owners: dict[str, str] = dict(self.con.execute("SELECT session_id, path FROM sessions").fetchall())

    def _owner_of(self, session_id: str) -> str | None:
        return self._owners.get(session_id)

    def _assign_id(self, path: Path, ident: formats.Identity, report: IngestReport) -> tuple[str, str | None]:
        """The session id for a new file, and the claimed id when it had to differ."""
        wanted = ident.claimed_id or formats.fallback_id(path)
        owner = self._owner_of(wanted)
        if owner is None or os.path.normpath(owner) == str(path):
            return wanted, None
        unique = f"{wanted}~{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
        report.warnings.append(
            f"{path}: its records claim session id {wanted}, which {owner} already has; "
            f"both are kept, this one as {unique}"
        )
        return unique, wanted

    # -- change detection -----------------------------------------------------------------------
    def _unchanged_prefix(self, path: Path, known: dict) -> bool:
        """True when the bytes we stored are still the file's first bytes (so it only grew)."""
        if known["head_len"]:
            if _sha(_read_at(path, 0, known["head_len"])) != known["head_hash"]:
                return False
        if known["tail_len"]:
            start = known["size_bytes"] - known["tail_len"]
            if _sha(_read_at(path, start, known["tail_len"])) != known["tail_hash"]:
                return False
        return True

    def _forget(self, session_id: str) -> None:
        self.con.execute("DELETE FROM lines WHERE session_id = ?", [session_id])
        self.con.execute(
            "DELETE FROM llm_calls WHERE session_id = ? AND source IN ('claude-code', 'codex')", [session_id]
        )
        self.con.execute("DELETE FROM ingest_problems WHERE session_id = ?", [session_id])
        self.con.execute("DELETE FROM secret_values WHERE session_id = ?", [session_id])
        self.con.execute("DELETE FROM secret_scans WHERE session_id = ?", [session_id])

    # -- planning --------------------------------------------------------------------------------
    def plan(self, files: Sequence[Path], report: IngestReport) -> list[tuple[Path, int, dict | None, FileResult]]:
        """Decide what to read. Unchanged files are settled here; the rest are returned sorted by
        session id, so that one ingest appends its rows in (session_id, line_no) order and the
        row-group zone maps of `lines` stay tight for per-session queries."""
        todo: list[tuple[str, Path, int, dict | None, FileResult]] = []
        known_by_path = self._load_known()
        self._load_owners()
        for path in files:
            spath = str(path)
            result = FileResult(path=spath, session_id=None)
            try:
                size = path.stat().st_size
                known = known_by_path.get(spath)
                if known is not None and size == known["size_bytes"] and self._unchanged_prefix(path, known):
                    result.session_id = known["session_id"]
                    report.files.append(result)
                    continue
                if known:
                    key = known["session_id"]
                else:
                    self._sniffed[path] = self._sniff(path)
                    key = self._sniffed[path].claimed_id or formats.fallback_id(path)
            except OSError as exc:
                self._fail(result, exc, report)
                continue
            todo.append((key, path, size, known, result))
        todo.sort(key=lambda t: (t[0], str(t[1])))
        return [(p, size, known, result) for _, p, size, known, result in todo]

    @staticmethod
    def _fail(result: FileResult, exc: OSError, report: IngestReport) -> None:
        result.action = "error"
        result.message = f"{result.path}: cannot read ({exc.strerror or exc})"
        report.warnings.append(result.message)
        report.files.append(result)

    def run(self, files: Sequence[Path], report: IngestReport) -> None:
        """Ingest in transactions of about GROUP_BYTES of new data each.

        A transaction is all-or-nothing, so a crash leaves every file either as it was before this
        ingest or fully read up to a line boundary. A file that fails to read rolls back its group,
        which is then redone without it. A group that DuckDB refuses (out of memory, an I/O error, a
        full disk) is rolled back and redone a file at a time; a file that still fails alone is set
        aside, named with the step that failed, and tried again by the next ingest, so one bad file
        never holds back the others.
        """
        queue = [(*item, False) for item in self.plan(files, report)]
        while queue:
            group: list[tuple[Path, int, dict | None, FileResult]] = []
            budget = 0
            alone = queue[0][4]
            while queue and (not group or (budget < GROUP_BYTES and not alone and not queue[0][4])):
                path, size, known, result, _alone = queue.pop(0)
                group.append((path, size, known, result))
                budget += size - (known["size_bytes"] if known else 0)
            warnings_before = len(report.warnings)
            self._reset_group()
            failed: int | None = None
            self.step = "reading the files"
            try:
                with atomic(self.con) as tx:
                    for i, (path, size, known, result) in enumerate(group):
                        try:
                            self._read_file(path, size, known, result, report)
                        except OSError as exc:
                            failed = i
                            self._fail(result, exc, report)
                            break
                    if failed is None:
                        self._finish_group()
                    else:  # the whole group is read again without the file that failed
                        tx.rollback()
            except duckdb.Error as exc:
                self._refused(group, exc, report, warnings_before, queue)
                continue
            if failed is None:
                report.files.extend(r for *_, r in group)
                crash_point("ingest:group-committed")
                continue
            self._load_owners()
            del report.warnings[warnings_before:-1]  # keep only the failure; the others will be redone
            self._undo(group)
            queue[:0] = [(*item, alone) for j, item in enumerate(group) if j != failed]

    def _undo(self, group: list[tuple[Path, int, dict | None, FileResult]]) -> None:
        for _p, _s, _k, r in group:
            if r.action != "error":
                r.action, r.new_lines, r.new_bytes, r.problems, r.session_id = "unchanged", 0, 0, 0, None

    def _refused(self, group: list[tuple[Path, int, dict | None, FileResult]], exc: duckdb.Error, report: IngestReport,
                 warnings_before: int, queue: list[tuple[Path, int, dict | None, FileResult, bool]]) -> None:
        """DuckDB refused a statement of this group's transaction, which is rolled back (nothing of
        the group is stored). Several files are redone one transaction each; a file alone is set aside."""
        if isinstance(_first_error(exc), duckdb.FatalException):
            # DuckDB invalidates the database after a fatal error: nothing more can be written now.
            raise IngestAborted(_advice(self.step, exc, [str(p) for p, *_ in group]) +
                                " The ingest stopped here; every group committed before it is kept.") from exc
        self._load_owners()
        del report.warnings[warnings_before:]
        self._undo(group)
        if len(group) > 1:
            queue[:0] = [(*item, True) for item in group]
            return
        path, _size, _known, result = group[0]
        result.action = "error"
        result.new_lines = result.new_bytes = result.problems = 0
        result.message = f"{path}: set aside, nothing of it stored: {_advice(self.step, exc, None)}"
        report.warnings.append(result.message)
        report.files.append(result)

    def ingest_file(self, path: Path, report: IngestReport) -> FileResult:
        """Ingest one file in its own transaction."""
        self.run([path], report)
        return report.files[-1]

    # -- one transaction -------------------------------------------------------------------------
    def _reset_group(self) -> None:
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._buffer_formats: set[str] = set()
        self._projections: list[pl.DataFrame] = []
        self._targets: dict[str, derive.Target] = {}
        self._finish: list[tuple[FileResult, dict]] = []
        self._new_sessions: list[dict] = []

    def _append(self, session_id: str, first_line: int, texts: pa.Array) -> None:
        n = len(texts)
        sid = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([session_id]))
        line_no = pa.array(np.arange(first_line, first_line + n, dtype=np.int64))
        self._buffer.append(pa.table({"session_id": sid, "line_no": line_no, "text": texts}))
        self._buffer_formats.add(self._targets[session_id].format)
        self._buffered += texts.nbytes
        if self._buffered >= FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Append the buffered lines to `lines` and project their JSON, in one pass each."""
        if not self._buffer:
            return
        if len({t.schema.field("text").type for t in self._buffer}) > 1:  # a buffer too large for views was split
            self._buffer = [
                t.set_column(t.schema.get_field_index("text"), "text", t.column("text").cast(pa.large_string()))
                for t in self._buffer
            ]
        batch = pa.concat_tables(self._buffer, promote_options="permissive")
        fmts, self._buffer_formats = self._buffer_formats, set()
        self._buffer, self._buffered = [], 0
        self.con.register("_ingest_batch", batch)
        try:
            self.step = "storing lines in the lines table"
            self.con.execute(
                "INSERT INTO lines SELECT session_id::VARCHAR, line_no, text FROM _ingest_batch"
            )
            self.step = "reading the JSON of the new lines"
            self._projections.append(derive.project(self.con, "_ingest_batch", fmts))
            self.step = "reading the files"
        finally:
            self.con.unregister("_ingest_batch")

    def _finish_group(self) -> None:
        self._flush()
        self.step = "adding the new sessions"
        if self._new_sessions:
            table = pa.Table.from_pylist(self._new_sessions, schema=_NEW_SESSION_SCHEMA)
            self.con.register("_new_sessions", table)
            try:
                self.con.execute(
                    "INSERT INTO sessions (session_id, path, format, parent_session_id, slug, cwd, claimed_session_id) "
                    "SELECT session_id, path, format, parent_session_id, slug, cwd, claimed FROM _new_sessions"
                )
            finally:
                self.con.unregister("_new_sessions")
        not_json: dict[str, int] = {}
        if self._projections:
            proj = pl.concat(self._projections, how="vertical_relaxed")
            proj = proj.with_columns(pl.col("session_id").cast(pl.String))
            self.step = "deriving the sessions' statistics and usage rows"
            not_json = derive.fold(self.con, proj, self._targets)
        self.step = "recording how far each file was read"
        rows = []
        for result, final in self._finish:
            result.problems = not_json.get(final["session_id"], 0) + final["bad_utf8"]
            rows.append({**final, "problems": result.problems})
        if rows:
            # One UPDATE for the whole transaction: a statement per file would dominate re-ingests.
            table = pa.Table.from_pylist(rows, schema=_FINISH_SCHEMA)
            self.con.register("_finished_files", table)
            try:
                self.con.execute(
                    "UPDATE sessions SET size_bytes = f.size, line_count = f.lines, problems = sessions.problems + f.problems, "
                    "held_back_bytes = f.held, head_hash = f.hh, head_len = f.hl, tail_hash = f.th, tail_len = f.tl, "
                    "ingested_at = f.now FROM _finished_files f WHERE sessions.session_id = f.session_id"
                )
            finally:
                self.con.unregister("_finished_files")

    def _read_file(self, path: Path, size: int, known: dict | None, result: FileResult, report: IngestReport) -> None:
        spath = str(path)
        now = dt.datetime.now(dt.UTC)
        offset = 0
        first_line = 1
        if known is not None and size >= known["size_bytes"] and self._unchanged_prefix(path, known):
            session_id = known["session_id"]
            offset = known["size_bytes"]
            first_line = known["line_count"] + 1
            result.action = "appended"
            fmt, state = known["format"], known["state"]
            if known["line_count"] == 0:
                # Nothing was stored yet, so the file may only now show what it is.
                session_id, fmt = self._reidentify(path, known["session_id"], report)
                state = known["state"] if session_id == known["session_id"] else None
        elif known is not None:
            session_id = known["session_id"]
            self._forget(session_id)
            self.con.execute(
                "UPDATE sessions SET size_bytes = 0, line_count = 0, problems = 0, prompts = 0, turns = 0, "
                "first_at = NULL, last_at = NULL, state = NULL, head_len = 0, tail_len = 0, "
                "rewritten_at = ? WHERE session_id = ?",
                [now, session_id],
            )
            session_id, fmt = self._reidentify(path, session_id, report)
            state = None
            result.action = "rewritten"
            report.warnings.append(f"{spath}: the file was rewritten since the last ingest; read again from line 1")
        else:
            ident = self._sniffed.pop(path, None) or self._sniff(path)
            session_id, claimed = self._assign_id(path, ident, report)
            # Inserted with the rest of the transaction's new sessions in _finish_group: one
            # statement per file would cost more than reading a small file.
            self._new_sessions.append({
                "session_id": session_id, "path": spath, "format": ident.format,
                "parent_session_id": ident.parent_session_id,
                "slug": formats.slug_for(ident.cwd) or path.parent.name, "cwd": ident.cwd, "claimed": claimed,
            })
            self._owners[session_id] = spath
            fmt, state = ident.format, None
            if claimed:
                self.con.execute(
                    "INSERT INTO ingest_problems (session_id, line_no, kind, detail, path) VALUES (?, NULL, ?, ?, ?)",
                    [session_id, "duplicate-id", f"records claim {claimed}, already used by another file", spath],
                )
            result.action = "new"
        result.session_id = session_id
        self._targets[session_id] = derive.Target(session_id, fmt, spath, json.loads(state) if state else {},
                                                  fresh=result.action in ("new", "rewritten"))

        line_no = first_line
        consumed = offset
        held = 0
        bad_utf8 = 0
        for data, end, held_after in _chunks(path, offset):
            held = held_after
            if not end:
                continue
            texts, bad = _split(data, end)
            for i in bad:
                self.con.execute(
                    "INSERT INTO ingest_problems (session_id, line_no, kind, detail, path) VALUES (?, ?, ?, ?, ?)",
                    [session_id, line_no + i, "invalid-utf8", "stored with replacement characters", spath],
                )
            self._append(session_id, line_no, texts)
            bad_utf8 += len(bad)
            line_no += len(texts)
            consumed += end
            self.progress(end)

        result.new_lines = line_no - first_line
        result.new_bytes = consumed - offset
        if held:
            report.warnings.append(_held_back(spath, held))
        head_len = min(consumed, HASH_BYTES)
        tail_len = min(consumed, HASH_BYTES)
        self._finish.append((result, {
            "session_id": session_id, "size": consumed, "lines": line_no - 1, "held": held,
            "hh": _sha(_read_at(path, 0, head_len)) if head_len else None, "hl": head_len,
            "th": _sha(_read_at(path, consumed - tail_len, tail_len)) if tail_len else None, "tl": tail_len,
            "now": now, "bad_utf8": bad_utf8,
        }))
        if result.new_lines == 0 and result.action == "appended":
            result.action = "unchanged"

    def _reidentify(self, path: Path, session_id: str, report: IngestReport) -> tuple[str, str]:
        """Re-sniff a file that has no stored lines; rename its session when its records say who it is."""
        ident = self._sniff(path)
        new_id = session_id
        if ident.claimed_id and ident.claimed_id != session_id and self._owner_of(ident.claimed_id) is None:
            new_id = ident.claimed_id
            self.con.execute("DELETE FROM sessions WHERE session_id = ?", [session_id])
            self.con.execute(
                "INSERT INTO sessions (session_id, path, format) VALUES (?, ?, ?)", [new_id, str(path), ident.format]
            )
            self._owners.pop(session_id, None)
            self._owners[new_id] = str(path)
        self.con.execute(
            "UPDATE sessions SET format = ?, parent_session_id = ?, cwd = coalesce(?, cwd), slug = coalesce(?, slug) "
            "WHERE session_id = ?",
            [ident.format, ident.parent_session_id, ident.cwd, formats.slug_for(ident.cwd), new_id],
        )
        return new_id, ident.format


def total_bytes(files: Sequence[Path]) -> int:
    total = 0
    for f in files:
        try:
            total += f.stat().st_size
        except OSError:
            pass
    return total


def ingest(
    con: duckdb.DuckDBPyConnection,
    paths: Sequence[str | os.PathLike[str]],
    *,
    progress: bool = False,
    found: Preview | None = None,
) -> IngestReport:
    """Ingest every transcript under `paths` into an open read-write warehouse connection. `found`, a
    preview of the same paths just made, spares walking the folders again (a file that appears in
    between is read by the next ingest)."""
    report = IngestReport()
    if found is not None and found.files is not None:
        files = found.files
        report.warnings.extend(found.notes)
    else:
        files = discover(paths, report.warnings)
    with memory.bounded(con), background_writeback(_file_of(con)):
        _run(con, files, report, progress)
    report.files.sort(key=lambda f: f.path)
    return report


@dataclass
class Preview:
    """What an ingest would do, found on a read-only connection before any write session opens."""

    report: IngestReport | None  # the whole report when the ingest would change nothing, else None
    new_bytes: int = 0  # bytes of transcript it would read: new files, and what known ones grew by
    stored_bytes: int = 0  # bytes of transcript the warehouse holds already
    files: list[Path] | None = None  # the files found under the paths (`discover`)
    notes: list[str] = field(default_factory=list)  # and what finding them had to say

    @property
    def small(self) -> bool:
        """Small enough to write into the published file itself (`pipeline.warehouse.publish`,
        "in place"): the warehouse holds something, and this adds at most IN_PLACE_SHARE of it."""
        return self.stored_bytes > 0 and self.new_bytes <= IN_PLACE_SHARE * self.stored_bytes


# How much an ingest may add, against what the warehouse holds, and still write the published file in place
# rather than a copy of it: a reader that opens the warehouse meanwhile waits for the write, which takes about
# this share of the time the whole home took to ingest.
IN_PLACE_SHARE = 0.25


def preview(db_file: str | Path | None, paths: Sequence[str | os.PathLike[str]]) -> Preview:
    """What `ingest` would do, from a read-only connection: the report when it would change nothing
    (`Preview.report`), and how much it would read against what is stored.

    A write session starts by copying the published warehouse to a private working file (6 s for a
    6.4 GB warehouse): a nightly ingest of a home where nothing grew need not pay it, and one where
    little grew writes in place. The report is None whenever a write is needed or cannot be ruled out
    (a new, grown or rewritten file, an unreadable one, a warehouse that is missing or must be upgraded
    first); the sizes are 0 when they could not be read."""
    from pipeline.errors import PipelineError
    from pipeline.warehouse import db

    report = IngestReport()
    files = discover(paths, report.warnings)
    notes = list(report.warnings)
    try:
        with db.reading(db_file) as con:
            planner = Ingester(con)
            stored = planner._load_known()
            # what every stored session was read to, once each (`stored` also keys some under a second path)
            total = sum({k["session_id"]: k["size_bytes"] or 0 for k in stored.values()}.values())
            grown = Preview(None, new_bytes=_growth(files, stored), stored_bytes=total, files=files, notes=notes)
            if any(str(f) not in stored for f in files):
                return grown  # a new file: only the write path reads its head (up to 8 MB), not both
            todo = planner.plan(files, report)
            for path, size, known, result in todo:
                # A file that only still holds the same unfinished last line: the ingest would hold it
                # back again and store nothing.
                held = int((known or {}).get("held_back_bytes") or 0)
                if not (known and held and size == known["size_bytes"] + held and planner._unchanged_prefix(path, known)
                        and b"\n" not in _read_at(path, known["size_bytes"], held)):
                    return grown
                result.session_id = known["session_id"]
                report.files.append(result)
                report.warnings.append(_held_back(str(path), held))
    except (PipelineError, duckdb.Error, OSError):
        return Preview(None, files=files, notes=notes)
    if report.errors:
        return grown
    report.files.sort(key=lambda f: f.path)
    return Preview(report, stored_bytes=grown.stored_bytes)


def _growth(files: Sequence[Path], stored: dict[str, dict]) -> int:
    """Bytes an ingest would read: a new file whole, a known one from where it was read to (whole when it
    shrank, as a rewritten file is read again)."""
    total = 0
    for path in files:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        known = stored.get(str(path))
        total += size if known is None or size < known["size_bytes"] else size - known["size_bytes"]
    return total


def _held_back(path: str, held: int) -> str:
    return f"{path}: the last {held} bytes have no newline yet; they will be read once the line is complete"


def _file_of(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The file of the connection's current database (None in memory)."""
    row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return Path(row[0]) if row and row[0] else None


def _run(con: duckdb.DuckDBPyConnection, files: list[Path], report: IngestReport, progress: bool) -> None:
    if progress and sys.stderr.isatty():
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        with Progress(
            "[progress.description]{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
            console=_stderr_console(), transient=True,
        ) as bar:
            task = bar.add_task("ingest", total=total_bytes(files))
            Ingester(con, progress=lambda n: bar.advance(task, n)).run(files, report)
    else:
        Ingester(con).run(files, report)


def _stderr_console() -> Any:
    from pipeline.console import console

    return console(stderr=True)


def problems_of(con: duckdb.DuckDBPyConnection, session_id: str) -> list[dict]:
    rows = con.execute(
        "SELECT line_no, kind, detail FROM ingest_problems WHERE session_id = ? ORDER BY line_no NULLS FIRST",
        [session_id],
    ).fetchall()
    return [{"line": r[0], "kind": r[1], "detail": r[2]} for r in rows]


__all__ = ["IN_PLACE_SHARE", "FileResult", "IngestAborted", "IngestReport", "Ingester", "Preview", "discover", "ingest",
           "preview", "problems_of"]
