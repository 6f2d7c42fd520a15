"""Per-token list rates of every (model, source, UTC day) the calls hold, one row per price tier.

A price with tiers (a long-context surcharge above so many prompt tokens) becomes one row per tier
covering the prompt lengths `(lo, hi]`; a model with no known price gets one row with NULL rates, so
its calls' cost is NULL and the reports say it is unpriced instead of pricing it as another.

Loading the price data costs a quarter of a second, as much as a whole usage answer may take on a
heavy home. So every ingest prices the days it added (`store`, into the `price_rates` table, under the
name of the genai-prices release that priced them: `pipeline ingest` and the nightly driver call it
after the ingest), and a report reads the table (`pipeline.usage.priced`). What the table
lacks (calls of another source, a warehouse last written before a genai-prices upgrade, which a
read-only report cannot write) is priced on the spot (`missing`) and bound to the query.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import duckdb

from pipeline.calls import session_sums
from pipeline.calls.priced_sql import COLUMNS

# Prompt lengths beyond any tier's bounds.
_BELOW = -1
_ABOVE = 2**62



# The (model, source, day) keys of the calls of $sources that the table has no rate row for under $prices.
_MISSING = """
SELECT DISTINCT coalesce(c.model, 'unknown') AS model, c.source, make_timestamp(epoch_us(c."at"))::DATE AS day
FROM llm_calls c
WHERE c.source IN (SELECT unnest($sources::VARCHAR[])) AND c."at" IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM price_rates r WHERE r.prices = $prices AND r.model = coalesce(c.model, 'unknown')
                  AND r.source = c.source AND r.day = make_timestamp(epoch_us(c."at"))::DATE)
"""


def release() -> str:
    """The genai-prices release whose data prices the calls, found without importing it."""
    spec = importlib.util.find_spec("genai_prices")
    if spec is not None and spec.origin:
        found = sorted(Path(spec.origin).parent.parent.glob("genai_prices-*.dist-info"))
        if len(found) == 1:
            return found[0].name.removesuffix(".dist-info")
    from pipeline.calls.prices import database_version

    return f"genai_prices-{database_version()}"


def priced(keys: list[tuple[str, str, Any]]) -> dict[str, list[Any]]:
    """The rate rows of `keys` ((model, source, day) each), column by column."""
    from pipeline.calls.prices import LONG_TTL_SECONDS, SHORT_TTL_SECONDS, PriceBook, effective

    book = PriceBook()
    out: dict[str, list[Any]] = {name: [] for name in COLUMNS}

    def row(*values: Any) -> None:
        for name, value in zip(COLUMNS, values, strict=True):
            out[name].append(value)

    for model, source, day in keys:
        price = book.price(model, source=source, when=day)
        if price is None:
            row(model, source, day, _BELOW, _ABOVE, None, None, None, None, None)
            continue
        steps = sorted({t.above_input_tokens for t in price.tiers})
        bounds = [_BELOW, *steps, _ABOVE]
        # tier k: the prompts above exactly k of the thresholds
        for k in range(len(steps) + 1):
            p = effective(price, bounds[k] + 1 if k else 0)
            row(model, source, day, bounds[k], bounds[k + 1], p.input, p.cache_read, p.output,
                p.write_price(SHORT_TTL_SECONDS), p.write_price(LONG_TTL_SECONDS))
    return out


def missing(con: duckdb.DuckDBPyConnection, sources: list[str], prices: str) -> dict[str, list[Any]]:
    """The rate rows the table lacks for the calls of `sources`, priced now."""
    keys = con.execute(_MISSING, {"sources": sources, "prices": prices}).fetchall()
    return priced(keys) if keys else {name: [] for name in COLUMNS}


def store(con: duckdb.DuckDBPyConnection) -> int:
    """Price every (model, source, day) of the calls the table lacks under today's price data, in the
    caller's transaction, drop the rows of other releases, and keep each session's priced sums
    (`session_sums`). Returns the rate rows added."""
    prices = release()
    sources = [r[0] for r in con.execute("SELECT DISTINCT source FROM llm_calls").fetchall()]
    rows = missing(con, sources, prices)
    con.execute("DELETE FROM price_rates WHERE prices <> ?", [prices])
    if rows["model"]:
        con.execute(
            """
            INSERT INTO price_rates
            SELECT $prices, unnest($model::VARCHAR[]), unnest($source::VARCHAR[]), unnest($day::DATE[]),
                   unnest($lo::BIGINT[]), unnest($hi::BIGINT[]), unnest($r_in::DOUBLE[]), unnest($r_read::DOUBLE[]),
                   unnest($r_out::DOUBLE[]), unnest($r_w5::DOUBLE[]), unnest($r_w1h::DOUBLE[])
            """,
            {"prices": prices, **rows},
        )
    # Every day priced, each session's sums are summed again under the same release (`sessions` reads them).
    session_sums.refresh(con, prices)
    return len(rows["model"])


def store_after_ingest(con: duckdb.DuckDBPyConnection, warnings: list[str]) -> None:
    """`store`, in a transaction of its own, right after an ingest committed its groups (the ingest's
    callers run it: the warehouse stage knows nothing of prices). A failure costs only speed: the
    reports price what the table lacks as they run, so it becomes a warning."""
    from pipeline.warehouse.transaction import atomic

    try:
        with atomic(con):
            store(con)
    except duckdb.Error as exc:
        warnings.append(f"pricing the new days' calls: {str(exc).splitlines()[0]}; usage reports will price them "
                        "as they run until the next ingest")


__all__ = ["COLUMNS", "missing", "priced", "release", "store", "store_after_ingest"]
