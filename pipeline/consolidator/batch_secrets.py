"""The secrets of a batch: detected once on the raw lines of its sessions, then masked everywhere.

`scan_sessions` reads every stored line of the batch's sessions (the lines a batch can touch) and
returns a `SecretSet` (`scan_warehouse` does the same on a connection of its own, held only while the
lines are copied out); `summarise` counts what detection finds and masks per kind (the secrets
line of `make check-real`). The batch's tools mask them in what the model reads, the rules engine masks
them before it normalises, the artifact writer masks them in every file, and `apply` and the night
report compute them again (never trusting an artifact) for their last gate.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb

from pipeline.secrets.gate import SecretSet
from pipeline.secrets.scan import Secret, SecretsSummary, line_secrets, summarise_lines
from pipeline.warehouse import db

__all__ = ["SecretsSummary", "scan_sessions", "scan_warehouse", "summarise"]

_FETCH = 512


def scan_sessions(con: duckdb.DuckDBPyConnection, session_ids: Sequence[str]) -> SecretSet:
    """Every secret detected on the stored lines of these sessions (ids are bound, never formatted)."""
    if not session_ids:
        return SecretSet()
    cur = con.execute(
        "SELECT text FROM lines WHERE session_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY session_id, line_no",
        [list(dict.fromkeys(session_ids))],
    )
    found: set[Secret] = set()
    while batch := cur.fetchmany(_FETCH):
        for (text,) in batch:
            found |= line_secrets(text)
    return SecretSet(found)


def scan_warehouse(db_file: str | Path | None, session_ids: Sequence[str]) -> SecretSet:
    """`scan_sessions` that holds the warehouse only while it copies the lines out: detection runs
    after the connection is closed, so a nightly writer (or a batch starting) is never kept waiting
    for it. A batch's lines are bounded by the planner (--max-bytes), so they fit in memory."""
    if not session_ids:
        return SecretSet()
    with db.reading(db_file) as con:
        texts = [t for (t,) in con.execute(
            "SELECT text FROM lines WHERE session_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY session_id, line_no",
            [list(dict.fromkeys(session_ids))],
        ).fetchall()]
    return SecretSet.from_lines(texts)


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
