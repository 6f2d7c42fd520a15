"""Recognising a transcript's format and identity from its first records (never from its path)."""

from __future__ import annotations

import bisect
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


def _parse(raw: bytes | bytearray) -> dict | None:
    if len(raw) > SNIFF_MAX_LINE:
        return None
    try:
        rec = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


@dataclass(frozen=True)
class Head:
    """A file's first complete lines: one buffer, and each line's (start, end) in it (the newline
    excluded). Lines stay in the buffer so that a sniff copies only the lines it parses."""

    data: bytes | bytearray
    bounds: list[tuple[int, int]]

    @classmethod
    def of(cls, lines: list[bytes]) -> Head:
        bounds: list[tuple[int, int]] = []
        start = 0
        for raw in lines:
            bounds.append((start, start + len(raw)))
            start += len(raw) + 1
        return cls(b"\n".join(lines), bounds)

    def lines(self) -> list[bytes]:
        return [bytes(self.data[s:e]) for s, e in self.bounds]


# Once a Claude Code record, a record with a session id and one with a cwd have been read, a later
# line can change what `identify` decides only by being a Codex record (it has a `payload`); a line
# with a \u escape is parsed too, since a key may be written that way. Neither pattern holds a
# newline, so a search over the rest of the head finds the next such line without cutting the others.
def _find_escape(data: bytes | bytearray, start: int, end: int) -> int:
    """The first `\\u` in data[start:end], or -1. A single byte is looked for first: CPython finds
    one byte with memchr but walks two (59 ms against 3 ms over the bench corpus's heads)."""
    at = data.find(b"\\", start, end)
    return at if at < 0 else data.find(b"\\u", at, end)


class _Deciding:
    """Finds, from a given line on, the first line of a head that may change the decision.

    Each pattern's next position is kept until a later line is asked about: searching the rest of
    the head again for every escaped line scanned it to its end once per such line."""

    _UNSEARCHED = -2

    def __init__(self, head: Head, starts: list[int], end: int):
        self._data, self._starts, self._end = head.data, starts, end
        self._payload = self._escape = self._UNSEARCHED

    def next_line(self, i: int) -> int:
        """The index of the first line from line i on that may change the decision (len(starts) if none)."""
        start = self._starts[i]
        if self._payload == self._UNSEARCHED or 0 <= self._payload < start:
            self._payload = self._data.find(b'"payload"', start, self._end)
        if self._escape == self._UNSEARCHED or 0 <= self._escape < start:
            self._escape = _find_escape(self._data, start, self._end)
        hits = [at for at in (self._payload, self._escape) if at >= 0]
        return bisect.bisect_right(self._starts, min(hits)) - 1 if hits else len(self._starts)


def _records(head: Head) -> list[dict]:
    """The records `identify` needs from a file's first lines, in order.

    Every line is parsed unless the file has shown itself a Claude Code transcript: then the lines
    that cannot change the decision are skipped (most of a sniff's time went into parsing 64 long
    Claude Code lines to read three fields of the first). A head that might be a 2025 Codex rollout
    (a first record without `type`, or a `record_type` line) is always parsed whole.
    """
    bounds = head.bounds[:SNIFF_LINES]
    if not bounds:
        return []
    end = bounds[-1][1]
    starts = [s for s, _ in bounds]
    may_skip = head.data.find(b'"record_type"', 0, end) < 0
    deciding = _Deciding(head, starts, end)
    out: list[dict] = []
    claude = with_id = cwd = False
    i = 0
    while i < len(bounds):
        if may_skip and claude and with_id and cwd:
            i = deciding.next_line(i)
            if i == len(bounds):
                break
        start, stop = bounds[i]
        i += 1
        rec = _parse(head.data[start:stop])
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
    return sniff_head(Head.of(head_lines))


def sniff_head(head: Head) -> Identity:
    """`sniff` over a head read into one buffer (see `ingest._head`)."""
    return identify(_records(head))


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
