"""Session date anchoring: anchor resolution, sender dates, date-change notices, the date section.

Each test names the point of the session-date-anchoring design (seed 001) it covers in its docstring.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.anchoring.rules import (
    DATE_CHANGE_CLOSE,
    DATE_CHANGE_OPEN,
    HANDOFF_HEADING,
    HANDOFF_HEADING_ORIGINAL,
    SYSTEM_NOTICE_OPEN,
    MessageStamp,
    apply_date_change_notices,
    current_date_section,
    date_change_notice,
    first_user_id_in_window,
    is_real_user_message,
    previous_user_ymd_before,
    previous_user_ymd_before_id,
    sender_ymd,
    session_base_ymd,
    strip_date_change_notice,
    to_chat_message,
    weekday_name,
)


def _clock(ymd: str = "2030-01-01"):
    calls: list[str] = []

    def today() -> str:
        calls.append(ymd)
        return ymd

    today.calls = calls  # type: ignore[attr-defined]
    return today


def _never_called() -> str:
    raise AssertionError("the clock must not be consulted when a first user message exists")


def _user(ymd: str | None, text: Any = "hi", **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": text, **extra}
    if ymd is not None:
        message["sender_ymd"] = ymd
    return message


def _notice_dates(messages: list[dict[str, Any]]) -> list[str | None]:
    """Per message: the date named by its leading notice, or None when it has none."""
    out: list[str | None] = []
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else (content[0].get("text", "") if content else "")
        if isinstance(text, str) and text.startswith(DATE_CHANGE_OPEN):
            out.append(next(tok for tok in text.split() if tok[:4].isdigit() and tok[4:5] == "-"))
        else:
            out.append(None)
    return out


# --------------------------------------------------------------------------- anchor


def test_anchor_lowest_id() -> None:
    """seed §7 anchor / §5.1 / §2.1 item 1: the non-deleted user message with the lowest id gives the anchor."""
    stamps = [
        MessageStamp(id=7, created_at="2026-10-14 09:00:00"),
        MessageStamp(id=3, created_at="2026-10-12 23:50:00"),
        MessageStamp(id=5, created_at="2026-10-13 08:00:00"),
    ]
    assert session_base_ymd(stamps, _never_called) == "2026-10-12"


def test_anchor_independent_of_clock() -> None:
    """seed §7 anchor: the anchor equals the first message's date whatever the injected clock says."""
    stamps = [MessageStamp(id=1, created_at="2026-10-12 10:00:00")]
    clock = _clock("2027-03-03")
    assert session_base_ymd(stamps, clock) == "2026-10-12"
    assert clock.calls == []  # type: ignore[attr-defined]


def test_anchor_falls_back_to_injected_clock() -> None:
    """seed §7 anchor / §5.1 step 2 / §3.1: no user message → the injected clock's today."""
    clock = _clock("2026-10-12")
    assert session_base_ymd([], clock) == "2026-10-12"
    assert clock.calls == ["2026-10-12"]  # type: ignore[attr-defined]


def test_anchor_falls_back_when_all_user_messages_deleted() -> None:
    """seed §7 anchor / §4 (deleted = 0): only soft-deleted user messages → the clock."""
    stamps = [MessageStamp(id=1, created_at="2026-10-01 10:00:00", deleted=True)]
    assert session_base_ymd(stamps, _clock("2026-10-12")) == "2026-10-12"


def test_anchor_self_heals_after_soft_delete() -> None:
    """seed §7 anchor / §2.2 / §5.1: soft-deleting the first message moves the anchor on the next resolve."""
    rows = [
        {"id": 1, "created_at": "2026-10-10 22:00:00", "deleted": False},
        {"id": 2, "created_at": "2026-10-12 09:00:00", "deleted": False},
    ]
    assert session_base_ymd(rows, _never_called) == "2026-10-10"
    rows[0]["deleted"] = True  # the next turn sees the soft delete
    assert session_base_ymd(rows, _never_called) == "2026-10-12"


def test_anchor_is_string_slice_not_timezone_conversion() -> None:
    """seed §3.2 / §8: the date is created_at[:10] of the writer's wall-clock text, never converted."""
    late = [MessageStamp(id=1, created_at="2026-10-12T23:50:00+08:00")]
    # Converting to another zone would move the day (e.g. +14:00 gives 2026-10-13); slicing never does.
    assert session_base_ymd(late, _never_called) == "2026-10-12"
    early = [{"id": 1, "created_at": "2026-10-13 00:10:00"}]
    assert session_base_ymd(early, _never_called) == "2026-10-13"


def test_anchor_ignores_non_user_rows_and_accepts_dicts() -> None:
    """seed §4 (role = 'USER'): rows of other roles never anchor; plain dicts work like records."""
    rows = [
        {"id": 1, "role": "ASSISTANT", "created_at": "2026-10-01 10:00:00"},
        {"id": 2, "role": "USER", "created_at": "2026-10-05 10:00:00", "deleted": False},
    ]
    assert session_base_ymd(rows, _never_called) == "2026-10-05"


# --------------------------------------------------------------------------- sender dates


def test_sender_ymd_present() -> None:
    """seed §7 loading / §5.2: a stored message with created_at yields created_at[:10]."""
    assert sender_ymd({"created_at": "2026-10-13 08:00:00"}) == "2026-10-13"
    assert sender_ymd(MessageStamp(id=1, created_at="2026-10-12 23:50:00")) == "2026-10-12"


def test_sender_ymd_absent() -> None:
    """seed §7 loading / §5.2: no created_at → no sender date (None, and no key on the chat dict)."""
    assert sender_ymd({"id": 1}) is None
    assert sender_ymd({"created_at": None}) is None
    assert "sender_ymd" not in to_chat_message({"role": "USER", "content": "x"})


def test_to_chat_message_carries_sender_ymd() -> None:
    """seed §7 loading / §5.2: the chat message built from a stored row carries sender_ymd when dated."""
    chat = to_chat_message({"id": 4, "role": "USER", "content": "hello", "created_at": "2026-10-13 08:00:00"})
    assert chat == {"role": "user", "content": "hello", "sender_ymd": "2026-10-13"}


# --------------------------------------------------------------------------- compaction reference


def test_previous_user_ymd_before_crosses_compaction_boundary() -> None:
    """seed §7 loading / §5.2: the reference for the window is the last user message before it."""
    stored = [
        {"id": 1, "role": "USER", "created_at": "2026-10-10 09:00:00"},
        {"id": 2, "role": "ASSISTANT", "created_at": "2026-10-10 09:01:00"},
        {"id": 3, "role": "USER", "created_at": "2026-10-11 09:00:00"},
        {"id": 4, "role": "ASSISTANT", "created_at": "2026-10-11 09:01:00"},
        {"id": 5, "role": "USER", "created_at": "2026-10-12 09:00:00"},
    ]
    window = stored[3:]  # loaded after the compaction boundary: ids 4 and 5
    assert first_user_id_in_window(window) == 5
    assert previous_user_ymd_before(window, stored) == "2026-10-11"


def test_previous_user_ymd_before_none_without_user_in_window() -> None:
    """seed §7 loading / §5.2: a window with no user message gives None."""
    stored = [
        {"id": 1, "role": "USER", "created_at": "2026-10-10 09:00:00"},
        {"id": 2, "role": "ASSISTANT", "created_at": "2026-10-10 09:01:00"},
    ]
    assert previous_user_ymd_before(stored[1:], stored) is None
    assert previous_user_ymd_before([], stored) is None


def test_previous_user_stamp_query_semantics() -> None:
    """seed §7 loading / §4 selectPreviousUserStamp: user only, not deleted, id strictly smaller, latest first."""
    stored = [
        MessageStamp(id=1, created_at="2026-10-08 09:00:00"),
        MessageStamp(id=2, created_at="2026-10-09 09:00:00"),
        MessageStamp(id=3, created_at="2026-10-10 09:00:00", deleted=True),
        MessageStamp(id=4, created_at="2026-10-11 09:00:00", role="ASSISTANT"),
        MessageStamp(id=5, created_at="2026-10-12 09:00:00"),
    ]
    assert previous_user_ymd_before_id(5, stored) == "2026-10-09"
    assert previous_user_ymd_before_id(2, stored) == "2026-10-08"
    assert previous_user_ymd_before_id(1, stored) is None


# --------------------------------------------------------------------------- notices


def test_notice_same_day_none() -> None:
    """seed §7 pure function: several messages on the same day → no notice at all."""
    messages = [_user("2026-10-12", "a"), {"role": "assistant", "content": "b"}, _user("2026-10-12", "c")]
    out = apply_date_change_notices(messages, "2026-10-12")
    assert out == messages
    assert all(o is m for o, m in zip(out, messages, strict=True))


def test_notice_one_day_only_first_message_of_new_day() -> None:
    """seed §7 pure function: across one day only the first message of the new day is tagged."""
    messages = [
        _user("2026-10-12", "a"),
        _user("2026-10-13", "b"),
        {"role": "assistant", "content": "ok"},
        _user("2026-10-13", "c"),
    ]
    out = apply_date_change_notices(messages, "2026-10-12")
    assert _notice_dates(out) == [None, "2026-10-13", None, None]


def test_notice_three_day_gap_single_notice_with_new_date() -> None:
    """seed §7 pure function: a three-day gap gives one notice naming the new date."""
    messages = [_user("2026-10-12", "a"), _user("2026-10-15", "b"), _user("2026-10-15", "c")]
    out = apply_date_change_notices(messages, "2026-10-12")
    assert _notice_dates(out) == [None, "2026-10-15", None]
    assert "2026-10-15 (Thursday)" in out[1]["content"]


def test_notice_first_message_on_anchor_day_none() -> None:
    """seed §7 pure function: the first message on the anchor day is not tagged."""
    out = apply_date_change_notices([_user("2026-10-12", "first")], "2026-10-12")
    assert out[0]["content"] == "first"


def test_notice_first_message_after_anchor_tagged() -> None:
    """seed §7 pure function / §5.3: an anchor from an earlier (deleted) message → the first message is tagged."""
    out = apply_date_change_notices([_user("2026-10-13", "first")], "2026-10-10")
    assert _notice_dates(out) == ["2026-10-13"]


def test_notice_starts_from_previous_user_ymd_before() -> None:
    """seed §5.3 rule 1 / §5.2: the reference starts at the pre-compaction date, not the anchor."""
    messages = [_user("2026-10-14", "a"), _user("2026-10-15", "b")]
    assert _notice_dates(apply_date_change_notices(messages, "2026-10-01", "2026-10-14")) == [
        None,
        "2026-10-15",
    ]
    assert _notice_dates(apply_date_change_notices(messages, "2026-10-14", None)) == [None, "2026-10-15"]


def test_notice_string_content_format_and_fields_kept() -> None:
    """seed §5.3 rule 4: string content becomes notice, blank line, original text; other fields kept."""
    message = _user("2026-10-13", "please continue", name="alice", extra={"k": 1})
    out = apply_date_change_notices([message], "2026-10-12")
    notice = date_change_notice("2026-10-13")
    assert out[0]["content"] == notice + "\n\nplease continue"
    assert {k: v for k, v in out[0].items() if k != "content"} == {
        k: v for k, v in message.items() if k != "content"
    }
    assert message["content"] == "please continue"


def test_notice_multimodal_list_content_original_untouched() -> None:
    """seed §7 pure function / §5.3 rule 4: list content gets a leading text part, image order kept,
    and the original nested list is not modified (shallow-copy trap regression test)."""
    parts = [
        {"type": "image_url", "image_url": {"url": "data:a"}},
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:b"}},
    ]
    original = {"role": "user", "content": parts, "sender_ymd": "2026-10-13"}
    history = [original]
    shallow_copy = [{**m} for m in history]  # what the harness hands over: dicts copied, lists shared
    snapshot = copy.deepcopy(history)
    out = apply_date_change_notices(shallow_copy, "2026-10-12")
    assert out[0]["content"][0] == {"type": "text", "text": date_change_notice("2026-10-13")}
    assert out[0]["content"][1:] == parts
    assert out[0]["content"] is not parts
    assert history == snapshot and original["content"] is parts and len(parts) == 3
    assert shallow_copy[0]["content"] is parts


def test_notice_skips_messages_without_date_and_keeps_reference() -> None:
    """seed §7 pure function / §5.3 rule 3: undated user messages are neither compared nor move the reference."""
    messages = [
        _user("2026-10-12", "a"),
        _user(None, "undated"),
        _user("2026-10-12", "b"),
        _user(None, "undated again"),
        _user("2026-10-13", "c"),
    ]
    out = apply_date_change_notices(messages, "2026-10-12")
    assert _notice_dates(out) == [None, None, None, None, "2026-10-13"]
    assert out[1] is messages[1] and out[3] is messages[3]


def test_notice_only_on_user_messages() -> None:
    """seed §2.2 / §5.3 rule 2: assistant and tool messages are never tagged and never move the reference."""
    messages = [
        {"role": "assistant", "content": "x", "sender_ymd": "2026-10-20"},
        {"role": "tool", "content": "y", "tool_call_id": "c1", "sender_ymd": "2026-10-21"},
        _user("2026-10-12", "z"),
    ]
    out = apply_date_change_notices(messages, "2026-10-12")
    assert out == messages


def test_notice_returns_new_list_and_never_mutates_input() -> None:
    """seed §5.3 / §3.4 / §2.1 item 3: a new list is returned; no input list or dict is changed."""
    messages = [_user("2026-10-12", "a"), _user("2026-10-13", [{"type": "text", "text": "b"}])]
    snapshot = copy.deepcopy(messages)
    out = apply_date_change_notices(messages, "2026-10-12")
    assert out is not messages
    assert messages == snapshot
    assert out[0] is messages[0] and out[1] is not messages[1]


def test_notice_text_is_one_line_with_date_and_weekday() -> None:
    """seed §5.3 tag text / §11: one line, tagged <date-change>, new date with its weekday, marked as system-made."""
    notice = date_change_notice("2026-10-13")
    assert notice.startswith(DATE_CHANGE_OPEN) and notice.endswith(DATE_CHANGE_CLOSE)
    assert "\n" not in notice
    assert "2026-10-13 (Tuesday)" in notice
    assert "not write" in notice and "system" in notice
    assert "`date`" in notice
    assert not notice.startswith(SYSTEM_NOTICE_OPEN)
    assert "`date`" not in date_change_notice("2026-10-13", allow_shell_clock=False)


def test_weekday_is_locale_independent_english() -> None:
    """seed §5.4 / §11: weekdays are English names; an unparseable date has none."""
    assert weekday_name("2026-10-12") == "Monday"
    assert weekday_name("2026-10-18") == "Sunday"
    assert weekday_name("not-a-date") is None


# --------------------------------------------------------------------------- date section


def test_current_date_section_rolling() -> None:
    """seed §1.1 / §5.4: rolling mode shows today's date with its weekday and the shell-clock hint."""
    text = current_date_section("2026-10-12", "rolling")
    assert "`2026-10-12` (Monday)" in text
    assert "`date`" in text
    assert DATE_CHANGE_OPEN not in text


def test_current_date_section_anchored() -> None:
    """seed §5.4 / §2.1 item 4: anchored mode names the session start date, says it is fixed and that
    a <date-change> notice takes precedence."""
    text = current_date_section("2026-10-12", "anchored")
    assert "`2026-10-12` (Monday)" in text
    assert "start" in text and "fixed" in text
    assert DATE_CHANGE_OPEN in text and "precedence" in text


def test_current_date_section_shell_clock_hint_optional() -> None:
    """seed §5.4: the shell `date` hint appears only when the shell clock is allowed (embedded pages)."""
    for mode in ("rolling", "anchored"):
        assert "`date`" in current_date_section("2026-10-12", mode, allow_shell_clock=True)
        assert "`date`" not in current_date_section("2026-10-12", mode, allow_shell_clock=False)
    with pytest.raises(ValueError, match="unknown date mode"):
        current_date_section("2026-10-12", "weekly")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- real user messages


def test_is_real_user_message_rejects_system_notice_and_handoff() -> None:
    """seed §1.1 / §3.3: <system-notice> and hand-off user messages are not real (both heading spellings)."""
    assert is_real_user_message({"role": "user", "content": "fix the bug"})
    assert not is_real_user_message({"role": "user", "content": SYSTEM_NOTICE_OPEN + "x</system-notice>"})
    assert not is_real_user_message({"role": "user", "content": HANDOFF_HEADING + "\n\nsummary"})
    assert not is_real_user_message({"role": "user", "content": HANDOFF_HEADING_ORIGINAL + "\n\n摘要"})
    assert not is_real_user_message({"role": "assistant", "content": "fix the bug"})
    assert not is_real_user_message(
        {"role": "user", "content": [{"type": "text", "text": SYSTEM_NOTICE_OPEN}]}
    )


def test_tagged_user_message_still_real() -> None:
    """seed §7 judgement / §10 item 5: a user message carrying a <date-change> notice is still real,
    in string and list form; tagging a system notice does not make it real."""
    messages = [
        _user("2026-10-13", "fix the bug"),
        _user(
            "2026-10-14", [{"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": "see"}]
        ),
        _user("2026-10-15", SYSTEM_NOTICE_OPEN + "internal</system-notice>"),
    ]
    out = apply_date_change_notices(messages, "2026-10-12")
    assert _notice_dates(out) == ["2026-10-13", "2026-10-14", "2026-10-15"]
    assert is_real_user_message(out[0]) and is_real_user_message(out[1])
    assert not is_real_user_message(out[2])
    assert strip_date_change_notice(out[0]["content"]) == "fix the bug"


# --------------------------------------------------------------------------- properties

_BASE = dt.date(2026, 1, 1)

_texts = st.lists(
    st.sampled_from(["hi", " ", "\n", "中文", "$go$", "#{x}#", "<system-notice>"]), max_size=4
).map("".join)


@st.composite
def _sessions(draw: st.DrawFn) -> tuple[list[dict[str, Any]], str, str | None]:
    day = draw(st.integers(0, 300))
    base = (_BASE + dt.timedelta(days=day)).isoformat()
    messages: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 12))):
        day += draw(st.sampled_from([0, 0, 0, 1, 3]))
        ymd = (_BASE + dt.timedelta(days=day)).isoformat()
        kind = draw(st.sampled_from(["user", "user", "list", "undated", "assistant"]))
        text = draw(_texts)
        if kind == "user":
            messages.append(_user(ymd, text))
        elif kind == "list":
            messages.append(
                _user(ymd, [{"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": text}])
            )
        elif kind == "undated":
            messages.append(_user(None, text))
        else:
            messages.append({"role": "assistant", "content": text, "sender_ymd": ymd})
    previous = draw(st.none() | st.integers(0, 300).map(lambda d: (_BASE + dt.timedelta(days=d)).isoformat()))
    return messages, base, previous


@settings(deadline=None)
@given(_sessions())
def test_property_notices_follow_date_changes_without_mutation(
    session: tuple[list[dict[str, Any]], str, str | None],
) -> None:
    """seed §5.3 / §5.8 / §3.3: notices exactly at dated-user date changes, input untouched, output
    deterministic, notices never start with <system-notice>, tagged real messages stay real."""
    messages, base, previous = session
    snapshot = copy.deepcopy(messages)
    out = apply_date_change_notices(messages, base, previous)
    assert messages == snapshot
    assert out == apply_date_change_notices(messages, base, previous)
    reference = previous or base
    for before, after in zip(messages, out, strict=True):
        ymd = before.get("sender_ymd")
        if before["role"] == "user" and ymd and ymd != reference:
            reference = ymd
            content = after["content"]
            notice = content[0]["text"] if isinstance(content, list) else content.split("\n\n", 1)[0]
            assert notice == date_change_notice(ymd)
            assert not notice.startswith(SYSTEM_NOTICE_OPEN)
            assert is_real_user_message(after) == is_real_user_message(before)
            assert {k: v for k, v in after.items() if k != "content"} == {
                k: v for k, v in before.items() if k != "content"
            }
        else:
            assert after is before
