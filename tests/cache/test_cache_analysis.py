"""Cache analysis: classification from the log alone, rates, the difference-in-differences and its
bootstrap interval, costs, the `cache-report` verb, and acceptance against the simulator's truth."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cache.analysis import (
    CAUSES,
    HIT_SHARE,
    AnalysisConfig,
    analyze,
    cache_cliffs,
    classify,
    cost_by_cause,
    daily_rates,
    load_calls,
)
from pipeline.cache.report import render_table
from pipeline.cache.workload import CALLS_SCHEMA, WorkloadConfig, simulate, write_calls
from pipeline.cli.main import main
from pipeline.warehouse import db

T0 = dt.datetime(2026, 10, 12, 23, 50, tzinfo=dt.UTC)


def _calls(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """llm_calls rows from short dicts: session, seconds after T0, prompt, cached, [changed]."""
    data = []
    for i, r in enumerate(rows):
        data.append({
            "call_id": f"c{i:04d}",
            "source": r.get("source", "simulated"),
            "session_id": r["s"],
            "at": T0 + dt.timedelta(seconds=r["t"]),
            "model": r.get("model", "claude-sonnet-4-5"),
            "prompt_tokens": r["p"],
            "cached_tokens": r["c"],
            "cache_write_tokens": r.get("w", r["p"] - r["c"]),
            "completion_tokens": 10,
            "latency_ms": 100.0,
            "run_id": None, "batch_id": None, "system_fp": None, "tools_fp": None, "prefix_fp": None,
            "changed_sections": r.get("changed"),
            "true_cause": r.get("truth"),
            "line_no": None, "origin": None,
        })
    return pl.DataFrame(data, schema=CALLS_SCHEMA)


def _causes(rows: list[dict[str, Any]], **kw: Any) -> list[str]:
    out = classify(_calls(rows), **kw).collect()
    return out.sort("at")["cause"].cast(pl.String).to_list()


# --------------------------------------------------------------------------- classification


def test_each_cause_from_the_log() -> None:
    rows = [
        {"s": "a", "t": 0, "p": 10_000, "c": 0},  # first call of the session
        {"s": "a", "t": 60, "p": 11_000, "c": 10_000},  # reads the whole previous prompt
        {"s": "a", "t": 200, "p": 12_000, "c": 0},  # 23:53:20, same day, nothing read: other prefix change
        {"s": "a", "t": 650, "p": 13_000, "c": 0},  # 00:00:50, 450 s later: past the TTL
        {"s": "a", "t": 700, "p": 14_000, "c": 13_000},
        {"s": "a", "t": 800, "p": 15_000, "c": 2_000, "changed": ["current-date"]},  # names the date section
    ]
    assert _causes(rows) == ["cold_start", "hit", "prefix_change", "ttl_expiry", "hit", "date_change"]


def test_date_change_needs_a_new_local_day_within_the_ttl() -> None:
    rows = [
        {"s": "a", "t": 0, "p": 10_000, "c": 0},  # 23:50 UTC
        {"s": "a", "t": 240, "p": 11_000, "c": 10_000},  # 23:54
        {"s": "a", "t": 480, "p": 12_000, "c": 0},  # 23:58, still the same day
        {"s": "a", "t": 720, "p": 13_000, "c": 0},  # 00:02 the next day: the first call after midnight
    ]
    assert _causes(rows) == ["cold_start", "hit", "prefix_change", "date_change"]
    # In Shanghai (UTC+8) the same calls are at 07:50..08:02: no midnight, so no date change.
    assert _causes(rows, tz="Asia/Shanghai") == ["cold_start", "hit", "prefix_change", "prefix_change"]
    crossing = classify(_calls(rows)).collect().sort("at")["crossing"].to_list()
    assert crossing == [False, False, False, True]


def test_miss_threshold_is_a_share_of_the_previous_prompt() -> None:
    at_threshold = int(HIT_SHARE * 10_000)
    rows = [
        {"s": "a", "t": 0, "p": 10_000, "c": 0},
        {"s": "a", "t": 10, "p": 10_500, "c": at_threshold},  # exactly the threshold: a hit
        {"s": "b", "t": 0, "p": 10_000, "c": 0},
        {"s": "b", "t": 10, "p": 10_500, "c": at_threshold - 1},  # just below: a miss
        # A short prompt after a long one: reading the system prompt back is still a miss, and a
        # prompt below half the previous one is a compaction.
        {"s": "c", "t": 0, "p": 60_000, "c": 55_000},
        {"s": "c", "t": 10, "p": 9_000, "c": 7_000},
    ]
    out = classify(_calls(rows)).collect().sort(["session_id", "at"])
    assert out["cause"].cast(pl.String).to_list() == ["cold_start", "hit", "cold_start", "prefix_change", "cold_start", "compaction"]


def test_unknown_cached_tokens_count_as_nothing_read() -> None:
    frame = _calls([{"s": "a", "t": 0, "p": 5000, "c": 0}, {"s": "a", "t": 10, "p": 6000, "c": 0}])
    frame = frame.with_columns(pl.lit(None, pl.Int64).alias("cached_tokens"))
    assert classify(frame).collect()["cause"].cast(pl.String).to_list() == ["cold_start", "prefix_change"]


_session_rows = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(0, 3 * 86400), st.integers(1, 50_000), st.floats(0, 1),
              st.booleans()),
    min_size=1, max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(_session_rows, st.sampled_from([60, 300, 3600]), st.sampled_from(["UTC", "Asia/Shanghai", "America/New_York"]))
def test_property_classification_invariants(raw: list[tuple[str, int, int, float, bool]], ttl: int, tz: str) -> None:
    rows = [
        {"s": s, "t": t, "p": p, "c": int(p * share), "changed": ["current-date"] if named else []}
        for s, t, p, share, named in raw
    ]
    frame = _calls(rows)
    out = classify(frame, tz=tz, ttl_seconds=ttl).collect()
    shuffled = classify(frame.sample(fraction=1.0, shuffle=True, seed=1), tz=tz, ttl_seconds=ttl).collect()
    assert out.select("session_id", "at", "cause").sort(["session_id", "at", "cause"]).equals(
        shuffled.select("session_id", "at", "cause").sort(["session_id", "at", "cause"])
    )
    for r in out.iter_rows(named=True):
        assert r["cause"] in CAUSES
        # The causes in their order of precedence, as a log without transcripts can show them.
        if r["gap_s"] is None:
            assert r["cause"] == "cold_start"
        elif r["cached_tokens"] >= HIT_SHARE * r["prev_prompt"]:
            assert r["cause"] == "hit"  # whatever the gap
        elif not r["cache_reported"]:
            assert r["cause"] == "no_cache_reported"
        elif r["gap_s"] > ttl:
            assert r["cause"] == "ttl_expiry" and not r["continuation"]
        elif r["prompt_tokens"] < 0.5 * r["prev_prompt"]:
            assert r["cause"] == "compaction"
        else:
            assert r["cause"] in ("date_change", "prefix_change")
            named = "current-date" in (r["changed_sections"] or [])
            assert (r["cause"] == "date_change") == (r["crossing"] or named)
    # Exactly one cold start per session.
    assert out.filter(pl.col("cause") == "cold_start").height == out["session_id"].n_unique()


# --------------------------------------------------------------------------- effect


def _did_fixture(after_cross_share: float) -> pl.DataFrame:
    """Three sessions, five nights. Each night: 23:50 (after a day's pause), 23:54, 23:58 and 00:02
    the next day (the crossing call). Crossing dates run 10-13 .. 10-17; the cutover is 10-15."""
    rows: list[dict[str, Any]] = []
    for night in range(5):
        base = night * 86400
        share = 0.0 if night < 2 else after_cross_share  # night 2 crosses into the cutover day
        for s in ("x", "y", "z"):
            rows += [
                {"s": s, "t": base, "p": 10_000, "c": 0},
                {"s": s, "t": base + 240, "p": 10_500, "c": 9_900},
                {"s": s, "t": base + 480, "p": 10_800, "c": 10_500},
                {"s": s, "t": base + 720, "p": 11_000, "c": int(11_000 * share)},
            ]
    return _calls(rows)


# The fixture's smallest cell: 3 sessions and 6 calls (below the defaults of 5 and 20, see
# tests/cache/test_causes.py for the floors themselves).
_SMALL = {"min_sessions": 3, "min_calls": 6}


def test_did_recovers_a_planted_effect() -> None:
    frame = _did_fixture(after_cross_share=0.9)
    report, _ = analyze(frame, AnalysisConfig(cutover=dt.date(2026, 10, 15), bootstrap=200, **_SMALL))
    e = report.effect
    # crossing: 0 → 0.9; other within-TTL calls: unchanged → DiD = 0.9.
    assert e.estimate == pytest.approx(0.9, abs=1e-3)
    assert e.ci_low <= e.estimate <= e.ci_high
    assert e.calls["crossing_before"] == 6 and e.calls["crossing_after"] == 6  # the cutover day is left out
    assert e.cell_sessions == {"crossing_before": 3, "crossing_after": 3, "other_before": 3, "other_after": 3}
    assert e.reason is None and e.resampled_sessions == 3
    assert report.rates["groups"]["crossing"]["before"]["token_share"] == 0.0


def test_no_crossing_calls_means_no_estimate() -> None:
    rows = [{"s": "a", "t": 0, "p": 10_000, "c": 0}, {"s": "a", "t": 60, "p": 11_000, "c": 10_000}]
    report, _ = analyze(_calls(rows), AnalysisConfig(cutover=dt.date(2026, 10, 13), bootstrap=50))
    assert report.effect.estimate is None and report.effect.ci_low is None


def test_notes_say_why_there_is_no_estimate_and_which_prices_were_guessed() -> None:
    frame = _did_fixture(after_cross_share=0.9)
    report, _ = analyze(frame, AnalysisConfig(cutover=dt.date(2026, 10, 15), bootstrap=50, **_SMALL))
    # every cell has enough calls and every model has a price: only the time zone fallback and
    # which write price was used
    assert report.notes == [
        "3 of 3 sessions record no time zone (no date notice, <timezone> or local file name): their days are in UTC "
        "(--tz, PIPELINE_TZ)",
        "cache writes are priced at the 5m write price (--ttl unset): no call reports how its writes split by TTL",
    ]
    report, _ = analyze(frame, AnalysisConfig(cutover=dt.date(2026, 12, 31), bootstrap=50))
    assert report.notes[0] == ("no calls after the cutover 2026-12-31: the calls run from 2026-10-12 to 2026-10-17 "
                               "(each session's local date), so there is nothing to compare")
    rows = [{"s": "a", "t": 0, "p": 10_000, "c": 0}, {"s": "a", "t": 60, "p": 11_000, "c": 10_000, "model": "house-model-7"},
            {"s": "a", "t": 3 * 86400, "p": 11_000, "c": 10_000}, {"s": "a", "t": 3 * 86400 + 60, "p": 12_000, "c": 11_000}]
    report, _ = analyze(_calls(rows), AnalysisConfig(cutover=dt.date(2026, 10, 14), bootstrap=50))
    assert report.effect.estimate is None
    assert report.notes[0].startswith("no effect estimate, too few to estimate")
    assert "first calls on a new date before the cutover: 0 sessions, 0 calls" in report.notes[0]
    assert report.notes[3].startswith("1 calls have no price: the price database (genai-prices ")
    assert "does not know house-model-7, and no model is priced as another" in report.notes[3]
    assert report.cost["unpriced"] == {"calls": 1, "models": {"house-model-7": 1}}


def test_calls_without_time_or_session_are_left_out_and_counted() -> None:
    rows = [{"s": "a", "t": 0, "p": 10_000, "c": 0}, {"s": "a", "t": 60, "p": 11_000, "c": 10_000},
            {"s": "b", "t": 90, "p": 9_000, "c": 0}, {"s": "c", "t": 120, "p": 9_000, "c": 0}, {"s": "d", "t": 150, "p": 9_000, "c": 0}]
    frame = _calls(rows).with_columns(
        pl.when(pl.col("session_id") == "b").then(None).otherwise(pl.col("at")).alias("at"),
        pl.when(pl.col("session_id").is_in(["c", "d"])).then(None).otherwise(pl.col("session_id")).alias("session_id"),
    )
    report, _ = analyze(frame, AnalysisConfig(cutover=dt.date(2026, 10, 13), bootstrap=20))
    assert (report.calls, report.sessions, report.left_out) == (2, 1, {"undated": 1, "no_session": 2})
    assert report.causes["cold_start"]["calls"] == 1  # session a's first call only
    assert report.notes[0].startswith("1 calls have no time: they are left out of every figure here")
    assert report.notes[1].startswith("2 calls have no session id: they are left out")
    assert "(3 more left out: no time or no session)" in render_table(report).splitlines()[0]


def test_bootstrap_resamples_whole_sessions() -> None:
    """Identical sessions leave no room for the interval: it collapses on the estimate."""
    frame = _did_fixture(after_cross_share=0.5)
    report, _ = analyze(frame, AnalysisConfig(cutover=dt.date(2026, 10, 15), bootstrap=200, **_SMALL))
    assert report.effect.estimate == pytest.approx(0.5)
    assert report.effect.ci_high - report.effect.ci_low < 1e-9
    assert report.effect.sessions == 3 and report.effect.resampled_sessions == 3


def test_cost_by_cause_at_list_prices() -> None:
    rows = [
        {"s": "a", "t": 0, "p": 100_000, "c": 0, "w": 100_000},
        {"s": "a", "t": 1000, "p": 100_000, "c": 0, "w": 100_000},  # TTL expired: all re-sent
    ]
    frame = classify(_calls(rows)).collect()
    cost = cost_by_cause(frame)
    # Claude Sonnet 4.5 list prices: write $3.75 / MTok (1 hour: $6), read $0.30 / MTok, output $15.
    cold = cost["by_cause"]["cold_start"]
    assert cold["cache_write_5m_usd"] == pytest.approx(0.375) and cold["output_usd"] == pytest.approx(10 * 15 / 1e6)
    assert cold["input_usd"] == cold["cache_read_usd"] == cold["cache_write_1h_usd"] == 0
    assert cold["spend_usd"] == pytest.approx(0.375 + 10 * 15 / 1e6)  # list price: every part, output included
    assert cold["lost_usd"] == 0
    assert cost["by_cause"]["ttl_expiry"]["lost_usd"] == pytest.approx(0.1 * (3.75 - 0.30))
    assert cost["misses_lost_usd"] == pytest.approx(0.345)
    assert cost["total"]["spend_usd"] == pytest.approx(2 * (0.375 + 10 * 15 / 1e6))
    one_hour = cost_by_cause(frame, ttl_seconds=3600)
    assert one_hour["by_cause"]["cold_start"]["cache_write_1h_usd"] == pytest.approx(0.6)
    assert one_hour["by_cause"]["cold_start"]["spend_usd"] == pytest.approx(0.6 + 10 * 15 / 1e6)
    assert cost["prices"]["claude-sonnet-4-5"] | {"tiers": None} == {
        "input": 3.0, "cache_read": 0.3, "output": 15.0, "cache_write_5m": 3.75, "cache_write_1h": 6.0, "tiers": None,
        "provider": "anthropic", "model": "claude-sonnet-4-5", "source": "genai-prices"}


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(st.tuples(st.integers(1, 400_000), st.floats(0, 1), st.floats(0, 1), st.integers(1, 4000)),
                      min_size=2, max_size=6))
def test_a_miss_never_loses_more_than_its_call_spent(calls: list[tuple[int, float, float, int]]) -> None:
    # whatever a call read and wrote: a compaction that re-sent its prompt mostly unwritten once lost
    # more (every re-sent token priced as a write) than the call spent
    rows, t = [], 0
    for prompt, read_share, write_share, gap in calls:
        t += gap
        cached = int(prompt * read_share)
        rows.append({"s": "a", "t": t, "p": prompt, "c": cached, "w": int((prompt - cached) * write_share)})
    cost = cost_by_cause(classify(_calls(rows)).collect())
    for cause, row in cost["by_cause"].items():
        assert row["lost_usd"] <= row["spend_usd"] + 1e-12, cause
        assert row["lost_usd"] >= 0


def test_writes_split_by_ttl_pay_each_ttl_its_price() -> None:
    rows = [
        {"s": "a", "t": 0, "p": 100_000, "c": 0, "w": 100_000},  # 60k for 1 hour, 40k for 5 minutes
        {"s": "b", "t": 0, "p": 100_000, "c": 0, "w": 100_000},  # split unknown: the --ttl price
        {"s": "a", "t": 4000, "p": 100_000, "c": 0, "w": 100_000},  # all 1 hour; re-sent after the TTL
    ]
    frame = _calls(rows).with_columns(pl.Series("cache_write_1h_tokens", [60_000, None, 100_000], dtype=pl.Int64))
    classified = classify(frame).collect()
    cost = cost_by_cause(classified)
    # Sonnet 4.5: 5-minute write $3.75 / MTok, 1-hour write $6, read $0.30, output $15 (10 tokens a call)
    out = 10 * 15 / 1e6
    cold = cost["by_cause"]["cold_start"]
    assert cold["cache_write_1h_usd"] == pytest.approx(0.06 * 6)
    assert cold["cache_write_5m_usd"] == pytest.approx(0.04 * 3.75 + 0.1 * 3.75)
    assert cold["spend_usd"] == pytest.approx(0.06 * 6 + 0.04 * 3.75 + 0.1 * 3.75 + 2 * out)
    assert cold["write_1h_tokens"] == 60_000
    assert cost["by_cause"]["ttl_expiry"]["spend_usd"] == pytest.approx(0.6 + out)
    assert cost["by_cause"]["ttl_expiry"]["lost_usd"] == pytest.approx(0.1 * (6 - 0.30))  # re-written for 1 hour
    assert cost["write_price"] == "5m"
    assert cost["write_split"] == {"calls_split": 2, "write_5m_tokens": 40_000, "write_1h_tokens": 160_000,
                                   "calls_unsplit": 1, "unsplit_write_tokens": 100_000}
    # --ttl changes the price of the unsplit call only
    one_hour = cost_by_cause(classified, ttl_seconds=3600)
    assert one_hour["by_cause"]["cold_start"]["spend_usd"] == pytest.approx(0.06 * 6 + 0.04 * 3.75 + 0.1 * 6 + 2 * out)
    assert one_hour["by_cause"]["ttl_expiry"]["spend_usd"] == pytest.approx(0.6 + out)
    report, _ = analyze(frame, AnalysisConfig(cutover=None, bootstrap=0))
    assert ("cache writes of 2 calls are priced by their own TTL split (160,000 tokens written for 1 hour at the 1-hour "
            "price, 40,000 for 5 minutes at the 5-minute price); the 100,000 written tokens of 1 calls that do not report "
            "a split are priced at the 5m write price (--ttl unset)") in report.notes


def test_call_cost_prices_a_known_split_by_ttl() -> None:
    from pipeline.calls.prices import call_cost, load_prices

    price = load_prices().price("claude-sonnet-4-5", source="claude-code")
    assert call_cost(price, 100_000, 0, 100_000, 0, written_1h=60_000) == pytest.approx(0.06 * 6 + 0.04 * 3.75)
    assert call_cost(price, 100_000, 0, 100_000, 0, ttl_seconds=3600) == pytest.approx(0.6)
    assert call_cost(price, 100_000, 0, 100_000, 0) == pytest.approx(0.375)


def test_a_long_prompt_pays_the_long_context_price() -> None:
    # Above 200,000 prompt tokens Sonnet 4.5 costs more per token (write $7.50 / MTok, output $22.50).
    frame = classify(_calls([{"s": "a", "t": 0, "p": 1_000_000, "c": 0, "w": 1_000_000}])).collect()
    cold = cost_by_cause(frame)["by_cause"]["cold_start"]
    assert cold["cache_write_5m_usd"] == pytest.approx(7.5) and cold["output_usd"] == pytest.approx(10 * 22.5 / 1e6)
    assert cold["spend_usd"] == pytest.approx(7.5 + 10 * 22.5 / 1e6)
    assert cost_by_cause(frame)["prices"]["claude-sonnet-4-5"]["tiers"][0]["above_input_tokens"] == 200_000


def test_each_call_is_priced_by_its_own_provider_and_model() -> None:
    rows = [
        {"s": "cc", "t": 0, "p": 100_000, "c": 0, "w": 100_000, "source": "claude-code", "model": "claude-opus-4-1-20250805"},
        {"s": "cx", "t": 0, "p": 100_000, "c": 0, "w": None, "source": "codex", "model": "gpt-5.4"},
        {"s": "gl", "t": 0, "p": 100_000, "c": 0, "w": None, "source": "claude-code", "model": "glm-5.1"},
        {"s": "un", "t": 0, "p": 100_000, "c": 0, "w": None, "source": "codex", "model": None},
    ]
    cost = cost_by_cause(classify(_calls(rows)).collect())
    prices = cost["prices"]
    assert (prices["claude-opus-4-1-20250805"]["provider"], prices["claude-opus-4-1-20250805"]["input"]) == ("anthropic", 15.0)
    # OpenAI charges nothing for writing its cache: no write price is listed, and none is charged
    assert prices["gpt-5.4"]["provider"] == "openai" and "cache_write_5m" not in prices["gpt-5.4"]
    assert prices["glm-5.1"]["provider"] == "zhipuai"  # a Claude Code session driving another vendor's model
    # cold starts: 100k written at Opus 4.1's $18.75 + 100k input at GPT-5.4's $2.50 + 100k at GLM-5.1's input price,
    # and each priced call's 10 output tokens at its model's output price
    cold = cost["by_cause"]["cold_start"]
    assert cold["cache_write_5m_usd"] == pytest.approx(0.1 * 18.75)
    assert cold["input_usd"] == pytest.approx(0.1 * 2.5 + 0.1 * prices["glm-5.1"]["input"])
    out = sum(10 * prices[m]["output"] / 1e6 for m in ("claude-opus-4-1-20250805", "gpt-5.4", "glm-5.1"))
    assert cold["output_usd"] == pytest.approx(out)
    assert cold["spend_usd"] == pytest.approx(0.1 * 18.75 + 0.1 * 2.5 + 0.1 * prices["glm-5.1"]["input"] + out)
    assert cost["unpriced"] == {"calls": 1, "models": {"(no model)": 1}}


def test_cliffs_and_daily_rates() -> None:
    frame = classify(_calls([
        {"s": "a", "t": 0, "p": 50_000, "c": 0},
        {"s": "a", "t": 100, "p": 52_000, "c": 0},
        {"s": "b", "t": 0, "p": 10_000, "c": 0},
        {"s": "b", "t": 100, "p": 11_000, "c": 10_000},
    ]), cutover=dt.date(2026, 10, 13)).collect()
    cliffs = cache_cliffs(frame)
    assert cliffs["session_id"].to_list() == ["a"] and cliffs["drop_tokens"].to_list() == [50_000]
    daily = daily_rates(frame)
    assert daily["calls"].sum() == 4


# --------------------------------------------------------------------------- acceptance (default workload)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_acceptance_default_workload(seed: int) -> None:
    """Anthropic 5-minute TTL, 42 days, cutover on day 22: the truth lies in the CI, the estimate
    is within 10 % of it, and the classification agrees with the true cause on >= 95 % of calls."""
    result = simulate(WorkloadConfig(seed=seed))
    assert result.summary.calls >= 20_000 and result.summary.days == 42
    assert result.summary.cutover == dt.date(2026, 9, 22)
    report, _ = analyze(result.frame, AnalysisConfig(cutover=result.summary.cutover))
    true_effect = result.summary.true_effect
    e = report.effect
    assert e.ci_low <= true_effect <= e.ci_high
    assert abs(e.estimate - true_effect) <= 0.1 * abs(true_effect)
    assert report.agreement is not None and report.agreement["rate"] >= 0.95


# --------------------------------------------------------------------------- the verb


@pytest.fixture(scope="module")
def sim_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    result = simulate(WorkloadConfig(days=14, scale=0.5))
    path = write_calls(result.frame, tmp_path_factory.mktemp("sim") / "calls.parquet", result.summary)
    return path, result


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cache_report_json_from_a_file(sim_file: tuple[Path, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path, result = sim_file
    code, out, _ = _run(capsys, ["cache-report", "--calls", str(path), "--cutover", str(result.summary.cutover), "--json", "--bootstrap", "200"])
    doc = json.loads(out)
    assert code == 0
    assert set(doc["effect"]) >= {"estimate", "ci_low", "ci_high"}
    assert {"rates", "causes", "cost"} <= set(doc)
    # ttl_seconds None: the TTL in force for each call (no --ttl given)
    assert doc["inputs"]["ttl_seconds"] is None and doc["inputs"]["tz"] == "UTC" and doc["inputs"]["provider"] == "anthropic"
    assert doc["effect"]["reason"] is None and doc["effect"]["resampled_sessions"] > 0
    assert doc["simulation"]["true_effect"] == result.summary.true_effect
    assert doc["effect"]["ci_low"] <= result.summary.true_effect <= doc["effect"]["ci_high"]
    code, table, _ = _run(capsys, ["cache-report", "--calls", str(path), "--cutover", str(result.summary.cutover), "--bootstrap", "50"])
    assert code == 0 and "first call on a new date" in table and "date_change" in table
    assert "TTL in force per call" in table and "sessions resampled" in table


def test_cache_report_reads_the_warehouse_read_only(sim_file: tuple[Path, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, result = sim_file
    warehouse = tmp_path / "w.duckdb"
    with db.writing(warehouse) as con:
        con.execute("INSERT INTO llm_calls BY NAME SELECT * FROM read_parquet(?)", [str(path)])
        con.execute(
            "INSERT INTO llm_calls (call_id, source, session_id, \"at\", prompt_tokens, cached_tokens) VALUES (?, ?, ?, ?, ?, ?)",
            ["other-1", "claude-code", "cc-1", T0, 1000, 0],
        )
    cutover = str(result.summary.cutover)
    code, out, _ = _run(capsys, ["cache-report", "--db", str(warehouse), "--cutover", cutover, "--source", "simulated", "--json", "--bootstrap", "200"])
    from_db = json.loads(out)
    code2, out2, _ = _run(capsys, ["cache-report", "--calls", str(path), "--cutover", cutover, "--json", "--bootstrap", "200"])
    from_file = json.loads(out2)
    assert code == code2 == 0
    assert from_db["calls"] == result.frame.height  # the claude-code row is filtered out by --source
    assert from_db["effect"]["estimate"] == pytest.approx(from_file["effect"]["estimate"])
    with db.writing(warehouse):  # the report let go of the file
        pass


def test_cache_report_reads_jsonl_artifacts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"call_id": "1", "source": "consolidator", "session_id": "b1", "at": "2026-10-12T10:00:00Z", "model": "gpt-5",
         "prompt_tokens": 3000, "cached_tokens": 0, "completion_tokens": 5},
        {"call_id": "2", "source": "consolidator", "session_id": "b1", "at": "2026-10-12T10:00:30Z", "model": "gpt-5",
         "prompt_tokens": 3500, "cached_tokens": 2944, "completion_tokens": 5},
    ]
    path = tmp_path / "llm_calls.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code, out, _ = _run(capsys, ["cache-report", "--calls", str(path), "--cutover", "2026-10-12", "--provider", "openai", "--json"])
    doc = json.loads(out)
    assert code == 0 and doc["causes"]["hit"]["calls"] == 1 and doc["causes"]["cold_start"]["calls"] == 1


def test_cache_report_without_cutover_shows_rates_causes_and_costs(
    sim_file: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = sim_file
    code, out, _ = _run(capsys, ["cache-report", "--calls", str(path), "--json", "--bootstrap", "50"])
    doc = json.loads(out)
    assert code == 0 and doc["inputs"]["cutover"] is None
    assert doc["effect"]["estimate"] is None
    assert doc["causes"]["hit"]["calls"] > 0 and doc["cost"]["by_cause"]["cold_start"]["spend_usd"] > 0
    assert any(n.startswith("no cutover given, so every call counts as before it") for n in doc["notes"])
    code, table, _ = _run(capsys, ["cache-report", "--calls", str(path), "--bootstrap", "50"])
    assert code == 0 and "cutover none given" in table and "cached share, within the TTL" in table


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--calls", "missing.parquet", "--cutover", "2026-10-12"], "no calls file"),
        (["--calls", "x.parquet", "--db", "w.duckdb", "--cutover", "2026-10-12"], "not allowed with"),
        (["--calls", "x.parquet", "--cutover", "12/10/2026"], "not a date"),
        (["--calls", "x.parquet", "--cutover", "2026-10-12", "--tz", "Nowhere/Land"], "time zone"),
        (["--db", "missing.duckdb", "--cutover", "2026-10-12"], "no warehouse"),
    ],
)
def test_cache_report_bad_invocations_exit_2(
    sim_file: tuple[Path, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    path, _ = sim_file
    argv = [str(path) if a == "x.parquet" else str(tmp_path / a) if a.endswith((".parquet", ".duckdb")) else a for a in argv]
    code, out, err = _run(capsys, ["cache-report", *argv])
    assert code == 2 and out == ""
    assert needle in err


def test_load_calls_refuses_both_sources() -> None:
    from pipeline.errors import UsageError

    with pytest.raises(UsageError):
        load_calls(db="a", calls="b")
