"""Request builder: system sections, history copy, marker expansion, notices, serialization, and the
request-level prefix invariants of session date anchoring (seed 001 §5.8, §7, §10)."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.anchoring.request_builder import (
    COMPACTION_INSTRUCTION,
    SECTION_NAMES,
    ChatRequest,
    PromptSections,
    RequestBuilder,
    build_compaction_request,
    build_request,
    changed_sections,
    derive_compaction_request,
    expand_quick_commands,
    section_texts,
    serialize,
    to_wire_message,
)
from pipeline.anchoring.rules import (
    DATE_CHANGE_OPEN,
    SYSTEM_NOTICE_OPEN,
    DateMode,
    MessageStamp,
    date_change_notice,
    is_real_user_message,
    session_base_ymd,
    to_chat_message,
)

SECTIONS = PromptSections(
    persona="## Persona\n\nYou are a careful coding agent.",
    experience="## Experience\n\nPrefer small diffs.",
    memory="## Memory\n\nThe user likes tests.",
    environment="## Environment\n\nLinux, Python 3.11.",
    tool_guidance="## Tools\n\nUse the shell tool for commands.",
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        },
    }
]
EXPANSIONS = {"$go$": "Run the full test suite.", "#{x}#": "Explain the last error."}
BUILDER = RequestBuilder(TOOLS, EXPANSIONS)


def _user(ymd: str | None, text: Any = "hi", **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": text, **extra}
    if ymd is not None:
        message["sender_ymd"] = ymd
    return message


def _system(request: dict[str, Any]) -> str:
    assert request["messages"][0]["role"] == "system"
    return request["messages"][0]["content"]


def _wire(messages: list[dict[str, Any]]) -> list[bytes]:
    return [serialize(m) for m in messages]


def _assert_prefix_extension(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Every old message is byte-identical at the same position in new, and new is longer."""
    old_msgs, new_msgs = _wire(old["messages"]), _wire(new["messages"])
    assert len(new_msgs) > len(old_msgs)
    assert new_msgs[: len(old_msgs)] == old_msgs
    # The serialized message array itself is a byte prefix (minus its closing bracket).
    assert serialize(new["messages"]).startswith(serialize(old["messages"])[:-1])
    assert serialize(new["tools"]) == serialize(old["tools"])


def _build(
    history: list[dict[str, Any]], mode: DateMode, day: str, base: str, prev: str | None = None
) -> ChatRequest:
    return BUILDER.build_request(
        history, SECTIONS, mode=mode, today=day, base_ymd=base, previous_user_ymd_before=prev
    )


# --------------------------------------------------------------------------- structure


def test_system_sections_in_seed_order() -> None:
    """seed §1.1: persona → experience → memory → environment → current-date → tool guidance, as messages[0]."""
    request = _build([_user("2026-10-12")], "anchored", "2026-10-12", "2026-10-12")
    assert list(section_texts(request)) == list(SECTION_NAMES)
    system = _system(request)
    positions = [system.index(text) for text in section_texts(request).values()]
    assert positions == sorted(positions)
    assert request["tools"] == TOOLS
    assert list(request) == ["messages", "tools"]


def test_rolling_mode_shows_today_and_adds_no_notices() -> None:
    """seed §1.1 (old behaviour): rolling mode shows this turn's today and never tags messages."""
    history = [_user("2026-10-12", "a"), _user("2026-10-13", "b")]
    request = _build(history, "rolling", "2026-10-13", "2026-10-12")
    assert "`2026-10-13` (Tuesday)" in section_texts(request)["current-date"]
    assert DATE_CHANGE_OPEN not in serialize(request["messages"][1:]).decode()


def test_anchored_mode_shows_session_base_date() -> None:
    """seed §2.1 items 1 and 4 / §5.4: anchored mode shows the session base date, not today."""
    request = _build([_user("2026-10-12", "a")], "anchored", "2026-10-20", "2026-10-12")
    date_section = section_texts(request)["current-date"]
    assert "`2026-10-12` (Monday)" in date_section and "2026-10-20" not in date_section


def test_mode_requires_its_date() -> None:
    """seed §5.1 / §5.4: rolling needs today, anchored needs the base date; unknown modes are refused."""
    with pytest.raises(ValueError, match="today"):
        BUILDER.build_request([], SECTIONS, mode="rolling", base_ymd="2026-10-12")
    with pytest.raises(ValueError, match="base date"):
        BUILDER.build_request([], SECTIONS, mode="anchored", today="2026-10-12")
    with pytest.raises(ValueError, match="unknown date mode"):
        BUILDER.build_request([], SECTIONS, mode="weekly", today="2026-10-12")  # type: ignore[arg-type]


def test_shell_clock_hint_follows_builder_setting() -> None:
    """seed §5.4: no shell-clock hint anywhere (section or notice) when the shell clock is not allowed."""
    history = [_user("2026-10-12", "a"), _user("2026-10-13", "b")]
    off = build_request(
        history, SECTIONS, mode="anchored", base_ymd="2026-10-12", tools=TOOLS, allow_shell_clock=False
    )
    on = build_request(history, SECTIONS, mode="anchored", base_ymd="2026-10-12", tools=TOOLS)
    assert "`date`" not in serialize(off).decode()
    assert "`date`" in section_texts(on)["current-date"]
    assert on["messages"][2]["content"].startswith(date_change_notice("2026-10-13"))


# --------------------------------------------------------------------------- marker expansion


def test_marker_expansion_keeps_every_field() -> None:
    """seed §5.3 (existing-bug fix) / §7: expansion rebuilds as {**msg, content: replaced}, keeping sender_ymd."""
    history = [
        _user("2026-10-12", "$go$ then #{x}# and $unknown$", name="alice", msg_id=9),
        _user(
            "2026-10-12",
            [{"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": "#{x}#"}],
        ),
        {"role": "assistant", "content": "$go$"},
        _user("2026-10-12", "plain"),
    ]
    snapshot = copy.deepcopy(history)
    out = expand_quick_commands(history, EXPANSIONS)
    assert out[0] == {
        **history[0],
        "content": "Run the full test suite. then Explain the last error. and $unknown$",
    }
    assert out[1]["content"] == [
        history[1]["content"][0],
        {"type": "text", "text": "Explain the last error."},
    ]
    assert out[1]["sender_ymd"] == "2026-10-12"
    assert out[2] is history[2] and out[3] is history[3]
    assert history == snapshot


def test_marker_expanded_message_still_tagged() -> None:
    """seed §7 pure function / §5.3: a cross-day user message with a marker is expanded and still tagged,
    and expansion works on the original text (before the notice)."""
    history = [_user("2026-10-12", "start"), _user("2026-10-13", "$go$ please")]
    request = _build(history, "anchored", "2026-10-13", "2026-10-12")
    tagged = request["messages"][2]["content"]
    assert tagged == date_change_notice("2026-10-13") + "\n\nRun the full test suite. please"


# --------------------------------------------------------------------------- serialization


def test_serialization_drops_internal_fields() -> None:
    """seed §5.2 / §1.1 / §7 no-leak: only role, content, name, tool_calls, tool_call_id reach the body."""
    history = [
        _user("2026-10-12", "a", msg_id=1, created_at="2026-10-12 09:00:00"),
        {
            "role": "assistant",
            "content": None,
            "sender_ymd": "2026-10-12",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "shell", "arguments": "{}"},
                    "summary": "s",
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "shell", "content": "ok", "sender_ymd": "2026-10-12"},
    ]
    for mode in ("rolling", "anchored"):
        body = serialize(_build(history, mode, "2026-10-12", "2026-10-12")).decode()
        assert "sender_ymd" not in body and "msg_id" not in body and "created_at" not in body
        assert '"summary"' not in body
    assert list(to_wire_message({"content": "x", "zzz": 1, "role": "user"})) == ["role", "content"]


def test_serialize_is_canonical_json() -> None:
    """seed §3.4 / §5.8: serialization is compact UTF-8 JSON with non-ASCII kept and stable key order."""
    request = _build([_user("2026-10-12", "你好")], "anchored", "2026-10-12", "2026-10-12")
    raw = serialize(request)
    assert "你好".encode() in raw
    assert b'{"messages":[{"role":"system","content":' == raw[: raw.index(b":", 30) + 1]
    assert json.loads(raw) == request
    assert raw == serialize(json.loads(raw))


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _JSON_VALUES, max_size=4))
def test_serialize_is_the_documented_json_dumps_spelling(body: dict[str, Any]) -> None:
    """serialize keeps one encoder for speed; its bytes stay exactly json.dumps' with the documented options."""
    expected = json.dumps(body, ensure_ascii=False, separators=(",", ":"), sort_keys=False).encode("utf-8")
    assert serialize(body) == expected


def test_build_does_not_mutate_history() -> None:
    """seed §2.1 item 3 / §3.4 / §5.5: notices live only in the request copy; history stays as stored."""
    history = [
        _user("2026-10-12", "a"),
        _user(
            "2026-10-13", [{"type": "text", "text": "$go$"}, {"type": "image_url", "image_url": {"url": "u"}}]
        ),
        _user("2026-10-14", "#{x}#"),
    ]
    snapshot = copy.deepcopy(history)
    _build(history, "anchored", "2026-10-14", "2026-10-12")
    build_compaction_request(history, SECTIONS, mode="anchored", base_ymd="2026-10-12", expansions=EXPANSIONS)
    assert history == snapshot


# --------------------------------------------------------------------------- sections


def test_changed_sections_names_the_changed_section() -> None:
    """seed §10 item 2 (fingerprint observation): changed_sections reports which system sections differ."""
    history = [_user("2026-10-12", "a")]
    first = _build(history, "rolling", "2026-10-12", "2026-10-12")
    assert changed_sections(first, _build(history, "rolling", "2026-10-12", "2026-10-12")) == []
    assert changed_sections(first, _build(history, "rolling", "2026-10-13", "2026-10-12")) == ["current-date"]
    new_memory = dataclasses.replace(SECTIONS, memory="## Memory\n\nnew")
    other = BUILDER.build_request(history, new_memory, mode="rolling", today="2026-10-13")
    assert changed_sections(first, other) == ["memory", "current-date"]
    assert changed_sections(section_texts(first), {**section_texts(first), "extra": "x"}) == ["extra"]


def test_section_texts_needs_a_built_request() -> None:
    """seed §10 item 2: a body that lost its section record (e.g. after JSON) is refused, not guessed."""
    request = _build([_user("2026-10-12", "a")], "rolling", "2026-10-12", "2026-10-12")
    with pytest.raises(TypeError, match="section record"):
        section_texts(json.loads(serialize(request)))


# --------------------------------------------------------------------------- seed §10 acceptance


def test_seed_10_1_anchored_across_midnight() -> None:
    """seed §10 item 1: first message 2026-10-12 23:50, next 08:00 the next day → system still shows
    2026-10-12 (Monday); the new user message starts with a <date-change> naming 2026-10-13 (Tuesday)."""
    stored = [
        {"id": 1, "role": "USER", "content": "start the nightly job", "created_at": "2026-10-12 23:50:00"},
        {"id": 2, "role": "ASSISTANT", "content": "done", "created_at": "2026-10-12 23:51:00"},
        {"id": 3, "role": "USER", "content": "how did it go?", "created_at": "2026-10-13 08:00:00"},
    ]
    clock = lambda: "2026-10-13"  # noqa: E731 - the server's today on the second turn
    stamps = [MessageStamp(id=r["id"], created_at=r["created_at"], role=r["role"]) for r in stored]
    base = session_base_ymd(stamps, clock)
    history = [to_chat_message(r) for r in stored]
    request = BUILDER.build_request(history, SECTIONS, mode="anchored", base_ymd=base)
    date_section = section_texts(request)["current-date"]
    assert "`2026-10-12` (Monday)" in date_section and "2026-10-13" not in date_section
    last = request["messages"][-1]["content"]
    assert last.startswith(DATE_CHANGE_OPEN)
    assert "2026-10-13 (Tuesday)" in last.split("</date-change>")[0]
    assert last.endswith("\n\nhow did it go?")
    assert request["messages"][1]["content"] == "start the nightly job"


def test_seed_10_2_no_current_date_change_across_days() -> None:
    """seed §10 item 2 / §5.8 point 3: across midnight the anchored build changes no section, the
    rolling build changes exactly current-date."""
    day1 = [_user("2026-10-12", "a"), {"role": "assistant", "content": "b"}]
    day2 = [*day1, _user("2026-10-13", "c")]
    anchored = (
        _build(day1, "anchored", "2026-10-12", "2026-10-12"),
        _build(day2, "anchored", "2026-10-13", "2026-10-12"),
    )
    rolling = (
        _build(day1, "rolling", "2026-10-12", "2026-10-12"),
        _build(day2, "rolling", "2026-10-13", "2026-10-12"),
    )
    assert changed_sections(*anchored) == []
    assert changed_sections(*rolling) == ["current-date"]
    _assert_prefix_extension(*anchored)


def test_seed_10_5_tagged_message_still_real_in_request() -> None:
    """seed §10 item 5 / §7 judgement: in the built request the latest user message carries a notice
    and is still judged a real user message; the notice is not a <system-notice>."""
    history = [_user("2026-10-12", "a"), _user("2026-10-13", "b")]
    request = _build(history, "anchored", "2026-10-13", "2026-10-12")
    latest = request["messages"][-1]
    assert latest["content"].startswith(DATE_CHANGE_OPEN)
    assert not latest["content"].startswith(SYSTEM_NOTICE_OPEN)
    assert is_real_user_message(latest)


def test_seed_10_6_no_user_messages_falls_back_to_clock() -> None:
    """seed §10 item 6 / §5.1: with no user messages the anchor is the clock's today and nothing is tagged."""
    base = session_base_ymd([], lambda: "2026-10-12")
    history = [{"role": "assistant", "content": "scheduled signal fired", "sender_ymd": "2026-10-12"}]
    anchored = BUILDER.build_request(history, SECTIONS, mode="anchored", base_ymd=base)
    rolling = BUILDER.build_request(history, SECTIONS, mode="rolling", today="2026-10-12")
    assert "`2026-10-12` (Monday)" in section_texts(anchored)["current-date"]
    assert DATE_CHANGE_OPEN not in serialize(anchored["messages"][1:]).decode()
    assert _wire(anchored["messages"][1:]) == _wire(rolling["messages"][1:])
    empty = BUILDER.build_request([], SECTIONS, mode="anchored", base_ymd=base)
    assert len(empty["messages"]) == 1


def test_seed_10_7_same_day_body_matches_rolling() -> None:
    """seed §10 items 3 and 7: within one day the anchored history bytes equal the rolling ones (only
    the date-section wording differs) and no notice appears."""
    history = [_user("2026-10-12", "a"), {"role": "assistant", "content": "b"}, _user("2026-10-12", "$go$")]
    anchored = _build(history, "anchored", "2026-10-12", "2026-10-12")
    rolling = _build(history, "rolling", "2026-10-12", "2026-10-12")
    assert _wire(anchored["messages"][1:]) == _wire(rolling["messages"][1:])
    assert changed_sections(anchored, rolling) == ["current-date"]


def test_compaction_request_is_main_plus_instruction() -> None:
    """seed §5.5 / §5.8 point 2 / §7 invariants: compaction = main request + a trailing instruction,
    notices included in the shared prefix."""
    history = [_user("2026-10-12", "a"), _user("2026-10-13", "b")]
    main = _build(history, "anchored", "2026-10-13", "2026-10-12")
    compaction = BUILDER.build_compaction_request(history, SECTIONS, mode="anchored", base_ymd="2026-10-12")
    _assert_prefix_extension(main, compaction)
    assert compaction["messages"][-1] == {"role": "user", "content": COMPACTION_INSTRUCTION}
    assert len(compaction["messages"]) == len(main["messages"]) + 1
    derived = derive_compaction_request(main, "summarise")
    assert derived["messages"][:-1] == main["messages"] and derived.sections == main.sections
    assert len(main["messages"]) == 3


# --------------------------------------------------------------------------- properties

_START = dt.date(2026, 1, 1)
# No underscore anywhere, so "sender_ymd" can only appear in a body as a leaked key.
_text = st.lists(
    st.sampled_from(["hi", " ", "\n", "中文", "$go$", "#{x}#", "$", "#{", "ok.", SYSTEM_NOTICE_OPEN]),
    max_size=5,
).map("".join)


def _ymd(day: int) -> str:
    return (_START + dt.timedelta(days=day)).isoformat()


@st.composite
def _message(draw: st.DrawFn, ymd: str) -> dict[str, Any]:
    kind = draw(st.sampled_from(["user", "user", "list", "undated", "assistant", "tool"]))
    text = draw(_text)
    if kind == "user":
        return _user(ymd, text)
    if kind == "list":
        return _user(ymd, [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "u"}}])
    if kind == "undated":
        return _user(None, text)
    if kind == "assistant":
        return {
            "role": "assistant",
            "content": text,
            "sender_ymd": ymd,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
            ],
        }
    return {"role": "tool", "tool_call_id": "c1", "content": text, "sender_ymd": ymd}


@st.composite
def _sessions(draw: st.DrawFn) -> dict[str, Any]:
    """A chronological session: history, anchor, optional pre-compaction reference, and the last day."""
    day = draw(st.integers(0, 300))
    base = _ymd(day)
    day += draw(st.sampled_from([0, 0, 2]))  # the anchor may come from an earlier, since deleted, message
    history: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 10))):
        day += draw(st.sampled_from([0, 0, 0, 1, 3]))
        history.append(draw(_message(_ymd(day))))
    previous = draw(st.none() | st.just(base))
    mode = draw(st.sampled_from(["rolling", "anchored"]))
    return {"history": history, "base": base, "previous": previous, "day": day, "mode": mode}


def _reference(session: dict[str, Any]) -> str:
    """The date the next user message is compared with: last dated user message, else the start."""
    for message in reversed(session["history"]):
        if message["role"] == "user" and message.get("sender_ymd"):
            return message["sender_ymd"]
    return session["previous"] or session["base"]


def _build_session(session: dict[str, Any], history: list[dict[str, Any]], today: str) -> ChatRequest:
    return _build(history, session["mode"], today, session["base"], session["previous"])


@settings(deadline=None)
@given(_sessions())
def test_property_build_twice_byte_identical(session: dict[str, Any]) -> None:
    """seed §7 invariants / §5.8 / §3.4: building the same context twice gives identical bytes."""
    today = _ymd(session["day"])
    first = _build_session(session, session["history"], today)
    second = _build_session(session, copy.deepcopy(session["history"]), today)
    assert serialize(first) == serialize(second)
    assert section_texts(first) == section_texts(second)


@settings(deadline=None)
@given(_sessions(), st.data())
def test_property_same_day_append_keeps_prefix(session: dict[str, Any], data: st.DataObject) -> None:
    """seed §7 invariants / §10 item 3 / §5.8 point 1: appending a same-day message leaves the old
    request a prefix of the new one, with the system message identical."""
    today = _ymd(session["day"])
    old = _build_session(session, session["history"], today)
    same_day = _reference(session)
    appended = data.draw(_message(same_day))
    new = _build_session(session, [*session["history"], appended], today)
    _assert_prefix_extension(old, new)
    assert new["messages"][0] == old["messages"][0]
    assert changed_sections(old, new) == []
    if session["mode"] == "anchored" and appended["role"] == "user":
        assert DATE_CHANGE_OPEN not in serialize(new["messages"][-1]).decode()


@settings(deadline=None)
@given(_sessions(), st.sampled_from([1, 3]), st.sampled_from(["text", "list"]))
def test_property_next_day_append_anchored_keeps_prefix(
    session: dict[str, Any], gap: int, shape: str
) -> None:
    """seed §7 invariants (core acceptance) / §5.8 point 3 / §10 item 2: in anchored mode a user message
    on a later day changes nothing before the new tail, and the tail carries the notice."""
    session = {**session, "mode": "anchored"}
    reference = _reference(session)
    new_day = (dt.date.fromisoformat(reference) + dt.timedelta(days=gap)).isoformat()
    content: Any = "next day" if shape == "text" else [{"type": "image_url", "image_url": {"url": "u"}}]
    old = _build_session(session, session["history"], reference)
    new = _build_session(session, [*session["history"], _user(new_day, content)], new_day)
    _assert_prefix_extension(old, new)
    assert changed_sections(old, new) == []
    tail = new["messages"][-1]["content"]
    notice = tail if isinstance(tail, str) else tail[0]["text"]
    assert notice.startswith(date_change_notice(new_day))
    assert is_real_user_message(new["messages"][-1])


@settings(deadline=None)
@given(_sessions(), st.sampled_from([1, 3]))
def test_property_next_day_append_rolling_changes_date_section(session: dict[str, Any], gap: int) -> None:
    """seed §1.2 / §7 invariants (contrast): in rolling mode the next-day turn rewrites the current-date
    section (the system message), while the history messages keep their bytes."""
    session = {**session, "mode": "rolling"}
    reference = _reference(session)
    new_day = (dt.date.fromisoformat(reference) + dt.timedelta(days=gap)).isoformat()
    old = _build_session(session, session["history"], reference)
    new = _build_session(session, [*session["history"], _user(new_day, "next day")], new_day)
    assert new["messages"][0] != old["messages"][0]
    assert changed_sections(old, new) == ["current-date"]
    assert _wire(new["messages"][1 : len(old["messages"])]) == _wire(old["messages"][1:])
    assert DATE_CHANGE_OPEN not in serialize(new).decode()


@settings(deadline=None)
@given(_sessions(), _text)
def test_property_compaction_request_strict_prefix_extension(
    session: dict[str, Any], instruction: str
) -> None:
    """seed §7 invariants / §5.5 / §5.8 point 2: the compaction request is the main request plus one
    trailing instruction message."""
    today = _ymd(session["day"])
    main = _build_session(session, session["history"], today)
    compaction = build_compaction_request(
        session["history"],
        SECTIONS,
        mode=session["mode"],
        today=today,
        base_ymd=session["base"],
        previous_user_ymd_before=session["previous"],
        tools=TOOLS,
        expansions=EXPANSIONS,
        instruction=instruction,
    )
    _assert_prefix_extension(main, compaction)
    assert len(compaction["messages"]) == len(main["messages"]) + 1
    assert compaction["messages"][-1] == {"role": "user", "content": instruction}
    assert serialize(derive_compaction_request(main, instruction)) == serialize(compaction)


@settings(deadline=None)
@given(_sessions())
def test_property_no_body_contains_sender_ymd(session: dict[str, Any]) -> None:
    """seed §7 no-leak / §5.2: no serialized body (main or compaction, either mode) contains sender_ymd,
    and the caller's history is unchanged."""
    snapshot = copy.deepcopy(session["history"])
    today = _ymd(session["day"])
    main = _build_session(session, session["history"], today)
    compaction = derive_compaction_request(main)
    assert b"sender_ymd" not in serialize(main)
    assert b"sender_ymd" not in serialize(compaction)
    assert session["history"] == snapshot


@settings(deadline=None)
@given(_sessions())
def test_property_notice_never_system_notice_and_tagged_user_still_real(session: dict[str, Any]) -> None:
    """seed §3.3 / §7 judgement: every message the notices touch is a user message whose new lead is a
    <date-change> (never a <system-notice>), and it keeps its real-user verdict."""
    session = {**session, "mode": "anchored"}
    request = _build_session(session, session["history"], _ymd(session["day"]))
    expanded = expand_quick_commands(session["history"], EXPANSIONS)
    for before, after in zip(expanded, request["messages"][1:], strict=True):
        if after == to_wire_message(before):
            continue
        content = after["content"]
        lead = content if isinstance(content, str) else content[0]["text"]
        assert after["role"] == "user"
        assert lead.startswith(DATE_CHANGE_OPEN) and not lead.startswith(SYSTEM_NOTICE_OPEN)
        assert is_real_user_message(after) == is_real_user_message(before)
