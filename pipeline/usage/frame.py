"""The calls a usage report counts, as one polars frame with each call's list-price cost, computed by
columns: a heavy home's 420,000 calls took five seconds through a Python object per call.

A price depends on the model, the source and the day, and a call's prompt picks its tier: each
distinct (model, source, day, tier) is priced once (`prices.effective`) and the costs are sums of
token counts times those prices, exactly as `prices.call_cost` adds them for one call.
"""

from __future__ import annotations

import datetime as dt
import warnings
from typing import Any

import duckdb
import polars as pl

KEY = ["model", "source", "day"]


def calls_frame(con: duckdb.DuckDBPyConnection, sources: list[str]) -> pl.DataFrame:
    """Every call of `sources` with a time, in no particular order: at (UTC), own (its session), session
    (as ccusage groups it), slug, source, model, the four token kinds and `cost` (null where no price is known)."""
    with warnings.catch_warnings():  # the result is copied once into Arrow: that is the point
        warnings.simplefilter("ignore", UserWarning)
        table = _query(con, sources)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    frame = frame.with_columns(
        pl.col("at").dt.convert_time_zone("UTC"),
        *(pl.col(c).cast(pl.Int64).fill_null(0).alias(c) for c in ("prompt", "cached", "written", "completion")),
        pl.col("written_1h").cast(pl.Int64),
        pl.col("session").fill_null("(none)"), pl.col("own").fill_null("(none)"),
    ).with_columns(pl.col("at").dt.date().alias("day"))
    return _priced(frame)


def _query(con: duckdb.DuckDBPyConnection, sources: list[str]) -> Any:
    return con.execute(
        """
        SELECT c."at", c.session_id AS own,
               coalesce(CASE WHEN s.format = 'claude-code' AND p.session_id IS NOT NULL THEN s.parent_session_id END,
                        c.session_id) AS session,
               coalesce(p.slug, s.slug) AS slug, c.source, coalesce(c.model, 'unknown') AS model,
               c.prompt_tokens AS prompt, c.cached_tokens AS cached, c.cache_write_tokens AS written,
               c.completion_tokens AS completion, c.cache_write_1h_tokens AS written_1h
        FROM llm_calls c
        LEFT JOIN sessions s ON s.session_id = c.session_id
        LEFT JOIN sessions p ON p.session_id = s.parent_session_id AND p.format = 'claude-code'
        WHERE c.source IN (SELECT unnest(?::VARCHAR[])) AND c."at" IS NOT NULL
        """,
        [sources],
    ).to_arrow_table()


def _priced(frame: pl.DataFrame) -> pl.DataFrame:
    from pipeline.calls.prices import LONG_TTL_SECONDS, SHORT_TTL_SECONDS, PriceBook, effective

    book = PriceBook()
    keys = frame.select(KEY).unique()
    rates: list[dict[str, Any]] = []
    limits: list[dict[str, Any]] = []
    for model, source, day in keys.iter_rows():
        price = book.price(model, source=source, when=day)
        if price is None:
            continue
        steps = sorted({t.above_input_tokens for t in price.tiers})
        for limit in steps:
            limits.append({"model": model, "source": source, "day": day, "above": limit})
        # tier k: the calls above exactly k of the thresholds (the tiers a call is above depend on that count alone)
        for k in range(len(steps) + 1):
            p = effective(price, steps[k - 1] + 1 if k else 0)
            rates.append({"model": model, "source": source, "day": day, "tier": k, "r_in": p.input,
                          "r_read": p.cache_read, "r_out": p.output, "r_w5": p.write_price(SHORT_TTL_SECONDS),
                          "r_w1h": p.write_price(LONG_TTL_SECONDS)})
    schema = {"model": pl.String, "source": pl.String, "day": pl.Date}
    rate_frame = pl.DataFrame(rates, schema={**schema, "tier": pl.Int64, "r_in": pl.Float64, "r_read": pl.Float64,
                                             "r_out": pl.Float64, "r_w5": pl.Float64, "r_w1h": pl.Float64})
    frame = frame.with_row_index("_i")
    tier = pl.lit(0, dtype=pl.Int64).alias("tier")
    if limits:
        above = (frame.select("_i", *KEY, "prompt")
                 .join(pl.DataFrame(limits, schema={**schema, "above": pl.Int64}), on=KEY)
                 .group_by("_i").agg((pl.col("prompt") > pl.col("above")).sum().cast(pl.Int64).alias("tier")))
        frame = frame.join(above, on="_i", how="left").with_columns(pl.col("tier").fill_null(0))
    else:
        frame = frame.with_columns(tier)
    frame = frame.join(rate_frame, on=[*KEY, "tier"], how="left")
    long = pl.min_horizontal(pl.col("written_1h").fill_null(0), pl.col("written"))
    uncached = (pl.col("prompt") - pl.col("cached") - pl.col("written")).clip(lower_bound=0)
    cost = (uncached * pl.col("r_in") + pl.col("cached") * pl.col("r_read")
            + (pl.col("written") - long) * pl.col("r_w5") + long * pl.col("r_w1h")
            + pl.col("completion") * pl.col("r_out")) / 1e6
    return frame.with_columns(
        cost.alias("cost"),
        uncached.alias("uncached"),
    ).drop("_i", "tier", "r_in", "r_read", "r_out", "r_w5", "r_w1h")


def local(frame: pl.DataFrame, tz: str) -> pl.DataFrame:
    """`frame` with `local`, each call's time in the zone `tz`."""
    return frame.with_columns(pl.col("at").dt.convert_time_zone(tz).alias("local"))


def by_model(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Sums per `keys` and model: the four token kinds, the cost of the priced calls, and whether any
    call had no price."""
    return frame.group_by([*keys, "model"]).agg(
        pl.col("uncached").sum(), pl.col("written").sum(), pl.col("cached").sum(), pl.col("completion").sum(),
        pl.col("cost").fill_null(0.0).sum().alias("cost"), pl.col("cost").is_null().any().alias("unpriced"),
    )


def week_start(day: dt.date, start_of_week: str) -> dt.date:
    from pipeline.usage import periods

    return dt.date.fromisoformat(periods.week(dt.datetime.combine(day, dt.time()), start_of_week))


__all__ = ["by_model", "calls_frame", "local", "week_start"]
