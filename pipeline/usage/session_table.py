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


@dataclass(frozen=True)
class SessionFilter:
    project: str | None = None  # slug or cwd
    since: dt.date | None = None  # sessions active on this UTC day or later
    until: dt.date | None = None
    format: str | None = None


def _facts(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Per session: format, cwd, parent, harness versions and tool-call count, as every ingest keeps them
    in `sessions` (reading them from the lines took seconds and gigabytes on a heavy user's home)."""
    return {
        sid: {"format": fmt, "cwd": cwd, "parentSessionId": parent, "harnessVersions": list(versions or []),
              "toolCalls": int(n or 0), "models": []}
        for sid, fmt, cwd, parent, versions, n in con.execute(
            "SELECT session_id, format, cwd, parent_session_id, harness_versions, tool_calls FROM sessions").fetchall()
    }


def session_table(con: duckdb.DuckDBPyConnection, entries: list[dict[str, Any]], flt: SessionFilter | None = None, *,
                  sort: str | None = None, descending: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
    """`entries` (list_sessions' shape) filtered, with the columns above added, sorted and cut at `limit`."""
    from pipeline.usage.frame import by_model, calls_frame
    from pipeline.usage.report import USAGE_SOURCES

    flt = flt or SessionFilter()
    if sort is not None and sort not in SORTABLE:
        raise UsageError(f"--sort {sort!r}: choose one of {', '.join(SORTABLE)}")
    if limit is not None and limit < 1:
        raise UsageError("--limit must be 1 or more")
    facts = _facts(con)
    tokens: dict[str, list[float]] = {}
    models: dict[str, set[str]] = {}
    unpriced: dict[str, bool] = {}
    for own, model, uncached, written, cached, completion, cost, no_price in by_model(
            calls_frame(con, list(USAGE_SOURCES)), ["own"]).select(
            "own", "model", "uncached", "written", "cached", "completion", "cost", "unpriced").iter_rows():
        t = tokens.setdefault(own, [0, 0, 0, 0, 0.0])
        for i, n in enumerate((uncached, written, cached, completion)):
            t[i] += n
        t[4] += cost
        unpriced[own] = unpriced.get(own, False) or no_price
        models.setdefault(own, set()).add(model)
    out = []
    for e in entries:
        sid = e["sessionId"]
        f = facts.get(sid, {})
        if flt.format and f.get("format") != flt.format:
            continue
        if flt.project and flt.project not in (e.get("slug"), f.get("cwd")):
            continue
        first, last = e.get("firstAt"), e.get("lastAt")
        if flt.since and (last is None or last[:10] < flt.since.isoformat()):
            continue
        if flt.until and (first is None or first[:10] > flt.until.isoformat()):
            continue
        t = tokens.get(sid, [0, 0, 0, 0, 0.0])
        out.append({
            **e, "format": f.get("format"), "parentSessionId": f.get("parentSessionId"),
            "models": sorted(models.get(sid, ())), "harnessVersions": f.get("harnessVersions", []),
            "toolCalls": f.get("toolCalls", 0),
            "inputTokens": int(t[0]), "cacheCreationTokens": int(t[1]), "cacheReadTokens": int(t[2]),
            "outputTokens": int(t[3]), "totalTokens": int(sum(t[:4])), "cost": t[4],
            "costComplete": not unpriced.get(sid, False),
        })
    if sort is not None:
        present = [r for r in out if r.get(sort) not in (None, [])]
        missing = [r for r in out if r.get(sort) in (None, [])]
        present.sort(key=lambda r: (", ".join(r[sort]) if isinstance(r[sort], list) else r[sort]), reverse=descending)
        out = present + missing  # a session without the value goes last either way
    return out[:limit] if limit is not None else out
