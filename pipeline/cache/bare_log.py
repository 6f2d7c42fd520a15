"""The cache causes of a call log that has no transcripts, vectorised in polars.

The definition is the SQL of :mod:`pipeline.warehouse.cache_calls`. A log without transcript lines
(a file, a simulated workload, ten million bulk calls) uses only the part of it that does not need
markers: no compaction record, date notice, turn or harness version can be known, the
conversation is the session, and its time zone is the default. Run through DuckDB, that part still
sorts every wide row through each join and window, which costs minutes and gigabytes at the
benchmark's scale; here it is one sort and a few shifts. `tests/cache/test_bare_log.py` checks, on
random logs, that both give every call the same cause, evidence line, crossing and continuation.
"""

from __future__ import annotations

import polars as pl

from pipeline.warehouse import cache_calls as rules

__all__ = ["classify_bare"]


def classify_bare(
    log: pl.DataFrame | pl.LazyFrame, *, hit_share: float = rules.HIT_SHARE, ttl: int | None = None, tz: str = rules.DEFAULT_TZ,
    openai_ttl: int = rules.OPENAI_TTL_SECONDS,
) -> pl.DataFrame:
    """``log`` has the llm_calls columns of :data:`pipeline.cache.causes._LOG_COLUMNS`; the result has
    the cache_calls columns but ``conversation`` (:func:`pipeline.cache.causes.classify` adds it), in
    (session_id, line_no, at, call_id) order."""
    lf = log.lazy().filter(pl.col("at").is_not_null() & pl.col("session_id").is_not_null())
    lf = lf.sort(["session_id", "line_no", "at", "call_id"], nulls_last=True)
    same = pl.col("session_id") == pl.col("session_id").shift(1)

    def prev(name: str) -> pl.Expr:
        return pl.when(same).then(pl.col(name).shift(1))

    cached = pl.col("cached_tokens").fill_null(0)
    written = pl.col("cache_write_tokens").fill_null(0)
    lf = lf.with_columns(
        pl.col("at").dt.convert_time_zone(_polars_zone(tz)).dt.date().alias("local_date"),
        ((cached > 0) | (written > 0)).any().over(["session_id", "model"]).alias("cache_reported"),
        pl.when(same).then(pl.col("call_id").shift(1)).alias("prev_call_id"),
        prev("line_no").alias("prev_line"),
        prev("at").alias("prev_at"),
        prev("prompt_tokens").alias("prev_prompt"),
        prev("model").alias("prev_model"),
        prev("cache_write_tokens").alias("prev_write"),
        prev("cache_write_1h_tokens").alias("prev_write_1h"),
    )
    long_write = pl.col("prev_write_1h").fill_null(0) > 0
    ttl_expr = (
        pl.lit(ttl) if ttl is not None else
        pl.when(long_write).then(rules.LONG_TTL_SECONDS)
        .when(pl.col("source") == "codex").then(openai_ttl)
        .otherwise(rules.SHORT_TTL_SECONDS)
    )
    lf = lf.with_columns(
        ((pl.col("at") - pl.col("prev_at")).dt.total_microseconds() / 1e6).alias("gap_s"),
        ttl_expr.cast(pl.Int32).alias("ttl_s"),
        prev("local_date").alias("prev_local_date"),
    )
    first = pl.col("prev_call_id").is_null()
    read = cached
    moved = pl.col("local_date") != pl.col("prev_local_date")
    named = pl.col("changed_sections").list.contains(rules.DATE_SECTION).fill_null(False)
    tier_switch = (
        (written > 0) & (pl.col("prev_write").fill_null(0) > 0)
        & pl.col("cache_write_1h_tokens").is_not_null() & pl.col("prev_write_1h").is_not_null()
        & ((pl.col("cache_write_1h_tokens") > 0) != (pl.col("prev_write_1h") > 0))
    )
    # Built in its Enum from the start: casting ten million strings afterwards costs gigabytes.
    causes = pl.Enum(rules.CAUSES)

    def is_(name: str) -> pl.Expr:
        return pl.lit(name, dtype=causes)

    cause = (
        pl.when(first).then(is_("cold_start"))
        .when(read >= hit_share * pl.col("prev_prompt").fill_null(0)).then(is_("hit"))
        .when(~pl.col("cache_reported")).then(is_("no_cache_reported"))
        .when(pl.col("gap_s") > pl.col("ttl_s")).then(is_("ttl_expiry"))
        .when(pl.col("prompt_tokens") < 0.5 * pl.col("prev_prompt")).then(is_("compaction"))
        .when(pl.col("model").is_not_null() & pl.col("prev_model").is_not_null() & (pl.col("model") != pl.col("prev_model"))
              & (read < 0.5 * pl.col("prev_prompt").fill_null(0)))
        .then(is_("model_switch"))
        .when(tier_switch).then(is_("ttl_tier_switch"))
        .when(named | moved).then(is_("date_change"))
        .otherwise(is_("prefix_change"))
    )
    lf = lf.with_columns(cause.alias("cause"))
    columns = lf.select(
        # No `conversation` column: in a bare log it is the session, and the caller adds it as the
        # same column once the frame is final (a copy of ten million ids otherwise).
        "call_id", "source", "session_id", "line_no", "at", "model",
        pl.lit(None, dtype=pl.String).alias("harness"), pl.lit(None, dtype=pl.String).alias("harness_version"),
        "prompt_tokens", "cached_tokens", "cache_write_tokens", "cache_write_1h_tokens", "completion_tokens",
        "prev_call_id", "prev_line", "prev_prompt", "gap_s", "ttl_s",
        (pl.col("cached_tokens").cast(pl.Float64) / pl.when(pl.col("prompt_tokens") != 0).then(pl.col("prompt_tokens")))
        .alias("share"),
        "cache_reported", "cause",
        pl.when(pl.col("cause") == "ttl_expiry").then(pl.col("prev_line")).otherwise(pl.col("line_no")).alias("evidence_line_no"),
        pl.lit(tz).alias("tz"), pl.lit("default").alias("tz_source"), "local_date",
        pl.lit(None, dtype=pl.Date).alias("seen_date"),
        (~first & moved.fill_null(False)).alias("crossing"),
        (~first & (pl.col("gap_s") <= pl.col("ttl_s"))).fill_null(False).alias("continuation"),
        pl.lit(True).alias("date_in_system"), "changed_sections", "true_cause",
        # What only a transcript shows: a Codex side request, a tool load or thinking switch.
        pl.lit(False).alias("side_request"), pl.lit(None, dtype=pl.String).alias("change_kind"),
    ).collect().get_columns()
    return _one_chunk(columns)


def _one_chunk(columns: list[pl.Series]) -> pl.DataFrame:
    """A frame of ``columns`` (taken over: the list is emptied), each in one chunk.

    The sort leaves columns in hundreds of chunks that do not line up, and polars then copies the
    whole frame into single chunks before every query that reads it: with ten million calls, two
    gigabytes more for each figure of the report. Done once here, a column at a time, the old
    chunks of each go as soon as its copy exists, so the peak is the frame plus one column."""
    done: list[pl.Series] = []
    while columns:
        done.append(columns.pop(0).rechunk())
    return pl.DataFrame(done)


def _polars_zone(tz: str) -> str:
    """polars takes IANA names; the SQL's fixed offsets ('GMT+07:00') never reach a bare log's default."""
    return "UTC" if tz.upper() == "UTC" else tz
