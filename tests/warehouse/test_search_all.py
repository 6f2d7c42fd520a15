"""Corpus-wide search: the hits are exactly the occurrences in the stored lines (as grep -F counts them),
and what is shown around each is the decoded text it falls in."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import UsageError
from pipeline.warehouse import db, ingest
from pipeline.warehouse.search_all import SearchFilter, _decode, line_role, search_all, snippet
from tests.helpers import write_jsonl


def brute(con, phrase: str, *, regex: bool = False) -> list[tuple[str, int, int]]:
    pattern = re.compile(phrase if regex else re.escape(phrase))
    out = []
    for sid, line_no, text in con.execute("SELECT session_id, line_no, text FROM lines").fetchall():
        out += [(sid, line_no, m.start() + 1) for m in pattern.finditer(text) if m.end() > m.start()]
    return sorted(out)


@pytest.mark.parametrize("phrase", ["pytest", "ModuleNotFoundError", '"type"', "\\n", "é", "Exit code"])
def test_hits_are_every_occurrence_in_the_stored_lines(wh: Path, phrase: str) -> None:
    with db.reading(wh) as con:
        got = search_all(con, phrase, limit=10**9)
        want = brute(con, phrase)
    assert sorted((h["sessionId"], h["line"], h["column"]) for h in got["hits"]) == want
    assert got["total"] == len(want) and not got["truncated"]


def test_a_regex_finds_what_python_finds(wh: Path) -> None:
    with db.reading(wh) as con:
        got = search_all(con, r"Exit code [0-9]+", regex=True, limit=10**9)
        want = brute(con, r"Exit code [0-9]+", regex=True)
    assert sorted((h["sessionId"], h["line"], h["column"]) for h in got["hits"]) == want and want


@pytest.mark.parametrize("limit", [0, 1, 3, 7, 40])
@pytest.mark.parametrize("phrase", ["pytest", "error", "\\n"])
def test_the_limit_cuts_the_listing_not_the_total(wh: Path, phrase: str, limit: int) -> None:
    # the scan keeps the text of only the lines the listing can still reach: the first `limit` hits are
    # the same as the head of the whole listing, whatever order the lines arrive in
    with db.reading(wh) as con:
        every = search_all(con, phrase, limit=10**9)
        some = search_all(con, phrase, limit=limit)
    assert some["total"] == every["total"] > limit and some["truncated"] and len(some["hits"]) == limit
    assert some["hits"] == every["hits"][:limit] and some["sessions"] == every["sessions"]


def test_filters_narrow_sessions_roles_and_days(wh: Path) -> None:
    with db.reading(wh) as con:
        every = search_all(con, "pytest", limit=10**9)["hits"]
        one = every[0]["sessionId"]
        only = search_all(con, "pytest", SearchFilter(sessions=(one,)), limit=10**9)["hits"]
        tool = search_all(con, "pytest", SearchFilter(role="tool"), limit=10**9)["hits"]
        codex = search_all(con, "pytest", SearchFilter(format="codex"), limit=10**9)["hits"]
        formats = dict(con.execute("SELECT session_id, format FROM sessions").fetchall())
        day = every[0]["at"][:10]
        import datetime as dt

        on_day = search_all(con, "pytest", SearchFilter(since=dt.date.fromisoformat(day), until=dt.date.fromisoformat(day)),
                            limit=10**9)["hits"]
    assert only == [h for h in every if h["sessionId"] == one]
    assert tool == [h for h in every if h["role"] == "tool"] and tool
    assert codex == [h for h in every if formats[h["sessionId"]] == "codex"] and codex
    assert on_day and all(h["at"][:10] == day for h in on_day)


def test_an_unknown_session_an_empty_phrase_and_a_bad_regex_are_usage_errors(wh: Path) -> None:
    with db.reading(wh) as con:
        for call, message in ((lambda: search_all(con, "x", SearchFilter(sessions=("nope",))), "unknown session"),
                              (lambda: search_all(con, ""), "non-empty"),
                              (lambda: search_all(con, "(", regex=True), "not a valid regular expression"),
                              (lambda: search_all(con, "x", SearchFilter(role="robot")), "--role")):
            with pytest.raises(UsageError, match=message):
                call()


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(before=texts, phrase=st.text(st.sampled_from("ABCXYZé中"), min_size=1, max_size=6), after=texts,
       context=st.integers(min_value=0, max_value=30))
def test_a_hit_inside_a_json_string_is_shown_decoded(before: str, phrase: str, after: str, context: int) -> None:
    """The rule: a hit inside a string value is shown in the decoded value (escapes read, quotes and
    new lines as themselves): `before` and `after` are the value's own text either side, cut at `context`.
    (Upper-case letters and non-ASCII never occur inside a JSON escape, so the first stored occurrence is
    the first occurrence in the value.)"""
    from pipeline.warehouse.search_all import _string_spans

    value = before + phrase + after
    line = json.dumps({"type": "user", "message": {"content": value}}, ensure_ascii=False)
    start = line.index(phrase, line.index('"content"') + len('"content": "'))
    b, m, a, decoded = snippet(line, _string_spans(line), start, start + len(phrase), context)
    at = value.index(phrase)
    assert decoded and m == phrase
    assert b == (value[:at][-context:] if context else "")
    assert a == value[at + len(phrase):][:context]


def test_roles_of_claude_code_and_codex_lines() -> None:
    assert line_role({"type": "user", "message": {"content": [{"type": "tool_result"}]}}, "claude-code") == "tool"
    assert line_role({"type": "user", "message": {"content": "hi"}}, "claude-code") == "user"
    assert line_role({"type": "assistant", "message": {}}, "claude-code") == "assistant"
    assert line_role({"type": "response_item", "payload": {"type": "function_call_output"}}, "codex") == "tool"
    assert line_role({"type": "response_item", "payload": {"type": "function_call"}}, "codex") == "assistant"
    assert line_role({"type": "response_item", "payload": {"type": "message", "role": "developer"}}, "codex") == "developer"
    assert line_role({"type": "event_msg", "payload": {"type": "token_count"}}, "codex") is None
    assert line_role({"type": "message", "role": "user"}, "codex") == "user"  # the 2025 format's bare items
    assert line_role(None, "codex") is None


def test_a_hit_over_json_syntax_is_shown_from_the_stored_line(warehouse, tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "p" / "S.jsonl", [
        {"type": "user", "sessionId": "S", "cwd": "/x", "timestamp": "2026-10-01T10:00:00.000Z",
         "message": {"role": "user", "content": "say \"hello\"\nthen stop"}}])
    ingest.ingest(warehouse, [f])
    decoded = search_all(warehouse, "hello")["hits"][0]
    assert decoded["before"].endswith('say "') and decoded["after"].startswith('"\nthen')
    across = search_all(warehouse, '"role": "user"')["hits"][0]
    assert across["match"] == '"role": "user"' and "{" in across["before"] + across["after"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=4))
def test_total_is_str_count_over_every_line(wh: Path, phrase: str) -> None:
    with db.reading(wh) as con:
        got = search_all(con, phrase, limit=0)
        want = sum(t.count(phrase) for (t,) in con.execute("SELECT text FROM lines").fetchall())
    assert got["total"] == want and got["hits"] == []


def test_redact_masks_a_secret_near_a_hit_and_leaves_the_rest_decoded(warehouse, tmp_path: Path) -> None:
    import random
    import string

    key = "sk_live_51" + "".join(random.Random(3).choices(string.ascii_letters + string.digits, k=30))
    f = write_jsonl(tmp_path / "p" / "S.jsonl", [
        {"type": "user", "sessionId": "S", "cwd": "/x", "timestamp": "2026-10-01T10:00:00.000Z",
         "message": {"role": "user", "content": f"the key provided: {key} fails"}},
        {"type": "user", "sessionId": "S", "cwd": "/x", "timestamp": "2026-10-01T10:00:01.000Z",
         "message": {"role": "user", "content": "nothing secret here:\nit fails"}},
    ])
    ingest.ingest(warehouse, [f])
    raw = search_all(warehouse, "fails")["hits"]
    masked = search_all(warehouse, "fails", redact=True)["hits"]
    assert key in raw[0]["before"] and key not in json.dumps(masked)
    assert "[REDACTED:stripe-key]" in masked[0]["before"]
    assert masked[1] == raw[1] and masked[1]["before"].endswith("here:\nit ")  # no secret near: decoded as usual


@settings(max_examples=500, deadline=None)
@given(raw=st.text(st.one_of(st.sampled_from(list('ab"\\/nu0\t\n\x01 ')), st.characters())))
def test_decoding_a_piece_of_a_json_string_agrees_with_json_loads(raw: str) -> None:
    try:
        expected = json.loads(f'"{raw}"')
    except ValueError:
        expected = None
    assert _decode(raw) == (expected if isinstance(expected, str) else None)
