"""Each session's priced usage, kept by every ingest: the columns `pipeline sessions` shows beside it.

Summing and pricing every call of a heavy home (413,236 calls in the 5 GB bench warehouse) took a
quarter of `pipeline sessions`' time, on every answer, for sums that change only when an ingest
adds calls. So the writer that prices the new days (`rates.store`, after every ingest and calls
import) also writes each session's sums into `session_usage`, with a fingerprint of the calls they
were summed from in `session_usage_state`: the price data's release, the number of calls and a sum
of a hash of every priced field of every call.

A reader uses the kept sums only when the fingerprint still matches the calls (`current`): a write
that bypassed `rates.store`, a failed refresh, another genai-prices release or a warehouse older than
the tables all make it sum the calls itself, as before. Checking the fingerprint reads the calls'
columns once, without the joins and the pricing.
"""

from __future__ import annotations

import duckdb

from pipeline.calls.priced_sql import PRICED, parameters
from pipeline.warehouse import db

# The sources whose calls usage reports count: those derived from the transcripts.
SOURCES = ("claude-code", "codex")

_FINGERPRINT = """
SELECT count(*), coalesce(sum(hash(call_id, model, "at", prompt_tokens, cached_tokens, cache_write_tokens,
                                  completion_tokens, cache_write_1h_tokens)), 0)::VARCHAR
FROM llm_calls WHERE source IN (SELECT unnest($sources::VARCHAR[])) AND "at" IS NOT NULL
"""

# Per session (its own calls: a subagent's are its own, not its parent's).
_SUMS = """
SELECT own, list_sort(list(DISTINCT model)), sum(uncached)::BIGINT, sum(written)::BIGINT, sum(cached)::BIGINT,
       sum(completion)::BIGINT, coalesce(sum(cost), 0.0), bool_or(cost IS NULL), bool_or(unrated)
FROM selected GROUP BY own
"""


def _fingerprint(con: duckdb.DuckDBPyConnection) -> tuple[int, str]:
    calls, digest = con.execute(_FINGERPRINT, {"sources": list(SOURCES)}).fetchone() or (0, "0")
    return int(calls), str(digest)


def _has_tables(con: duckdb.DuckDBPyConnection) -> bool:
    return db.has_tables(con, "session_usage", "session_usage_state")


def refresh(con: duckdb.DuckDBPyConnection, prices: str) -> int:
    """Sum every session's calls again under the price data `prices` (a genai-prices release), in the
    caller's transaction, once the rates of their days are stored (`rates.store` calls it). Returns
    the sessions summed."""
    if not _has_tables(con):
        return 0
    con.execute("DELETE FROM session_usage")
    con.execute("DELETE FROM session_usage_state")
    con.execute(f"INSERT INTO session_usage {PRICED} {_SUMS}", parameters(SOURCES, prices))
    calls, digest = _fingerprint(con)
    con.execute("INSERT INTO session_usage_state VALUES (?, ?, ?)", [prices, calls, digest])
    return int((con.execute("SELECT count(*) FROM session_usage").fetchone() or (0,))[0])


def current(con: duckdb.DuckDBPyConnection, prices: str, sources: list[str] | tuple[str, ...]) -> bool:
    """Do the kept sums stand for the calls as they are now, under `prices`, for these `sources`?"""
    if tuple(sources) != SOURCES or not _has_tables(con):
        return False
    state = con.execute("SELECT prices, calls, digest FROM session_usage_state").fetchall()
    if len(state) != 1 or state[0][0] != prices:
        return False
    if con.execute("SELECT 1 FROM session_usage WHERE unrated LIMIT 1").fetchall():
        return False  # some calls had no rate row when summed: the reader prices them on the spot
    return (int(state[0][1]), str(state[0][2])) == _fingerprint(con)


__all__ = ["SOURCES", "current", "refresh"]
