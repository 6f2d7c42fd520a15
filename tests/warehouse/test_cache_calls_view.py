"""The `cache_calls` view end to end: tiny hand-written Claude Code and Codex transcripts (the record
shapes the real harnesses write, minimal) ingested into a warehouse, then each call's cause, its
evidence line, the session's time zone and the date crossing read back with SQL."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.cache import causes
from pipeline.cli.main import main
from pipeline.warehouse import db, ingest

CWD = "/home/ana/src/shop"
COLUMNS = (
    "call_id", "session_id", "line_no", "at", "model", "harness_version", "prompt_tokens", "cached_tokens", "gap_s",
    "cause", "evidence_line_no", "tz", "tz_source", "seen_date", "crossing", "conversation", "prev_call_id",
)


def _stamp(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dumps(record: dict[str, Any]) -> str:
    # The harnesses write compact JSON, one record a line.
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


class Claude:
    """A Claude Code transcript being written: each method appends one record and returns its line number."""

    def __init__(self, session_id: str, *, version: str = "2.1.5", model: str = "claude-sonnet-4-5-20250929") -> None:
        self.session_id, self.version, self.model = session_id, version, model
        self.lines: list[str] = []
        self.parent: str | None = None

    def _add(self, record: dict[str, Any], *, sidechain: bool = False, agent: str | None = None,
             version: str | None = None) -> int:
        uuid = f"{self.session_id[:8]}-{len(self.lines):04d}-4000-8000-000000000000"
        base = {"parentUuid": self.parent, "isSidechain": sidechain, "userType": "external", "cwd": CWD,
                "sessionId": self.session_id, "version": version or self.version, "gitBranch": "main"}
        if agent:
            base["agentId"] = agent
        self.lines.append(_dumps({**base, **record, "uuid": uuid}))
        if not sidechain:
            self.parent = uuid
        return len(self.lines)

    def user(self, at: dt.datetime, text: str, **kw: Any) -> int:
        return self._add({"type": "user", "message": {"role": "user", "content": text}, "timestamp": _stamp(at)}, **kw)

    def call(self, at: dt.datetime, *, read: int, write: int, fresh: int = 10, write_1h: int = 0,
             model: str | None = None, **kw: Any) -> int:
        """An assistant response: its prompt is fresh + write + read tokens."""
        n = len(self.lines)
        usage = {"input_tokens": fresh, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
                 "cache_creation": {"ephemeral_5m_input_tokens": write - write_1h, "ephemeral_1h_input_tokens": write_1h},
                 "output_tokens": 20, "service_tier": "standard"}
        message = {"model": model or self.model, "id": f"msg_{self.session_id[:6]}{n:04d}", "type": "message",
                   "role": "assistant", "content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn",
                   "usage": usage}
        return self._add({"type": "assistant", "message": message, "requestId": f"req_{self.session_id[:6]}{n:04d}",
                          "timestamp": _stamp(at)}, **kw)

    def compact_boundary(self, at: dt.datetime) -> int:
        return self._add({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
                          "isMeta": False, "level": "info", "timestamp": _stamp(at),
                          "compactMetadata": {"trigger": "auto", "preTokens": 150_000}})

    def date_change(self, at: dt.datetime, new_date: str) -> int:
        return self._add({"type": "attachment", "attachment": {"type": "date_change", "newDate": new_date},
                          "timestamp": _stamp(at), "entrypoint": "cli"})

    def write(self, folder: Path) -> Path:
        path = folder / "claude" / "projects" / "-home-ana-src-shop" / f"{self.session_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        return path


class Codex:
    """A Codex CLI rollout being written (session_meta, turn_context, user turns, token counts)."""

    def __init__(self, session_id: str, created: dt.datetime, *, cli_version: str = "0.117.0", model: str = "gpt-5.4") -> None:
        self.session_id, self.created, self.model = session_id, created, model
        self.lines: list[str] = []
        self.totals = [0, 0, 0]
        self.session_meta(created, cli_version)
        self.turn_context(created)

    def _add(self, at: dt.datetime, kind: str, payload: dict[str, Any]) -> int:
        self.lines.append(_dumps({"timestamp": _stamp(at), "type": kind, "payload": payload}))
        return len(self.lines)

    def session_meta(self, at: dt.datetime, cli_version: str) -> int:
        return self._add(at, "session_meta", {"id": self.session_id, "timestamp": _stamp(self.created), "cwd": CWD,
                                              "originator": "codex_cli_rs", "cli_version": cli_version, "source": "cli",
                                              "model_provider": "openai"})

    def turn_context(self, at: dt.datetime, model: str | None = None) -> int:
        return self._add(at, "turn_context", {"cwd": CWD, "approval_policy": "on-request", "model": model or self.model})

    def environment(self, at: dt.datetime, *, current_date: str | None = None, timezone: str | None = None) -> int:
        parts = ["<environment_context>", f"  <cwd>{CWD}</cwd>", "  <shell>bash</shell>"]
        if current_date:
            parts.append(f"  <current_date>{current_date}</current_date>")
        if timezone:
            parts.append(f"  <timezone>{timezone}</timezone>")
        parts.append("</environment_context>")
        return self._add(at, "response_item", {"type": "message", "role": "user",
                                               "content": [{"type": "input_text", "text": "\n".join(parts)}]})

    def user_turn(self, at: dt.datetime, text: str) -> int:
        self._add(at, "event_msg", {"type": "task_started", "turn_id": f"turn-{len(self.lines)}",
                                    "model_context_window": 258_400})
        self._add(at, "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
        return self._add(at, "event_msg", {"type": "user_message", "message": text, "images": []})

    def call(self, at: dt.datetime, *, prompt: int, cached: int) -> int:
        """A response's token count: the running totals grow by this request's usage."""
        last = {"input_tokens": prompt, "cached_input_tokens": cached, "output_tokens": 40, "reasoning_output_tokens": 0,
                "total_tokens": prompt + 40}
        self.totals = [self.totals[0] + prompt, self.totals[1] + cached, self.totals[2] + 40]
        total = {"input_tokens": self.totals[0], "cached_input_tokens": self.totals[1], "output_tokens": self.totals[2],
                 "reasoning_output_tokens": 0, "total_tokens": self.totals[0] + self.totals[2]}
        return self._add(at, "event_msg", {"type": "token_count", "info": {
            "total_token_usage": total, "last_token_usage": last, "model_context_window": 258_400}})

    def compacted(self, at: dt.datetime) -> int:
        return self._add(at, "compacted", {"message": "summary of the conversation so far"})

    def write(self, folder: Path, local_start: dt.datetime | None = None) -> Path:
        """Named as Codex names a rollout: its creation in the machine's local time (`local_start`)."""
        start = local_start or self.created
        name = f"rollout-{start.strftime('%Y-%m-%dT%H-%M-%S')}-{self.session_id}.jsonl"
        path = folder / "codex" / "sessions" / start.strftime("%Y/%m/%d") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        return path


def _warehouse(tmp_path: Path, *transcripts: Claude | Codex, **names: dt.datetime) -> Path:
    folder = tmp_path / "logs"
    for t in transcripts:
        if isinstance(t, Codex):
            t.write(folder, names.get(t.session_id))
        else:
            t.write(folder)
    path = tmp_path / "w.duckdb"
    with db.writing(path) as con:
        report = ingest.ingest(con, [folder])
        assert not report.errors
    return path


_SELECT = ", ".join(f'"{c}"' for c in COLUMNS)


def _view(path: Path, session_id: str) -> list[dict[str, Any]]:
    with db.reading(path) as con:
        rows = con.execute(
            f"SELECT {_SELECT} FROM cache_calls WHERE session_id = ? ORDER BY line_no", [session_id]
        ).fetchall()
    return [dict(zip(COLUMNS, r, strict=True)) for r in rows]


def _causes(rows: list[dict[str, Any]]) -> list[str]:
    return [r["cause"] for r in rows]


T = dt.datetime(2026, 8, 3, 9, 0, tzinfo=dt.UTC)
SID = "5e551011-aaaa-4bbb-8ccc-000000000001"
SID2 = "5e551011-aaaa-4bbb-8ccc-000000000002"
CODEX_ID = "019d417c-54dd-7ee3-b9e7-538a07d03f7a"


def _s(seconds: float) -> dt.datetime:
    return T + dt.timedelta(seconds=seconds)


# --------------------------------------------------------------------------- Claude Code


def test_the_view_has_the_columns_the_issue_names(tmp_path: Path) -> None:
    cc = Claude(SID)
    cc.user(_s(0), "Add a test for the cart total")
    cc.call(_s(1), read=0, write=20_000)
    path = _warehouse(tmp_path, cc)
    with db.reading(path) as con:
        names = {r[0] for r in con.execute("DESCRIBE cache_calls").fetchall()}
    assert set(COLUMNS) <= names
    (row,) = _view(path, SID)
    assert row["cause"] == "cold_start" and row["prompt_tokens"] == 20_010 and row["harness_version"] == "2.1.5"
    assert row["line_no"] == 2 and row["evidence_line_no"] == 2 and row["gap_s"] is None


def test_a_compact_boundary_between_two_calls_is_the_compaction_and_its_evidence(tmp_path: Path) -> None:
    cc = Claude(SID)
    cc.user(_s(0), "Refactor the checkout module")
    cc.call(_s(5), read=0, write=100_000)
    cc.call(_s(30), read=100_000, write=2_000)
    boundary = cc.compact_boundary(_s(60))
    # after the compaction the prompt is still more than half the previous one: only the record explains the miss
    cc.call(_s(90), read=8_000, write=60_000)
    rows = _view(_warehouse(tmp_path, cc), SID)
    assert _causes(rows) == ["cold_start", "hit", "compaction"]
    assert rows[2]["evidence_line_no"] == boundary == 4
    assert not rows[2]["crossing"]


def test_a_date_change_attachment_is_a_crossing_sets_the_zone_and_explains_a_miss(tmp_path: Path) -> None:
    # 21:57 UTC, then Claude Code 2.1 announces 2026-08-04 at 22:00:40 UTC: midnight came at 22:00 UTC, GMT+02:00
    night = dt.datetime(2026, 8, 3, 21, 50, tzinfo=dt.UTC)
    miss, hit = Claude(SID), Claude(SID2)
    lines = {}
    for cc, read in ((miss, 3_000), (hit, 50_000)):
        cc.user(night, "Keep going with the migration")
        cc.call(night + dt.timedelta(seconds=10), read=0, write=50_000)
        cc.call(night + dt.timedelta(minutes=7), read=50_000, write=500)
        lines[cc.session_id] = cc.date_change(night + dt.timedelta(minutes=10, seconds=40), "2026-08-04")
        cc.user(night + dt.timedelta(minutes=10, seconds=41), "and now the tests")
        cc.call(night + dt.timedelta(minutes=11), read=read, write=50_600 - read)
    path = _warehouse(tmp_path, miss, hit)
    rows = _view(path, SID)
    assert _causes(rows) == ["cold_start", "hit", "date_change"]
    assert rows[2]["crossing"] and not rows[1]["crossing"]
    assert rows[2]["evidence_line_no"] == lines[SID]
    assert rows[2]["seen_date"] == dt.date(2026, 8, 4) and rows[1]["seen_date"] is None
    assert {(r["tz"], r["tz_source"]) for r in rows} == {("GMT+02:00", "date_notice")}
    # the same crossing that read everything back is a hit, and still a crossing
    rows = _view(path, SID2)
    assert _causes(rows) == ["cold_start", "hit", "hit"] and rows[2]["crossing"]
    assert rows[0]["tz"] == "GMT+02:00"


def test_a_date_notice_west_of_utc_gives_a_negative_offset(tmp_path: Path) -> None:
    # newDate 2026-08-04 announced at 06:20 UTC: midnight was at 06:00 UTC, GMT-06:00
    morning = dt.datetime(2026, 8, 4, 5, 58, tzinfo=dt.UTC)
    cc = Claude(SID)
    cc.user(morning, "continue")
    cc.call(morning + dt.timedelta(seconds=5), read=0, write=30_000)
    cc.date_change(morning + dt.timedelta(minutes=22), "2026-08-04")
    cc.call(morning + dt.timedelta(minutes=23), read=30_000, write=100)
    rows = _view(_warehouse(tmp_path, cc), SID)
    assert rows[0]["tz"] == "GMT-06:00" and rows[0]["tz_source"] == "date_notice"
    assert rows[1]["crossing"] and rows[1]["cause"] == "hit"


def test_an_interleaved_sidechain_is_a_conversation_of_its_own(tmp_path: Path) -> None:
    cc = Claude(SID)
    cc.user(_s(0), "Find where the tax is computed")
    main_1 = cc.call(_s(5), read=0, write=40_000)
    side_1 = cc.call(_s(10), read=0, write=6_000, sidechain=True, agent="a1b2c3")
    side_2 = cc.call(_s(15), read=6_000, write=300, sidechain=True, agent="a1b2c3")
    # reads the main conversation's prompt back: its previous call is main_1, not the sidechain's
    main_2 = cc.call(_s(20), read=40_000, write=800)
    rows = {r["line_no"]: r for r in _view(_warehouse(tmp_path, cc), SID)}
    assert rows[main_2]["prev_call_id"] == rows[main_1]["call_id"] and rows[main_2]["cause"] == "hit"
    assert rows[side_1]["cause"] == "cold_start" and rows[side_1]["conversation"] != rows[main_1]["conversation"]
    assert rows[side_2]["prev_call_id"] == rows[side_1]["call_id"] and rows[side_2]["cause"] == "hit"
    assert rows[main_2]["gap_s"] == pytest.approx(15.0)


def test_a_model_switch_and_a_version_change(tmp_path: Path) -> None:
    switch, update = Claude(SID), Claude(SID2, version="2.1.3")
    for cc in (switch, update):
        cc.user(_s(0), "Plan the release")
        cc.call(_s(5), read=0, write=40_000)
    switch.call(_s(40), read=0, write=41_000, model="claude-opus-4-1-20250805")
    update.call(_s(40), read=0, write=41_000, version="2.1.4")
    path = _warehouse(tmp_path, switch, update)
    assert _causes(_view(path, SID)) == ["cold_start", "model_switch"]
    rows = _view(path, SID2)
    assert _causes(rows) == ["cold_start", "harness_update"]
    assert [r["harness_version"] for r in rows] == ["2.1.3", "2.1.4"]


def test_a_long_gap_outranks_the_compaction_inside_it(tmp_path: Path) -> None:
    cc = Claude(SID)
    cc.user(_s(0), "Summarise the logs")
    cc.call(_s(5), read=0, write=90_000)
    cc.compact_boundary(_s(600))
    cc.call(_s(1200), read=0, write=20_000)
    rows = _view(_warehouse(tmp_path, cc), SID)
    assert _causes(rows) == ["cold_start", "ttl_expiry"] and rows[1]["evidence_line_no"] == rows[0]["line_no"]


def test_a_one_hour_write_keeps_its_cache_for_an_hour(tmp_path: Path) -> None:
    cc = Claude(SID)
    cc.user(_s(0), "Read the spec")
    cc.call(_s(5), read=0, write=60_000, write_1h=60_000)
    cc.call(_s(1205), read=0, write=60_500, write_1h=60_500)  # 20 minutes later: inside the 1-hour cache
    cc.call(_s(1205 + 3700), read=0, write=61_000, write_1h=61_000)  # beyond it
    rows = _view(_warehouse(tmp_path, cc), SID)
    # inside the hour a miss with nothing in the records to explain it is the provider's
    assert _causes(rows) == ["cold_start", "provider_miss", "ttl_expiry"]
    assert [r["gap_s"] for r in rows[1:]] == [pytest.approx(1200.0), pytest.approx(3700.0)]


def test_a_model_that_reports_no_caching_is_not_a_miss(tmp_path: Path) -> None:
    cc = Claude(SID, model="glm-5.1")
    cc.user(_s(0), "Translate the README")
    for k in range(3):
        cc.call(_s(10 + 30 * k), read=0, write=0, fresh=12_000 + 500 * k)
    rows = _view(_warehouse(tmp_path, cc), SID)
    assert _causes(rows) == ["cold_start", "no_cache_reported", "no_cache_reported"]


# --------------------------------------------------------------------------- Codex


def test_a_codex_rollout_name_in_local_time_gives_the_offset(tmp_path: Path) -> None:
    created = dt.datetime(2026, 3, 31, 1, 22, 40, tzinfo=dt.UTC)
    cx = Codex(CODEX_ID, created)
    cx.user_turn(created + dt.timedelta(seconds=2), "Why does the build fail?")
    cx.call(created + dt.timedelta(seconds=5), prompt=12_000, cached=0)
    # the file is named after 19:22:40 on 2026-03-30, Mountain daylight time
    path = _warehouse(tmp_path, cx, **{CODEX_ID: dt.datetime(2026, 3, 30, 19, 22, 40)})
    (row,) = _view(path, CODEX_ID)
    assert (row["tz"], row["tz_source"]) == ("GMT-06:00", "file_name")
    assert row["harness_version"] == "0.117.0" and row["cause"] == "cold_start"


def test_a_codex_environment_timezone_wins_and_its_date_is_what_the_model_saw(tmp_path: Path) -> None:
    created = dt.datetime(2026, 3, 31, 1, 22, 40, tzinfo=dt.UTC)
    cx = Codex(CODEX_ID, created)
    cx.environment(created, current_date="2026-03-30", timezone="America/Denver")
    cx.user_turn(created + dt.timedelta(seconds=2), "Why does the build fail?")
    cx.call(created + dt.timedelta(seconds=5), prompt=12_000, cached=0)
    cx.call(created + dt.timedelta(seconds=20), prompt=13_000, cached=11_904)
    # the file name says UTC+01:00: the named zone is stronger evidence
    path = _warehouse(tmp_path, cx, **{CODEX_ID: dt.datetime(2026, 3, 31, 2, 22, 40)})
    rows = _view(path, CODEX_ID)
    assert {(r["tz"], r["tz_source"]) for r in rows} == {("America/Denver", "environment")}
    assert [r["seen_date"] for r in rows] == [dt.date(2026, 3, 30)] * 2
    assert _causes(rows) == ["cold_start", "hit"]


def test_a_codex_environment_with_a_new_date_is_a_date_change(tmp_path: Path) -> None:
    created = dt.datetime(2026, 4, 1, 5, 50, tzinfo=dt.UTC)
    cx = Codex(CODEX_ID, created)
    cx.environment(created, current_date="2026-03-31", timezone="America/Denver")
    cx.user_turn(created, "Start the report")
    cx.call(created + dt.timedelta(seconds=5), prompt=20_000, cached=0)
    line = cx.environment(created + dt.timedelta(minutes=2), current_date="2026-04-01", timezone="America/Denver")
    cx.call(created + dt.timedelta(minutes=2, seconds=5), prompt=21_000, cached=2_048)
    rows = _view(_warehouse(tmp_path, cx), CODEX_ID)
    assert [r["seen_date"] for r in rows] == [dt.date(2026, 3, 31), dt.date(2026, 4, 1)]
    assert rows[1]["crossing"] and rows[1]["cause"] == "date_change" and rows[1]["evidence_line_no"] == line


@pytest.mark.parametrize(("cached", "cause"), [(9_984, "prefix_change"), (1_024, "provider_miss")])
def test_a_codex_new_turn_reads_up_to_the_previous_turns_first_request(tmp_path: Path, cached: int, cause: str) -> None:
    created = dt.datetime(2026, 3, 31, 14, 0, tzinfo=dt.UTC)
    cx = Codex(CODEX_ID, created)
    cx.user_turn(created, "Add pagination to the API")
    cx.call(created + dt.timedelta(seconds=5), prompt=10_000, cached=0)
    cx.call(created + dt.timedelta(seconds=20), prompt=12_000, cached=9_984)
    cx.call(created + dt.timedelta(seconds=40), prompt=14_000, cached=11_904)
    turn = cx.user_turn(created + dt.timedelta(seconds=90), "Now document it")
    # the earlier turn's reasoning is not resent: what stayed the same ends at its first request (10,000)
    cx.call(created + dt.timedelta(seconds=95), prompt=16_000, cached=cached)
    rows = _view(_warehouse(tmp_path, cx), CODEX_ID)
    assert _causes(rows) == ["cold_start", "hit", "hit", cause]
    if cause == "prefix_change":
        assert rows[3]["evidence_line_no"] == turn
    else:
        assert rows[3]["evidence_line_no"] == rows[3]["line_no"]


def test_a_codex_mid_turn_read_of_far_less_than_the_previous_prompt_is_a_provider_miss(tmp_path: Path) -> None:
    created = dt.datetime(2026, 3, 31, 14, 0, tzinfo=dt.UTC)
    cx = Codex(CODEX_ID, created)
    cx.user_turn(created, "Add pagination to the API")
    cx.call(created + dt.timedelta(seconds=5), prompt=140_000, cached=0)
    cx.call(created + dt.timedelta(seconds=20), prompt=142_000, cached=8_064)
    rows = _view(_warehouse(tmp_path, cx), CODEX_ID)
    assert _causes(rows) == ["cold_start", "provider_miss"]


def test_codex_compacted_model_switch_and_cli_update(tmp_path: Path) -> None:
    created = dt.datetime(2026, 3, 31, 14, 0, tzinfo=dt.UTC)
    cx = Codex(CODEX_ID, created)
    cx.user_turn(created, "Port the scheduler")
    cx.call(created + dt.timedelta(seconds=5), prompt=100_000, cached=0)
    compacted = cx.compacted(created + dt.timedelta(seconds=30))
    cx.call(created + dt.timedelta(seconds=35), prompt=90_000, cached=2_000)
    cx.turn_context(created + dt.timedelta(seconds=50), model="gpt-5.4-mini")
    cx.call(created + dt.timedelta(seconds=55), prompt=91_000, cached=0)
    cx.call(created + dt.timedelta(seconds=70), prompt=92_000, cached=90_880)
    meta = cx.session_meta(created + dt.timedelta(seconds=80), "0.118.0")
    cx.call(created + dt.timedelta(seconds=85), prompt=93_000, cached=1_024)
    rows = _view(_warehouse(tmp_path, cx), CODEX_ID)
    assert _causes(rows) == ["cold_start", "compaction", "model_switch", "hit", "harness_update"]
    assert rows[1]["evidence_line_no"] == compacted
    assert rows[4]["evidence_line_no"] == meta and rows[4]["harness_version"] == "0.118.0"


# --------------------------------------------------------------------------- readers of the same classification


def test_classify_warehouse_is_the_view(tmp_path: Path) -> None:
    cc = Claude(SID)
    cc.user(_s(0), "Refactor the checkout module")
    cc.call(_s(5), read=0, write=100_000)
    cc.compact_boundary(_s(60))
    cc.call(_s(90), read=8_000, write=60_000)
    path = _warehouse(tmp_path, cc)
    frame = causes.classify_warehouse(path)
    assert frame["cause"].cast(str).to_list() == _causes(_view(path, SID))
    assert frame["miss"].to_list() == [False, True]


def test_classify_warehouse_range_by_range_is_the_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each session a range of its own, and a logged call whose session has no transcript and whose
    # id falls between two ranges' sessions: the ranges together give the view's rows, every one.
    compacted, updated = Claude(SID), Claude(SID2, version="2.1.3")
    for cc in (compacted, updated):
        cc.user(_s(0), "Plan the release")
        cc.call(_s(5), read=0, write=40_000)
    compacted.compact_boundary(_s(20))
    compacted.call(_s(40), read=1_000, write=30_000)
    updated.call(_s(40), read=0, write=41_000, version="2.1.4")
    created = dt.datetime(2026, 3, 31, 14, 0, tzinfo=dt.UTC)
    cx = Codex(CODEX_ID, created)
    cx.user_turn(created, "Port the scheduler")
    cx.call(created + dt.timedelta(seconds=5), prompt=100_000, cached=0)
    cx.call(created + dt.timedelta(seconds=35), prompt=101_000, cached=99_000)
    path = _warehouse(tmp_path, compacted, updated, cx)
    between = SID + "-imported"  # sorts after SID and before SID2
    with db.writing(path) as con:
        for n, seconds in enumerate((0, 30)):
            con.execute(
                "INSERT INTO llm_calls (call_id, source, session_id, \"at\", model, prompt_tokens, cached_tokens) "
                "VALUES (?, 'import:log', ?, ?, 'gpt-5.4', 50000, 0)",
                [f"imported-{n}", between, _s(seconds)],
            )
    with db.reading(path) as con:
        assert len(causes.session_ranges(con, 1)) == 3
        whole = con.execute(
            f'SELECT {_SELECT} FROM cache_calls ORDER BY session_id, "at", call_id'
        ).fetchall()
    monkeypatch.setattr(causes, "RANGE_BYTES", 1)
    ranged = causes.classify_warehouse(path)
    assert ranged.height == len(whole) == 8
    assert [tuple(r) for r in ranged.select(pl.col(c).cast(pl.String) if c == "cause" else pl.col(c) for c in COLUMNS)
            .iter_rows()] == whole
    assert ranged.filter(pl.col("session_id") == between)["cause"].cast(str).to_list() == ["cold_start", "no_cache_reported"]


def _versioned(tmp_path: Path) -> Path:
    """Two Claude Code sessions before 2.1 and two after, each crossing midnight once."""
    transcripts = []
    for n, version in enumerate(("2.0.77", "2.0.77", "2.1.5", "2.1.5")):
        cc = Claude(f"5e551011-aaaa-4bbb-8ccc-00000000010{n}", version=version)
        night = dt.datetime(2026, 8, 3, 23, 50, tzinfo=dt.UTC)
        cc.user(night, "keep going")
        cc.call(night + dt.timedelta(seconds=5), read=0, write=30_000)
        cc.call(night + dt.timedelta(minutes=6), read=30_000, write=100)
        if version.startswith("2.1"):
            cc.date_change(night + dt.timedelta(minutes=10, seconds=10), "2026-08-04")
        anchored = version.startswith("2.1")
        cc.call(night + dt.timedelta(minutes=10, seconds=20), read=30_100 if anchored else 0, write=100 if anchored else 30_200)
        transcripts.append(cc)
    cx = Codex(CODEX_ID, dt.datetime(2026, 8, 3, 12, 0, tzinfo=dt.UTC))
    cx.user_turn(dt.datetime(2026, 8, 3, 12, 0, 5, tzinfo=dt.UTC), "hello")
    cx.call(dt.datetime(2026, 8, 3, 12, 0, 10, tzinfo=dt.UTC), prompt=9_000, cached=0)
    return _warehouse(tmp_path, *transcripts, cx)


def test_cutover_version_splits_by_harness_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _versioned(tmp_path)
    frame = causes.with_period(causes.classify_warehouse(path), cutover_version=causes.VersionCutover.parse("claude-code@2.1.0"))
    sides = {(r["harness_version"], r["period"]) for r in frame.select("harness_version", "period").iter_rows(named=True)}
    assert sides == {("2.0.77", "before"), ("2.1.5", "after"), ("0.117.0", None)}
    # before 2.1 the date is in the system prompt: the first call after midnight rewrote it
    crossing = frame.filter(frame["crossing"])
    assert sorted(zip(crossing["harness_version"], crossing["cause"].cast(str), strict=True)) == [
        ("2.0.77", "date_change"), ("2.0.77", "date_change"), ("2.1.5", "hit"), ("2.1.5", "hit")]
    capsys.readouterr()
    assert main(["cache-report", "--db", str(path), "--cutover-version", "claude-code@2.1.0", "--json", "--bootstrap", "50"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"]["cutover_version"] == "claude-code@2.1.0" and doc["inputs"]["cutover"] is None
    groups = doc["rates"]["groups"]["crossing"]
    assert (groups["before"]["calls"], groups["after"]["calls"]) == (2, 2)
    assert groups["before"]["token_share"] == 0.0 and groups["after"]["token_share"] > 0.99
    assert set(doc["rates"]["by_period"]) == {"before", "after"}  # the Codex call has no side
    assert doc["effect"]["estimate"] is None and "too few to estimate" in doc["effect"]["reason"]
    assert {r["era"] for r in doc["rates"]["by_harness"] if r["harness"] == "claude-code"} == {
        "date in system prompt (≤ 2.0)", "date notice in conversation (2.1+)"}


def test_a_codex_review_sub_session_is_a_conversation_of_its_own(tmp_path: Path) -> None:
    created = dt.datetime(2026, 3, 31, 14, 0, tzinfo=dt.UTC)
    cx = Codex(CODEX_ID, created)
    cx.user_turn(created, "Add pagination to the API")
    before = cx.call(created + dt.timedelta(seconds=5), prompt=30_000, cached=0)
    cx._add(created + dt.timedelta(seconds=10), "event_msg", {"type": "entered_review_mode", "user_facing_hint": "changes"})
    review_1 = cx.call(created + dt.timedelta(seconds=15), prompt=8_000, cached=0)
    review_2 = cx.call(created + dt.timedelta(seconds=20), prompt=9_000, cached=7_936)
    cx._add(created + dt.timedelta(seconds=25), "event_msg", {"type": "exited_review_mode", "review_output": None})
    after = cx.call(created + dt.timedelta(seconds=30), prompt=31_000, cached=29_952)
    rows = {r["line_no"]: r for r in _view(_warehouse(tmp_path, cx), CODEX_ID)}
    assert rows[review_1]["cause"] == "cold_start" and rows[review_1]["conversation"] != rows[before]["conversation"]
    assert rows[review_2]["prev_call_id"] == rows[review_1]["call_id"]
    assert rows[after]["prev_call_id"] == rows[before]["call_id"] and rows[after]["cause"] == "hit"
    assert rows[after]["conversation"] == rows[before]["conversation"]


def test_an_unknown_zone_name_in_one_transcript_does_not_break_the_others(tmp_path: Path) -> None:
    created = dt.datetime(2026, 3, 31, 1, 22, 40, tzinfo=dt.UTC)
    odd = Codex(CODEX_ID, created)
    odd.environment(created, current_date="2026-03-30", timezone="Mars/Olympus")
    odd.user_turn(created, "hi")
    odd.call(created + dt.timedelta(seconds=5), prompt=12_000, cached=0)
    cc = Claude(SID)
    cc.user(_s(0), "Add a test for the cart total")
    cc.call(_s(1), read=0, write=20_000)
    path = _warehouse(tmp_path, odd, cc)
    assert _causes(_view(path, SID)) == ["cold_start"]
    (row,) = _view(path, CODEX_ID)
    assert row["cause"] == "cold_start"


def test_a_five_minute_write_rewritten_for_an_hour_is_a_ttl_tier_switch(tmp_path: Path) -> None:
    cc = Claude(SID)
    cc.user(_s(0), "Review the diff")
    cc.call(_s(5), read=0, write=40_000)  # written for 5 minutes
    cc.call(_s(14), read=0, write=40_100, write_1h=40_100)  # 9 s later, the same prefix written for an hour
    rows = _view(_warehouse(tmp_path, cc), SID)
    assert _causes(rows) == ["cold_start", "ttl_tier_switch"]


def test_a_compact_summary_is_a_compaction_marker_too(tmp_path: Path) -> None:
    cc = Claude(SID)
    cc.user(_s(0), "Refactor the checkout module")
    cc.call(_s(5), read=0, write=100_000)
    summary = cc._add({"type": "user", "isCompactSummary": True, "timestamp": _stamp(_s(40)),
                       "message": {"role": "user", "content": "This session is being continued from a previous conversation."}})
    cc.call(_s(60), read=4_000, write=70_000)
    rows = _view(_warehouse(tmp_path, cc), SID)
    assert _causes(rows) == ["cold_start", "compaction"] and rows[1]["evidence_line_no"] == summary


def test_a_sidechain_prompt_is_not_a_turn_of_the_main_conversation(tmp_path: Path) -> None:
    cc = Claude(SID, version="2.0.30")
    cc.user(_s(0), "Find where the tax is computed")
    cc.call(_s(5), read=0, write=20_000)
    cc.call(_s(10), read=20_000, write=40_000)
    cc.user(_s(12), "Search the repo for tax_rate", sidechain=True, agent="a1")
    cc.call(_s(14), read=0, write=6_000, sidechain=True, agent="a1")
    # mid-turn, the request only grew, nothing recorded in the main conversation: it read a third of 60k
    last = cc.call(_s(20), read=20_000, write=42_000)
    rows = {r["line_no"]: r for r in _view(_warehouse(tmp_path, cc), SID)}
    assert rows[last]["cause"] == "provider_miss" and rows[last]["evidence_line_no"] == last


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_a_quoted_timezone_tag_in_a_tool_result_is_not_the_sessions_zone(tmp_path: Path, harness: str) -> None:
    quoted = "Codex writes <timezone>America/Denver</timezone> in its environment context"
    created = dt.datetime(2026, 8, 3, 9, 0, tzinfo=dt.UTC)
    if harness == "claude-code":
        t: Claude | Codex = Claude(SID)
        t.user(_s(0), "Read docs/issue.md")
        t.call(_s(5), read=0, write=20_000)
        t._add({"type": "user", "timestamp": _stamp(_s(8)), "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": quoted}]}})
        t.call(_s(10), read=20_000, write=500)
        session = SID
    else:
        t = Codex(CODEX_ID, created)
        t.user_turn(created, "Read docs/issue.md")
        t.call(created + dt.timedelta(seconds=5), prompt=12_000, cached=0)
        t._add(created + dt.timedelta(seconds=8), "response_item", {"type": "function_call_output", "call_id": "call_1",
                                                                    "output": json.dumps({"output": quoted})})
        t.call(created + dt.timedelta(seconds=10), prompt=13_000, cached=11_904)
        session = CODEX_ID
    rows = _view(_warehouse(tmp_path, t), session)
    assert all(r["tz_source"] != "environment" and r["tz"] != "America/Denver" for r in rows)


def test_a_quoted_current_date_in_a_codex_tool_output_is_not_a_date_notice(tmp_path: Path) -> None:
    created = dt.datetime(2026, 3, 31, 14, 0, tzinfo=dt.UTC)
    cx = Codex(CODEX_ID, created)
    cx.environment(created, current_date="2026-03-31", timezone="UTC")
    cx.user_turn(created, "Show me the fixture")
    cx.call(created + dt.timedelta(seconds=5), prompt=20_000, cached=0)
    cx._add(created + dt.timedelta(seconds=8), "response_item", {"type": "function_call_output", "call_id": "call_1",
            "output": json.dumps({"output": "<environment_context><current_date>2025-01-01</current_date></environment_context>"})})
    cx.call(created + dt.timedelta(seconds=10), prompt=21_000, cached=2_048)
    rows = _view(_warehouse(tmp_path, cx), CODEX_ID)
    assert [r["seen_date"] for r in rows] == [dt.date(2026, 3, 31)] * 2
    assert not rows[1]["crossing"] and rows[1]["cause"] == "provider_miss"
