"""A transcript line as a person reads it: who spoke and what they said, which tool was called with
what, and what it returned, instead of the raw JSON.

The same reading as the analyst views (`views.py`: messages, tool_calls, tool_results), done in
Python on one line at a time, for pages that show a passage of a transcript (the night report shows
each evidence quote in its context). Lines that say nothing a reader needs (token counts, turn
context, file snapshots) give no entry.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from pipeline.warehouse.formats import CLAUDE, CODEX

__all__ = ["Entry", "line_time", "readable", "readable_record", "tool_input"]


@dataclass(frozen=True)
class Entry:
    """One readable piece of a line: `label` says who or what ("user", "tool call shell"), `text` what."""

    label: str
    text: str
    kind: str = "message"  # message | thinking | tool call | tool result | other
    echo: bool = False  # Codex repeats each message as an event; shown only when it is the quoted line


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _compact(value: Any) -> str:
    """A tool's input as a reader wants it: the command when there is one, else compact JSON."""
    if isinstance(value, str):
        parsed = _parse(value) if value.lstrip().startswith(("{", "[")) else None
        return _compact(parsed) if parsed is not None else value
    if isinstance(value, dict):
        for key in ("command", "cmd", "query", "pattern", "file_path", "path", "url", "prompt"):
            if key in value and isinstance(value[key], str | list):
                main = value[key]
                main_text = " ".join(map(str, main)) if isinstance(main, list) else main
                # `bash -lc "…"`: the script is what was run
                if isinstance(main, list) and len(main) == 3 and main[:2] in (["bash", "-lc"], ["bash", "-c"], ["sh", "-c"]):
                    main_text = str(main[2])
                rest = {k: v for k, v in value.items() if k != key and k not in ("workdir", "description", "timeout")}
                return main_text + (f"  {json.dumps(rest, ensure_ascii=False)}" if rest else "")
    return json.dumps(value, ensure_ascii=False)


# A Write shows the file's first lines (the rest is in the transcript: `pipeline read`).
WRITE_LINES = 20


def _diff(path: str, old: Any, new: Any) -> str:
    """An edit as a unified diff of its old and new strings (3 lines of context)."""
    before = old.splitlines() if isinstance(old, str) else []
    after = new.splitlines() if isinstance(new, str) else []
    lines = list(difflib.unified_diff(before, after, fromfile=path, tofile=path, lineterm=""))
    return "\n".join(lines) if lines else f"{path}: old and new strings are the same"


def tool_input(name: str, value: Any) -> str:
    """A tool's input as a reader wants it: an Edit as a diff, a patch as its text, a Write as the file's
    first lines, a shell call as its command, anything else as compact JSON."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        parsed = _parse(value)
        value = parsed if isinstance(parsed, dict) else value
    if isinstance(value, dict):
        path = str(value.get("file_path") or value.get("path") or "")
        if name == "Edit" and ("old_string" in value or "new_string" in value):
            flag = "  (every occurrence)" if value.get("replace_all") else ""
            return _diff(path, value.get("old_string"), value.get("new_string")) + flag
        if name == "MultiEdit" and isinstance(value.get("edits"), list):
            return "\n".join(_diff(path, e.get("old_string"), e.get("new_string"))
                             for e in value["edits"] if isinstance(e, dict))
        if name == "Write" and isinstance(value.get("content"), str):
            lines = value["content"].splitlines()
            more = len(lines) - WRITE_LINES
            return "\n".join([f"{path} ({len(lines)} line(s))", *lines[:WRITE_LINES],
                              *([f"… {more} more line(s)"] if more > 0 else [])])
        if name == "apply_patch":
            patch = value.get("input", value.get("patch"))
            if isinstance(patch, str):
                return patch
    return _compact(value)


def _blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text")) for b in content if isinstance(b, dict) and b.get("text") is not None)
    return ""


def _claude(rec: dict[str, Any]) -> list[Entry]:
    kind = rec.get("type")
    if kind == "summary":
        return [Entry("summary", str(rec.get("summary") or ""), "other")]
    if kind == "system":
        text = rec.get("content")
        return [Entry("system", str(text), "other")] if text else []
    if kind not in ("user", "assistant"):
        return []
    message = rec.get("message") or {}
    role = str(message.get("role") or kind)
    content = message.get("content")
    if isinstance(content, str):
        return [Entry(role, content)] if content else []
    out: list[Entry] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "text" and block.get("text"):
            out.append(Entry(role, str(block["text"])))
        elif btype == "thinking" and block.get("thinking"):
            out.append(Entry(f"{role} (thinking)", str(block["thinking"]), "thinking"))
        elif btype == "tool_use":
            name = str(block.get("name") or "?")
            out.append(Entry(f"tool call {name}", tool_input(name, block.get("input")), "tool call"))
        elif btype == "tool_result":
            error = " (error)" if block.get("is_error") else ""
            out.append(Entry(f"tool result{error}", _blocks_text(block.get("content")), "tool result"))
    return out


def _codex_output(payload: dict[str, Any]) -> Entry:
    raw = payload.get("output")
    text, error = (raw if isinstance(raw, str) else _compact(raw)), ""
    inner = _parse(text) if isinstance(raw, str) and raw.lstrip().startswith("{") else None
    if isinstance(inner, dict) and "output" in inner:
        text = str(inner.get("output") or "")
        code = (inner.get("metadata") or {}).get("exit_code") if isinstance(inner.get("metadata"), dict) else None
        if isinstance(code, int) and code != 0:
            error = f" (exit {code})"
    return Entry(f"tool result{error}", text, "tool result")


def _codex(rec: dict[str, Any]) -> list[Entry]:
    payload = rec.get("payload") if isinstance(rec.get("payload"), dict) else {}
    assert isinstance(payload, dict)
    ptype = payload.get("type")
    if rec.get("type") == "event_msg":
        if ptype in ("user_message", "agent_message") and payload.get("message"):
            role = "user" if ptype == "user_message" else "assistant"
            return [Entry(role, str(payload["message"]), echo=True)]
        if ptype == "agent_reasoning" and payload.get("text"):
            return [Entry("assistant (thinking)", str(payload["text"]), "thinking", echo=True)]
        return []
    if rec.get("type") != "response_item":
        return []
    if ptype == "message":
        text = _blocks_text(payload.get("content"))
        return [Entry(str(payload.get("role") or "?"), text)] if text else []
    if ptype == "reasoning":
        text = _blocks_text(payload.get("summary"))
        return [Entry("assistant (thinking)", text, "thinking")] if text else []
    if ptype in ("function_call", "custom_tool_call", "local_shell_call"):
        value = payload.get("arguments", payload.get("input", payload.get("action")))
        name = str(payload.get("name") or "shell")
        return [Entry(f"tool call {name}", tool_input(name, value), "tool call")]
    if ptype in ("function_call_output", "custom_tool_call_output"):
        return [_codex_output(payload)]
    return []


def _plain(rec: dict[str, Any]) -> list[Entry]:
    text = rec.get("content", rec.get("text"))
    if text is None:
        return []
    return [Entry(str(rec.get("role") or "line"), text if isinstance(text, str) else _compact(text))]


def readable(text: str, fmt: str | None) -> list[Entry]:
    """The readable entries of one line of a transcript in format `fmt` (claude-code, codex, jsonl).
    A line that is not JSON is its own text."""
    return readable_record(_parse(text), text, fmt)


def readable_record(rec: Any, text: str, fmt: str | None) -> list[Entry]:
    """`readable(text, fmt)` for a caller that has parsed the line already: `rec` is
    `json.loads(text)`, or None when the line is not JSON (parsing is most of the cost)."""
    if not isinstance(rec, dict):
        return [Entry("line", text, "other")] if rec is None and text.strip() else []
    if fmt == CLAUDE:
        return _claude(rec)
    if fmt == CODEX:
        return _codex(rec)
    return _plain(rec)


def line_time(text: str) -> str | None:
    """When the line was written, as the transcript states it (ISO 8601), if it does."""
    rec = _parse(text)
    if not isinstance(rec, dict):
        return None
    value = rec.get("timestamp") or rec.get("created_at")
    return str(value) if value else None
