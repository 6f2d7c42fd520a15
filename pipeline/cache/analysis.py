"""Why prompt caches hit or miss, from an LLM call log alone, and what date anchoring changed.

Input: ``llm_calls`` rows from any source (a warehouse, a Parquet or JSONL file). Every step is
polars; the per-call work is one lazy pass (sort by session and time, look at the previous call of
the same session), the rest are group-bys over the classified frame.

Classification (never reads ``true_cause``)
    :mod:`pipeline.cache.causes` gives every call one cause from what its transcript records (the
    same statement as the warehouse view ``cache_calls``): the previous call of the same
    conversation, the TTL in force, compaction, model, harness-version and date-notice records
    between the two calls, and the session's own time zone.

Groups for the effect of anchoring
    *Crossing* calls are the first call of a conversation on a new date (a new local date in the
    session's time zone, or a date notice) whose previous call is within the TTL in force. *Other*
    calls are the remaining within-TTL continuations. The sides are a cutover date (local day
    before or after it; the cutover day is left out) or a harness version (``--cutover-version``).
    Calls of a model that never reports caching are left out of every share (and counted).

    effect = (share_after − share_before)[crossing] − (share_after − share_before)[other]

    on token-weighted cached shares (Σ cached / Σ prompt): a difference-in-differences, positive
    when anchoring helped. It is estimated only when each of the four cells holds at least
    ``min_sessions`` sessions and ``min_calls`` calls; its 95 % interval is a percentile bootstrap
    that resamples whole sessions with replacement. A cell's own share gets an interval under the
    same floor.

Cost of misses
    At the provider's prices (:mod:`pipeline.calls.prices`): ``spend`` is uncached input
    (prompt − cached − written) at the input price plus written tokens at the write price. A call
    that says how its writes split by TTL (``cache_write_1h_tokens``: Claude Code transcripts) pays
    the 1-hour price for its 1-hour writes and the 5-minute price for the rest; any other call pays
    one price for all its writes, the 5-minute one, or the 1-hour one when ``ttl_seconds`` > 300. ``lost`` is, for a miss, the part of the
    previous prompt it had to send again, priced at what re-sending cost (the part the call wrote to the
    cache at the write price, the rest at the input price) minus what reading it from the cache would
    have cost: the money the miss threw away, never more than the call spent.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from pipeline.cache import causes
from pipeline.cache.causes import VersionCutover
from pipeline.calls.prices import (
    LONG_TTL_SECONDS,
    SHORT_TTL_SECONDS,
    ModelPrice,
    PriceBook,
    database_version,
    load_prices,
)
from pipeline.display import counted
from pipeline.errors import OutcomeError, UsageError

__all__ = [
    "CAUSES",
    "DATE_SECTION",
    "HIT_SHARE",
    "AnalysisConfig",
    "CacheReport",
    "Effect",
    "agreement",
    "analyze",
    "cache_cliffs",
    "cause_table",
    "classify",
    "cost_by_cause",
    "daily_rates",
    "did_effect",
    "group_rates",
    "load_calls",
]

HIT_SHARE = causes.cache_calls.HIT_SHARE
DATE_SECTION = causes.cache_calls.DATE_SECTION
CAUSES: tuple[str, ...] = causes.CAUSES
_COLUMNS = (
    "call_id", "source", "session_id", "at", "model", "prompt_tokens", "cached_tokens",
    "cache_write_tokens", "changed_sections", "true_cause", "cache_write_1h_tokens", "completion_tokens", "line_no",
)
_INT_COLUMNS = ("prompt_tokens", "cached_tokens", "cache_write_tokens", "cache_write_1h_tokens", "completion_tokens", "line_no")
_CELLS = (("crossing", "before"), ("crossing", "after"), ("other", "before"), ("other", "after"))


class AnalysisConfig(BaseModel):
    """Inputs of one analysis (defaults as INTERFACES.md fixes them for ``cache-report``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # None (and no cutover_version): every call counts as before (rates and causes, no effect).
    cutover: dt.date | None
    cutover_version: VersionCutover | None = None
    # The time zone of sessions whose transcript records none.
    tz: str = "UTC"
    # None: the TTL in force (an hour after a 1-hour write, else the provider's default).
    ttl_seconds: int | None = Field(None, gt=0)
    provider: str = "anthropic"
    source: str | None = None
    hit_share: float = Field(HIT_SHARE, gt=0, le=1)
    min_sessions: int = Field(5, ge=1)
    min_calls: int = Field(20, ge=1)
    bootstrap: int = Field(1000, ge=0, le=100_000)
    confidence: float = Field(0.95, gt=0, lt=1)
    seed: int = 0

    @property
    def price_ttl(self) -> int:
        """The TTL whose write price a call pays when it does not report its own split."""
        return self.ttl_seconds or SHORT_TTL_SECONDS


class Effect(BaseModel):
    """Difference-in-differences of cached shares with a session-bootstrap interval."""

    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    bootstrap: int
    weighting: str
    sessions: int
    calls: dict[str, int]
    shares: dict[str, float | None]
    share_ci: dict[str, tuple[float, float] | None] = Field(
        default_factory=dict, description="bootstrap interval of each cell's cached share (only above the floors)"
    )
    cell_sessions: dict[str, int] = Field(default_factory=dict, description="sessions with a call in each cell")
    reason: str | None = Field(None, description="why there is no estimate")
    resampled_sessions: int = Field(0, description="sessions the bootstrap resampled")
    min_sessions: int = 5
    min_calls: int = 20


class CacheReport(BaseModel):
    """What ``pipeline cache-report --json`` prints and the notebook writes as metrics."""

    inputs: dict[str, Any]
    calls: int
    sessions: int
    effect: Effect
    effect_requests: Effect
    rates: dict[str, Any]
    causes: dict[str, dict[str, Any]]
    cost: dict[str, Any]
    agreement: dict[str, Any] | None = None
    simulation: dict[str, Any] | None = None
    notes: list[str] = Field(default_factory=list, description="why a figure is missing or may mislead")
    time_zones: dict[str, Any] = Field(default_factory=dict, description="where each session's time zone came from")
    left_out: dict[str, int] = Field(
        default_factory=dict,
        description="calls not analysed: `undated` (no time) and `no_session` (no session or conversation id)",
    )


# --------------------------------------------------------------------------- loading


def load_calls(*, db: str | Path | None = None, calls: str | Path | None = None, source: str | None = None) -> pl.LazyFrame:
    """llm_calls rows as a LazyFrame, from a Parquet/JSONL file (``calls``) or the warehouse (``db``).

    The warehouse is opened read-only and closed before this returns; only the columns the
    analysis uses are read.
    """
    if db is not None and calls is not None:
        raise UsageError("give either --db or --calls, not both")
    if calls is not None:
        frame = _scan_file(Path(calls))
    else:
        frame = _read_warehouse(db, source)
    if source is not None:
        frame = frame.filter(pl.col("source") == source)
    return frame


def _scan_file(path: Path) -> pl.LazyFrame:
    from pipeline.calls import files

    if not path.is_file():
        raise UsageError(f"no calls file at {path}; pass a Parquet, JSONL or CSV file of llm_calls rows")
    frame = files.scan(path)  # the same reader table as `pipeline import-calls`
    names = frame.collect_schema().names()
    missing = [c for c in ("session_id", "at", "prompt_tokens", "cached_tokens") if c not in names]
    if missing:
        raise UsageError(f"{path} lacks the llm_calls column(s) {', '.join(missing)}")
    return _normalize(frame, names)


def _read_warehouse(db: str | Path | None, source: str | None) -> pl.LazyFrame:
    from pipeline.warehouse import db as warehouse

    cols = ", ".join(f'"{c}"' for c in _COLUMNS)
    with warehouse.reading(db) as con:
        frame = warehouse.frame(
            con, f"SELECT {cols} FROM llm_calls WHERE (?::VARCHAR IS NULL OR source = ?)", [source, source]
        )
    return _normalize(frame.lazy(), frame.columns)


def _normalize(frame: pl.LazyFrame, names: list[str]) -> pl.LazyFrame:
    """Bring any llm_calls-shaped input to the types the analysis expects."""
    schema = frame.collect_schema()
    exprs: list[pl.Expr] = []
    for name in _COLUMNS:
        if name not in names:
            dtype = pl.List(pl.String) if name == "changed_sections" else pl.String if name not in _INT_COLUMNS else pl.Int64
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    at_type = schema["at"]
    if at_type == pl.String:
        at = pl.col("at").str.to_datetime(time_zone="UTC", time_unit="us")
    elif isinstance(at_type, pl.Datetime) and at_type.time_zone is None:
        at = pl.col("at").dt.replace_time_zone("UTC")
    else:
        at = pl.col("at").dt.convert_time_zone("UTC")
    exprs.append(at.alias("at"))
    for name in _INT_COLUMNS:
        if name in names:
            exprs.append(pl.col(name).cast(pl.Int64))
    if "changed_sections" in names and schema["changed_sections"] == pl.String:
        # a CSV cell holds the list as JSON text, as `import-calls` reads it
        exprs.append(pl.col("changed_sections").str.json_decode(pl.List(pl.String)))
    elif "changed_sections" in names and schema["changed_sections"] != pl.List(pl.String):
        exprs.append(pl.col("changed_sections").cast(pl.List(pl.String)))
    return frame.with_columns(exprs).select(_COLUMNS)


# --------------------------------------------------------------------------- classification


def classify(
    calls: pl.LazyFrame | pl.DataFrame,
    *,
    cutover: dt.date | None = None,
    cutover_version: VersionCutover | None = None,
    tz: str = "UTC",
    ttl_seconds: int | None = None,
    hit_share: float = HIT_SHARE,
) -> pl.LazyFrame:
    """A call log without transcripts, classified (:func:`pipeline.cache.causes.classify`) and
    split by ``period``; calls without a time or a session are dropped (``analyze`` counts them)."""
    frame = causes.classify(calls, hit_share=hit_share, ttl_seconds=ttl_seconds, tz=tz)
    return causes.with_period(frame, cutover=cutover, cutover_version=cutover_version).lazy()


# --------------------------------------------------------------------------- rates


def _shared(frame: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """The calls that count in cache shares: a model that never reports caching has no share."""
    return frame.lazy().filter(pl.col("cache_reported"))


def _stats(frame: pl.DataFrame | pl.LazyFrame, by: list[str] | None = None) -> pl.DataFrame:
    aggs = [
        pl.len().alias("calls"),
        pl.col("session_id").n_unique().alias("sessions"),
        pl.col("prompt_tokens").sum().alias("prompt_tokens"),
        pl.col("cached_tokens").fill_null(0).sum().alias("cached_tokens"),
        (pl.col("cached_tokens").fill_null(0).sum() / pl.col("prompt_tokens").sum()).alias("token_share"),
        pl.col("share").mean().alias("request_share"),
        (pl.col("cause") == "hit").mean().alias("hit_rate"),
    ]
    lf = frame.lazy()
    out = lf.group_by(by).agg(aggs).sort(by, nulls_last=True) if by else lf.select(aggs)
    return out.collect()


def _records(frame: pl.DataFrame) -> dict[str, Any]:
    row = frame.row(0, named=True) if frame.height else {}
    return {k: _clean(v) for k, v in row.items()}


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _group(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Within-TTL continuations, labelled crossing (first call on a new date) or other."""
    return frame.filter(pl.col("continuation")).with_columns(
        pl.when(pl.col("crossing")).then(pl.lit("crossing")).otherwise(pl.lit("other")).alias("group")
    )


def group_rates(classified: pl.DataFrame) -> dict[str, Any]:
    """Rates overall, by period, for crossing vs other continuations before and after, and by harness."""
    shared = _shared(classified)
    out: dict[str, Any] = {"overall": _records(_stats(shared))}
    out["no_cache_reported"] = {
        "calls": int(classified.filter(~pl.col("cache_reported")).height),
        "sessions": int(classified.filter(~pl.col("cache_reported"))["session_id"].n_unique()),
        "models": sorted({str(m) for m in classified.filter(~pl.col("cache_reported"))["model"].drop_nulls().to_list()}),
    }
    by_period = _stats(shared.filter(pl.col("period").is_not_null()), ["period"])
    out["by_period"] = {r["period"]: {k: _clean(v) for k, v in r.items() if k != "period"} for r in by_period.iter_rows(named=True)}
    groups = _stats(_group(shared.filter(pl.col("period").is_in(["before", "after"]))), ["group", "period"])
    cells: dict[str, dict[str, Any]] = {"crossing": {}, "other": {}}
    for r in groups.iter_rows(named=True):
        cells[r["group"]][r["period"]] = {k: _clean(v) for k, v in r.items() if k not in ("group", "period")}
    out["groups"] = cells
    out["by_harness"] = harness_rates(classified)
    return out


def _era() -> pl.Expr:
    """Where the harness put the date the model sees, as the transcript shows it."""
    return (
        pl.when(pl.col("harness") == "claude-code")
        .then(pl.when(pl.col("date_in_system")).then(pl.lit("date in system prompt (≤ 2.0)"))
              .otherwise(pl.lit("date notice in conversation (2.1+)")))
        .when(pl.col("harness") == "codex")
        .then(pl.when(pl.col("session_seen")).then(pl.lit("date in environment context"))
              .otherwise(pl.lit("no date in context")))
        .otherwise(pl.lit("unknown harness"))
    )


def harness_rates(classified: pl.DataFrame) -> list[dict[str, Any]]:
    """Per harness and date placement (and per version inside it): the crossing and other cached
    shares of within-TTL continuations, each with its calls and sessions: the anchoring that
    harnesses shipped, visible without knowing a deploy date."""
    lf = _shared(classified).with_columns(
        pl.col("seen_date").is_not_null().any().over("session_id").alias("session_seen"),
        pl.col("harness").fill_null("(no transcript)"),
    ).with_columns(_era().alias("era"))
    continuations = _group(lf)
    versions = lf.group_by(["harness", "era"]).agg(
        pl.col("harness_version").drop_nulls().unique().alias("versions"),
        pl.len().alias("calls"), pl.col("session_id").n_unique().alias("sessions"),
    ).collect()
    cells = _stats(continuations, ["harness", "era", "group"])
    out: list[dict[str, Any]] = []
    for row in versions.sort(["harness", "era"]).iter_rows(named=True):
        keyed = sorted(row["versions"], key=lambda v: causes.parse_version(v) or ((0,), 0, ""))
        entry: dict[str, Any] = {
            "harness": row["harness"], "era": row["era"], "calls": row["calls"], "sessions": row["sessions"],
            "versions": f"{keyed[0]} – {keyed[-1]}" if len(keyed) > 1 else (keyed[0] if keyed else None),
        }
        for group in ("crossing", "other"):
            match = cells.filter((pl.col("harness") == row["harness"]) & (pl.col("era") == row["era"]) & (pl.col("group") == group))
            rec = _records(match) if match.height else {"calls": 0, "sessions": 0, "token_share": None}
            entry[group] = {"calls": rec["calls"], "sessions": rec["sessions"], "token_share": rec.get("token_share")}
        out.append(entry)
    return out


def daily_rates(classified: pl.DataFrame) -> pl.DataFrame:
    """Per local day (each session's own zone): calls, token- and request-weighted cached share, hit rate."""
    return _stats(_shared(classified), ["local_date"])


def cause_table(classified: pl.DataFrame) -> dict[str, dict[str, Any]]:
    stats = _stats(classified, ["cause"])
    total = classified.height or 1
    out: dict[str, dict[str, Any]] = {}
    for cause in CAUSES:
        match = stats.filter(pl.col("cause") == cause)
        row: dict[str, Any] = _records(match) if match.height else {"calls": 0, "sessions": 0, "prompt_tokens": 0, "cached_tokens": 0}
        row.pop("cause", None)
        row["share_of_calls"] = row["calls"] / total
        out[cause] = row
    return out


# --------------------------------------------------------------------------- effect


def _session_cells(classified: pl.DataFrame) -> np.ndarray:
    """Per session and cell: Σ cached, Σ prompt, Σ per-call share, call count (n_sessions × 4 × 4)."""
    cell = (
        pl.when(pl.col("crossing")).then(pl.lit(0)).otherwise(pl.lit(2))
        + pl.when(pl.col("period") == "after").then(pl.lit(1)).otherwise(pl.lit(0))
    ).alias("cell")
    sub = _shared(classified).filter(pl.col("continuation") & pl.col("period").is_in(["before", "after"]))
    agg = (
        sub.with_columns(cell)
        .group_by(["session_id", "cell"])
        .agg(
            pl.col("cached_tokens").fill_null(0).sum().cast(pl.Float64).alias("cached"),
            pl.col("prompt_tokens").sum().cast(pl.Float64).alias("prompt"),
            pl.col("share").fill_null(0).sum().alias("share_sum"),
            pl.len().cast(pl.Float64).alias("n"),
        )
        .with_columns(pl.col("session_id").rank("dense").cast(pl.Int64).sub(1).alias("sid"))
        .collect()
    )
    n_active = agg["sid"].n_unique() if agg.height else 0  # sid is a dense rank from 0
    values = np.zeros((n_active, 4, 4))
    if agg.height:
        sid = agg["sid"].to_numpy()
        cells = agg["cell"].to_numpy()
        for j, name in enumerate(("cached", "prompt", "share_sum", "n")):
            values[sid, cells, j] = agg[name].to_numpy()
    return values


def _did(totals: np.ndarray, numerator: int, denominator: int) -> np.ndarray:
    """DiD over the last two axes of ``totals`` (..., 4 cells, 4 sums); NaN where a cell is empty."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = totals[..., numerator] / totals[..., denominator]
    return (share[..., 1] - share[..., 0]) - (share[..., 3] - share[..., 2])


def did_effect(
    classified: pl.DataFrame,
    *,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    min_sessions: int = 5,
    min_calls: int = 20,
) -> tuple[Effect, Effect]:
    """Token-weighted and request-weighted difference-in-differences with session-bootstrap CIs.

    No estimate (and no interval) unless each of the four cells holds ``min_sessions`` sessions
    and ``min_calls`` calls: below that, one session's luck is the effect. A cell's own share
    keeps its value, and gets an interval only above the same floors."""
    values = _session_cells(classified)
    totals = values.sum(axis=0)
    counts = {f"{g}_{p}": int(totals[i, 3]) for i, (g, p) in enumerate(_CELLS)}
    cell_sessions = {f"{g}_{p}": int((values[:, i, 3] > 0).sum()) for i, (g, p) in enumerate(_CELLS)}
    short = [
        f"{_CELL_WORDS[key]}: {counted(cell_sessions[key], 'session')}, {counted(counts[key], 'call')}"
        for key in counts if cell_sessions[key] < min_sessions or counts[key] < min_calls
    ]
    reason = (
        f"too few to estimate: each of the four cells needs at least {min_sessions} sessions and {min_calls} calls "
        f"(--min-sessions, --min-calls); " + "; ".join(short)
    ) if short else None
    enough = {key: cell_sessions[key] >= min_sessions and counts[key] >= min_calls for key in counts}
    results: list[Effect] = []
    run = bootstrap and values.shape[0] and any(enough.values())
    replicates = _bootstrap_totals(values, bootstrap, seed) if run else None
    alpha = (1 - confidence) / 2
    for weighting, num, den in (("tokens", 0, 1), ("requests", 2, 3)):
        with np.errstate(divide="ignore", invalid="ignore"):
            shares = totals[:, num] / totals[:, den]
        estimate = float(_did(totals, num, den))
        ci_low = ci_high = None
        share_ci: dict[str, tuple[float, float] | None] = {}
        if replicates is not None:
            if math.isfinite(estimate) and reason is None:
                draws = _did(replicates, num, den)
                draws = draws[np.isfinite(draws)]
                if draws.size:
                    ci_low, ci_high = (float(x) for x in np.quantile(draws, [alpha, 1 - alpha]))
            with np.errstate(divide="ignore", invalid="ignore"):
                cell_draws = replicates[..., num] / replicates[..., den]
            for i, (g, p) in enumerate(_CELLS):
                finite = cell_draws[:, i][np.isfinite(cell_draws[:, i])]
                share_ci[f"{g}_{p}"] = (
                    (float(np.quantile(finite, alpha)), float(np.quantile(finite, 1 - alpha)))
                    if finite.size and enough[f"{g}_{p}"] else None
                )
        results.append(
            Effect(
                estimate=estimate if math.isfinite(estimate) and reason is None else None,
                ci_low=ci_low,
                ci_high=ci_high,
                confidence=confidence,
                bootstrap=bootstrap,
                weighting=weighting,
                sessions=values.shape[0],
                calls=counts,
                shares={f"{g}_{p}": (float(s) if math.isfinite(s) else None) for (g, p), s in zip(_CELLS, shares, strict=True)},
                share_ci=share_ci,
                cell_sessions=cell_sessions,
                reason=reason,
                resampled_sessions=int(values.shape[0]) if replicates is not None else 0,
                min_sessions=min_sessions,
                min_calls=min_calls,
            )
        )
    return results[0], results[1]


def _bootstrap_totals(values: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """Cell totals of ``replicates`` resamples of whole sessions (with replacement)."""
    n = values.shape[0]
    flat = values.reshape(n, -1)
    rng = np.random.default_rng(seed)
    out = np.empty((replicates, flat.shape[1]))
    # Chunks keep the count matrix near 64 MB whatever the number of sessions.
    chunk = max(1, min(replicates, 8_000_000 // max(n, 1)))
    for start in range(0, replicates, chunk):
        stop = min(replicates, start + chunk)
        weights = np.empty((stop - start, n))
        for r in range(stop - start):
            weights[r] = np.bincount(rng.integers(0, n, size=n), minlength=n)
        out[start:stop] = weights @ flat
    return out.reshape(replicates, *values.shape[1:])


# --------------------------------------------------------------------------- cost, agreement, cliffs


def _split_column(frame: pl.LazyFrame | pl.DataFrame) -> pl.Expr:
    """``cache_write_1h_tokens`` where the frame has it, else a column of nulls (split unknown)."""
    names = frame.collect_schema().names()
    if "cache_write_1h_tokens" in names:
        return pl.col("cache_write_1h_tokens").cast(pl.Int64)
    return pl.lit(None, dtype=pl.Int64).alias("cache_write_1h_tokens")


def _price_columns(classified: pl.DataFrame, prices: PriceBook, ttl_seconds: int) -> tuple[pl.DataFrame, dict[str, Any]]:
    """One price row per (source, model, day) the calls have, and the prices listed by model.

    A call is priced by its own provider and model at the price in force on its (UTC) day; a call
    without a model, or with one the price database does not know, gets no price (nulls)."""
    keys = (
        classified.lazy()
        .select(pl.col("source").cast(pl.String), pl.col("model").cast(pl.String), pl.col("at").dt.date().alias("day"))
        .unique()
        .sort(["model", "day", "source"], nulls_last=True)
        .collect()
    )
    rows: list[dict[str, Any]] = []
    latest: dict[str, tuple[Any, ModelPrice]] = {}
    width = 0
    for source, model, day in keys.iter_rows():
        price = prices.price(model, source=source, when=day)
        row: dict[str, Any] = {"source": source, "model": model, "day": day}
        if price is not None:
            row.update(p_in=price.input, p_out=price.output, p_read=price.cache_read, p_write=price.write_price(ttl_seconds),
                       p_write5m=price.write_price(SHORT_TTL_SECONDS), p_write1h=price.write_price(LONG_TTL_SECONDS))
            for i, tier in enumerate(price.tiers, 1):
                t = price.model_copy(update={k: v for k, v in tier.model_dump().items() if k != "above_input_tokens" and v is not None})
                row.update({f"t{i}_start": tier.above_input_tokens, f"t{i}_in": t.input, f"t{i}_out": t.output, f"t{i}_read": t.cache_read,
                            f"t{i}_write": t.write_price(ttl_seconds), f"t{i}_write5m": t.write_price(SHORT_TTL_SECONDS),
                            f"t{i}_write1h": t.write_price(LONG_TTL_SECONDS)})
            width = max(width, len(price.tiers))
            if model is not None and (model not in latest or (day or dt.date.min) >= (latest[model][0] or dt.date.min)):
                latest[model] = (day, price)
        rows.append(row)
    schema: dict[str, Any] = {"source": pl.String, "model": pl.String, "day": pl.Date, "p_in": pl.Float64, "p_out": pl.Float64,
                              "p_read": pl.Float64, "p_write": pl.Float64, "p_write5m": pl.Float64, "p_write1h": pl.Float64}
    for i in range(1, width + 1):
        schema.update({f"t{i}_start": pl.Int64, f"t{i}_in": pl.Float64, f"t{i}_out": pl.Float64, f"t{i}_read": pl.Float64, f"t{i}_write": pl.Float64,
                       f"t{i}_write5m": pl.Float64, f"t{i}_write1h": pl.Float64})
    frame = pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema)
    listed = {m: price.listed() for m, (_day, price) in sorted(latest.items())}
    return frame, listed


def cost_by_cause(
    classified: pl.DataFrame, *, provider: str = "anthropic", ttl_seconds: int = 300, prices: PriceBook | None = None
) -> dict[str, Any]:
    """What each cause cost (USD), every call at its own provider's price for its model on its day.

    ``spend_usd``: the list-price spend, split into ``input_usd`` (input neither read from nor
    written to the cache), ``cache_read_usd``, ``cache_write_5m_usd``, ``cache_write_1h_usd`` and
    ``output_usd``: a call whose writes are split by TTL (``cache_write_1h_tokens`` known) pays the
    1-hour price for its 1-hour part and the 5-minute price for the rest; any other call pays the
    ``ttl_seconds`` price. The same parts by model, day and session (``by_model``, ``by_day``,
    ``by_session``, the 200 largest of each, with ``counterfactual_usd``: the spend had every miss
    read its previous prompt from the cache).
    ``lost_usd`` (misses only): the tokens of the previous prompt that this call did not read back
    (``min(previous prompt, prompt) − cached``), priced as what re-sending them cost (the call's
    average write price when the provider reports writes, else input price) minus what reading them would have cost.
    A price above a prompt-length threshold (long context) applies to the calls above it. Calls
    whose model has no price are left out of the sums and counted in ``unpriced``; ``provider``
    is only tried for calls that neither their source nor their model name place.
    """
    book = prices or load_prices(fallback_provider=provider)
    if book.fallback_provider is None:
        book.fallback_provider = provider
    price_frame, listed = _price_columns(classified, book, ttl_seconds)
    tiers = sum(1 for c in price_frame.columns if c.endswith("_start"))
    prompt = pl.col("prompt_tokens")

    def tiered(kind: str) -> pl.Expr:
        expr = pl.col(f"p_{kind}")
        for i in range(1, tiers + 1):  # a higher threshold, once passed, wins
            expr = pl.when(pl.col(f"t{i}_start").is_not_null() & (prompt > pl.col(f"t{i}_start"))).then(pl.col(f"t{i}_{kind}")).otherwise(expr)
        return expr

    write = pl.col("cache_write_tokens").fill_null(0)
    split = pl.col("cache_write_tokens").is_not_null() & pl.col("cache_write_1h_tokens").is_not_null()
    write_1h = pl.when(split).then(pl.min_horizontal("cache_write_1h_tokens", "cache_write_tokens")).otherwise(0)
    cached = pl.col("cached_tokens").fill_null(0)
    uncached = (prompt - cached - write).clip(lower_bound=0)
    resent = pl.when(~pl.col("miss")).then(0).otherwise(
        (pl.min_horizontal("prev_prompt", "prompt_tokens") - cached).clip(lower_bound=0).fill_null(0)
    )
    keyed = classified.lazy()
    keyed = keyed.with_columns(_split_column(keyed)).with_columns(
        pl.col("source").cast(pl.String).alias("_source"), pl.col("model").cast(pl.String).alias("_model"),
        pl.col("at").dt.date().alias("_day"),
    )
    per_call = keyed.join(
        price_frame.lazy().rename({"source": "_source", "model": "_model", "day": "_day"}),
        on=["_source", "_model", "_day"], how="left", nulls_equal=True,
    ).with_columns(
        tiered("in").alias("u_in"), tiered("out").alias("u_out"), tiered("read").alias("u_read"), tiered("write").alias("u_write"),
        tiered("write5m").alias("u_write5m"), tiered("write1h").alias("u_write1h"),
    )
    # What the call's writes cost (USD × 1e6): each TTL at its own price where the split is known.
    write_cost = pl.when(split).then((write - write_1h) * pl.col("u_write5m") + write_1h * pl.col("u_write1h")).otherwise(
        write * pl.col("u_write")
    )
    # What the re-sent tokens cost, as the call paid for them: those it wrote to the cache at the write
    # price, the rest at the input price (pricing every re-sent token as a write made a miss lose more
    # than the call spent when most of what it sent again was not written).
    write_price = (
        pl.when(split & (write > 0)).then(write_cost / write)
        .otherwise(pl.col("u_write"))
    )
    resent_written = pl.min_horizontal(resent, write)
    resend_cost = resent_written * write_price + (resent - resent_written) * pl.col("u_in")
    split_5m = pl.when(split).then((write - write_1h) * pl.col("u_write5m")).otherwise(
        pl.when(pl.lit(ttl_seconds > SHORT_TTL_SECONDS)).then(0.0).otherwise(write * pl.col("u_write"))
    )
    split_1h = pl.when(split).then(write_1h * pl.col("u_write1h")).otherwise(
        pl.when(pl.lit(ttl_seconds > SHORT_TTL_SECONDS)).then(write * pl.col("u_write")).otherwise(0.0)
    )
    per_call = per_call.with_columns(
        uncached.alias("uncached"),
        write.alias("written"),
        write_1h.alias("written_1h"),
        (split & (write > 0)).alias("split_writes"),
        (~split & (write > 0)).alias("unsplit_writes"),
        (uncached * pl.col("u_in") / 1e6).alias("input_usd"),
        (cached * pl.col("u_read") / 1e6).alias("cache_read_usd"),
        (split_5m / 1e6).alias("cache_write_5m_usd"),
        (split_1h / 1e6).alias("cache_write_1h_usd"),
        (pl.col("completion_tokens").fill_null(0) * pl.col("u_out") / 1e6).alias("output_usd"),
        resent.alias("resent"),
        ((resend_cost - resent * pl.col("u_read")) / 1e6).alias("lost"),
        pl.col("u_in").is_null().alias("unpriced"),
    ).with_columns(
        pl.sum_horizontal("input_usd", "cache_read_usd", "cache_write_5m_usd", "cache_write_1h_usd", "output_usd").alias("spend"),
    )
    # Summed once at the finest grain any table below needs (a cell: one cause of one session's
    # model on one day): every table is then a sum of cells, and no priced copy of ten million
    # calls is ever held.
    cells = per_call.group_by("cause", "miss", "session_id", "_model", "_day", "unpriced").agg(
        pl.len().alias("calls"),
        *[pl.col(c).sum() for c in ("uncached", "written", "written_1h", "spend", *_SPEND_PARTS, "resent", "lost")],
        pl.col("split_writes").sum().alias("split_calls"),
        pl.col("written").filter(pl.col("split_writes")).sum().alias("split_tokens"),
        pl.col("unsplit_writes").sum().alias("unsplit_calls"),
        pl.col("written").filter(pl.col("unsplit_writes")).sum().alias("unsplit_tokens"),
    ).collect().lazy()
    parts = [pl.col(c).sum() for c in _SPEND_PARTS]
    stats = (
        cells.group_by("cause")
        .agg(
            pl.col("calls").sum(),
            pl.col("uncached").sum().alias("uncached_tokens"),
            pl.col("written").sum().alias("write_tokens"),
            pl.col("written_1h").sum().alias("write_1h_tokens"),
            pl.col("spend").sum().alias("spend_usd"),
            *parts,
            pl.col("resent").sum().alias("resent_tokens"),
            pl.col("lost").sum().alias("lost_usd"),
            pl.col("calls").filter(pl.col("unpriced")).sum().alias("unpriced_calls"),
        )
        .with_columns(pl.col("cause").cast(pl.String))
        .collect()
    )
    breakdowns = {
        name: _spend_rows(cells, key)
        for name, key in (("by_model", pl.col("_model")), ("by_day", pl.col("_day").cast(pl.String)),
                          ("by_session", pl.col("session_id")))
    }
    writes = cells.select(
        pl.col("split_calls").sum(),
        pl.col("split_tokens").sum(),
        pl.col("written_1h").sum().alias("tokens_1h"),
        pl.col("unsplit_calls").sum(),
        pl.col("unsplit_tokens").sum(),
    ).collect().row(0, named=True)
    unpriced = (
        cells.filter(pl.col("unpriced")).group_by("_model").agg(pl.col("calls").sum().alias("n"))
        .sort(["n", "_model"], descending=[True, False])
        .collect()
    )
    empty = {"calls": 0, "uncached_tokens": 0, "write_tokens": 0, "write_1h_tokens": 0, "spend_usd": 0.0, "resent_tokens": 0, "lost_usd": 0.0,
             "unpriced_calls": 0, **{c: 0.0 for c in _SPEND_PARTS}}
    by_cause: dict[str, dict[str, Any]] = {}
    for cause in CAUSES:
        match = stats.filter(pl.col("cause") == cause)
        row = _records(match) if match.height else dict(empty)
        row.pop("cause", None)
        by_cause[cause] = row
    misses = list(causes.MISS_CAUSES)
    total = {c: sum(by_cause[k][c] or 0.0 for k in CAUSES) for c in ("spend_usd", *_SPEND_PARTS, "lost_usd")}
    return {
        "spend": "list price: uncached input + cache reads + cache writes (5 minutes and 1 hour) + output",
        "total": total,
        **breakdowns,
        "sessions_priced": int(cells.select(pl.col("session_id").n_unique()).collect().item()),
        "currency": "USD",
        "provider": "per call: its source's provider, else its model's",
        "fallback_provider": book.fallback_provider,
        "database": f"genai-prices {database_version()}",
        "write_price": "1h" if ttl_seconds > SHORT_TTL_SECONDS else "5m",
        # Which write price each call paid: its own TTL split where the call reports one, else write_price.
        "write_split": {
            "calls_split": int(writes["split_calls"] or 0),
            "write_5m_tokens": int((writes["split_tokens"] or 0) - (writes["tokens_1h"] or 0)),
            "write_1h_tokens": int(writes["tokens_1h"] or 0),
            "calls_unsplit": int(writes["unsplit_calls"] or 0),
            "unsplit_write_tokens": int(writes["unsplit_tokens"] or 0),
        },
        "prices": listed,
        "unpriced": {
            "calls": int(unpriced["n"].sum()) if unpriced.height else 0,
            "models": {("(no model)" if m is None else m): int(n) for m, n in unpriced.iter_rows()},
        },
        "by_cause": by_cause,
        "misses_spend_usd": sum(by_cause[c]["spend_usd"] or 0.0 for c in misses),
        "misses_lost_usd": sum(by_cause[c]["lost_usd"] or 0.0 for c in misses),
    }


_SPEND_PARTS = ("input_usd", "cache_read_usd", "cache_write_5m_usd", "cache_write_1h_usd", "output_usd")


# Rows of the largest spenders kept per breakdown in the report (a bulk log has 100,000s of sessions).
SPEND_ROWS = 200


def _spend_rows(cells: pl.LazyFrame, key: pl.Expr) -> list[dict[str, Any]]:
    """List-price spend by part for each value of ``key`` (the SPEND_ROWS largest), with what
    misses lost and the counterfactual: the same calls had every miss read the previous prompt
    from the cache. ``cells``: the priced calls summed by cause, session, model and day."""
    rows = (
        cells.group_by(key.alias("key"))
        .agg(pl.col("calls").sum(), pl.col("calls").filter(pl.col("miss")).sum().alias("misses"),
             pl.col("spend").sum().alias("spend_usd"), *[pl.col(c).sum() for c in _SPEND_PARTS],
             pl.col("lost").sum().alias("lost_usd"))
        .with_columns((pl.col("spend_usd") - pl.col("lost_usd")).alias("counterfactual_usd"))
        # ties (unpriced calls spend nothing, copied sessions spend the same) in the order of their
        # key, the same on every run: a sum's last bits depend on the order its rows came in
        .sort([pl.col("spend_usd").round(6), "calls", "key"], descending=[True, True, False], nulls_last=True)
        .head(SPEND_ROWS)
        .collect()
    )
    return [{k: _clean(v) for k, v in r.items()} for r in rows.iter_rows(named=True)]


def agreement(classified: pl.DataFrame) -> dict[str, Any] | None:
    """Share of calls whose classification equals ``true_cause`` (simulated rows), with a confusion table."""
    known = classified.lazy().filter(pl.col("true_cause").is_not_null())
    confusion = (
        known.group_by(["true_cause", "cause"])
        .agg(pl.len().alias("n"))
        .with_columns(pl.col("true_cause").cast(pl.String), pl.col("cause").cast(pl.String))
        .collect()
    )
    total = int(confusion["n"].sum()) if confusion.height else 0
    if not total:
        return None
    agree = int(confusion.filter(pl.col("true_cause") == pl.col("cause"))["n"].sum())
    table: dict[str, dict[str, int]] = {}
    for r in confusion.sort(["true_cause", "cause"]).iter_rows(named=True):
        table.setdefault(r["true_cause"], {})[r["cause"]] = int(r["n"])
    return {"rate": agree / total, "calls": total, "agree": agree, "confusion": table}


def cache_cliffs(classified: pl.DataFrame, top: int = 10) -> pl.DataFrame:
    """Sessions with the largest single drop: previous prompt minus what this call read back (misses only)."""
    drops = classified.lazy().filter(pl.col("miss") & pl.col("prev_prompt").is_not_null()).with_columns(
        (pl.col("prev_prompt") - pl.col("cached_tokens").fill_null(0)).alias("drop_tokens")
    )
    per_session = classified.lazy().group_by("session_id").agg(
        pl.len().alias("session_calls"), (pl.col("cause") != "hit").sum().alias("session_misses")
    )
    return (
        drops.sort("drop_tokens", descending=True)
        .group_by("session_id", maintain_order=True)
        .first()
        .join(per_session, on="session_id", how="left")
        .sort(["drop_tokens", "session_id"], descending=[True, False])
        .head(top)
        .select(
            "session_id", "source", "at", "cause", "prev_prompt", "cached_tokens", "drop_tokens",
            "gap_s", "session_calls", "session_misses",
        )
        .collect()
    )


# --------------------------------------------------------------------------- all at once


def analyze(
    calls: pl.LazyFrame | pl.DataFrame,
    config: AnalysisConfig,
    *,
    prices: PriceBook | None = None,
    inputs: dict[str, Any] | None = None,
    left_out: dict[str, int] | None = None,
) -> tuple[CacheReport, pl.DataFrame]:
    """Classify once (unless ``calls`` is already classified: it has a ``cause`` column), then
    compute every figure of the report; returns the report and the classified frame. ``left_out``
    counts calls the caller already dropped (the warehouse's classification keeps only calls with
    a time and a session)."""
    lf = calls.lazy()
    if config.source is not None:
        lf = lf.filter(pl.col("source") == config.source)
    # Every figure needs to know when a call happened and which session it continues: a call
    # without a time, or without a session, is counted and left out rather than guessed at.
    counts = lf.select(
        pl.len().alias("all"),
        pl.col("at").is_null().sum().alias("undated"),
        (pl.col("at").is_not_null() & pl.col("session_id").is_null()).sum().alias("no_session"),
    ).collect().row(0, named=True)
    dropped = left_out or {}
    left_out = {"undated": int(counts["undated"]) + dropped.get("undated", 0),
                "no_session": int(counts["no_session"]) + dropped.get("no_session", 0)}
    counts["all"] += sum(dropped.values())
    lf = lf.filter(pl.col("at").is_not_null() & pl.col("session_id").is_not_null())
    if "cause" in lf.collect_schema().names():
        classified = causes.with_period(lf.collect(), cutover=config.cutover, cutover_version=config.cutover_version)
    else:
        classified = classify(
            lf, cutover=config.cutover, cutover_version=config.cutover_version, tz=config.tz,
            ttl_seconds=config.ttl_seconds, hit_share=config.hit_share,
        ).collect()
    if classified.height == 0:
        which = f" from source {config.source!r}" if config.source else ""
        if counts["all"]:
            raise OutcomeError(
                f"none of the {counts['all']:,} llm_calls rows{which} can be analysed: {left_out['undated']:,} have no time "
                f"and {left_out['no_session']:,} no session id. Import the log again mapping its time and conversation "
                "columns (pipeline import-calls … --map at=FIELD --map session_id=FIELD)"
            )
        raise UsageError(f"no llm_calls rows{which} to analyse; check --source, or ingest or simulate some calls first")
    effect, effect_requests = did_effect(
        classified, bootstrap=config.bootstrap, confidence=config.confidence, seed=config.seed,
        min_sessions=config.min_sessions, min_calls=config.min_calls,
    )
    cost = cost_by_cause(classified, provider=config.provider, ttl_seconds=config.price_ttl, prices=prices)
    report = CacheReport(
        inputs={**(inputs or {}), **config.model_dump(mode="json"),
                "cutover_version": str(config.cutover_version) if config.cutover_version else None},
        calls=classified.height,
        sessions=classified["session_id"].n_unique(),
        effect=effect,
        effect_requests=effect_requests,
        rates=group_rates(classified),
        causes=cause_table(classified),
        cost=cost,
        agreement=agreement(classified),
        notes=_notes(classified, effect, config, cost, left_out),
        left_out=left_out,
        time_zones=time_zones(classified, config.tz),
    )
    return report, classified


def time_zones(classified: pl.DataFrame, default: str) -> dict[str, Any]:
    """Where each session's time zone came from, and how many fell back to the default."""
    per = classified.group_by("session_id").agg(pl.col("tz").first(), pl.col("tz_source").first())
    by_source = dict(per.group_by("tz_source").len().iter_rows())
    zones = dict(per.group_by("tz").len().sort("len", descending=True).iter_rows())
    return {"default": default, "sessions_by_source": {k: int(v) for k, v in by_source.items()},
            "fell_back": int(by_source.get("default", 0)), "zones": {k: int(v) for k, v in zones.items()}}


_CELL_WORDS = {
    "crossing_before": "first calls on a new date before the cutover",
    "crossing_after": "first calls on a new date after the cutover",
    "other_before": "other within-TTL calls before the cutover",
    "other_after": "other within-TTL calls after the cutover",
}


def _notes(
    classified: pl.DataFrame, effect: Effect, config: AnalysisConfig, cost: dict[str, Any], left_out: dict[str, int]
) -> list[str]:
    """Plain words for what the figures alone do not say: calls left out, a missing estimate, a missing price."""
    notes: list[str] = []
    if left_out.get("undated"):
        notes.append(
            f"{left_out['undated']:,} calls have no time: they are left out of every figure here (classification, "
            "daily rates, effect, cost), which all depend on when a call happened"
        )
    if left_out.get("no_session"):
        notes.append(
            f"{left_out['no_session']:,} calls have no session id: they are left out, since without one every call "
            "would look like the first of its session (a cold start)"
        )
    periods = dict(classified.group_by("period").len().iter_rows())
    days = classified.get_column("local_date")
    first, last = days.min(), days.max()
    span = f"the calls run from {first!s} to {last!s} (each session's local date)"
    cut = f"--cutover-version {config.cutover_version}" if config.cutover_version else f"the cutover {config.cutover}"
    if config.cutover is None and config.cutover_version is None:
        notes.append(f"no cutover given, so every call counts as before it ({span}): rates, causes and the crossing "
                     "share per harness version are shown; an effect needs --cutover DATE or --cutover-version HARNESS@VERSION")
    elif not periods.get("after"):
        notes.append(f"no calls after {cut}: {span}, so there is nothing to compare")
    elif not periods.get("before"):
        notes.append(f"no calls before {cut}: {span}, so there is nothing to compare")
    elif effect.reason is not None:
        notes.append(f"no effect estimate, {effect.reason}")
    elif effect.estimate is None:
        notes.append(f"no effect estimate: a cell has no tokens to take a share of ({span})")
    skipped = classified.filter(~pl.col("cache_reported"))
    if skipped.height:
        models = sorted({str(m) for m in skipped["model"].drop_nulls().to_list()})
        # Said with the causes these calls have in the table (a session's first call is its cold_start
        # whatever its model reports), so that the note and the table agree.
        by_cause = skipped.group_by("cause").len().sort("cause")
        causes_said = ", ".join(f"{n:,} {c}" for c, n in by_cause.iter_rows())
        notes.append(
            f"{skipped.height:,} calls in {skipped['session_id'].n_unique():,} sessions come from a model that reported no "
            f"cached or written token in that session ({', '.join(models[:5]) or 'no model named'}; {causes_said} in the "
            "cause table): they are left out of every cached share"
        )
    fell_back = classified.filter(pl.col("tz_source") == "default")["session_id"].n_unique()
    if fell_back:
        notes.append(
            f"{fell_back:,} of {classified['session_id'].n_unique():,} sessions record no time zone (no date notice, "
            f"<timezone> or local file name): their days are in {config.tz} (--tz, PIPELINE_TZ)"
        )
    split, price = cost["write_split"], cost["write_price"]
    ttl_words = f"the {price} write price (--ttl {config.ttl_seconds or 'unset'})"
    if split["calls_split"]:
        notes.append(
            f"cache writes of {split['calls_split']:,} calls are priced by their own TTL split "
            f"({split['write_1h_tokens']:,} tokens written for 1 hour at the 1-hour price, {split['write_5m_tokens']:,} "
            f"for 5 minutes at the 5-minute price)"
            + (f"; the {split['unsplit_write_tokens']:,} written tokens of {split['calls_unsplit']:,} calls that do not "
               f"report a split are priced at {ttl_words}" if split["calls_unsplit"] else "")
        )
    elif split["calls_unsplit"]:
        notes.append(f"cache writes are priced at {ttl_words}: no call reports how its writes split by TTL")
    unpriced = cost["unpriced"]
    if unpriced["calls"]:
        names = list(unpriced["models"])
        notes.append(
            f"{unpriced['calls']:,} calls have no price: the price database ({cost['database']}) does not know "
            f"{', '.join(names[:5])}{', …' if len(names) > 5 else ''}, and no model is priced as another. Their cost "
            "is left out of the spend figures; add their prices with --prices FILE"
        )
    return notes
