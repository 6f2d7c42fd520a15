"""Recognising a transcript's format and identity from its first records (never from its path)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.warehouse import prompt_rules

CLAUDE = "claude-code"
CODEX = "codex"
JSONL = "jsonl"

CODEX_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
CLAUDE_TYPES = {"user", "assistant", "summary", "system", "file-history-snapshot", "queue-operation"}

# How much of a file's head we parse to decide; a huge first line is skipped, not parsed.
SNIFF_LINES = 64
SNIFF_MAX_LINE = 256 * 1024


@dataclass(frozen=True)
class Identity:
    format: str
    claimed_id: str | None        # the id the records carry (None when they carry none)
    parent_session_id: str | None  # Claude Code subagent files: the spawning session
    cwd: str | None


def slug_for(cwd: str | None) -> str | None:
    """Claude Code's project folder name: every non-alphanumeric character of cwd becomes '-'.

    A Windows drive letter is written in capitals: harnesses record `c:\\Users\\…` and `C:\\Users\\…`
    for the same folder, and one project must not become two."""
    if not cwd:
        return None
    if re.match(r"^[a-z]:[\\/]", cwd):
        cwd = cwd[0].upper() + cwd[1:]
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def _parse(raw: bytes) -> dict | None:
    if len(raw) > SNIFF_MAX_LINE:
        return None
    try:
        rec = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


# Once a Claude Code record, a record with a session id and one with a cwd have been read, a later
# line can change what `identify` decides only by being a Codex record (it has a `payload`); a line
# with a \u escape is parsed too, since a key may be written that way.
def _may_decide(raw: bytes) -> bool:
    # The backslash is looked for first: one byte is found far faster than two.
    return b'"payload"' in raw or (b"\\" in raw and b"\\u" in raw)


def _records(head_lines: list[bytes]) -> list[dict]:
    """The records `identify` needs from a file's first lines, in order.

    Every line is parsed unless the file has shown itself a Claude Code transcript: then the lines
    that cannot change the decision are skipped (most of a sniff's time went into parsing 64 long
    Claude Code lines to read three fields of the first). A head that might be a 2025 Codex rollout
    (a first record without `type`, or a `record_type` line) is always parsed whole.
    """
    lines = head_lines[:SNIFF_LINES]
    may_skip = not any(b'"record_type"' in raw for raw in lines)
    out: list[dict] = []
    claude = with_id = cwd = False
    for raw in lines:
        if may_skip and claude and with_id and cwd and not _may_decide(raw):
            continue
        rec = _parse(raw)
        if rec is None:
            continue
        out.append(rec)
        if len(out) == 1 and "type" not in rec:
            may_skip = False
        claude = claude or (rec.get("type") in CLAUDE_TYPES and ("sessionId" in rec or "leafUuid" in rec or "messageId" in rec))
        with_id = with_id or bool(rec.get("sessionId"))
        cwd = cwd or bool(rec.get("cwd"))
    return out


_ENV_CWD = re.compile(r"<cwd>([^<]+)</cwd>")


def _codex_parent(meta: dict[str, Any]) -> str | None:
    """The rollout a Codex session was forked or spawned from, when its session_meta says."""
    if isinstance(meta.get("forked_from_id"), str):
        return str(meta["forked_from_id"])
    source = meta.get("source")
    spawn = source.get("subagent") if isinstance(source, dict) else None
    spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    return str(parent) if isinstance(parent, str) else None


def _is_legacy_codex(records: list[dict]) -> bool:
    """Codex CLI's 2025 rollout: a `{id, timestamp, instructions}` header, then bare items
    (`message`, `function_call`, …) and `{"record_type": "state"}` lines, with no `payload` wrapper."""
    if not records:
        return False
    head = records[0]
    header = "type" not in head and "id" in head and "timestamp" in head and "instructions" in head
    bare = any(r.get("type") in prompt_rules.CODEX_BARE_ITEMS and "payload" not in r for r in records)
    state = any(r.get("record_type") == "state" for r in records)
    return (header and (bare or state)) or (state and bare)


def _legacy_cwd(records: list[dict]) -> str | None:
    """The working directory of a 2025 rollout, from its injected `<environment_context>`."""
    for rec in records:
        if rec.get("type") != "message" or not isinstance(rec.get("content"), list):
            continue
        for block in rec["content"]:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str) and "<environment_context>" in text and (m := _ENV_CWD.search(text)):
                return m.group(1).strip()
    return None


def sniff(head_lines: list[bytes]) -> Identity:
    """Decide the format and identity from the first complete lines of a file."""
    return identify(_records(head_lines))


def identify(records: list[dict]) -> Identity:
    """The format and identity that the first records of a file show."""
    for rec in records:
        payload = rec.get("payload")
        if rec.get("type") in CODEX_TYPES and isinstance(payload, dict):
            meta: dict[str, Any] = next(
                (r["payload"] for r in records if r.get("type") == "session_meta" and isinstance(r.get("payload"), dict)),
                {},
            )
            cwd = meta.get("cwd") or next(
                (r["payload"].get("cwd") for r in records if r.get("type") == "turn_context" and isinstance(r.get("payload"), dict)),
                None,
            )
            sid = meta.get("id")
            return Identity(CODEX, str(sid) if sid else None, _codex_parent(meta), cwd)
    if _is_legacy_codex(records):
        head = records[0]
        sid = head.get("id") if "type" not in head else None
        return Identity(CODEX, str(sid) if isinstance(sid, str) and sid else None, None, _legacy_cwd(records))
    for rec in records:
        kind = rec.get("type")
        if kind in CLAUDE_TYPES and ("sessionId" in rec or "leafUuid" in rec or "messageId" in rec):
            with_id = next((r for r in records if r.get("sessionId")), None)
            cwd = next((r.get("cwd") for r in records if r.get("cwd")), None)
            if with_id is None:
                return Identity(CLAUDE, None, None, cwd)
            if with_id.get("isSidechain") and with_id.get("agentId"):
                return Identity(CLAUDE, f"agent-{with_id['agentId']}", str(with_id["sessionId"]), cwd)
            return Identity(CLAUDE, str(with_id["sessionId"]), None, cwd)
    cwd = next((r.get("cwd") for r in records if isinstance(r.get("cwd"), str)), None)
    sid = next((r.get(k) for r in records for k in ("session_id", "sessionId") if isinstance(r.get(k), str)), None)
    return Identity(JSONL, sid, None, cwd)


def fallback_id(path: Path) -> str:
    """A file whose records carry no id is named after the file."""
    name = path.name
    return name[: -len(".jsonl")] if name.endswith(".jsonl") else name
