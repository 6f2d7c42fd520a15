"""The cause rules on bare call logs (pipeline.cache.causes.classify: the cache_calls statement with
no transcript beside the calls), the version cutover, and the floors under the effect of anchoring."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cache import causes
from pipeline.cache.analysis import AnalysisConfig, analyze, did_effect
from pipeline.cache.causes import (
    CAUSES,
    MISS_CAUSES,
    VersionCutover,
    classify,
    classify_with_sql,
    parse_version,
    with_period,
)
from pipeline.cache.report import render_table
from pipeline.cli.main import main
from pipeline.errors import UsageError

T0 = dt.datetime(2026, 10, 12, 8, 0, tzinfo=dt.UTC)
HIT_SHARE = causes.cache_calls.HIT_SHARE

# One call of a session: seconds since the previous call, prompt, share of the previous prompt read
# back, whether the call wrote (and for how long), and which of two models it used.
_call = st.tuples(
    st.one_of(st.integers(0, 400), st.integers(0, 5000), st.sampled_from([299, 300, 301, 3599, 3600, 3601, 90_000])),
    st.integers(1, 200_000),
    st.one_of(st.floats(0, 1), st.sampled_from([0.0, 0.5, 0.79, 0.8, 0.81, 1.0])),
    st.sampled_from(["none", "5m", "1h"]),
    st.sampled_from(["claude-sonnet-4-5", "claude-sonnet-4-5", "claude-opus-4-1"]),
)
_sessions = st.lists(st.lists(_call, min_size=1, max_size=8), min_size=1, max_size=4)


def _log(sessions: list[list[tuple[int, int, float, str, str]]], *, reporting: bool = True) -> pl.DataFrame:
    """A bare call log. A call reads `share` of its previous prompt (capped at its own prompt) and
    writes the rest; with `reporting` False no call reports a cached or written token."""
    rows: list[dict[str, Any]] = []
    for s, calls in enumerate(sessions):
        at, prev = T0 + dt.timedelta(minutes=7 * s), 0
        for i, (gap, prompt, share, write, model) in enumerate(calls):
            at += dt.timedelta(seconds=gap if i else 0)
            cached = min(prompt, int(share * prev)) if reporting else 0
            written = prompt - cached if reporting and write != "none" else (0 if reporting else None)
            rows.append({
                "call_id": f"s{s}-c{i:02d}", "source": "simulated", "session_id": f"s{s}", "at": at, "model": model,
                "prompt_tokens": prompt, "cached_tokens": cached, "cache_write_tokens": written,
                "cache_write_1h_tokens": (written if write == "1h" else 0) if written is not None else None,
                "completion_tokens": 10,
            })
            prev = prompt
    return pl.DataFrame(rows, schema={
        "call_id": pl.String, "source": pl.String, "session_id": pl.String, "at": pl.Datetime("us", "UTC"),
        "model": pl.String, "prompt_tokens": pl.Int64, "cached_tokens": pl.Int64, "cache_write_tokens": pl.Int64,
        "cache_write_1h_tokens": pl.Int64, "completion_tokens": pl.Int64,
    })


def _by_id(frame: pl.DataFrame) -> dict[str, dict[str, Any]]:
    return {r["call_id"]: r for r in frame.iter_rows(named=True)}


def _is_read_back(r: dict[str, Any], hit_share: float = HIT_SHARE) -> bool:
    return (r["cached_tokens"] or 0) >= hit_share * r["prev_prompt"]


# --------------------------------------------------------------------------- properties of the rules

# Each rule must hold for the definition (the SQL, run without transcripts) and for the vectorised
# twin that `classify` uses on bare logs. 20 to 25 examples each: every SQL example costs about 60 ms
# of DuckDB planning, and tests/cache/test_bare_log.py checks the two call for call on 80 more logs.
both = pytest.mark.parametrize("classify_log", [classify, classify_with_sql], ids=["twin", "sql"])


@both
@settings(max_examples=25, deadline=None)
@given(_sessions, st.sampled_from([0.5, 0.8, 0.95]))
def test_a_call_that_read_its_previous_prompt_back_is_never_a_miss(classify_log: Any, sessions: list, hit_share: float) -> None:
    out = classify_log(_log(sessions), hit_share=hit_share)
    for r in out.iter_rows(named=True):
        if r["prev_call_id"] is not None and _is_read_back(r, hit_share):
            # whatever the gap (a 1-hour cache, or a provider that kept it longer), the model, the day
            assert r["cause"] == "hit" and not r["miss"], r


@both
@settings(max_examples=25, deadline=None)
@given(_sessions)
def test_the_first_call_of_each_session_is_a_cold_start_and_only_it(classify_log: Any, sessions: list) -> None:
    out = classify_log(_log(sessions))
    firsts = out.sort(["at", "call_id"]).group_by("session_id", maintain_order=True).first()
    assert set(firsts["cause"].cast(pl.String).to_list()) == {"cold_start"}
    assert firsts["prev_call_id"].null_count() == firsts.height
    assert out.filter(pl.col("cause") == "cold_start").height == len(sessions)


@both
@settings(max_examples=20, deadline=None)
@given(_sessions, _sessions)
def test_a_model_that_never_reports_caching_gives_no_miss(classify_log: Any, silent: list, reporting: list) -> None:
    # The silent sessions are named apart from the reporting ones, which keep their own causes.
    quiet = _log(silent, reporting=False).with_columns(
        ("quiet-" + pl.col("session_id")).alias("session_id"), ("quiet-" + pl.col("call_id")).alias("call_id"),
    )
    out = classify_log(pl.concat([quiet, _log(reporting)]))
    mute = out.filter(pl.col("session_id").str.starts_with("quiet-"))
    assert not mute["miss"].any() and not mute["cache_reported"].any()
    assert mute.filter(pl.col("prev_call_id").is_not_null())["cause"].cast(pl.String).to_list() == (
        ["no_cache_reported"] * (mute.height - len(silent))
    )
    # and the other sessions keep the causes they have on their own
    alone = classify_log(_log(reporting)).select("call_id", "cause").sort("call_id")
    assert out.filter(~pl.col("session_id").str.starts_with("quiet-")).select("call_id", "cause").sort("call_id").equals(alone)


@both
@settings(max_examples=25, deadline=None)
@given(_sessions)
def test_a_miss_after_the_ttl_in_force_is_a_ttl_expiry(classify_log: Any, sessions: list) -> None:
    out = classify_log(_log(sessions))
    previous = _by_id(out)
    for r in out.iter_rows(named=True):
        if r["prev_call_id"] is None or _is_read_back(r) or not r["cache_reported"]:
            continue
        prev = previous[r["prev_call_id"]]
        # An hour after a call that wrote for an hour, else Anthropic's 5 minutes.
        ttl = 3600 if (prev["cache_write_1h_tokens"] or 0) > 0 else 300
        assert r["ttl_s"] == ttl
        assert (r["cause"] == "ttl_expiry") == (r["gap_s"] > ttl), r
        assert r["continuation"] == (r["gap_s"] <= ttl)


@both
@settings(max_examples=25, deadline=None)
@given(_sessions, st.sampled_from([60, 300, 7200]))
def test_ttl_overrides_the_ttl_in_force(classify_log: Any, sessions: list, ttl: int) -> None:
    out = classify_log(_log(sessions), ttl_seconds=ttl)
    for r in out.filter(pl.col("prev_call_id").is_not_null()).iter_rows(named=True):
        assert r["ttl_s"] == ttl
        if not _is_read_back(r) and r["cache_reported"]:
            assert (r["cause"] == "ttl_expiry") == (r["gap_s"] > ttl), r


@both
@settings(max_examples=25, deadline=None)
@given(_sessions)
def test_a_prompt_below_half_the_previous_one_is_a_compaction(classify_log: Any, sessions: list) -> None:
    out = classify_log(_log(sessions))
    for r in out.iter_rows(named=True):
        if r["prev_call_id"] is None or _is_read_back(r) or not r["cache_reported"] or r["gap_s"] > r["ttl_s"]:
            continue  # a hit, a silent model or a long gap outranks a compaction
        # a bare log has no compaction record: the shrink alone decides
        assert (r["cause"] == "compaction") == (r["prompt_tokens"] < 0.5 * r["prev_prompt"]), r
        if r["cause"] == "compaction":
            assert r["evidence_line_no"] is None  # no transcript line to point at


@both
@settings(max_examples=20, deadline=None)
@given(_sessions, st.randoms(use_true_random=False))
def test_causes_do_not_depend_on_row_order(classify_log: Any, sessions: list, rng: Any) -> None:
    log = _log(sessions)
    order = list(range(log.height))
    rng.shuffle(order)
    a = classify_log(log).select("call_id", "cause", "prev_call_id", "crossing").sort("call_id")
    b = classify_log(log[order]).select("call_id", "cause", "prev_call_id", "crossing").sort("call_id")
    assert a.equals(b)


def test_the_causes_and_their_order() -> None:
    assert CAUSES == (
        "cold_start", "hit", "no_cache_reported", "ttl_expiry", "compaction", "model_switch", "ttl_tier_switch",
        "date_change", "harness_update", "provider_miss", "prefix_change",
    )
    assert MISS_CAUSES == CAUSES[3:]


def test_model_switch_and_ttl_tier_switch_in_a_bare_log() -> None:
    # s0: a 5-minute write, then within the TTL a full 1-hour rewrite of the same prefix; s1: a model switch
    log = _log([[(0, 10_000, 0, "5m", "claude-sonnet-4-5"), (9, 10_000, 0, "1h", "claude-sonnet-4-5")],
                [(0, 10_000, 0, "5m", "claude-sonnet-4-5"), (30, 10_500, 0, "5m", "claude-opus-4-1")]])
    out = classify(log).sort("call_id")
    assert out["cause"].cast(pl.String).to_list() == ["cold_start", "ttl_tier_switch", "cold_start", "model_switch"]


def test_a_long_gap_outranks_a_shrink_and_a_model_switch() -> None:
    log = _log([[(0, 50_000, 0, "5m", "claude-sonnet-4-5"), (900, 10_000, 0, "5m", "claude-opus-4-1")]])
    assert classify(log).sort("call_id")["cause"].cast(pl.String).to_list() == ["cold_start", "ttl_expiry"]


# --------------------------------------------------------------------------- periods


@pytest.mark.parametrize(
    ("text", "key"),
    [("2.1.0", ((2, 1, 0), 1, "")), ("2.1", ((2, 1, 0), 1, "")), ("v0.116.0-alpha.10", ((0, 116, 0), 0, "-alpha.10")),
     ("n/a", None), (None, None)],
)
def test_parse_version(text: str | None, key: Any) -> None:
    assert parse_version(text) == key


def test_versions_compare_as_numbers_and_a_release_after_its_pre_releases() -> None:
    ordered = ["0.9.0", "0.34.0", "0.116.0-alpha.10", "0.116.0", "0.117.0", "2.0.2", "2.0.77", "2.1.0", "2.1.88", "2.1.232"]
    assert sorted(ordered, key=lambda v: parse_version(v)) == ordered  # type: ignore[arg-type, return-value]


@pytest.mark.parametrize("bad", ["claude-code", "claude-code@", "@2.1.0", "claude-code@latest"])
def test_a_version_cutover_must_be_harness_at_version(bad: str) -> None:
    with pytest.raises(UsageError, match="HARNESS@VERSION"):
        VersionCutover.parse(bad)


def test_with_period_by_harness_version() -> None:
    log = _log([[(0, 1000, 0, "5m", "claude-sonnet-4-5")]] * 5)
    frame = classify(log).sort("call_id").with_columns(
        pl.Series("harness", ["claude-code", "claude-code", "claude-code", "codex", None]),
        pl.Series("harness_version", ["2.0.77", "2.1.0", "2.1.88", "2.1.5", None]),
    )
    periods = with_period(frame, cutover_version=VersionCutover.parse("claude-code@2.1.0"))["period"].cast(pl.String).to_list()
    # another harness, and a call without a version, have no side
    assert periods == ["before", "after", "after", None, None]
    with pytest.raises(UsageError, match="not both"):
        with_period(frame, cutover=dt.date(2026, 10, 12), cutover_version=VersionCutover.parse("claude-code@2.1.0"))


def test_with_period_by_date_leaves_the_cutover_day_out() -> None:
    log = _log([[(0, 1000, 0, "5m", "claude-sonnet-4-5"), (86_400, 1000, 0, "5m", "claude-sonnet-4-5"),
                 (86_400, 1000, 0, "5m", "claude-sonnet-4-5")]])
    periods = with_period(classify(log), cutover=dt.date(2026, 10, 13)).sort("at")["period"].cast(pl.String).to_list()
    assert periods == ["before", "cutover", "after"]


# --------------------------------------------------------------------------- the effect's floors


def _nights(sessions: int, nights: int = 5, after_share: float = 0.9) -> pl.DataFrame:
    """`sessions` sessions, each night 23:50, 23:54, 23:58 UTC and 00:02 the next day (the crossing
    call, which reads nothing before 10-15 and `after_share` from then on)."""
    rows: list[dict[str, Any]] = []
    start = dt.datetime(2026, 10, 12, 23, 50, tzinfo=dt.UTC)
    for s in range(sessions):
        for night in range(nights):
            base = start + dt.timedelta(days=night)
            share = 0.0 if night < 2 else after_share
            for i, (sec, prompt, cached) in enumerate(
                [(0, 10_000, 0), (240, 10_500, 9_900), (480, 10_800, 10_500), (720, 11_000, int(11_000 * share))]
            ):
                rows.append({"call_id": f"s{s}-n{night}-{i}", "source": "simulated", "session_id": f"s{s}",
                             "at": base + dt.timedelta(seconds=sec), "model": "claude-sonnet-4-5", "prompt_tokens": prompt,
                             "cached_tokens": cached, "cache_write_tokens": prompt - cached, "completion_tokens": 10})
    return pl.DataFrame(rows).with_columns(pl.col("at").cast(pl.Datetime("us", "UTC")))


CUTOVER = dt.date(2026, 10, 15)


@pytest.mark.parametrize(
    ("min_sessions", "min_calls", "short"),
    [
        (4, 6, "first calls on a new date before the cutover: 3 sessions, 6 calls"),  # too few sessions
        (3, 7, "first calls on a new date after the cutover: 3 sessions, 6 calls"),  # too few calls
        (5, 20, "other within-TTL calls after the cutover: 3 sessions, 6 calls"),  # the defaults
    ],
)
def test_no_estimate_below_the_floors_and_the_reason_names_the_counts(min_sessions: int, min_calls: int, short: str) -> None:
    config = AnalysisConfig(cutover=CUTOVER, bootstrap=100, min_sessions=min_sessions, min_calls=min_calls)
    report, _ = analyze(_nights(3), config)
    for e in (report.effect, report.effect_requests):
        assert e.estimate is None and e.ci_low is None and e.ci_high is None
        assert e.reason is not None and e.reason.startswith("too few to estimate")
        assert f"at least {min_sessions} sessions and {min_calls} calls" in e.reason and short in e.reason
        assert (e.min_sessions, e.min_calls) == (min_sessions, min_calls)
    # the counts behind the reason are in the effect too, and the shares keep their values
    assert report.effect.calls == {"crossing_before": 6, "crossing_after": 6, "other_before": 18, "other_after": 6}
    assert report.effect.cell_sessions == dict.fromkeys(report.effect.calls, 3)
    assert report.effect.shares["crossing_after"] == pytest.approx(0.9, abs=1e-3)
    assert f"no effect estimate, {report.effect.reason}" in report.notes
    assert f"effect of anchoring: no estimate — {report.effect.reason}" in render_table(report)


def test_an_estimate_at_the_floors() -> None:
    report, _ = analyze(_nights(3), AnalysisConfig(cutover=CUTOVER, bootstrap=100, min_sessions=3, min_calls=6))
    assert report.effect.reason is None and report.effect.estimate == pytest.approx(0.9, abs=1e-3)
    assert report.effect.resampled_sessions == 3


def test_defaults_give_an_estimate_once_every_cell_is_full() -> None:
    # 10 sessions × 2 nights a side: 20 crossing calls in 10 sessions per cell
    report, _ = analyze(_nights(10), AnalysisConfig(cutover=CUTOVER, bootstrap=100))
    e = report.effect
    assert (e.min_sessions, e.min_calls) == (5, 20)
    assert min(e.cell_sessions.values()) >= 5 and min(e.calls.values()) >= 20
    assert e.reason is None and e.estimate == pytest.approx(0.9, abs=1e-3) and e.resampled_sessions == 10
    assert all(e.share_ci[k] is not None for k in e.calls)


def test_a_cell_share_gets_an_interval_only_above_the_floors() -> None:
    classified = causes.with_period(classify(_nights(3)), cutover=CUTOVER)
    effect, _ = did_effect(classified, bootstrap=50, min_sessions=3, min_calls=7)
    # crossing cells hold 6 calls each (below 7), the other-before cell 18
    assert effect.share_ci["crossing_before"] is None and effect.share_ci["crossing_after"] is None
    assert effect.share_ci["other_before"] is not None


def test_no_cache_reported_calls_are_left_out_of_shares_and_counted() -> None:
    log = pl.concat([
        _log([[(0, 10_000, 0, "5m", "claude-sonnet-4-5"), (30, 11_000, 1.0, "5m", "claude-sonnet-4-5")]]),
        _log([[(0, 10_000, 0, "none", "glm-5.1"), (30, 11_000, 0, "none", "glm-5.1"), (30, 12_000, 0, "none", "glm-5.1")]],
             reporting=False).with_columns(pl.lit("glm").alias("session_id"), ("glm-" + pl.col("call_id")).alias("call_id")),
    ])
    report, _ = analyze(log, AnalysisConfig(cutover=None, bootstrap=0))
    assert report.causes["no_cache_reported"]["calls"] == 2
    assert report.rates["no_cache_reported"] == {"calls": 3, "sessions": 1, "models": ["glm-5.1"]}
    assert report.rates["overall"]["calls"] == 2  # the reporting session's calls only
    assert report.rates["overall"]["token_share"] == pytest.approx(10_000 / 21_000)
    # the note names the causes those calls have in the table: it agrees with it
    note = next(n for n in report.notes if n.startswith("3 calls in 1 sessions come from a model that reported no cached"))
    assert "(glm-5.1; 1 cold_start, 2 no_cache_reported in the cause table)" in note
    assert report.causes["cold_start"]["calls"] >= 1


# --------------------------------------------------------------------------- the verb


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    return _run_err(capsys, argv)[:2]


def _run_err(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cache_report_json_says_why_there_is_no_estimate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "calls.parquet"
    _nights(3).write_parquet(path)
    code, out = _run(capsys, ["cache-report", "--calls", str(path), "--cutover", "2026-10-15", "--json", "--bootstrap", "50"])
    doc = json.loads(out)
    assert code == 0
    assert doc["effect"]["estimate"] is None and doc["effect"]["ci_low"] is None
    assert doc["effect"]["reason"].startswith("too few to estimate: each of the four cells needs at least 5 sessions and 20 calls")
    assert "first calls on a new date before the cutover: 3 sessions, 6 calls" in doc["effect"]["reason"]
    assert doc["effect"]["cell_sessions"]["crossing_before"] == 3 and doc["inputs"]["min_sessions"] == 5
    code, out = _run(capsys, ["cache-report", "--calls", str(path), "--cutover", "2026-10-15", "--json", "--bootstrap", "50",
                              "--min-sessions", "3", "--min-calls", "6"])
    doc = json.loads(out)
    assert code == 0 and doc["effect"]["reason"] is None and doc["effect"]["estimate"] == pytest.approx(0.9, abs=1e-3)
    assert (doc["inputs"]["min_sessions"], doc["inputs"]["min_calls"]) == (3, 6)
    code, text = _run(capsys, ["cache-report", "--calls", str(path), "--cutover", "2026-10-15", "--bootstrap", "50"])
    assert code == 0 and "effect of anchoring: no estimate — too few to estimate" in text


def test_cache_report_tz_defaults_to_pipeline_tz(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "calls.parquet"
    _nights(1, nights=1).write_parquet(path)
    monkeypatch.setenv("PIPELINE_TZ", "Asia/Shanghai")
    code, out = _run(capsys, ["cache-report", "--calls", str(path), "--json", "--bootstrap", "0"])
    doc = json.loads(out)
    assert code == 0 and doc["inputs"]["tz"] == "Asia/Shanghai"
    assert doc["time_zones"]["fell_back"] == 1 and doc["time_zones"]["zones"] == {"Asia/Shanghai": 1}
    # 23:50..00:02 UTC is 07:50..08:02 in Shanghai: no new date
    assert doc["rates"]["groups"]["crossing"] == {}
    code, out = _run(capsys, ["cache-report", "--calls", str(path), "--json", "--bootstrap", "0", "--tz", "UTC"])
    assert json.loads(out)["rates"]["groups"]["crossing"]["before"]["calls"] == 1
    monkeypatch.setenv("PIPELINE_TZ", "Nowhere/Land")
    code, out, err = _run_err(capsys, ["cache-report", "--calls", str(path)])
    assert code == 2 and out == "" and "PIPELINE_TZ: unknown time zone 'Nowhere/Land'" in err


@pytest.mark.parametrize("bad", [["--min-sessions", "0"], ["--min-calls", "-1"], ["--cutover-version", "claude-code"],
                                 ["--cutover", "2026-10-15", "--cutover-version", "claude-code@2.1.0"]])
def test_cache_report_refuses_bad_floors_and_cutovers(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: list[str]) -> None:
    path = tmp_path / "calls.parquet"
    _nights(1, nights=1).write_parquet(path)
    code, out, err = _run_err(capsys, ["cache-report", "--calls", str(path), *bad])
    assert code == 2 and out == "" and err


# --------------------------------------------------------------------------- once bugs, now fixed


def test_the_closing_note_places_no_truth_outside_an_interval_that_does_not_exist() -> None:
    from pipeline.cache.report import closing_note

    report, _ = analyze(_nights(3), AnalysisConfig(cutover=CUTOVER, bootstrap=50))
    report.simulation = {"true_effect": 0.9}
    note = closing_note(report)
    assert "- No effect estimate: too few to estimate" in note
    assert "outside the interval" not in note


def test_the_warehouse_path_counts_the_calls_it_leaves_out(tmp_path: Path) -> None:
    from pipeline.cache.report import ReportInputs, run_report
    from pipeline.warehouse import db

    path = tmp_path / "w.duckdb"
    at = dt.datetime(2026, 10, 12, 10, 0, tzinfo=dt.UTC)
    with db.writing(path) as con:
        for i, (session, when, cached) in enumerate(
            [("a", at, 0), ("a", at + dt.timedelta(seconds=30), 900), ("a", None, 900), (None, at, 0)]
        ):
            con.execute('INSERT INTO llm_calls (call_id, source, session_id, "at", prompt_tokens, cached_tokens) '
                        "VALUES (?, ?, ?, ?, ?, ?)", [f"c{i}", "harness", session, when, 1000, cached])
    report, _ = run_report(ReportInputs(db=str(path), config=AnalysisConfig(cutover=None, bootstrap=0)))
    assert report.calls == 2
    assert report.left_out == {"undated": 1, "no_session": 1}
