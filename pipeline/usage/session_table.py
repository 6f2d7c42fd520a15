"""`pipeline sessions` as a table an analyst can filter and sort: each session's manifest entry (the
`list_sessions` shape) with its format, models, harness versions, tool calls, tokens and list-price cost."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import duckdb

from pipeline.errors import UsageError

# Columns `--sort` takes, as the JSON names them; text sorts A→Z, numbers and times smallest first (--desc reverses).
SORTABLE = ("sessionId", "slug", "format", "firstAt", "lastAt", "prompts", "turns", "toolCalls", "lineCount", "sizeBytes",
            "inputTokens", "cacheCreationTokens", "cacheReadTokens", "outputTokens", "totalTokens", "cost", "models",
            "harnessVersions")


# A manifest entry the sessions table does not hold (it cannot happen on one warehouse; kept safe).
_NO_FACTS: tuple[Any, ...] = (None, None, None, [], 0, [], 0, 0, 0, 0, 0.0, False)


@dataclass(frozen=True)
class SessionFilter:
    project: str | None = None  # slug or cwd
    since: dt.date | None = None  # sessions active on this UTC day or later
    until: dt.date | None = None
    format: str | None = None


def session_table(con: duckdb.DuckDBPyConnection, entries: list[dict[str, Any]], flt: SessionFilter | None = None, *,
                  sort: str | None = None, descending: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
    """`entries` (list_sessions' shape) filtered, with the columns above added, sorted and cut at `limit`."""
    from pipeline.usage.priced import Selection
    from pipeline.usage.report import USAGE_SOURCES

    flt = flt or SessionFilter()
    if sort is not None and sort not in SORTABLE:
        raise UsageError(f"--sort {sort!r}: choose one of {', '.join(SORTABLE)}")
    if limit is not None and limit < 1:
        raise UsageError("--limit must be 1 or more")
    # Per session: the facts every ingest keeps in `sessions` (reading them from the lines took seconds
    # and gigabytes on a heavy user's home) and its calls' usage, from one query.
    facts = {row[0]: row[1:] for row in Selection(con, USAGE_SOURCES).per_session()}
    out = []
    for e in entries:
        fmt, cwd, parent, versions, tool_calls, models, *tokens, cost, unpriced = facts.get(e["sessionId"], _NO_FACTS)
        if flt.format and fmt != flt.format:
            continue
        if flt.project and flt.project not in (e.get("slug"), cwd):
            continue
        first, last = e.get("firstAt"), e.get("lastAt")
        if flt.since and (last is None or last[:10] < flt.since.isoformat()):
            continue
        if flt.until and (first is None or first[:10] > flt.until.isoformat()):
            continue
        out.append({
            **e, "format": fmt, "parentSessionId": parent, "models": models, "harnessVersions": list(versions or []),
            "toolCalls": int(tool_calls), "inputTokens": tokens[0], "cacheCreationTokens": tokens[1],
            "cacheReadTokens": tokens[2], "outputTokens": tokens[3], "totalTokens": sum(tokens), "cost": cost,
            "costComplete": not unpriced,
        })
    if sort is not None:
        present = [r for r in out if r.get(sort) not in (None, [])]
        missing = [r for r in out if r.get(sort) in (None, [])]
        present.sort(key=lambda r: (", ".join(r[sort]) if isinstance(r[sort], list) else r[sort]), reverse=descending)
        out = present + missing  # a session without the value goes last either way
    return out[:limit] if limit is not None else out
