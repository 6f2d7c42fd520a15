"""Tokens by kind and list-price cost by day, week, month, session or 5-hour block, as ccusage reports them.

The rows are `llm_calls` (by default the `usage` sources, `claude-code` and `codex`: what every ingest
derives from transcripts). The JSON uses ccusage's names so that a script written for ccusage reads it
unchanged: an array named after the report (`daily`, `weekly`, `monthly`, `sessions`, `blocks`) of
`{period | sessionId, inputTokens, cacheCreationTokens, cacheReadTokens, outputTokens, totalTokens,
totalCost, modelsUsed, modelBreakdowns}`, plus `totals`. `inputTokens` is the input neither read from
nor written to the cache (`prompt_tokens - cached_tokens - cache_write_tokens`), as ccusage counts it.

A session is what ccusage calls one: a Claude Code subagent file counts with the session that spawned
it (its `parent_session_id`); a Codex rollout is its own session. Costs are list prices
(`pipeline.calls.prices`: genai-prices' data, the price in force on the call's day, cache writes by
TTL where Claude Code records the split); a model the price data does not know adds no cost and is
listed under `totals.unpricedModels`, never priced as another model.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb

from pipeline.calls import session_sums
from pipeline.errors import UsageError
from pipeline.usage import periods
from pipeline.usage.priced import Selection

KINDS = {"daily": "daily", "weekly": "weekly", "monthly": "monthly", "session": "sessions", "blocks": "blocks"}
USAGE_SOURCES = session_sums.SOURCES
TOKEN_KEYS = ("inputTokens", "cacheCreationTokens", "cacheReadTokens", "outputTokens")


@dataclass(frozen=True)
class UsageFilter:
    """Which calls a report counts. Dates are local days (in `tz`), both ends included."""

    source: str | None = None
    project: str | None = None
    since: dt.date | None = None
    until: dt.date | None = None
    tz: str = "UTC"
    start_of_week: str = "sunday"

    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise UsageError(f"unknown time zone {self.tz!r}; give an IANA name such as UTC or Europe/Paris") from None


def parse_day(text: str) -> dt.date:
    """A day as ccusage takes it: YYYY-MM-DD or YYYYMMDD."""
    for fmt in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return dt.datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    raise UsageError(f"{text!r} is not a day: write YYYY-MM-DD or YYYYMMDD")


@dataclass
class Call:
    at: dt.datetime  # UTC
    local: dt.datetime
    session: str  # the session as ccusage groups it
    own: str  # the warehouse session the call is recorded in
    project: str | None
    source: str
    model: str
    tokens: tuple[int, int, int, int]  # input (uncached, unwritten), cache write, cache read, output
    cost: float | None


def _calls(con: duckdb.DuckDBPyConnection, flt: UsageFilter) -> list[Call]:
    """The calls the filter selects, one object each, in time order (the 5-hour blocks walk them)."""
    return [Call(utc.replace(tzinfo=dt.UTC), local_at, session, own or "(none)", slug, source, model,
                 (int(uncached), int(written), int(cached), int(completion)), cost)
            for utc, local_at, session, own, slug, source, model, uncached, written, cached, completion, cost
            in selected(con, flt).each()]


class _Sum:
    """Token counts and cost of a group of calls, by model."""

    def __init__(self) -> None:
        self.models: dict[str, list[float]] = {}
        self.unpriced: set[str] = set()

    def add(self, call: Call) -> None:
        m = self.models.setdefault(call.model, [0, 0, 0, 0, 0.0])
        for i, n in enumerate(call.tokens):
            m[i] += n
        if call.cost is None:
            self.unpriced.add(call.model)
        else:
            m[4] += call.cost

    def fields(self, breakdown: bool = True) -> dict[str, Any]:
        tokens = [sum(int(m[i]) for m in self.models.values()) for i in range(4)]
        out: dict[str, Any] = dict(zip(TOKEN_KEYS, tokens, strict=True))
        out["totalTokens"] = sum(tokens)
        out["totalCost"] = sum(m[4] for m in self.models.values())
        out["modelsUsed"] = sorted(self.models)
        out["modelBreakdowns"] = [
            {"modelName": name, **dict(zip(TOKEN_KEYS, (int(v) for v in m[:4]), strict=True)), "cost": m[4]}
            for name, m in sorted(self.models.items(), key=lambda kv: -kv[1][4])
        ] if breakdown else []
        return out


def calls(con: duckdb.DuckDBPyConnection, flt: UsageFilter | None = None) -> list[Call]:
    """Every call the filter selects, with its tokens by kind and its list-price cost (None: no price known)."""
    return _calls(con, flt or UsageFilter())


def _iso(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def usage_report(con: duckdb.DuckDBPyConnection, kind: str, flt: UsageFilter | None = None) -> dict[str, Any]:
    """The report `kind` (daily, weekly, monthly, session, blocks) as one JSON-ready document."""
    if kind not in KINDS:
        raise UsageError(f"unknown report {kind!r}; choose one of {', '.join(KINDS)}")
    flt = flt or UsageFilter()
    if flt.start_of_week not in periods.WEEK_STARTS:
        raise UsageError(f"--start-of-week must be one of {', '.join(periods.WEEK_STARTS)}")
    if kind == "blocks":  # 5-hour blocks follow the calls one by one
        return _blocks_report(_calls(con, flt))
    selection = selected(con, flt)
    rows: list[dict[str, Any]] = []
    if kind in ("daily", "weekly", "monthly"):
        grouped = _sums(selection.sums(kind, first_weekday=periods.WEEK_STARTS.index(flt.start_of_week)))
        for period in sorted(grouped):
            rows.append({"period": period, **grouped[period].fields()})
    else:
        grouped = _sums(selection.sums("session"))
        spans = sorted(selection.spans(), key=lambda r: (r[2], r[0]))
        for session, first, last, slug, source in spans:
            rows.append({
                "sessionId": session, **grouped[session].fields(),
                "projectPath": slug, "source": source,
                "firstActivity": _iso(first.replace(tzinfo=dt.UTC)), "lastActivity": _iso(last.replace(tzinfo=dt.UTC)),
            })
    grand = _Sum()  # every group's sums added up: the same numbers as one more query, without it
    for group in grouped.values():
        for model, m in group.models.items():
            g = grand.models.setdefault(model, [0, 0, 0, 0, 0.0])
            for i in range(5):
                g[i] += m[i]
        grand.unpriced |= group.unpriced
    totals = {k: v for k, v in grand.fields().items() if k not in ("modelsUsed", "modelBreakdowns")}
    if grand.unpriced:
        totals["unpricedModels"] = sorted(grand.unpriced)
    return {KINDS[kind]: rows, "totals": totals}


def selected(con: duckdb.DuckDBPyConnection, flt: UsageFilter) -> Selection:
    """The calls the filter selects, priced, with their local time in the filter's zone."""
    return Selection(con, [flt.source] if flt.source else list(USAGE_SOURCES), tz=flt.zone().key,
                     project=flt.project, since=flt.since, until=flt.until)


def _sums(rows: list[tuple[Any, ...]]) -> dict[Any, _Sum]:
    """Per group, the sums of each model as a `_Sum` (rows as `Selection.sums` gives them)."""
    out: dict[Any, _Sum] = {}
    for value, model, uncached, written, cached, completion, cost, unpriced in rows:
        total = out.setdefault(value, _Sum())
        total.models[model] = [uncached, written, cached, completion, cost]
        if unpriced:
            total.unpriced.add(model)
    return out


def _blocks_report(calls: list[Call]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for block in periods.blocks([c.at for c in calls]):
        total = _Sum()
        for i in block.members:
            total.add(calls[i])
        rows.append({
            "period": _iso(block.start), "startTime": _iso(block.start), "endTime": _iso(block.end),
            "actualEndTime": _iso(block.last_call), "entries": len(block.members), **total.fields(),
        })
    grand = _Sum()
    for call in calls:
        grand.add(call)
    totals = {k: v for k, v in grand.fields().items() if k not in ("modelsUsed", "modelBreakdowns")}
    if grand.unpriced:
        totals["unpricedModels"] = sorted(grand.unpriced)
    return {KINDS["blocks"]: rows, "totals": totals}
