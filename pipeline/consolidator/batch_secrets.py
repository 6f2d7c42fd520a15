"""The secrets of a batch: detected once on the raw lines of its sessions, then masked everywhere.

`scan_sessions` reads every stored line of the batch's sessions (the lines a batch can touch) and
returns a `SecretSet` (`scan_warehouse` does the same on a connection of its own, held only while the
lines are copied out); `summarise` counts what detection finds and masks per kind (the secrets
line of `make check-real`). The batch's tools mask them in what the model reads, the rules engine masks
them before it normalises, the artifact writer masks them in every file, and `apply` and the night
report compute them again (never trusting an artifact) for their last gate.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipeline.secret_gate import SecretSet
from pipeline.secrets_scan import Secret, line_secrets, spans
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


@dataclass(frozen=True)
class SecretsSummary:
    """What detection found on a set of transcript lines, and how much of it masking hides."""

    lines: int
    bytes: int
    seconds: float
    found: dict[str, int]  # distinct secrets, per kind
    masked: dict[str, int]  # occurrences masked in the stored lines, per kind

    def line(self) -> str:
        """One line for a person (make check-real): found and masked per kind, size and speed."""
        mb = self.bytes / 1e6
        rate = f", {mb / self.seconds:.1f} MB/s" if self.seconds > 0 else ""
        if not self.found:
            return f"secrets: none found in {self.lines:,} lines ({mb:.1f} MB, {self.seconds:.1f} s{rate})"
        kinds = ", ".join(f"{k} {self.found[k]}/{self.masked.get(k, 0)}" for k in sorted(self.found))
        return (f"secrets: {sum(self.found.values())} found, {sum(self.masked.values())} occurrences masked "
                f"(per kind, found/masked: {kinds}) in {self.lines:,} lines ({mb:.1f} MB, {self.seconds:.1f} s{rate})")

    def to_json(self) -> dict[str, object]:
        return {"lines": self.lines, "bytes": self.bytes, "seconds": round(self.seconds, 3),
                "found": self.found, "masked": self.masked}


def summarise(con: duckdb.DuckDBPyConnection, session_ids: Sequence[str] | None = None) -> SecretsSummary:
    """Detect secrets on every stored line (of the given sessions, or of the whole warehouse) and
    count, per kind, the distinct secrets found and the occurrences the tools would mask."""
    began = time.perf_counter()
    where, params = "", []
    if session_ids is not None:
        where, params = "WHERE session_id IN (SELECT unnest(?::VARCHAR[]))", [list(session_ids)]
    query = f"SELECT text FROM lines {where} ORDER BY session_id, line_no"  # `where` is a fixed string
    found: set[Secret] = set()
    lines = size = 0
    cur = con.execute(query, params or None)
    while batch := cur.fetchmany(_FETCH):
        for (text,) in batch:
            lines += 1
            size += len(text.encode("utf-8", "surrogatepass"))
            found |= line_secrets(text)
    masked: Counter[str] = Counter()
    if found:
        # Second pass: every place a known value sits is masked, on whatever line it is repeated.
        cur = con.execute(query, params or None)
        while batch := cur.fetchmany(_FETCH):
            for (text,) in batch:
                masked.update(sp.kind for sp in spans(text, found))
    return SecretsSummary(
        lines=lines, bytes=size, seconds=time.perf_counter() - began,
        found=dict(sorted(Counter(s.kind for s in found).items())), masked=dict(sorted(masked.items())),
    )
