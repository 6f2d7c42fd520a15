"""Session date anchoring: a pure reference model of how the harness dates a conversation.

The system prompt used to carry "today", so the first turn after midnight rewrote the system
message and threw away the whole prompt cache for the longest history of the day. In anchored
mode the system prompt instead carries the date of the session's first user message, which
never changes for the session, and each user message that arrives on a later calendar day is
prefixed, only in the request copy, with a one-line ``<date-change>`` notice.

Everything here is a pure function: no I/O, no global clock. The current date is injected as a
zero-argument callable, and every date is the first ten characters of the writer's wall-clock
timestamp text (``"YYYY-MM-DD HH:MM:SS"``), never a time-zone conversion, so a date is always
read the same way the writer stored it.

Records may be the small dataclasses defined here or plain mappings with the same keys.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "DATE_CHANGE_CLOSE",
    "DATE_CHANGE_OPEN",
    "DATE_MODES",
    "HANDOFF_HEADING",
    "HANDOFF_HEADINGS",
    "HANDOFF_HEADING_ORIGINAL",
    "SYSTEM_NOTICE_OPEN",
    "ChatMessage",
    "DateMode",
    "MessageStamp",
    "apply_date_change_notices",
    "current_date_section",
    "date_change_notice",
    "first_user_id_in_window",
    "is_real_user_message",
    "message_text",
    "previous_user_ymd_before",
    "previous_user_ymd_before_id",
    "sender_ymd",
    "session_base_ymd",
    "strip_date_change_notice",
    "to_chat_message",
    "weekday_name",
]

# Literal markers. The notice tag is deliberately distinct from <system-notice>: a user message
# whose text starts with <system-notice> is treated as harness-injected, and the date notice is
# attached to genuine user messages, so reusing that tag would flip them to "not real".
DATE_CHANGE_OPEN = "<date-change>"
DATE_CHANGE_CLOSE = "</date-change>"
SYSTEM_NOTICE_OPEN = "<system-notice>"

# Heading that opens a compaction hand-off summary posted as a user message. Older transcripts
# carry the original (Chinese) heading, so both spellings are recognised.
HANDOFF_HEADING = "## Session hand-off"
HANDOFF_HEADING_ORIGINAL = "## 会话任务交接"
HANDOFF_HEADINGS: tuple[str, ...] = (HANDOFF_HEADING, HANDOFF_HEADING_ORIGINAL)

# Separator between an injected notice and the original text of a string-content message.
NOTICE_SEPARATOR = "\n\n"

DateMode = Literal["rolling", "anchored"]
DATE_MODES: tuple[DateMode, ...] = ("rolling", "anchored")

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


class ChatMessage(TypedDict):
    """A chat message as the request builder sees it.

    ``sender_ymd`` is internal: it feeds the date notices and must never reach a request body.
    Other protocol keys (``name``, ``tool_calls``, ``tool_call_id``) may also be present.
    """

    role: str
    content: NotRequired[str | list[dict[str, Any]] | None]
    sender_ymd: NotRequired[str]


@dataclass(frozen=True, slots=True)
class MessageStamp:
    """The stored facts about one message that anchoring needs.

    ``created_at`` is the writer's wall-clock text (``"YYYY-MM-DD HH:MM:SS"``) or None.
    ``role`` follows the store's spelling; ``"USER"`` and ``"user"`` both count as user.
    """

    id: int
    created_at: str | None
    deleted: bool = False
    role: str = "user"


Stamp = MessageStamp | Mapping[str, Any]


# --------------------------------------------------------------------------- record access


def _field(record: Any, name: str, default: Any = None) -> Any:
    if isinstance(record, Mapping):
        return record.get(name, default)
    return getattr(record, name, default)


def _is_user(record: Any) -> bool:
    """True for user-role records; a record without a role is taken to be a user message."""
    role = _field(record, "role")
    return role is None or str(role).lower() == "user"


def _is_deleted(record: Any) -> bool:
    return bool(_field(record, "deleted", False))


def _ymd_of(created_at: Any) -> str | None:
    """First ten characters of the timestamp text; None when there is no timestamp."""
    if created_at is None:
        return None
    text = created_at if isinstance(created_at, str) else str(created_at)
    return text[:10] or None


# --------------------------------------------------------------------------- dates


@lru_cache(maxsize=4096)
def weekday_name(ymd: str) -> str | None:
    """English weekday of a ``YYYY-MM-DD`` date, or None when the text is not such a date.

    The name comes from a fixed table, not ``strftime``, so the result does not depend on the locale.
    """
    try:
        return _WEEKDAYS[dt.date.fromisoformat(ymd).weekday()]
    except (TypeError, ValueError):
        return None


def _date_with_weekday(ymd: str, *, code: bool) -> str:
    shown = f"`{ymd}`" if code else ymd
    weekday = weekday_name(ymd)
    return f"{shown} ({weekday})" if weekday else shown


# --------------------------------------------------------------------------- anchor


def session_base_ymd(user_messages: Iterable[Stamp], today: Callable[[], str]) -> str:
    """The session's anchor date, resolved afresh on every build.

    The non-deleted user message with the lowest id supplies ``created_at[:10]``. With no such
    message (or when that message has no timestamp) the injected clock ``today()`` is used, which
    matches the pre-anchoring behaviour. Because nothing is cached, soft-deleting the first message
    moves the anchor to the next surviving one on the following turn.
    """
    first: Any = None
    first_id: Any = None
    for record in user_messages:
        if not _is_user(record) or _is_deleted(record):
            continue
        record_id = _field(record, "id")
        if first is None or record_id < first_id:
            first, first_id = record, record_id
    if first is not None:
        ymd = _ymd_of(_field(first, "created_at"))
        if ymd is not None:
            return ymd
    return today()


def sender_ymd(message: Any) -> str | None:
    """``created_at[:10]`` of a stored message, or None when it has no ``created_at``."""
    return _ymd_of(_field(message, "created_at"))


def to_chat_message(record: Any) -> dict[str, Any]:
    """Turn a stored message into a chat dict, carrying its date as the internal ``sender_ymd``.

    The role is lower-cased; ``content`` and the optional protocol keys are copied by reference.
    ``sender_ymd`` is set only when the record has a ``created_at``.
    """
    chat: dict[str, Any] = {"role": str(_field(record, "role", "user")).lower()}
    chat["content"] = _field(record, "content")
    for key in ("name", "tool_calls", "tool_call_id"):
        value = _field(record, key)
        if value is not None:
            chat[key] = value
    ymd = sender_ymd(record)
    if ymd is not None:
        chat["sender_ymd"] = ymd
    return chat


def first_user_id_in_window(window: Iterable[Any]) -> Any | None:
    """Id of the first non-deleted user message in a loaded history window, or None."""
    for record in window:
        if _is_user(record) and not _is_deleted(record):
            return _field(record, "id")
    return None


def previous_user_ymd_before_id(before_id: Any, user_messages: Iterable[Stamp]) -> str | None:
    """Date of the latest non-deleted user message whose id is strictly smaller than ``before_id``."""
    best: Any = None
    best_id: Any = None
    for record in user_messages:
        if not _is_user(record) or _is_deleted(record):
            continue
        record_id = _field(record, "id")
        if record_id < before_id and (best is None or record_id > best_id):
            best, best_id = record, record_id
    return None if best is None else sender_ymd(best)


def previous_user_ymd_before(window: Iterable[Any], user_messages: Iterable[Stamp]) -> str | None:
    """Reference date carried across a compaction boundary.

    ``window`` is the loaded history after the boundary (records with ``id`` and ``role``);
    ``user_messages`` are the session's stored user messages. The first user message inside the
    window is located, and the date of the latest non-deleted user message before it is returned.
    None when the window holds no user message or nothing precedes it.
    """
    first_id = first_user_id_in_window(window)
    if first_id is None:
        return None
    return previous_user_ymd_before_id(first_id, user_messages)


# --------------------------------------------------------------------------- notices


def date_change_notice(ymd: str, *, allow_shell_clock: bool = True) -> str:
    """The one-line ``<date-change>`` notice announcing that the calendar date is now ``ymd``."""
    text = (
        f"System note: the calendar date has moved on and is now {_date_with_weekday(ymd, code=False)}."
        " This line was inserted by the system; the user did not write it."
    )
    if allow_shell_clock:
        text += " Run `date` in the shell if you need the exact time."
    return f"{DATE_CHANGE_OPEN}{text}{DATE_CHANGE_CLOSE}"


def _with_notice(message: Mapping[str, Any], notice: str) -> dict[str, Any]:
    """A new message dict whose content starts with ``notice``; the input is left untouched."""
    content = message.get("content")
    new_content: str | list[Any]
    if isinstance(content, str):
        new_content = notice + NOTICE_SEPARATOR + content
    elif isinstance(content, list | tuple):
        new_content = [{"type": "text", "text": notice}, *content]
    elif content is None:
        new_content = notice
    else:
        raise TypeError(f"cannot prefix a date notice to content of type {type(content).__name__}")
    return {**message, "content": new_content}


def apply_date_change_notices(
    messages: Sequence[Mapping[str, Any]],
    base_ymd: str,
    previous_user_ymd_before: str | None = None,
    *,
    allow_shell_clock: bool = True,
) -> list[Any]:
    """Return a new message list with a ``<date-change>`` notice on each user message that opens a new day.

    The reference date starts as ``previous_user_ymd_before`` (the last user date before a
    compaction boundary) or else ``base_ymd``. Messages are scanned in order; only user messages
    that carry ``sender_ymd`` are compared, and only they move the reference. When a message's
    date differs from the reference it gets a notice naming its own date: string content becomes
    notice + blank line + text, list content gets a new leading text part with the other parts
    kept in order. The input list, its dicts and any nested content list are never mutated;
    messages without a notice are returned as the same objects, changed ones as new dicts that
    keep every other field (``sender_ymd`` included).
    """
    reference = previous_user_ymd_before if previous_user_ymd_before is not None else base_ymd
    out: list[Any] = list(messages)
    for index, message in enumerate(out):
        if message.get("role") != "user":
            continue
        ymd = message.get("sender_ymd")
        if not ymd:
            continue
        if ymd != reference:
            out[index] = _with_notice(message, date_change_notice(ymd, allow_shell_clock=allow_shell_clock))
            reference = ymd
    return out


# --------------------------------------------------------------------------- system prompt section


def current_date_section(ymd: str, mode: DateMode = "rolling", allow_shell_clock: bool = True) -> str:
    """Text of the current-date section of the system prompt.

    ``rolling`` shows ``ymd`` as today's date (the old behaviour, rewritten each day). ``anchored``
    shows ``ymd`` as the session's start date, says it stays fixed for the session and that a
    ``<date-change>`` notice at the start of a user message overrides it. The hint to run ``date``
    in the shell is included only when ``allow_shell_clock`` is true.
    """
    shown = _date_with_weekday(ymd, code=True)
    if mode == "rolling":
        lines = [f"Today's date: {shown}."]
    elif mode == "anchored":
        lines = [
            f"Session start date: {shown}.",
            "This is the day the session began; it stays fixed for the whole session and is not"
            " updated as days pass. When a user message begins with a <date-change> notice, the real"
            " date has moved on since then, and the date in that notice takes precedence over this one.",
        ]
    else:
        raise ValueError(f"unknown date mode {mode!r}; expected one of {', '.join(DATE_MODES)}")
    if allow_shell_clock:
        lines.append("For the exact time of day, run `date` in the shell.")
    return "## Current date\n\n" + "\n".join(lines)


# --------------------------------------------------------------------------- real user messages


def message_text(message: Mapping[str, Any]) -> str:
    """Leading text of a message: the string content, or the first text part of list content."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                text = part.get("text")
                return text if isinstance(text, str) else ""
    return ""


def strip_date_change_notice(text: str) -> str:
    """Text with one leading ``<date-change>…</date-change>`` notice (and its separator) removed."""
    if not text.startswith(DATE_CHANGE_OPEN):
        return text
    end = text.find(DATE_CHANGE_CLOSE)
    if end < 0:
        return text
    rest = text[end + len(DATE_CHANGE_CLOSE) :]
    return rest.removeprefix(NOTICE_SEPARATOR)


def _leading_text_after_notice(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list | tuple):
        texts: list[str] = [
            part["text"] if isinstance(part.get("text"), str) else ""
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        ]
        if not texts:
            return ""
        first = texts[0]
        if first.startswith(DATE_CHANGE_OPEN) and strip_date_change_notice(first) == "":
            # A notice part of its own: judge the message by the text that follows it.
            return texts[1] if len(texts) > 1 else ""
        return strip_date_change_notice(first)
    return strip_date_change_notice(message_text(message))


def is_real_user_message(message: Mapping[str, Any]) -> bool:
    """True for a user message written by the user.

    User-role messages that start with ``<system-notice>`` (harness-injected notes) or with the
    hand-off heading (compaction summaries) are not real. A leading ``<date-change>`` notice is
    ignored for this judgement, so tagging a genuine message never changes the verdict.
    """
    if message.get("role") != "user":
        return False
    text = _leading_text_after_notice(message)
    if text.startswith(SYSTEM_NOTICE_OPEN):
        return False
    return not text.startswith(HANDOFF_HEADINGS)
