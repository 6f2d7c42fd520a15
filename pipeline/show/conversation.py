"""A session's lines as a conversation: who said what, which tool was called with what and how it ended.

Each line is read as the night report reads its evidence (`pipeline.warehouse.readable`: user, assistant,
thinking, tool call, tool result), and the analyst views add what a reader needs to judge a tool's result
(`tool_results`: exit status, error flag, a user's refusal). Markers are added where something changes
the conversation: a compaction, a new day (UTC), a subagent starting (an Agent/Task call, and each
subagent or spawned session whose first line falls there, named so it can be shown in turn).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipeline.errors import UsageError
from pipeline.warehouse import db, prompt_rules
from pipeline.warehouse.formats import CLAUDE, CODEX, JSONL
from pipeline.warehouse.readable import readable_record

__all__ = ["Conversation", "Item", "conversation"]

SUBAGENT_TOOLS = ("Task", "Agent")


@dataclass
class Item:
    """One thing shown: `kind` ∈ user, assistant, thinking, tool call, tool result, marker, other."""

    line_no: int
    at: str | None
    kind: str
    label: str
    text: str
    status: str = ""  # tool results: "exit N", "error", "rejected", "ok" (exit 0), "" (no status recorded)
    session_link: str | None = None  # a marker naming another session (a subagent)


@dataclass
class Conversation:
    session_id: str
    slug: str | None
    format: str
    cwd: str | None
    first_at: str | None
    last_at: str | None
    line_count: int
    start: int
    end: int
    parent_session_id: str | None = None
    items: list[Item] = field(default_factory=list)

    def empty_note(self) -> str | None:
        """What to say when the lines hold nothing a reader needs (metadata, file snapshots, token counts)."""
        if self.items:
            return None
        if not self.line_count:
            return "this session has no complete line yet"
        return f"lines {self.start}–{self.end} hold no message, tool call or result (metadata only: pipeline read shows them)"

    def to_json(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id, "slug": self.slug, "format": self.format, "cwd": self.cwd,
            "firstAt": self.first_at, "lastAt": self.last_at, "lineCount": self.line_count, "start": self.start,
            "end": self.end, "parentSessionId": self.parent_session_id,
            "items": [{"line": i.line_no, "at": i.at, "kind": i.kind, "label": i.label, "text": i.text,
                       "status": i.status or None, "sessionLink": i.session_link} for i in self.items],
        }


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(value)


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _day(at: str | None) -> str | None:
    if not at:
        return None
    try:
        return dt.datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(dt.UTC).date().isoformat()
    except ValueError:
        return None


def _compaction(rec: Any, fmt: str) -> str | None:
    """The words of a compaction marker when this line records one."""
    if not isinstance(rec, dict):
        return None
    if fmt == CLAUDE and rec.get("type") == "system" and rec.get("subtype") == "compact_boundary":
        meta = rec.get("compactMetadata") or {}
        how = f" ({meta.get('trigger')}, {meta.get('preTokens'):,} tokens before)" if isinstance(meta.get("preTokens"), int) else ""
        return f"conversation compacted{how}"
    if fmt == CODEX:
        payload: dict[str, Any] = rec["payload"] if isinstance(rec.get("payload"), dict) else {}
        if rec.get("type") == "compacted":
            return "conversation compacted (the history was replaced by a summary)"
        if rec.get("type") == "event_msg" and payload.get("type") == "context_compacted":
            return "context compacted"
    return None


def _subagent(rec: Any) -> dict[str, str]:
    """For an Agent/Task tool call, {call id: "type: description"}."""
    out: dict[str, str] = {}
    message = rec.get("message") if isinstance(rec, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    # A string content (a typed prompt) holds no call: iterating it would visit every character.
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") in SUBAGENT_TOOLS:
            inp: dict[str, Any] = block["input"] if isinstance(block.get("input"), dict) else {}
            kind = inp.get("subagent_type") or "subagent"
            out[str(block.get("id"))] = f"{kind}: {inp.get('description') or ''}".strip(": ")
    return out


def _status(is_error: bool | None, exit_code: int | None, rejected: bool | None) -> str:
    if rejected:
        return "rejected"
    if exit_code is not None:
        return "ok" if exit_code == 0 else f"exit {exit_code}"
    return "error" if is_error else ""


# `messages.is_prompt` of a session's user messages, evaluated on the lines the caller passes (their
# text as a parameter) instead of read through the view: the view's copy relation reads every parent
# session's lines whatever session is asked for (seconds on a large warehouse), and each branch runs
# its JSON functions on every line of the range. Each query is the view's branch for one format, with
# the same rules (`prompt_rules`); tests/show/test_prompts.py checks that both agree on every sample
# session. A Claude Code subagent's copy of its parent's user line (same uuid) is not its prompt.
_GIVEN = "(SELECT unnest($n) AS line_no, unnest($t) AS text)"
_CLAUDE_USER = f"""
    FROM {_GIVEN}
    WHERE json_valid(text) AND json_extract_string(text, '$.type') IN ('user', 'assistant')
      AND json_extract_string(text, '$.message.content[0].type') IS DISTINCT FROM 'tool_result'
      AND json_extract_string(text, '$.message.role') = 'user'
"""
_CLAUDE_PROMPTS = f"""
    SELECT line_no, {prompt_rules.claude_prompt("text")} AND NOT coalesce(json_extract_string(text, '$.uuid') IN (
        SELECT json_extract_string(p.text, '$.uuid') FROM lines p
        WHERE p.session_id = $parent AND json_valid(p.text) AND json_extract_string(p.text, '$.type') = 'user'), false)
    {_CLAUDE_USER}"""
# A session with no parent copies no line: the same query without the copy test (which costs a
# scan of `lines` even when it finds nothing), whose result is then the same.
_CLAUDE_PROMPTS_NO_PARENT = f"""
    SELECT line_no, {prompt_rules.claude_prompt("text")}
    {_CLAUDE_USER}"""
_CODEX_PROMPTS = f"""
    SELECT line_no, line_no > (
        SELECT coalesce(TRY_CAST(json_extract_string(state, '$.inherited_lines') AS BIGINT), 0) FROM sessions
        WHERE session_id = $id) AND {prompt_rules.codex_item_prompt("item")}
    FROM (SELECT line_no, {prompt_rules.codex_item("text")} AS item FROM {_GIVEN} WHERE json_valid(text))
    WHERE json_extract_string(item, '$.type') = 'message' AND json_extract_string(item, '$.role') = 'user'
"""
_JSONL_PROMPTS = f"""
    SELECT line_no, {prompt_rules.jsonl_prompt("text")} FROM {_GIVEN}
    WHERE json_valid(text) AND json_extract_string(text, '$.role') = 'user'
"""


def _prompts(con: duckdb.DuckDBPyConnection, session_id: str, fmt: str, parent: str | None,
             lines: list[tuple[int, str]]) -> dict[int, bool]:
    """{line: is a prompt} for those of `lines` (number, stored text) that hold a user message,
    as `messages` has them."""
    if not lines:
        return {}
    params: dict[str, Any] = {"n": [n for n, _ in lines], "t": [t for _, t in lines]}
    if fmt == CLAUDE and parent is None:
        sql = _CLAUDE_PROMPTS_NO_PARENT
    elif fmt == CLAUDE:
        sql, params["parent"] = _CLAUDE_PROMPTS, parent
    elif fmt == CODEX:
        sql, params["id"] = _CODEX_PROMPTS, session_id
    elif fmt == JSONL:
        sql = _JSONL_PROMPTS
    else:
        return {}
    return dict(db.execute_parsed(con, sql, params).fetchall())


_MESSAGE_ITEM = (f"SELECT 1 FROM lines WHERE session_id = ? AND json_valid(text) "
                 f"AND json_extract_string({prompt_rules.codex_item('text')}, '$.type') = 'message' LIMIT 1")


def _has_message_items(con: duckdb.DuckDBPyConnection, session_id: str) -> bool:
    """Whether a Codex rollout has a row in `messages` (a `message` item), read from its own lines."""
    return db.execute_parsed(con, _MESSAGE_ITEM, [session_id]).fetchone() is not None


# The session, and whether any session was started from it: most were not, and `_CHILDREN` costs
# more than a millisecond even when it finds nothing.
_META = ("SELECT format, slug, cwd, first_at, last_at, line_count, parent_session_id, "
         "EXISTS (SELECT 1 FROM sessions c WHERE c.parent_session_id = $id) FROM sessions WHERE session_id = $id")
# The sessions started from session $id (Claude Code subagents, Codex spawned rollouts), placed at their first line's time.
# A Claude Code subagent file may open with a copy of the parent's lines (same uuids, the parent's
# times): it starts at its first line of its own.
_CHILDREN = """
        WITH own AS (
            SELECT c.session_id, c.line_count, CASE WHEN json_valid(k.text) THEN k.text END AS rec
            FROM sessions c JOIN lines k ON k.session_id = c.session_id WHERE c.parent_session_id = $id
        ), parent AS (
            SELECT json_extract_string(text, '$.uuid') AS uuid FROM lines
            WHERE session_id = $id AND json_valid(text) AND json_extract_string(text, '$.uuid') IS NOT NULL
        ), kids AS (
            SELECT session_id, line_count, min(TRY_CAST(json_extract_string(rec, '$.timestamp') AS TIMESTAMPTZ)) AS started
            FROM own WHERE rec IS NOT NULL
              AND (json_extract_string(rec, '$.uuid') IS NULL OR json_extract_string(rec, '$.uuid') NOT IN (SELECT uuid FROM parent))
            GROUP BY ALL
        ), times AS (
            SELECT line_no, TRY_CAST(json_extract_string(text, '$.timestamp') AS TIMESTAMPTZ) AS at
            FROM lines WHERE session_id = $id AND json_valid(text)
        )
        -- the line a subagent stands on: the parent's last line written before its own first one
        SELECT k.session_id, k.line_count, k.started, (SELECT max(t.line_no) FROM times t WHERE t.at <= k.started) AS anchor
        FROM kids k ORDER BY anchor NULLS LAST, started NULLS LAST, session_id
        """
_LINES = "SELECT line_no, text FROM lines WHERE session_id = ? AND line_no BETWEEN ? AND ? ORDER BY line_no"
_STATUSES = ("SELECT line_no, is_error, exit_code, rejected FROM tool_results WHERE session_id = $id "
             "AND line_no BETWEEN $lo AND $hi AND list_contains($at, line_no) ORDER BY line_no")


def conversation(con: duckdb.DuckDBPyConnection, session_id: str, start: int | None = None,
                 end: int | None = None) -> Conversation:
    """Lines `start`..`end` (1-based, both included; the whole session by default) as a conversation."""
    meta = db.execute_parsed(con, _META, {"id": session_id}).fetchone()
    if meta is None:
        raise UsageError(f"unknown session {session_id!r}; `pipeline sessions` lists the ids in this warehouse")
    fmt, slug, cwd, first_at, last_at, line_count, parent, has_children = meta
    lo = 1 if start is None else start
    hi = int(line_count) if end is None else end
    if end is None and start is None and not line_count:  # a file with no complete line yet
        return Conversation(session_id, slug, fmt, cwd, _iso(first_at), _iso(last_at), 0, 1, 0, parent)
    if lo < 1 or hi < lo:
        raise UsageError(f"bad range {lo}..{hi}: lines are numbered from 1 and TO must be ≥ FROM")
    if line_count and lo > line_count:
        raise UsageError(f"session {session_id} has {line_count} lines; FROM {lo} is past its end")
    conv = Conversation(session_id, slug, fmt, cwd, _iso(first_at), _iso(last_at), int(line_count), lo,
                        min(hi, int(line_count)), parent)
    # Sessions started from this one (`_CHILDREN`), asked for only when there are some.
    # Each stands on the line that started it; one with no time of its own is listed after the last line.
    children: dict[int, list[tuple[str | None, str, int]]] = {}
    for sid, n, a, anchor in db.execute_parsed(con, _CHILDREN, {"id": session_id}).fetchall() if has_children else []:
        children.setdefault(int(anchor) if anchor is not None else (1 if a is not None else int(line_count)), []
                            ).append((_iso(a), sid, n))
    # Codex writes each message twice, as an item and as an event: the events are shown only in a
    # rollout that has no message items.
    has_items = fmt != CODEX or _has_message_items(con, session_id)
    # The lines are read first, so that the analyst views are asked only about the lines that need
    # them: the statuses of the lines holding a tool result, and (what the harness wrote in the
    # user's name is no prompt: shown folded) the prompts of the lines holding a user message.
    rows: list[tuple[int, Any, str | None, list[Any]]] = []
    results_at: list[int] = []
    users_at: list[tuple[int, str]] = []
    cur = db.execute_parsed(con, _LINES, [session_id, lo, hi])
    while batch := cur.fetchmany(1024):
        for line_no, text in batch:
            rec = _parse(text)  # once: the readable entries, the markers and the timestamp all use it
            marker = _compaction(rec, fmt)
            entries = [] if marker else readable_record(rec, text, fmt)
            rows.append((line_no, rec, marker, entries))
            if any(e.kind == "tool result" for e in entries):
                results_at.append(line_no)
            if any(e.kind == "message" and e.label == "user" for e in entries):
                users_at.append((line_no, text))
    statuses: dict[int, list[str]] = {}
    if results_at:
        for line_no, is_error, exit_code, rejected in db.execute_parsed(
                con, _STATUSES, {"id": session_id, "lo": lo, "hi": hi, "at": results_at}).fetchall():
            statuses.setdefault(line_no, []).append(_status(is_error, exit_code, rejected))
    prompts = _prompts(con, session_id, fmt, parent, users_at)
    day: str | None = None
    subagents: dict[str, str] = {}
    for line_no, rec, marker, entries in rows:
        at = rec.get("timestamp") if isinstance(rec, dict) and isinstance(rec.get("timestamp"), str) else None
        today = _day(at)
        if today and today != day:
            conv.items.append(Item(line_no, at, "marker", "new day" if day else "day", f"{today} (UTC)"))
        day = today or day
        if marker:
            conv.items.append(Item(line_no, at, "marker", "compaction", marker))
            _started_here(conv, children.get(line_no, ()), line_no)
            continue
        if fmt == CLAUDE:
            subagents.update(_subagent(rec))
        results = iter(statuses.get(line_no, []))
        shown = [e for e in entries if not e.echo] if has_items else entries
        for e in shown:
            if not e.text.strip() and e.kind != "tool result":
                continue
            label, kind = e.label, e.kind
            if e.kind == "message":
                kind = label if label in ("user", "assistant") else "other"
                if isinstance(rec, dict) and rec.get("isCompactSummary"):
                    kind, label = "other", "compaction summary"
                elif kind == "user" and prompts.get(line_no) is False:
                    kind, label = "other", "user (harness)"
            if e.kind == "tool call" and label.removeprefix("tool call ") in SUBAGENT_TOOLS:
                desc = next(iter(subagents.values()), "") if subagents else ""
                label = f"subagent {desc}".strip() if desc else label
                subagents.clear()
            status = next(results, "") if e.kind == "tool result" else ""
            if e.kind == "tool result":
                label = "tool result"
            conv.items.append(Item(line_no, at, kind, label, e.text, status))
        _started_here(conv, children.get(line_no, ()), line_no)
    return conv


def _started_here(conv: Conversation, children: Any, line_no: int) -> None:
    """The subagents (and spawned sessions) that line `line_no` started, after what the line shows."""
    for c_at, c_id, c_lines in children:
        conv.items.append(Item(line_no, c_at, "marker", "subagent starts",
                               f"{c_id} ({c_lines} lines): pipeline show {c_id}", session_link=c_id))
