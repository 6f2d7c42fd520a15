"""Derived usage and prompts on the quirks real logs have: restarting and replayed Codex totals,
forked rollouts, Claude Code subagents that copy their parent, usage that shrinks within a response,
and an older warehouse re-derived by its migration."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import UsageError
from pipeline.warehouse import db, derive, ingest
from tests.helpers import EXPECTED, SAMPLES, write_jsonl

QUIRKS = EXPECTED["real_log_quirks"]


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> list[tuple]:
    return con.execute(sql, params).fetchall() if params is not None else con.execute(sql).fetchall()


def expected_session(sid: str) -> dict:
    return next(s for s in EXPECTED["sessions"] if s["sessionId"] == sid)


# --------------------------------------------------------------------------- Codex usage on the samples


def test_restarted_and_replayed_totals_give_no_negative_row(wh: Path) -> None:
    sid = QUIRKS["codex_totals"]["sessionId"]
    with db.reading(wh) as con:
        assert rows(con, "SELECT count(*) FROM llm_calls WHERE prompt_tokens < 0 OR cached_tokens < 0 OR completion_tokens < 0") == [(0,)]
        lines = {r[0] for r in rows(con, "SELECT line_no FROM usage WHERE session_id = ?", [sid])}
        u = rows(con, "SELECT count(*), sum(prompt_tokens), sum(cached_tokens), sum(completion_tokens) FROM usage "
                      "WHERE session_id = ?", [sid])[0]
    # a restarted total is a response like any other; a replayed one is none
    assert set(QUIRKS["codex_totals"]["restart_lines"]) <= lines
    assert not set(QUIRKS["codex_totals"]["replay_lines"]) & lines
    want = expected_session(sid)["usage"]
    assert u == (want["calls"], want["prompt_tokens"], want["cached_tokens"], want["completion_tokens"])


def test_each_call_is_its_own_last_token_usage(wh: Path) -> None:
    sid = QUIRKS["codex_totals"]["sessionId"]
    with db.reading(wh) as con:
        got = rows(con, "SELECT line_no, prompt_tokens, cached_tokens, completion_tokens FROM usage WHERE session_id = ? "
                        "ORDER BY line_no", [sid])
        texts = dict(rows(con, "SELECT line_no, text FROM lines WHERE session_id = ?", [sid]))
    for line_no, p, c, o in got:
        last = json.loads(texts[line_no])["payload"]["info"]["last_token_usage"]
        assert (p, c, o) == (last["input_tokens"], last["cached_input_tokens"], last["output_tokens"])


def test_forked_rollout_counts_only_its_own_part(wh: Path) -> None:
    fork = QUIRKS["forked_rollout"]
    with db.reading(wh) as con:
        first_own = rows(con, "SELECT min(line_no) FROM usage WHERE session_id = ?", [fork["sessionId"]])[0][0]
        parent, prompts = rows(con, "SELECT parent_session_id, prompts FROM sessions WHERE session_id = ?", [fork["sessionId"]])[0]
        copied_prompts = rows(con, "SELECT count(*) FROM messages WHERE session_id = ? AND role = 'user' AND is_prompt "
                                   "AND line_no <= ?", [fork["sessionId"], fork["copied_lines"][1]])[0][0]
    assert first_own > fork["own_from"] > fork["copied_lines"][1]
    assert parent == fork["parent"]
    assert prompts == expected_session(fork["sessionId"])["prompts"] == 1
    assert copied_prompts == 0  # the parent's prompt, copied into the fork, is the parent's


def codex_event(total: dict, last: dict | None, n: int) -> dict:
    info: dict = {"total_token_usage": total}
    if last is not None:
        info["last_token_usage"] = last
    return {"timestamp": f"2026-10-02T08:{n // 60:02d}:{n % 60:02d}.000Z", "type": "event_msg",
            "payload": {"type": "token_count", "info": info}}


def usage(i: int, c: int, o: int) -> dict:
    return {"input_tokens": i, "cached_input_tokens": c, "output_tokens": o, "reasoning_output_tokens": 0, "total_tokens": i + o}


# A response stream: each step is a new response (with a fresh or restarted total), a repeat of the
# previous event, or a replay of an earlier total.
steps = st.lists(
    st.tuples(st.sampled_from(["new", "new", "restart", "repeat", "replay"]), st.integers(1, 5000), st.integers(0, 100),
              st.integers(1, 400)),
    min_size=1, max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps, cut=st.integers(0, 30))
def test_codex_usage_is_the_sum_of_new_responses(tmp_path_factory: pytest.TempPathFactory, steps: list, cut: int) -> None:
    """Whatever the running totals do, and wherever an ingest stops, usage = Σ last_token_usage of
    the responses, and no row is negative."""
    total = usage(0, 0, 0)
    seen: list[dict] = []
    events: list[dict] = []
    want = [0, 0, 0, 0]
    for kind, inp, share, out in steps:
        if kind in ("repeat", "replay") and seen:
            events.append(codex_event(seen[-1] if kind == "repeat" else seen[0], usage(0, 0, 0), len(events)))
            continue
        cached = inp * share // 100
        last = usage(inp, cached, out)
        base = usage(0, 0, 0) if kind == "restart" else total
        total = {k: base[k] + last[k] for k in last}
        if total in seen:
            continue  # an accidental equal total is a replay by definition; keep the stream unambiguous
        seen.append(total)
        events.append(codex_event(total, last, len(events)))
        want = [want[0] + 1, want[1] + inp, want[2] + cached, want[3] + out]
    head = [{"timestamp": "2026-10-02T08:00:00.000Z", "type": "session_meta", "payload": {"id": "P1", "cwd": "/x"}},
            {"timestamp": "2026-10-02T08:00:00.000Z", "type": "turn_context", "payload": {"cwd": "/x", "model": "gpt-5"}}]
    records = head + events
    folder = tmp_path_factory.mktemp("prop")
    f = folder / "rollout.jsonl"
    write_jsonl(f, records[: min(cut, len(records))])
    with db.writing(folder / "w.duckdb") as con:
        ingest.ingest(con, [f])
        write_jsonl(f, records)  # the file grew: the rest is read from where the last ingest stopped
        ingest.ingest(con, [f])
        got = rows(con, "SELECT count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(cached_tokens), 0), "
                        "coalesce(sum(completion_tokens), 0), count(*) FILTER (WHERE prompt_tokens < 0 OR cached_tokens < 0 "
                        "OR completion_tokens < 0) FROM usage")[0]
    assert list(got[:4]) == want and got[4] == 0


def test_a_would_be_negative_difference_is_a_problem_not_a_row(warehouse, tmp_path: Path) -> None:
    # An old CLI without last_token_usage whose running total restarts: the difference is negative.
    f = write_jsonl(tmp_path / "r.jsonl", [
        {"timestamp": "2026-10-02T08:00:00.000Z", "type": "session_meta", "payload": {"id": "N1", "cwd": "/x"}},
        codex_event(usage(1000, 0, 50), None, 1),
        codex_event(usage(300, 0, 20), None, 2),
        codex_event(usage(900, 200, 60), None, 3),
    ])
    ingest.ingest(warehouse, [f])
    assert rows(warehouse, "SELECT line_no, prompt_tokens, cached_tokens, completion_tokens FROM usage ORDER BY line_no") == [
        (2, 1000, 0, 50), (4, 600, 200, 40)]
    problems = rows(warehouse, "SELECT line_no, kind, detail FROM ingest_problems")
    assert [(p[0], p[1]) for p in problems] == [(3, "negative-usage")]
    assert "prompt -700" in problems[0][2] and problems[0][2].endswith("no llm_calls row")


# --------------------------------------------------------------------------- Claude Code usage


def claude_line(mid: str, n: int, usage_: dict | None, *, sid: str = "S1", rid: str | None = "r1", **extra: object) -> dict:
    msg: dict = {"id": mid, "role": "assistant", "model": "glm-5.1", "content": [{"type": "text", "text": f"block {n}"}]}
    if usage_ is not None:
        msg["usage"] = usage_
    rec: dict = {"type": "assistant", "sessionId": sid, "cwd": "/x", "uuid": f"u{n}", "message": msg,
                 "timestamp": f"2026-10-01T10:00:{n:02d}.000Z", **extra}
    if rid:
        rec["requestId"] = rid
    return rec


def test_a_response_is_its_line_with_the_largest_usage(warehouse, tmp_path: Path) -> None:
    # Proxies to other models write usage on one block only, or a smaller one on a later block.
    u = lambda i, o: {"input_tokens": i, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": o}  # noqa: E731
    f = write_jsonl(tmp_path / "p" / "S1.jsonl", [
        claude_line("m1", 1, None, rid=None), claude_line("m1", 2, u(5000, 90), rid=None), claude_line("m1", 3, u(4800, 0), rid=None),
        claude_line("m2", 4, u(5100, 10)), claude_line("m2", 5, u(5100, 75)),
    ])
    ingest.ingest(warehouse, [f])
    assert rows(warehouse, "SELECT line_no, prompt_tokens, completion_tokens FROM usage ORDER BY line_no") == [
        (2, 5000, 90), (5, 5100, 75)]


def test_a_response_completed_by_a_later_ingest_replaces_its_row(warehouse, tmp_path: Path) -> None:
    # The file was read while the response was being written: its later block, read by the next
    # ingest, carries the final usage, which replaces the row (a new file's rows replace nothing).
    u = lambda i, o: {"input_tokens": i, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": o}  # noqa: E731
    lines = [claude_line("m1", 1, u(5000, 10)), claude_line("m1", 2, u(5000, 90)), claude_line("m2", 3, u(5200, 7))]
    f = write_jsonl(tmp_path / "p" / "S1.jsonl", lines[:1])
    ingest.ingest(warehouse, [f])
    assert rows(warehouse, "SELECT line_no, completion_tokens FROM usage ORDER BY line_no") == [(1, 10)]
    write_jsonl(f, lines)
    ingest.ingest(warehouse, [f])
    assert rows(warehouse, "SELECT line_no, completion_tokens FROM usage ORDER BY line_no") == [(2, 90), (3, 7)]
    assert rows(warehouse, "SELECT turns FROM sessions") == [(2,)]


@pytest.mark.parametrize("parent_first", [True, False])
def test_subagent_copies_of_parent_responses_stay_with_the_parent(tmp_path: Path, parent_first: bool) -> None:
    y5 = QUIRKS["subagent_copies"]
    parent_file = SAMPLES / expected_session(y5["parent"])["path"]
    sub_file = SAMPLES / expected_session(y5["sessionId"])["path"]
    with db.writing(tmp_path / "w.duckdb") as con:
        for f in ([parent_file, sub_file] if parent_first else [sub_file, parent_file]):
            ingest.ingest(con, [f])
        got = dict(rows(con, "SELECT session_id, count(*) FROM usage GROUP BY 1"))
        turns = dict(rows(con, "SELECT session_id, turns FROM sessions"))
    for sid in (y5["parent"], y5["sessionId"]):
        assert got[sid] == turns[sid] == expected_session(sid)["usage"]["calls"]
    assert got[y5["sessionId"]] == 1 and y5["copied_response_lines"] >= 1


@pytest.mark.parametrize("parent_first", [True, False])
def test_subagent_copies_of_parent_prompts_and_the_compaction_order_are_not_prompts(tmp_path: Path, parent_first: bool) -> None:
    y5, y6 = QUIRKS["subagent_copies"], QUIRKS["compaction_subagent"]
    parent = y5["parent"]
    files = [SAMPLES / expected_session(sid)["path"] for sid in (y5["sessionId"], y6["sessionId"])]
    order = [SAMPLES / expected_session(parent)["path"], *files] if parent_first else [*files, SAMPLES / expected_session(parent)["path"]]
    with db.writing(tmp_path / "w.duckdb") as con:
        for f in order:
            ingest.ingest(con, [f])
        counted = dict(rows(con, "SELECT session_id, prompts FROM sessions"))
        flagged = rows(con, "SELECT session_id, line_no FROM messages WHERE is_prompt ORDER BY 1, 2")
    # Y5 keeps only the side question it was asked; Y6 (a compaction) has none; Y4 keeps its own
    assert [line for sid, line in flagged if sid == y5["sessionId"]] == [y5["own_prompt_line"]]
    assert not [line for sid, line in flagged if sid == y6["sessionId"]] and y6["prompts"] == 0
    for sid in (parent, y5["sessionId"], y6["sessionId"]):
        assert counted[sid] == sum(1 for s, _ in flagged if s == sid) == expected_session(sid)["prompts"]


# --------------------------------------------------------------------------- re-deriving an older warehouse


def test_migration_rederives_as_a_fresh_ingest_would(samples_copy: Path) -> None:
    """A warehouse ingested by an older version (its derived rows wrong, a 2025 rollout stored as
    plain JSONL) gives, after the migration, exactly what a fresh ingest gives."""
    legacy = QUIRKS["codex_2025_format"]
    with db.writing(samples_copy) as con:
        fresh_sessions = rows(con, "SELECT session_id, format, prompts, turns, model, cwd FROM sessions ORDER BY 1")
        fresh_calls = rows(con, "SELECT * EXCLUDE (\"at\") FROM llm_calls ORDER BY call_id")
        # what the previous version left: differenced usage, other prompt counts, the 2025 rollout as jsonl
        con.execute("UPDATE llm_calls SET prompt_tokens = -5 WHERE source = 'codex'")
        con.execute("UPDATE sessions SET prompts = prompts + 3, state = NULL, model = NULL")
        con.execute("UPDATE sessions SET format = 'jsonl' WHERE session_id = ?", [legacy])
        con.execute("DELETE FROM schema_migrations WHERE name = ?", [f"derived:{derive.DERIVE_VERSION}"])
    with pytest.raises(UsageError, match="missing steps: derived"), db.reading(samples_copy):
        pass  # a read-only open cannot re-derive: it says how to upgrade
    with db.writing(samples_copy) as con:  # a writing open derives every session again
        assert rows(con, "SELECT session_id, format, prompts, turns, model, cwd FROM sessions ORDER BY 1") == fresh_sessions
        assert rows(con, "SELECT * EXCLUDE (\"at\") FROM llm_calls ORDER BY call_id") == fresh_calls


def test_rederive_of_a_subset_leaves_the_rest(samples_copy: Path) -> None:
    sid = QUIRKS["codex_totals"]["sessionId"]
    with db.writing(samples_copy) as con:
        before = rows(con, "SELECT * FROM llm_calls ORDER BY call_id")
        assert derive.rederive(con, [sid]) == 1
        assert rows(con, "SELECT * FROM llm_calls ORDER BY call_id") == before


def test_samples_folder_is_what_the_tests_read() -> None:
    # the quirk files are real files of the corpus, not fixtures built elsewhere
    for key in ("codex_totals", "forked_rollout", "subagent_copies", "compaction_subagent"):
        assert (SAMPLES / expected_session(QUIRKS[key]["sessionId"])["path"]).is_file()


def test_a_batch_of_one_format_derives_what_parsing_every_field_derives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each sample file ingested alone, so that every batch holds one format and its projection parses
    only that format's fields, gives the rows a projection of every field gives."""
    files = sorted(SAMPLES.rglob("*.jsonl"))
    # and two whose working folder is first written after the lines a sniff reads
    late = [{"type": "user", "sessionId": "late-cwd", "timestamp": f"2026-10-01T10:{i // 60:02d}:{i % 60:02d}.000Z",
             "message": {"role": "user", "content": f"line {i}"}} for i in range(70)]
    files.append(write_jsonl(tmp_path / "src" / "late-cwd.jsonl", [*late, {**late[0], "cwd": "/home/dev/late"}]))
    rollout = [{"type": "session_meta", "timestamp": "2026-10-01T10:00:00.000Z", "payload": {"id": "late-codex"}},
               *({"type": "event_msg", "timestamp": "2026-10-01T10:00:01.000Z", "payload": {"type": "agent_reasoning"}}
                 for _ in range(70)),
               {"type": "turn_context", "timestamp": "2026-10-01T10:00:02.000Z", "payload": {"cwd": "/home/dev/rollout"}}]
    files.append(write_jsonl(tmp_path / "src" / "late-codex.jsonl", rollout))
    used: list[str] = []
    frame = derive._frame

    def recording(con: duckdb.DuckDBPyConnection, sql: str, params: object) -> object:
        used.append(sql)
        return frame(con, sql, params)

    monkeypatch.setattr(derive, "_frame", recording)

    def derived(path: Path) -> list[list[tuple]]:
        with db.writing(path) as con:
            for f in files:
                ingest.ingest(con, [f])
            return [
                rows(con, "SELECT * EXCLUDE (ingested_at, rewritten_at) FROM sessions ORDER BY session_id"),
                rows(con, "SELECT * FROM llm_calls ORDER BY call_id"),
                rows(con, "SELECT * FROM ingest_problems ORDER BY ALL"),
            ]

    by_format = derived(tmp_path / "by_format.duckdb")
    for fmt in ("claude-code", "codex"):  # both narrow projections ran
        assert derive._BY_FORMAT[fmt].sql.format(table="_ingest_batch") in used
    monkeypatch.setattr(derive, "_BY_FORMAT", {})
    every_field = derived(tmp_path / "every_field.duckdb")
    assert by_format == every_field
    assert len(by_format[0]) == len(files) and len(by_format[1]) > 100
    cwds = {r[0]: r for r in by_format[0] if r[0] in ("late-cwd", "late-codex")}
    assert "/home/dev/late" in cwds["late-cwd"] and "/home/dev/rollout" in cwds["late-codex"]


_TIMESTAMP_PARTS = st.one_of(
    st.builds(
        lambda day, sec, frac, zone: f"2026-10-{day:02d}T12:00:{sec:02d}{frac}{zone}",
        st.integers(1, 28), st.integers(0, 59), st.sampled_from(["", ".5", ".123", ".123456", ".123456789"]),
        st.sampled_from(["Z", "Z", "Z", "+02:00", "-05:30", ""]),
    ),
    st.sampled_from(["2026-10-01 12:00:00", "1759000000", "garbage", ""]),
    st.none(),
)


@given(st.lists(_TIMESTAMP_PARTS, max_size=12))
def test_timestamps_read_as_polars_infers_them_whichever_path_is_taken(values: list[str | None]) -> None:
    text = pl.Series("t", values, dtype=pl.String)
    inferred = text.str.to_datetime(time_zone="UTC", strict=False)
    assert derive._timestamps(text).to_list() == inferred.to_list()


# ------------------------------------------------------------------- copied prompts: the SQL and its twin

# drop_copied_prompts as first written: every user line of the parents parsed, no pre-selection. The
# module's query parses only parent lines that spell a subagent prompt's uuid (or hold a \u escape).
_COPIED_TWIN = """
    WITH pu AS (
        SELECT DISTINCT session_id, json_extract_string(text, '$.uuid') AS uuid FROM lines
        WHERE session_id IN (SELECT session_id FROM _parents)
          AND json_valid(text) AND json_extract_string(text, '$.type') = 'user'
    ), k AS (
        SELECT session_id, json_extract_string(text, '$.uuid') AS uuid FROM lines
        WHERE session_id IN (SELECT session_id FROM _subs)
          AND json_valid(text) AND json_extract_string(text, '$.type') = 'user' AND {prompt}
    )
    SELECT k.session_id, count(*) FROM k JOIN _subs s ON s.session_id = k.session_id
    SEMI JOIN pu ON pu.session_id = s.parent_session_id AND pu.uuid = k.uuid
    GROUP BY k.session_id
"""

_UUIDS = st.sampled_from(["u-1", "u-2", "u-3", "0f9e-a1", ""])


def _spelled(value: str, escape: list[bool]) -> str:
    """A JSON string literal of `value`, with the characters `escape` picks written as \\u escapes."""
    return '"' + "".join(f"\\u{ord(c):04x}" if e else c for c, e in zip(value, escape + [False] * len(value), strict=False)) + '"'


@st.composite
def _claude_line(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(["not json", "{", '"user"', "[1]"]))
    kind = draw(st.sampled_from(["user", "user", "user", "assistant", "system"]))
    uuid = draw(_UUIDS)
    content = draw(st.one_of(
        st.sampled_from(["fix the build", "and the docs", "<command-name>/clear</command-name>", "Caveat: the messages below", ""]),
        st.just([{"type": "tool_result", "tool_use_id": "t", "content": "ok u-1"}]),
        st.just([{"type": "text", "text": "and the tests"}]),
    ))
    body = json.dumps({"type": kind, "message": {"role": "user", "content": content}}, ensure_ascii=False)
    uuid_json = _spelled(uuid, draw(st.lists(st.booleans(), max_size=len(uuid))))
    return body[:-1] + ', "uuid": ' + uuid_json + "}"


@pytest.mark.parametrize("searched", [16, 1])  # the parent's lines searched uuid by uuid, or all parsed
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parent=st.lists(_claude_line(), max_size=8), subs=st.lists(st.lists(_claude_line(), max_size=6), min_size=1, max_size=3),
       copied=st.lists(st.integers(0, 7), max_size=4))
def test_copied_prompts_match_their_twin_that_parses_every_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, searched: int,
                                                                parent: list[str], subs: list[list[str]], copied: list[int]) -> None:
    from pipeline.warehouse import prompt_rules

    monkeypatch.setattr(derive, "_UUIDS_SEARCHED", searched)
    # the first subagent copies some of its parent's lines, written plainly where the parent escaped them
    for i in copied:
        if i < len(parent) and parent[i].startswith('{"'):  # not the broken line "{"
            subs[0].append(json.dumps(json.loads(parent[i]), ensure_ascii=False))

    with db.opened(tmp_path / "w.duckdb") as con:  # one warehouse for every example, emptied first
        con.execute("DELETE FROM lines")
        con.execute("DELETE FROM sessions")
        sessions = {"P": parent} | {f"S{i}": lines for i, lines in enumerate(subs)}
        for sid, lines in sessions.items():
            con.execute("INSERT INTO sessions (session_id, path, format, parent_session_id, state) VALUES (?, ?, 'claude-code', ?, ?)",
                        [sid, f"/{sid}.jsonl", None if sid == "P" else "P", json.dumps({"prompts": 10})])
            for n, text in enumerate(lines, 1):
                con.execute("INSERT INTO lines (session_id, line_no, text) VALUES (?, ?, ?)", [sid, n, text])
        derive.drop_copied_prompts(con, list(sessions))
        got = {sid: 10 - prompts for sid, prompts in rows(con, "SELECT session_id, prompts FROM sessions WHERE session_id <> 'P'")}
        derive._scope_subagents(con, list(sessions))
        twin = dict(rows(con, _COPIED_TWIN.format(prompt=prompt_rules.claude_prompt("text"))))
    assert got == {sid: twin.get(sid, 0) for sid in got}
