"""Each call's cache cause, from the warehouse (with its transcripts) or from a bare call log.

The rules are one SQL statement, :mod:`pipeline.warehouse.cache_calls` (the `cache_calls` view is
the same statement with its defaults). A log that is not in a warehouse (a Parquet, JSONL or CSV
file, a simulated workload) runs through that statement in an in-memory DuckDB with no
transcript lines: its calls then have no markers, no conversation other than their session, and
no harness version, so a miss is told apart by gap, shrink, model, TTL tier, a named
``current-date`` change or a new local date, and otherwise is a ``prefix_change``.

``period`` splits calls for the before/after comparison: by a cutover date (the local day in each
session's own time zone; the cutover day itself is left out, since the deploy rewrote every live
cache that day), or by a harness version (``claude-code@2.1.0``: that harness's calls at or above
the version are *after*, below it *before*; other harnesses' calls are left out).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict

from pipeline.errors import UsageError
from pipeline.warehouse import cache_calls

__all__ = [
    "CAUSES", "MISS_CAUSES", "VersionCutover", "classify", "classify_warehouse", "classify_with_sql", "left_out_counts",
    "parse_version", "with_period",
]

CAUSES = cache_calls.CAUSES
MISS_CAUSES = cache_calls.MISS_CAUSES

_LOG_COLUMNS: dict[str, pl.DataType] = {
    "call_id": pl.String(), "source": pl.String(), "session_id": pl.String(), "at": pl.Datetime("us", "UTC"),
    "model": pl.String(), "prompt_tokens": pl.Int64(), "cached_tokens": pl.Int64(), "cache_write_tokens": pl.Int64(),
    "cache_write_1h_tokens": pl.Int64(), "completion_tokens": pl.Int64(), "line_no": pl.Int64(),
    "changed_sections": pl.List(pl.String()), "true_cause": pl.String(),
}


class VersionCutover(BaseModel):
    """``HARNESS@VERSION``: that harness's calls at or above the version are after the cutover."""

    model_config = ConfigDict(frozen=True)

    harness: str
    version: str

    @classmethod
    def parse(cls, text: str) -> VersionCutover:
        harness, sep, version = text.partition("@")
        if not sep or not harness or parse_version(version) is None:
            raise UsageError(
                f"--cutover-version {text!r} is not HARNESS@VERSION; write it as claude-code@2.1.0 or codex@0.80.0"
            )
        return cls(harness=harness, version=version)

    def __str__(self) -> str:
        return f"{self.harness}@{self.version}"


def parse_version(text: str | None) -> tuple[tuple[int, ...], int, str] | None:
    """A comparable key for ``2.1.88`` or ``0.116.0-alpha.10``: numbers first, then a release sorts
    after its own pre-releases (``0.116.0-alpha.10`` < ``0.116.0``)."""
    if not text:
        return None
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)(.*)$", text)
    if match is None:
        return None
    numbers = tuple(int(x) for x in match.group(1).split("."))
    numbers = numbers + (0,) * (3 - len(numbers)) if len(numbers) < 3 else numbers
    rest = match.group(2).strip()
    return numbers, (0 if rest else 1), rest


def _as_log(frame: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    """Any llm_calls-shaped frame with the columns the statement reads, in its types (still lazy:
    the bare path sorts it as it is read, so the unsorted copy is never held beside the sorted)."""
    lf = frame.lazy()
    names = lf.collect_schema().names()
    exprs = [
        (pl.col(name).cast(dtype) if name in names else pl.lit(None, dtype=dtype)).alias(name)
        for name, dtype in _LOG_COLUMNS.items()
    ]
    out = lf.select(exprs)
    if "call_id" not in names or out.select(pl.col("call_id").null_count()).collect().item():
        # A log without ids still needs one per row for the window's tie-break.
        out = out.with_columns(pl.coalesce("call_id", pl.format("row:{}", pl.int_range(pl.len()))).alias("call_id"))
    return out


def classify(
    calls: pl.LazyFrame | pl.DataFrame,
    *,
    hit_share: float = cache_calls.HIT_SHARE,
    ttl_seconds: int | None = None,
    tz: str = cache_calls.DEFAULT_TZ,
) -> pl.DataFrame:
    """Classify a call log that has no transcripts beside it (a file, a simulated workload), with
    the vectorised twin of the SQL (:mod:`pipeline.cache.bare_log`)."""
    from pipeline.cache.bare_log import classify_bare

    # The repeated names go into their categorical types before the sort, which then moves
    # four bytes a row for each instead of a string.
    log = _as_log(calls).with_columns(pl.col("model", "source", "true_cause").cast(pl.Categorical))
    out = classify_bare(log, hit_share=hit_share, ttl=ttl_seconds, tz=tz)
    # Sorted by (session_id, line_no, at, call_id): without line numbers that is already the
    # order _finish gives, and a second sort would copy every column for nothing.
    ordered = out["line_no"].null_count() == out.height
    out = _finish(out, ordered=ordered)
    return out.insert_column(out.get_column_index("session_id") + 1, out["session_id"].alias("conversation"))


def classify_with_sql(
    calls: pl.LazyFrame | pl.DataFrame,
    *,
    hit_share: float = cache_calls.HIT_SHARE,
    ttl_seconds: int | None = None,
    tz: str = cache_calls.DEFAULT_TZ,
) -> pl.DataFrame:
    """The same through the SQL definition, in an in-memory DuckDB without transcript lines (what
    the vectorised twin is checked against)."""
    from pipeline.warehouse import hosts

    log = _as_log(calls)
    # Temporary objects only: they belong to this block's session and go with it.
    with hosts.borrowed() as con:
        con.execute("SET TimeZone = 'UTC'")
        # A view over the registered Arrow data: the log is not copied into DuckDB.
        con.register("_log", log.collect().to_arrow())
        con.execute("CREATE TEMP VIEW llm_calls AS SELECT * FROM _log")
        con.execute(
            "CREATE TEMP TABLE sessions (session_id VARCHAR, format VARCHAR, path VARCHAR, first_at TIMESTAMPTZ, "
            "parent_session_id VARCHAR)"
        )
        con.execute("CREATE TEMP TABLE lines (session_id VARCHAR, line_no BIGINT, text VARCHAR)")
        return _run(con, hit_share=hit_share, ttl_seconds=ttl_seconds, tz=tz)


def classify_warehouse(
    db: str | Path | None,
    *,
    source: str | None = None,
    hit_share: float = cache_calls.HIT_SHARE,
    ttl_seconds: int | None = None,
    tz: str = cache_calls.DEFAULT_TZ,
) -> pl.DataFrame:
    """Classify the warehouse's calls with their transcripts (opened read-only, closed on return).

    The sessions are classified range by range of session ids, each range holding about
    RANGE_BYTES of transcript: the statement's working set (the marker lines it parses, the windows
    over calls) then stays that of one range, within the reader's memory cap, however large the
    warehouse grows."""
    from pipeline.warehouse import db as warehouse

    params = cache_calls.parameters(hit_share=hit_share, ttl=ttl_seconds, tz=tz)
    parts: list[pl.DataFrame] = []
    with warehouse.reading(db) as con:
        for lo, hi in session_ranges(con, RANGE_BYTES):
            sql = cache_calls.classify_sql(lower=lo is not None, upper=hi is not None)
            bounds = ({"lo": lo} if lo is not None else {}) | ({"hi": hi} if hi is not None else {})
            parts.append(warehouse.frame(con, sql, params | bounds))
    frame = _finish(pl.concat(parts, how="vertical_relaxed") if len(parts) > 1 else parts[0])
    if source is not None:
        frame = frame.filter(pl.col("source") == source)
    return frame


# Transcript bytes per range of sessions classified at once. The whole 5 GB bench warehouse in one
# statement needed 2 GB of DuckDB memory; a range of this size stays well within the reader's 1 GB.
RANGE_BYTES = 512 * 1024 * 1024


def session_ranges(con: object, budget: int) -> list[tuple[str | None, str | None]]:
    """[lo, hi) ranges of session ids that cover every id, each holding about `budget` bytes of
    transcript lines (one session larger than that is a range of its own). The first range has no
    lower bound and the last no upper bound, so a call whose session has no transcript is in one."""
    sizes = con.execute(  # type: ignore[attr-defined]
        "SELECT session_id, size_bytes FROM sessions ORDER BY session_id"
    ).fetchall()
    bounds: list[str] = []
    total = 0
    for session_id, size in sizes:
        if total and total + int(size or 0) > budget:
            bounds.append(session_id)
            total = 0
        total += int(size or 0)
    edges: list[str | None] = [None, *bounds, None]
    return list(itertools.pairwise(edges))


def left_out_counts(db: str | Path | None, *, source: str | None = None) -> dict[str, int]:
    """The warehouse's calls that no classification can place: no time (``undated``), or a time
    and no session (``no_session``); `cache_calls` leaves them out, the report counts them."""
    from pipeline.warehouse import db as warehouse

    with warehouse.reading(db) as con:
        undated, no_session = con.execute(
            'SELECT count(*) FILTER (WHERE "at" IS NULL), count(*) FILTER (WHERE "at" IS NOT NULL AND session_id IS NULL) '
            "FROM llm_calls WHERE (?::VARCHAR IS NULL OR source = ?)",
            [source, source],
        ).fetchall()[0]
    return {"undated": int(undated), "no_session": int(no_session)}


def _run(con: object, *, hit_share: float, ttl_seconds: int | None, tz: str) -> pl.DataFrame:
    from pipeline.warehouse.db import frame

    params = cache_calls.parameters(hit_share=hit_share, ttl=ttl_seconds, tz=tz)
    return _finish(frame(con, cache_calls.classify_sql(), params))  # type: ignore[arg-type]


def _finish(out: pl.DataFrame, *, ordered: bool = False) -> pl.DataFrame:
    """Types and order of a classified frame; ``ordered``: the rows already run by (session_id,
    at, call_id)."""
    out = out.with_columns(
        pl.col("cause").cast(pl.Enum(CAUSES)),
        pl.col("cause").is_in(MISS_CAUSES).alias("miss"),
        pl.col("model").cast(pl.Categorical),
        pl.col("source").cast(pl.Categorical),
        pl.col("true_cause").cast(pl.Categorical),
    )
    return out if ordered else out.sort(["session_id", "at", "call_id"])


def with_period(
    classified: pl.DataFrame, *, cutover: dt.date | None = None, cutover_version: VersionCutover | None = None
) -> pl.DataFrame:
    """Add ``period`` (before | cutover | after, null when the call has no side)."""
    periods = pl.Enum(("before", "cutover", "after"))

    def side(name: str) -> pl.Expr:  # in its Enum from the start, not ten million strings cast
        return pl.lit(name, dtype=periods)

    if cutover is not None and cutover_version is not None:
        raise UsageError("give --cutover or --cutover-version, not both")
    if cutover is not None:
        expr = (
            pl.when(pl.col("local_date") < cutover).then(side("before"))
            .when(pl.col("local_date") > cutover).then(side("after"))
            .otherwise(side("cutover"))
        )
    elif cutover_version is not None:
        threshold = parse_version(cutover_version.version)
        versions = classified.select(pl.col("harness_version").drop_nulls().unique()).to_series().to_list()
        after = [v for v in versions if (key := parse_version(v)) is not None and threshold is not None and key >= threshold]
        before = [v for v in versions if v not in after and parse_version(v) is not None]
        same = pl.col("harness") == cutover_version.harness
        expr = (
            pl.when(same & pl.col("harness_version").is_in(after)).then(side("after"))
            .when(same & pl.col("harness_version").is_in(before)).then(side("before"))
            .otherwise(pl.lit(None, dtype=periods))
        )
    else:
        # No cutover: every call is on the before side (rates and causes, no effect).
        expr = side("before")
    return classified.with_columns(expr.alias("period"))
