"""Recognising a transcript's format and identity from its first records (never from its path)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    """Claude Code's project folder name: every non-alphanumeric character of cwd becomes '-'."""
    if not cwd:
        return None
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def _records(head_lines: list[bytes]) -> list[dict]:
    out: list[dict] = []
    for raw in head_lines[:SNIFF_LINES]:
        if len(raw) > SNIFF_MAX_LINE:
            continue
        try:
            rec = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def sniff(head_lines: list[bytes]) -> Identity:
    """Decide the format and identity from the first complete lines of a file."""
    records = _records(head_lines)
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
            return Identity(CODEX, str(sid) if sid else None, None, cwd)
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
