"""The secrets of a batch: detected once on the raw lines of its sessions, then masked everywhere.

`scan_sessions` returns the `SecretSet` of the batch's sessions (the lines a batch can touch):
what earlier scans kept in the warehouse (`secret_scans`, `secret_values`), plus what detection
finds on the lines after them. `scan_warehouse` does the same on a connection of its own, held only
while the lines are copied out, and `store` keeps its result inside a writer's transaction: a
night's apply does, so that its report and later nights scan only lines no night has scanned. A kept
scan counts only for the detector that made it (`detector_fingerprint`) and the rewrite of the file
it read (a rewritten file is scanned again from line 1).

`summarise` counts what detection finds and masks per kind (the secrets line of `make check-real`).
The batch's tools mask the secrets in what the model reads, the rules engine masks them before it
normalises, the artifact writer masks them in every file, and `apply` and the night report check
again against the warehouse (never trusting an artifact) for their last gate.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pipeline.secrets.gate import SecretSet
from pipeline.secrets.scan import Secret, SecretsSummary, detector_fingerprint, line_secrets, summarise_lines
from pipeline.warehouse import db

__all__ = ["Scan", "SecretsSummary", "scan_sessions", "scan_warehouse", "store", "summarise"]

_FETCH = 512


@dataclass
class _Session:
    """One session's part of a scan: what the warehouse kept of it (`kept`, through line `kept_to`),
    the lines read now, and what they hold."""

    kept_to: int = 0
    rewritten_at: dt.datetime | None = None
    kept: set[Secret] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)
    last_line: int = 0
    found: set[Secret] = field(default_factory=set)


@dataclass
class Scan:
    """The secrets of some sessions: those the warehouse kept from earlier scans, and those found now
    in the lines no scan had read. `store` keeps the new part in the warehouse."""

    sessions: dict[str, _Session]

    @property
    def known(self) -> SecretSet:
        return SecretSet({s for part in self.sessions.values() for s in part.kept | part.found})

    def detect(self) -> Scan:
        for part in self.sessions.values():
            for text in part.texts:
                part.found |= line_secrets(text)
            part.texts = []
        return self


def _read(con: duckdb.DuckDBPyConnection, session_ids: Sequence[str]) -> Scan:
    """What the warehouse kept of these sessions' scans, and the lines no kept scan covers (a scan made
    by another detector, or before the session's file was rewritten, counts for nothing)."""
    ids = list(dict.fromkeys(session_ids))
    parts: dict[str, _Session] = {}
    # A batch input written by an earlier version has no kept scans: every line is scanned then.
    kept_scans = db.has_tables(con, "secret_scans", "secret_values")
    query = (
        "SELECT s.session_id, s.rewritten_at, c.line_no FROM sessions s LEFT JOIN secret_scans c "
        "ON c.session_id = s.session_id AND c.detector = ? AND c.rewritten_at IS NOT DISTINCT FROM s.rewritten_at "
        "WHERE s.session_id IN (SELECT unnest(?::VARCHAR[]))"
        if kept_scans else
        "SELECT session_id, rewritten_at, NULL FROM sessions WHERE ? IS NOT NULL AND session_id IN (SELECT unnest(?::VARCHAR[]))"
    )
    for sid, rewritten_at, kept_to in con.execute(query, [detector_fingerprint(), ids]).fetchall():
        parts[sid] = _Session(kept_to=int(kept_to or 0), rewritten_at=rewritten_at)
    kept = [sid for sid, p in parts.items() if p.kept_to]
    if kept:
        for sid, kind, value, before, after in con.execute(
            "SELECT session_id, kind, value, before, after FROM secret_values WHERE session_id IN (SELECT unnest(?::VARCHAR[]))",
            [kept],
        ).fetchall():
            parts[sid].kept.add(Secret(kind, value, before, after))
    cur = con.execute(
        "SELECT l.session_id, l.line_no, l.text FROM lines l "
        "JOIN (SELECT unnest(?::VARCHAR[]) AS session_id, unnest(?::BIGINT[]) AS kept_to) k USING (session_id) "
        "WHERE l.line_no > k.kept_to ORDER BY l.session_id, l.line_no",
        [list(parts), [p.kept_to for p in parts.values()]],
    )
    while batch := cur.fetchmany(_FETCH):
        for sid, line_no, text in batch:
            part = parts[sid]
            part.texts.append(text)
            part.last_line = line_no
    return Scan(parts)


def scan_sessions(con: duckdb.DuckDBPyConnection, session_ids: Sequence[str]) -> SecretSet:
    """Every secret detected on the stored lines of these sessions (ids are bound, never formatted):
    what earlier scans kept, and the lines none of them read."""
    if not session_ids:
        return SecretSet()
    return _read(con, session_ids).detect().known


def scan_warehouse(db_file: str | Path | None, session_ids: Sequence[str]) -> Scan:
    """`scan_sessions` that holds the warehouse only while it copies the lines out: detection runs
    after the connection is closed, so a nightly writer (or a batch starting) is never kept waiting
    for it. A batch's lines are bounded by the planner (--max-bytes), so they fit in memory. The
    result's `known` is the set; `store` keeps what it found for the next reader."""
    if not session_ids:
        return Scan({})
    with db.reading(db_file) as con:
        scan = _read(con, session_ids)
    return scan.detect()


def store(con: duckdb.DuckDBPyConnection, scan: Scan) -> None:
    """Keep what `scan` read for the next reader, inside the caller's write transaction. A session
    whose file was rewritten since the scan keeps nothing (its kept scan no longer matches)."""
    now = dt.datetime.now(dt.UTC)
    fingerprint = detector_fingerprint()
    for sid, part in scan.sessions.items():
        if part.last_line <= part.kept_to:
            continue  # nothing new was read
        if not part.kept_to:  # a scan from the first line replaces whatever was kept
            con.execute("DELETE FROM secret_values WHERE session_id = ?", [sid])
        new = sorted(part.found - part.kept, key=lambda s: (s.kind, s.value, s.before, s.after))
        if new:
            con.executemany(
                "INSERT INTO secret_values (session_id, kind, value, before, after) VALUES (?, ?, ?, ?, ?)",
                [[sid, s.kind, s.value, s.before, s.after] for s in new],
            )
        con.execute(
            "INSERT OR REPLACE INTO secret_scans (session_id, line_no, detector, rewritten_at, scanned_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [sid, part.last_line, fingerprint, part.rewritten_at, now],
        )


def summarise(con: duckdb.DuckDBPyConnection, session_ids: Sequence[str] | None = None) -> SecretsSummary:
    """Detect secrets on every stored line (of the given sessions, or of the whole warehouse) and
    count, per kind, the distinct secrets found and the occurrences the tools would mask."""
    where, params = "", []
    if session_ids is not None:
        where, params = "WHERE session_id IN (SELECT unnest(?::VARCHAR[]))", [list(session_ids)]
    query = f"SELECT text FROM lines {where} ORDER BY session_id, line_no"  # `where` is a fixed string

    def read() -> Iterator[str]:
        cur = con.execute(query, params or None)
        while batch := cur.fetchmany(_FETCH):
            yield from (text for (text,) in batch)

    return summarise_lines(read)
