"""The calls of a usage report, priced, as one SQL common table expression (`selected`).

Shared by the reports (`pipeline.usage.priced`) and by the per-session sums every ingest keeps
(`pipeline.calls.session_sums`), so that both price a call the same way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

# The rate columns, as `price_rates` holds them and as PRICED binds the rates the table lacks ($x_…).
COLUMNS = ("model", "source", "day", "lo", "hi", "r_in", "r_read", "r_out", "r_w5", "r_w1h")

# The calls, one row each, with the session ccusage would group them under (a Claude Code subagent
# counts with the session that spawned it), the project, the UTC day the price is taken on, the local
# time in the asked zone and the cost. Every variable part is a bound parameter: $sources, $tz, the
# price release and the rates the table lacks ($x_…, `price_rates.missing`).
PRICED = """
WITH rates AS (
    SELECT model, source, day, lo, hi, r_in, r_read, r_out, r_w5, r_w1h FROM price_rates WHERE prices = $prices
    UNION ALL
    SELECT unnest($x_model::VARCHAR[]), unnest($x_source::VARCHAR[]), unnest($x_day::DATE[]),
           unnest($x_lo::BIGINT[]), unnest($x_hi::BIGINT[]), unnest($x_r_in::DOUBLE[]), unnest($x_r_read::DOUBLE[]),
           unnest($x_r_out::DOUBLE[]), unnest($x_r_w5::DOUBLE[]), unnest($x_r_w1h::DOUBLE[])
), calls AS (
    -- The UTC time from the stored instant directly: ICU's time-zone conversion costs ten times more, and a
    -- local time is only converted when the zone is not UTC.
    SELECT make_timestamp(epoch_us(c."at")) AS utc,
           CASE WHEN $tz = 'UTC' THEN make_timestamp(epoch_us(c."at")) ELSE timezone($tz, c."at") END AS local,
           c.session_id AS own,
           coalesce(CASE WHEN s.format = 'claude-code' AND p.session_id IS NOT NULL THEN s.parent_session_id END,
                    c.session_id, '(none)') AS session,
           coalesce(p.slug, s.slug) AS slug, c.source, coalesce(c.model, 'unknown') AS model,
           coalesce(c.prompt_tokens, 0) AS prompt, coalesce(c.cached_tokens, 0) AS cached,
           coalesce(c.cache_write_tokens, 0) AS written, coalesce(c.completion_tokens, 0) AS completion,
           least(coalesce(c.cache_write_1h_tokens, 0), coalesce(c.cache_write_tokens, 0)) AS written_1h
    FROM llm_calls c
    LEFT JOIN sessions s ON s.session_id = c.session_id
    LEFT JOIN sessions p ON p.session_id = s.parent_session_id AND p.format = 'claude-code'
    WHERE c.source IN (SELECT unnest($sources::VARCHAR[])) AND c."at" IS NOT NULL
), priced AS (
    SELECT k.*, r.model IS NULL AS unrated, greatest(k.prompt - k.cached - k.written, 0) AS uncached,
           (greatest(k.prompt - k.cached - k.written, 0) * r.r_in + k.cached * r.r_read
            + (k.written - k.written_1h) * r.r_w5 + k.written_1h * r.r_w1h + k.completion * r.r_out) / 1e6 AS cost
    FROM calls k
    LEFT JOIN rates r ON r.model = k.model AND r.source = k.source AND r.day = k.utc::DATE
                     AND k.prompt > r.lo AND k.prompt <= r.hi
), selected AS (
    SELECT * FROM priced
    WHERE ($project::VARCHAR IS NULL OR slug = $project::VARCHAR)
      AND ($since::DATE IS NULL OR local::DATE >= $since::DATE)
      AND ($until::DATE IS NULL OR local::DATE <= $until::DATE)
)
"""



def parameters(sources: Sequence[str], prices: str, *, tz: str = "UTC", project: str | None = None,
               since: dt.date | None = None, until: dt.date | None = None) -> dict[str, Any]:
    """PRICED's bound parameters, with no rate of its own to add ($x_…: what the table lacks, priced
    by the caller when it must be)."""
    return {"sources": list(sources), "tz": tz, "project": project, "since": since, "until": until, "prices": prices,
            **{f"x_{k}": [] for k in COLUMNS}}


__all__ = ["COLUMNS", "PRICED", "parameters"]
