"""The harness workload simulator: determinism, rows, true causes, the cutover, seed 001 §10 item 2,
the true effect, the bulk mode and the `simulate` verb."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from pipeline.anchoring.request_builder import PromptSections, RequestBuilder, changed_sections
from pipeline.cache import workload
from pipeline.cache.simulator import AnthropicCache, PromptHasher, provider_rules
from pipeline.cache.workload import (
    ALLOW_SHELL_CLOCK,
    CALLS_SCHEMA,
    DATE_SECTION,
    TRUE_CAUSES,
    WorkloadConfig,
    WorkloadMix,
    _History,
    read_summary,
    simulate,
    write_calls,
)
from pipeline.cache.workload_bulk import simulate_bulk
from pipeline.cli.main import main

SMALL = WorkloadConfig(days=14, scale=0.5)


@pytest.fixture(scope="module")
def small() -> Any:
    return simulate(SMALL)


def _with_previous(frame: pl.DataFrame, tz: str = "UTC") -> pl.DataFrame:
    return (
        frame.sort(["session_id", "at"])
        .with_columns(
            pl.col("at").dt.convert_time_zone(tz).dt.date().alias("day"),
            pl.col("at").shift(1).over("session_id").alias("prev_at"),
            pl.col("prompt_tokens").shift(1).over("session_id").alias("prev_prompt"),
        )
        .with_columns(
            pl.col("prev_at").dt.convert_time_zone(tz).dt.date().alias("prev_day"),
            ((pl.col("at") - pl.col("prev_at")).dt.total_seconds()).alias("gap"),
        )
    )


def test_deterministic_for_a_seed(small: Any) -> None:
    again = simulate(SMALL)
    assert again.frame.equals(small.frame)
    assert again.summary.model_dump(exclude={"elapsed_s"}) == small.summary.model_dump(exclude={"elapsed_s"})
    other = simulate(SMALL.model_copy(update={"seed": 2}))
    assert not other.frame.equals(small.frame)


def test_rows_have_the_llm_calls_shape(small: Any) -> None:
    f = small.frame
    assert dict(f.schema) == CALLS_SCHEMA
    assert f["call_id"].is_unique().all()
    assert f["source"].unique().to_list() == ["simulated"]
    assert set(f["true_cause"].unique().to_list()) <= set(TRUE_CAUSES)
    assert f.filter(pl.col("cached_tokens") + pl.col("cache_write_tokens") > pl.col("prompt_tokens")).height == 0
    assert f.filter(pl.col("cached_tokens") < 0).height == 0
    start = dt.datetime.combine(SMALL.start, dt.time(), tzinfo=dt.UTC)
    assert f["at"].min() >= start and f["at"].max() < start + dt.timedelta(days=SMALL.days)
    # Every cause appears in a workload of this size.
    assert {c for c, n in small.summary.causes.items() if n} == set(TRUE_CAUSES)


def test_first_call_of_a_session_is_a_cold_start() -> None:
    f = simulate(SMALL.model_copy(update={"burn_in_days": 0})).frame
    first = _with_previous(f).filter(pl.col("prev_at").is_null())
    assert set(first["true_cause"].to_list()) == {"cold_start"}
    assert first["changed_sections"].null_count() == first.height
    assert (first["cached_tokens"] == 0).all()


def test_ttl_expiry_is_a_gap_beyond_the_ttl(small: Any) -> None:
    f = _with_previous(small.frame).filter(pl.col("prev_at").is_not_null())
    assert (f.filter(pl.col("true_cause") == "ttl_expiry")["gap"] > 300).all()
    assert (f.filter(pl.col("gap") > 300)["true_cause"] == "ttl_expiry").all()


def test_cutover_rewrites_live_sessions_once_and_never_again(small: Any) -> None:
    f = _with_previous(small.frame)
    cut = SMALL.cutover_date
    deploy = dt.datetime.combine(cut, dt.time(), tzinfo=dt.UTC)
    dated = f.filter(pl.col("changed_sections").list.contains(DATE_SECTION))
    # Once a session has made a call under the new harness, its date section never changes again;
    # a session's first call after the deploy sees the new wording whenever it comes.
    assert dated.filter(pl.col("prev_at") >= deploy).height == 0
    late = dated.filter(pl.col("day") > cut)
    assert (late["true_cause"] == "ttl_expiry").all()
    rewrites = f.filter((pl.col("day") == cut) & (pl.col("true_cause") == "prefix_change") & pl.col("changed_sections").list.contains(DATE_SECTION))
    assert rewrites.height >= 1  # the scheduled sessions running through the deploy at midnight
    assert (rewrites["cached_tokens"] == 0).all()
    assert rewrites["session_id"].is_unique().all()  # once per session


def test_compaction_keeps_the_system_prompt(small: Any) -> None:
    f = _with_previous(small.frame)
    compacted = f.filter(pl.col("true_cause") == "compaction")
    assert compacted.height >= 1
    assert (compacted["changed_sections"].list.len() == 0).all()  # nothing in the system prompt changed
    assert (compacted["cached_tokens"] > 0).all()  # tools + system prompt read back
    assert (compacted["cached_tokens"] < 0.5 * compacted["prev_prompt"]).all()


def _loop_over_midnight(deploy_first: bool) -> list[Any]:
    """One session: a three-call tool loop from 23:59:50 past midnight, then a new turn at 00:02."""
    import random

    from pipeline.cache import workload as w

    cfg = WorkloadConfig(days=5, cutover=dt.date(2026, 9, 3), burn_in_days=0)
    clock = w.Clock("UTC")
    script = w._Script(0, "s-loop", "interactive", "claude-sonnet-4-5")
    writer = w._ScriptWriter(script, random.Random(0), cfg, clock, w.Projects(cfg, clock), 0)
    day = dt.date(2026, 9, 3) if deploy_first else dt.date(2026, 9, 1)
    midnight = clock.at(day + dt.timedelta(days=1), 0)
    writer.turn(midnight - 10, 400, 3, lambda: 20.0)  # calls at 23:59:50, 00:00:10, 00:00:30
    writer.turn(midnight + 120, 400, 1, lambda: 20.0)
    rows, _ = w._replay([script], cfg, clock.at(cfg.cutover_date, 0), set())
    return rows


def test_tool_loop_calls_share_their_turn_date() -> None:
    """Rolling dates are read once per user turn: a tool loop running past midnight keeps its date."""
    rows = _loop_over_midnight(deploy_first=False)
    assert [r.cause for r in rows] == ["cold_start", "hit", "hit", "date_change"]
    assert rows[1].changed == [] and rows[2].changed == []  # the first call after midnight: no change
    assert rows[3].changed == [DATE_SECTION] and rows[3].cached_tokens == 0  # the next turn re-reads it
    anchored = _loop_over_midnight(deploy_first=True)
    assert [r.cause for r in anchored] == ["cold_start", "hit", "hit", "hit"]
    assert anchored[3].changed == [] and anchored[3].cached_tokens == anchored[2].prompt_tokens


# --------------------------------------------------------------------------- seed 001 §10 item 2

SECTIONS = PromptSections(
    persona="## Persona\n\n" + "a scheduled agent " * 200,
    experience="## Experience\n\n" + "checks the queue " * 200,
    memory="## Memory\n\n" + "notes " * 300,
    environment="## Environment\n\nLinux",
    tool_guidance="## Tools\n\n" + "use the shell " * 300,
)
TOOLS = [{"type": "function", "function": {"name": "shell", "description": "run " * 300, "parameters": {}}}]


def _replay_crossing(mode: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """A session begun at 23:50 on 10-12 whose next user message comes at 00:02 on 10-13."""
    builder = RequestBuilder(TOOLS)
    cache = AnthropicCache(provider_rules("anthropic"))
    hasher = PromptHasher()
    history: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    prompts = []
    previous = None
    # Seconds after 23:50 on 10-12: three turns four minutes apart, then one at 00:02 (within the TTL).
    turns = [
        (0.0, "2026-10-12", "check the build queue"),
        (240.0, "2026-10-12", "and the deploy log"),
        (480.0, "2026-10-12", "summarise"),
        (720.0, "2026-10-13", "what changed overnight?"),
    ]
    for at, ymd, text in turns:
        history.append({"role": "user", "content": text + " " + "detail " * 80, "sender_ymd": ymd})
        today = ymd
        request = builder.build_request(history, SECTIONS, mode=mode, today=today, base_ymd="2026-10-12")  # type: ignore[arg-type]
        plain = hasher.prompt(request)
        prompt = plain.with_breakpoints((len(TOOLS) + 5, len(plain.keys) - 1))
        result = cache.request(prompt, at, "claude-sonnet-4-5")
        rows.append({
            "prompt": result.prompt_tokens, "cached": result.cached_tokens, "write": result.cache_write_tokens,
            "changed": None if previous is None else changed_sections(previous, request),
        })
        prompts.append(prompt)
        previous = request
        history.append({"role": "assistant", "content": "done " * 60})
    return rows, prompts


def test_seed_10_2_anchored_first_call_after_midnight_keeps_its_cache() -> None:
    rows, prompts = _replay_crossing("anchored")
    crossing, usual = rows[-1], rows[1:-1]
    assert DATE_SECTION not in crossing["changed"]
    assert crossing["changed"] == []
    assert crossing["cached"] == prompts[-2].tokens  # the whole previous prompt is read back
    usual_share = min(r["cached"] / r["prompt"] for r in usual)
    assert crossing["cached"] / crossing["prompt"] >= usual_share - 0.02  # the session's usual level


def test_seed_10_2_rolling_first_call_after_midnight_rewrites_from_the_date_section() -> None:
    rows, prompts = _replay_crossing("rolling")
    crossing = rows[-1]
    assert crossing["changed"] == [DATE_SECTION]
    date_start = prompts[-1].ends[prompts[-1].labels.index(DATE_SECTION) - 1]
    assert crossing["cached"] <= date_start  # nothing from the date section on is read
    assert crossing["cached"] + crossing["write"] == crossing["prompt"]  # it is all written again
    assert crossing["cached"] == 0  # with the breakpoint after the system prompt, the hit drops to zero


def test_seed_10_2_in_the_simulated_workload(small: Any) -> None:
    f = _with_previous(small.frame)
    crossing = f.filter((pl.col("gap") <= 300) & (pl.col("day") != pl.col("prev_day")))
    after = crossing.filter(pl.col("day") > SMALL.cutover_date)
    before = crossing.filter(pl.col("day") < SMALL.cutover_date)
    assert after.height >= 10 and before.height >= 10
    # Anchored: no date section among the changes, and the whole previous prompt is read back.
    assert not after["changed_sections"].list.contains(DATE_SECTION).any()
    assert (after["cached_tokens"] >= after["prev_prompt"]).all()
    # Rolling: the date section changed and everything from the system prompt on was rewritten.
    rewritten = before.filter(pl.col("true_cause") == "date_change")
    assert rewritten.height == before.height  # cron-aligned tasks: each crossing opens a turn
    assert (rewritten["changed_sections"].list.contains(DATE_SECTION)).all()
    assert (rewritten["cached_tokens"] == 0).all()
    assert (rewritten["cache_write_tokens"] == rewritten["prompt_tokens"]).all()


# --------------------------------------------------------------------------- true effect


def test_true_effect_is_the_replayed_difference(small: Any) -> None:
    s = small.summary
    d = s.true_effect_detail
    assert d is not None and d.calls >= 10
    assert -1.0 <= s.true_effect <= 1.0
    assert s.true_effect == pytest.approx(d.anchored_share - d.rolling_share)
    assert d.rolling_share == 0.0  # Anthropic: a date change leaves nothing to read
    assert s.true_effect > 0.9


def test_openai_rolling_date_change_keeps_the_sections_before_the_date() -> None:
    result = simulate(SMALL.model_copy(update={"provider": "openai"}))
    f = result.frame
    assert f["cache_write_tokens"].null_count() == f.height  # OpenAI reports no writes
    detail = result.summary.true_effect_detail
    assert detail is not None and 0.0 < detail.rolling_share < 0.5
    assert 0.0 < result.summary.true_effect < 1.0
    assert set(f["model"].unique().to_list()) <= {"gpt-5", "gpt-5-mini"}


def test_time_zone_moves_midnight() -> None:
    result = simulate(SMALL.model_copy(update={"tz": "Asia/Shanghai", "scale": 0.25}))
    f = _with_previous(result.frame, "Asia/Shanghai")
    dated = f.filter(pl.col("true_cause") == "date_change")
    assert dated.height >= 1
    local_hours = dated["at"].dt.convert_time_zone("Asia/Shanghai").dt.hour().to_list()
    assert set(local_hours) <= {0}  # the crossing calls fire at local midnight


def test_summary_travels_in_the_parquet(small: Any, tmp_path: Path) -> None:
    path = write_calls(small.frame, tmp_path / "calls.parquet", small.summary)
    assert pl.read_parquet(path).equals(small.frame)
    assert read_summary(path) == small.summary
    assert read_summary(tmp_path / "nothing.parquet") is None


# --------------------------------------------------------------------------- bulk


def test_bulk_exact_size_same_shape_and_deterministic() -> None:
    a = simulate_bulk(20_000, WorkloadConfig(seed=3))
    b = simulate_bulk(20_000, WorkloadConfig(seed=3))
    assert a.frame.height == 20_000 and a.summary.calls == 20_000 and a.summary.bulk
    assert a.frame.equals(b.frame)
    assert dict(a.frame.schema) == CALLS_SCHEMA
    f = a.frame
    assert f.filter(pl.col("cached_tokens") + pl.col("cache_write_tokens") > pl.col("prompt_tokens")).height == 0
    assert {c for c, n in a.summary.causes.items() if n} <= set(TRUE_CAUSES)
    assert a.summary.true_effect is not None and 0.9 < a.summary.true_effect <= 1.0


def test_bulk_yields_every_true_cause() -> None:
    bulk = simulate_bulk(20_000, WorkloadConfig(seed=3))
    assert {c for c, n in bulk.summary.causes.items() if n} == set(TRUE_CAUSES)


def test_bulk_draws_from_the_same_model_as_the_detailed_simulator() -> None:
    detailed = simulate(WorkloadConfig(days=14)).frame
    bulk = simulate_bulk(detailed.height, WorkloadConfig(days=14)).frame

    def profile(f: pl.DataFrame) -> dict[str, float]:
        return {
            "share": f["cached_tokens"].sum() / f["prompt_tokens"].sum(),
            "prompt": f["prompt_tokens"].mean(),
            "ttl": (f["true_cause"] == "ttl_expiry").mean(),
        }

    d, b = profile(detailed), profile(bulk)
    assert b["share"] == pytest.approx(d["share"], abs=0.05)
    assert b["prompt"] == pytest.approx(d["prompt"], rel=0.25)
    assert b["ttl"] == pytest.approx(d["ttl"], abs=0.04)


# --------------------------------------------------------------------------- incremental requests
# The replay keeps each session's projected messages instead of rebuilding them from the whole
# history on every call; these check it against RequestBuilder.build_request on the whole history.

FULL_BUILDER = RequestBuilder(workload.TOOLS, allow_shell_clock=ALLOW_SHELL_CLOCK)
_DAYS = ["2026-09-01", "2026-09-02", "2026-09-03"]
_message = st.one_of(
    st.builds(lambda ymd, text: {"role": "user", "content": text, "sender_ymd": ymd}, st.sampled_from(_DAYS), st.text(max_size=5)),
    st.builds(lambda text: {"role": "user", "content": [{"type": "text", "text": text}]}, st.text(max_size=5)),
    st.builds(lambda ymd: {"role": "user", "content": None, "sender_ymd": ymd}, st.sampled_from(_DAYS)),
    st.just({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}, "summary": "internal"}
    ]}),
    st.just({"role": "tool", "tool_call_id": "c1", "content": "ok", "sender_ymd": _DAYS[0]}),
)
_key = st.tuples(st.sampled_from(["rolling", "anchored"]), st.sampled_from(_DAYS[:2]), st.none() | st.sampled_from(_DAYS))
_step = st.one_of(
    st.tuples(st.just("extend"), st.lists(_message, min_size=1, max_size=3)),
    st.tuples(st.just("build"), st.none()),
    st.tuples(st.just("reset"), st.lists(_message, max_size=2)),
    st.tuples(st.just("rekey"), _key),
)


def _full_wire(items: list[dict[str, Any]], mode: Any, base_ymd: str, previous: str | None) -> list[dict[str, Any]]:
    request = FULL_BUILDER.build_request(items, mode=mode, today=_DAYS[-1], base_ymd=base_ymd, previous_user_ymd_before=previous)
    return request["messages"][1:]


@settings(max_examples=80, deadline=None)
@given(_key, st.lists(_step, max_size=16))
def test_history_projection_equals_a_full_build(key: Any, steps: list[tuple[str, Any]]) -> None:
    """Appends between builds, compaction resets, date-mode and reference switches."""
    history = _History()
    for op, arg in steps:
        if op == "extend":
            history.extend(arg)
        elif op == "reset":
            history = _History(arg)
        elif op == "rekey":
            key = arg
        else:
            assert history.wire(*key) == _full_wire(history.items, *key)
            assert history.copy().wire(*key) == _full_wire(history.items, *key)


def test_replay_equals_the_replay_with_full_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A small workload with compactions, tool loops, memory updates, the cutover and a replayed
    shadow world gives the same frame and summary when every request is built from the whole history."""
    cfg = WorkloadConfig(days=4, scale=0.25, burn_in_days=1,
                         mix=WorkloadMix(compaction_limit_tokens=10_000, channel_tool_p=0.3, memory_updates_per_day=1.0))
    fast = simulate(cfg)
    monkeypatch.setattr(_History, "wire", lambda self, *key: _full_wire(self.items, *key))
    full = simulate(cfg)
    assert_frame_equal(fast.frame, full.frame, check_exact=True)
    assert fast.summary.model_dump(exclude={"elapsed_s"}) == full.summary.model_dump(exclude={"elapsed_s"})
    assert {"compaction", "date_change", "prefix_change"} <= {c for c, n in fast.summary.causes.items() if n}


# --------------------------------------------------------------------------- CLI


def test_simulate_verb_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "calls.parquet"
    code = main(["simulate", "--days", "6", "--scale", "0.25", "--seed", "4", "--out", str(out), "--json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 0 and doc["calls"] == pl.read_parquet(out).height
    assert doc["cutover"] == "2026-09-04" and doc["out"] == str(out)
    assert set(doc["causes"]) == set(TRUE_CAUSES) and "true_effect" in doc
    assert "simulating" in captured.err


def test_simulate_verb_bulk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bulk.parquet"
    assert main(["simulate", "--bulk", "5000", "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calls"] == 5000 == pl.read_parquet(out).height


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--tz", "Mars/Olympus"], "time zone"),
        (["--cutover", "2027-01-01"], "cutover"),
        (["--cutover", "yesterday"], "not a date"),
        (["--days", "0"], "must be 1 or more"),
        (["--provider", "acme"], "invalid choice"),
    ],
)
def test_simulate_bad_invocations_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    try:
        code = main(["simulate", "--out", str(tmp_path / "x.parquet"), *argv])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()
