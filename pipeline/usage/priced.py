"""The calls a usage report counts, priced and summed inside DuckDB.

A heavy home holds 400,000 calls and more. Pulling them into Python (an object per call took five
seconds; a polars frame still cost half a second of imports and copies) made `usage daily` and
`sessions` slow on exactly the homes where an instant answer matters, so the sums are SQL and only
the grouped rows come back.

A price depends on the model, the source and the UTC day, and a call's prompt length picks its tier.
Each distinct (model, source, day) is priced once (`pipeline.calls.rates`: genai-prices' data,
the price in force that day), one rate row per tier covering the prompt lengths `(lo, hi]`, kept in
the `price_rates` table by every ingest. A call's cost is its token counts times its tier's rates, exactly as
`prices.call_cost` adds them for one call; a call whose model has no price has a NULL cost, and the
sums report that model as unpriced instead of pricing it as another.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import duckdb

from pipeline.calls import rates as price_rates
from pipeline.calls import session_sums
from pipeline.calls.priced_sql import PRICED as _PRICED
from pipeline.calls.priced_sql import parameters

# Per group and model: the four token kinds, the cost of the priced calls, whether any call had no price.
_SUMS = """
SELECT {key} AS grp, model, sum(uncached)::BIGINT, sum(written)::BIGINT, sum(cached)::BIGINT,
       sum(completion)::BIGINT, coalesce(sum(cost), 0.0), bool_or(cost IS NULL), bool_or(unrated)
FROM selected GROUP BY ALL ORDER BY grp, model
"""

# The group keys a report may sum by; the query texts are built from these constants only.
KEYS = {
    "daily": "strftime(local, '%Y-%m-%d')",
    "monthly": "strftime(local, '%Y-%m')",
    # the local day minus the days since the week's first day ($first: 0 for Monday … 6 for Sunday)
    "weekly": "strftime(local::DATE - (((isodow(local) - 1 - $first) % 7 + 7) % 7)::INTEGER, '%Y-%m-%d')",
    "session": "session",
    "own": "own",
}
# Per warehouse session (a subagent's own, not its parent's): what the sessions table keeps of it, and
# its calls' models, token kinds and cost, in one query.
_PER_SESSION = """
SELECT s.session_id, s.format, s.cwd, s.parent_session_id, s.harness_versions, coalesce(s.tool_calls, 0),
       coalesce(u.models, []), coalesce(u.uncached, 0), coalesce(u.written, 0), coalesce(u.cached, 0),
       coalesce(u.completion, 0), coalesce(u.cost, 0.0), coalesce(u.unpriced, false), coalesce(u.unrated, false)
FROM sessions s LEFT JOIN (
    SELECT own, list_sort(list(DISTINCT model)) AS models, sum(uncached)::BIGINT AS uncached,
           sum(written)::BIGINT AS written, sum(cached)::BIGINT AS cached, sum(completion)::BIGINT AS completion,
           coalesce(sum(cost), 0.0) AS cost, bool_or(cost IS NULL) AS unpriced, bool_or(unrated) AS unrated
    FROM selected GROUP BY own
) u ON u.own = s.session_id
"""
# The same columns from the sums every ingest keeps (`pipeline.calls.session_sums`).
_PER_SESSION_KEPT = """
SELECT s.session_id, s.format, s.cwd, s.parent_session_id, s.harness_versions, coalesce(s.tool_calls, 0),
       coalesce(u.models, []), coalesce(u.uncached, 0), coalesce(u.written, 0), coalesce(u.cached, 0),
       coalesce(u.completion, 0), coalesce(u.cost, 0.0), coalesce(u.unpriced, false)
FROM sessions s LEFT JOIN session_usage u ON u.session_id = s.session_id
"""
_SPANS = """
SELECT session, min(utc), max(utc), arg_min(slug, utc), arg_min(source, utc) FROM selected GROUP BY session
"""
_EACH = """
SELECT utc, local, session, own, slug, source, model, uncached, written, cached, completion, cost, unrated
FROM selected ORDER BY utc, own
"""


class Selection:
    """The calls of `sources` in zone `tz`, narrowed by project and local days, ready to be summed.

    The rates come from the `price_rates` table. A call it has no row for (it says so in `unrated`)
    sends the query again with the rates the table lacks priced on the spot: the usual answer is one
    query, and only a warehouse the last ingest did not price pays for the price data."""

    def __init__(self, con: duckdb.DuckDBPyConnection, sources: Sequence[str], *, tz: str = "UTC",
                 project: str | None = None, since: dt.date | None = None, until: dt.date | None = None) -> None:
        self.con = con
        self.sources = list(sources)
        self.prices = price_rates.release()
        self.params: dict[str, Any] = parameters(self.sources, self.prices, tz=tz, project=project, since=since,
                                                 until=until)
        self._complete = False

    def _run(self, tail: str, extra: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        rows = self.con.execute(_PRICED + tail, {**self.params, **(extra or {})}).fetchall()
        if not self._complete and any(r[-1] for r in rows):
            self._complete = True
            self.params.update({f"x_{k}": v for k, v in price_rates.missing(self.con, self.sources, self.prices).items()})
            rows = self.con.execute(_PRICED + tail, {**self.params, **(extra or {})}).fetchall()
        return [r[:-1] for r in rows]

    def sums(self, key: str, *, first_weekday: int = 0) -> list[tuple[Any, ...]]:
        """(group, model, uncached, written, cached, completion, cost, unpriced) per group of `key`
        (a name of KEYS) and model, in group order."""
        extra = {"first": first_weekday} if key == "weekly" else None
        return self._run(_SUMS.format(key=KEYS[key]), extra)

    def per_session(self) -> list[tuple[Any, ...]]:
        """Per session of the warehouse: id, format, cwd, parent, harness versions, tool calls, then its
        calls': models, the four token kinds, cost, whether a model had no price. From the sums the
        last ingest kept when they still stand for the calls (`session_sums.current`)."""
        if session_sums.current(self.con, self.prices, self.sources):
            return self.con.execute(_PER_SESSION_KEPT).fetchall()
        return self._run(_PER_SESSION)

    def spans(self) -> list[tuple[Any, ...]]:
        """(session, first UTC time, last UTC time, project of the first call, source of the first call)."""
        return self.con.execute(_PRICED + _SPANS, self.params).fetchall()

    def each(self) -> list[tuple[Any, ...]]:
        """Every call in time order: utc, local, session, own, slug, source, model, the four token kinds, cost."""
        return self._run(_EACH)


__all__ = ["KEYS", "Selection"]
