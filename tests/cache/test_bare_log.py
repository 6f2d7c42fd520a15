"""The vectorised causes of a bare call log equal the SQL definition's, call for call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cache import causes

COMPARED = ["cause", "evidence_line_no", "crossing", "continuation", "ttl_s", "local_date", "cache_reported",
            "prev_call_id", "prev_prompt", "conversation"]
T0 = datetime(2026, 3, 1, 22, 0, tzinfo=UTC)

call = st.fixed_dictionaries({
    "session": st.sampled_from(["a", "b", "c"]),
    "step_s": st.sampled_from([0, 1, 30, 299, 301, 599, 601, 3599, 3601, 7200]),
    "model": st.sampled_from(["m1", "m2", None]),
    "prompt": st.integers(0, 5000),
    "read_share": st.sampled_from([0.0, 0.1, 0.5, 0.79, 0.8, 1.0]),
    "write": st.sampled_from([None, 0, 100]),
    "write_1h": st.sampled_from([None, 0, 50, 100]),
    "source": st.sampled_from(["simulated", "import:x", "codex"]),
    "date_named": st.booleans(),
    "line": st.one_of(st.none(), st.integers(1, 50)),
})


def _frame(rows: list[dict]) -> pl.DataFrame:
    at = T0
    out = []
    for i, r in enumerate(rows):
        at = at + timedelta(seconds=r["step_s"])
        out.append({
            "call_id": f"c{i:03d}", "source": r["source"], "session_id": r["session"], "at": at, "model": r["model"],
            "prompt_tokens": r["prompt"], "cached_tokens": int(r["prompt"] * r["read_share"]),
            "cache_write_tokens": r["write"], "cache_write_1h_tokens": r["write_1h"] if r["write"] is not None else None,
            "line_no": r["line"], "changed_sections": ["current-date"] if r["date_named"] else [],
        })
    return pl.DataFrame(out)


def _compare(frame: pl.DataFrame, **kwargs: object) -> None:
    def norm(df: pl.DataFrame) -> pl.DataFrame:
        return df.select("call_id", *COMPARED).with_columns(
            pl.col("cause").cast(pl.String), pl.col("ttl_s").cast(pl.Int64)
        ).sort("call_id")

    vectorised = norm(causes.classify(frame, **kwargs))  # type: ignore[arg-type]
    sql = norm(causes.classify_with_sql(frame, **kwargs))  # type: ignore[arg-type]
    assert vectorised.to_dicts() == sql.to_dicts()


@settings(max_examples=60, deadline=None)
@given(st.lists(call, min_size=1, max_size=25))
def test_the_twin_agrees_with_the_sql(rows: list[dict]) -> None:
    _compare(_frame(rows))


@settings(max_examples=20, deadline=None)
@given(st.lists(call, min_size=1, max_size=25), st.sampled_from([None, 120, 3600]), st.sampled_from(["UTC", "Asia/Shanghai"]),
       st.sampled_from([0.5, 0.8, 0.95]))
def test_the_twin_agrees_under_other_thresholds(rows: list[dict], ttl: int | None, tz: str, hit_share: float) -> None:
    _compare(_frame(rows), ttl_seconds=ttl, tz=tz, hit_share=hit_share)


def test_the_twin_gives_the_sql_columns_in_their_order_each_in_one_chunk() -> None:
    rows = [{"session": s, "step_s": 30, "model": "m1", "prompt": 1000, "read_share": 0.9, "write": 100, "write_1h": 0,
             "source": "simulated", "date_named": False, "line": None} for s in ("b", "a", "b", "a")]
    # Two frames glued together: the input arrives in several chunks, as a scanned file does.
    frame = pl.concat([_frame(rows[:2]), _frame(rows[2:]).with_columns(pl.col("call_id") + "x")], rechunk=False)
    vectorised = causes.classify(frame)
    sql = causes.classify_with_sql(frame)
    assert vectorised.columns == sql.columns
    assert vectorised.schema == sql.schema
    assert set(vectorised.n_chunks("all")) == {1}
    assert vectorised["conversation"].to_list() == vectorised["session_id"].to_list() == ["a", "a", "b", "b"]
    assert vectorised.select("session_id", "at", "call_id").equals(sql.select("session_id", "at", "call_id"))
