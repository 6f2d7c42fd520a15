"""Search every session at once: each occurrence of a phrase (or a regular expression) in the stored
lines, shown in the decoded text a person reads rather than the JSON wrapper around it.

Occurrences are counted on the stored line text, exactly as `grep -F` sees the file and as the
per-session tool (`search_transcript`) counts them: non-overlapping, left to right, columns 1-based in
code points. What is shown around a hit is the decoded JSON string the hit falls in (a message, a
command, a tool's output), so `\\n` reads as a new line and `\\"` as a quote; a hit that spans JSON
syntax (keys, several values) is shown in the raw line instead.
"""

from __future__ import annotations

import bisect
import datetime as dt
import heapq
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from pipeline.errors import UsageError
from pipeline.warehouse.formats import CLAUDE, CODEX

DEFAULT_LIMIT = 50
CONTEXT_CHARS = 80
ROLES = ("user", "assistant", "tool")
_CODEX_ASSISTANT_ITEMS = {"function_call", "custom_tool_call", "local_shell_call", "reasoning", "web_search_call"}
_CODEX_TOOL_ITEMS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


@dataclass(frozen=True)
class SearchFilter:
    """Which lines a search looks at. Days are UTC days, both ends included."""

    sessions: tuple[str, ...] = ()
    project: str | None = None
    since: dt.date | None = None
    until: dt.date | None = None
    format: str | None = None
    role: str | None = None


def line_role(rec: Any, fmt: str | None) -> str | None:
    """Who wrote a parsed line: user, assistant, tool (a tool's result), another role the transcript
    names (developer, system), or None for a line that is no message (metadata, token counts)."""
    if not isinstance(rec, dict):
        return None
    if fmt == CLAUDE:
        kind = rec.get("type")
        if kind == "assistant":
            return "assistant"
        if kind == "user":
            content = (rec.get("message") or {}).get("content") if isinstance(rec.get("message"), dict) else None
            if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
                return "tool"
            return "user"
        return "system" if kind == "system" else None
    if fmt == CODEX:
        item = rec.get("payload") if rec.get("type") in ("response_item", "event_msg") else rec
        if not isinstance(item, dict):
            return None
        kind = item.get("type")
        if rec.get("type") == "event_msg":
            return {"user_message": "user", "agent_message": "assistant", "agent_reasoning": "assistant"}.get(str(kind))
        if kind == "message":
            return str(item.get("role") or "") or None
        if kind in _CODEX_ASSISTANT_ITEMS:
            return "assistant"
        if kind in _CODEX_TOOL_ITEMS:
            return "tool"
        return None
    role = rec.get("role")
    return str(role) if isinstance(role, str) else None


def line_time(rec: Any) -> str | None:
    if not isinstance(rec, dict):
        return None
    value = rec.get("timestamp") or rec.get("created_at")
    return str(value) if isinstance(value, str) else None


_STRING = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)  # the unrolled loop: fast on long values


def _string_spans(text: str) -> list[tuple[int, int]]:
    """The JSON string literals of a line, as (start, end) of their content (quotes excluded)."""
    return [m.span(1) for m in _STRING.finditer(text)]


def _decode_from(text: str, s: int, lo: int, start: int) -> str | None:
    """The decoded text[lo:start], where lo may fall inside an escape: retried from the literal's start."""
    got = _decode(text[lo:start])
    return got if got is not None or lo == s else _decode(text[s:start])


def _decode_to(text: str, end: int, hi: int) -> str | None:
    """The decoded text[end:hi]; a cut escape at hi is dropped."""
    for cut in range(hi, max(end, hi - 12) - 1, -1):
        got = _decode(text[end:cut])
        if got is not None:
            return got
    return None


# Text with no quote, backslash or control character: as the content of a JSON string it decodes to itself.
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')


def _decode(raw: str) -> str | None:
    if _PLAIN.fullmatch(raw):
        return raw  # what json.loads would return, without its cost (three calls per hit shown)
    try:
        value = json.loads(f'"{raw}"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def snippet(text: str, spans: list[tuple[int, int]] | None, start: int, end: int, context: int) -> tuple[str, str, str, bool]:
    """(before, match, after, decoded) for the occurrence text[start:end]: taken from the decoded JSON
    string it lies in when it lies in one, else from the raw line."""
    if spans:
        # the last literal that opens at or before the hit (spans are sorted and do not overlap)
        k = bisect.bisect_right(spans, (start, len(text) + 1)) - 1
        if k >= 0 and spans[k][0] <= start and end <= spans[k][1]:
            s, e = spans[k]
            # decode only the reach shown: a decoded character comes from at most 6 stored ones
            lo, hi = max(s, start - 6 * context - 6), min(e, end + 6 * context + 6)
            while lo > s and text[lo - 1] == "\\":  # do not start inside an escape
                lo -= 1
            before, match, after = _decode_from(text, s, lo, start), _decode(text[start:end]), _decode_to(text, end, hi)
            if before is not None and match is not None and after is not None:
                return before[-context:] if context else "", match, after[:context], True
    return text[max(0, start - context):start], text[start:end], text[end:end + context], False


def _occurrences(text: str, phrase: str, pattern: re.Pattern[str] | None, folded: str | None = None) -> Iterator[tuple[int, int]]:
    """Non-overlapping occurrences, left to right, as (start, end) in `text`. With `folded` (the phrase
    lower-cased), a literal search compares lower-cased text: offsets are the original text's."""
    if folded is not None:
        low = text.lower()
        if len(low) != len(text):  # a character whose lower case is longer (İ): compare one by one
            yield from _occurrences(text, phrase, re.compile(re.escape(phrase), re.IGNORECASE))
            return
        text, phrase = low, folded
        pattern = None
    if pattern is None:
        at = text.find(phrase)
        while at >= 0:
            yield at, at + len(phrase)
            at = text.find(phrase, at + len(phrase))
        return
    for m in pattern.finditer(text):
        if m.end() > m.start():  # an empty match is no occurrence
            yield m.start(), m.end()


def _in_days(at: str | None, first: dt.datetime | None, flt: SearchFilter) -> bool:
    if flt.since is None and flt.until is None:
        return True
    when: dt.date | None = None
    if at:
        try:
            when = dt.datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(dt.UTC).date()
        except ValueError:
            when = None
    if when is None and first is not None:
        when = first.astimezone(dt.UTC).date()
    if when is None:
        return False
    return not ((flt.since and when < flt.since) or (flt.until and when > flt.until))


def search_all(
    con: duckdb.DuckDBPyConnection,
    phrase: str,
    flt: SearchFilter | None = None,
    *,
    regex: bool = False,
    ignore_case: bool = False,
    limit: int = DEFAULT_LIMIT,
    context: int = CONTEXT_CHARS,
    redact: bool = False,
) -> dict[str, Any]:
    """Every occurrence of `phrase` in the sessions `flt` selects:
    `{phrase, total, truncated, sessions, hits: [{sessionId, project, line, column, at, role, before, match, after}]}`.

    `total` counts every occurrence (of the role asked for, on the days asked for); `hits` lists the
    first `limit`, by session (oldest first) then line; `truncated` says the listing was cut. With
    `redact`, secrets are masked as the consolidator's tools mask them (`pipeline.secrets.redact.LineMasker`): a
    hit with a secret anywhere near it is shown from the stored line, masked, and never decoded.
    With `ignore_case`, a literal phrase matches whatever its case (both sides lower-cased) and a
    regular expression is compiled with re.IGNORECASE; columns and the text shown are the line's own."""
    flt = flt or SearchFilter()
    if not isinstance(phrase, str) or phrase == "":
        raise UsageError("the phrase must be non-empty (it is matched literally unless --regex)")
    if limit < 0 or context < 0:
        raise UsageError("--limit and --context must be 0 or more")
    if flt.role is not None and flt.role not in ROLES:
        raise UsageError(f"--role must be one of {', '.join(ROLES)}")
    pattern = None
    if regex:
        try:
            pattern = re.compile(phrase, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise UsageError(f"--regex: {phrase!r} is not a valid regular expression: {exc}") from None
    sessions = _sessions(con, flt)
    folded = phrase.lower() if ignore_case and pattern is None else None
    # The listing order: sessions oldest first, then line. It is known before the scan, so the scan can
    # stream the matching lines in any order and keep the text of only those that can still be listed.
    order = sorted(sessions, key=lambda s: (sessions[s]["first_at"] is None, sessions[s]["first_at"] or dt.datetime.min, s))
    rank = {s: i for i, s in enumerate(order)}
    every = not (flt.sessions or flt.project or flt.format or flt.since or flt.until)
    match = ("" if pattern is not None else
             "contains(lower(text), $phrase)" if folded is not None else "contains(text, $phrase)")
    # The phrase test runs on the lines alone, before the sessions are narrowed: joining every line to the
    # session list first (and sorting the result) held the whole table in memory, gigabytes on a heavy home.
    scope = "" if every else "session_id IN (SELECT unnest($ids::VARCHAR[]))"
    where = " AND ".join(part for part in (match, scope) if part) or "true"
    params: dict[str, Any] = {} if every else {"ids": list(sessions)}
    if pattern is None:
        params["phrase"] = folded if folded is not None else phrase
    cur = con.execute(
        f"SELECT session_id, line_no, text FROM lines WHERE {where}",  # `where` is built from fixed strings only
        params or None,
    )
    kept: list[tuple[int, int, str, dict[str, Any]]] = []  # a max-heap of the first lines by (rank, line), negated
    kept_hits = 0
    found_sessions: set[str] = set()
    total = 0
    needs_rec = flt.role is not None or flt.since is not None or flt.until is not None
    while batch := cur.fetchmany(2048):
        for session_id, line_no, text in batch:
            meta = sessions.get(session_id)
            if meta is None:
                continue
            hits = list(_occurrences(text, phrase, pattern, folded))
            if not hits:
                continue
            rec = _parse(text) if needs_rec else None
            if flt.role is not None and line_role(rec, meta["format"]) != flt.role:
                continue
            if not _in_days(line_time(rec), meta["first_at"], flt):
                continue
            total += len(hits)
            found_sessions.add(session_id)
            key = (-rank[session_id], -line_no)
            if kept and kept_hits >= limit and key < (kept[0][0], kept[0][1]):
                continue  # after every line kept so far, which already hold `limit` hits
            heapq.heappush(kept, (*key, session_id, {"line": line_no, "text": text, "hits": hits, "rec": rec}))
            kept_hits += len(hits)
            # the last kept line can go once the others hold `limit` hits without it
            while kept and kept_hits - len(kept[0][3]["hits"]) >= limit:
                kept_hits -= len(heapq.heappop(kept)[3]["hits"])
    found: dict[str, list[dict[str, Any]]] = {}
    for _r, _l, session_id, entry in sorted(kept, key=lambda k: (-k[0], -k[1])):
        found.setdefault(session_id, []).append(entry)
    order = [s for s in order if s in found]
    masker = None
    if redact:
        from pipeline.secrets.redact import LineMasker  # detect-secrets: only a masked search pays for it

        masker = LineMasker()
    listed: list[dict[str, Any]] = []
    for session_id in order:
        meta = sessions[session_id]
        for entry in found[session_id]:
            if len(listed) >= limit:
                break
            text, rec = entry["text"], entry["rec"] if entry["rec"] is not None else _parse(entry["text"])
            spans = _string_spans(text) if rec is not None else None
            role, at = line_role(rec, meta["format"]), line_time(rec)
            secrets = masker.spans(text) if masker is not None else []
            for start, end in entry["hits"]:
                if len(listed) >= limit:
                    break
                before, match, after, _ = snippet(text, spans, start, end, context)
                # A decoded character comes from at most 6 stored ones (\uXXXX): a secret within that
                # reach of the hit is shown masked from the stored line instead.
                reach = (start - 6 * context - 6, end + 6 * context + 6)
                if any(sp.start < reach[1] and sp.end > reach[0] for sp in secrets):
                    before, match, after = (_render(text, secrets, max(0, start - context), start),
                                            _render(text, secrets, start, end), _render(text, secrets, end, end + context))
                listed.append({
                    "sessionId": session_id, "project": meta["slug"], "line": entry["line"], "column": start + 1,
                    "at": at, "role": role, "before": before, "match": match, "after": after,
                })
    return {"phrase": phrase, "regex": regex, "ignoreCase": ignore_case, "total": total, "truncated": len(listed) < total,
            "sessions": len(found_sessions), "hits": listed}


def _render(text: str, found: list[Any], start: int, end: int) -> str:
    from pipeline.secrets.scan import render

    return render(text, found, start, end)


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _sessions(con: duckdb.DuckDBPyConnection, flt: SearchFilter) -> dict[str, dict[str, Any]]:
    """The sessions a filter selects, with what each hit shows of them; an unknown --session is an error."""
    rows = con.execute(
        """
        SELECT session_id, slug, format, first_at, last_at FROM sessions
        WHERE (len($ids) = 0 OR session_id IN (SELECT unnest($ids::VARCHAR[])))
          AND ($project IS NULL OR slug = $project OR cwd = $project)
          AND ($format IS NULL OR format = $format)
          AND ($until IS NULL OR first_at IS NULL OR CAST(first_at AS DATE) <= $until)
          AND ($since IS NULL OR last_at IS NULL OR CAST(last_at AS DATE) >= $since)
        """,
        {"ids": list(flt.sessions), "project": flt.project, "format": flt.format,
         "since": flt.since, "until": flt.until},
    ).fetchall()
    out = {r[0]: {"slug": r[1], "format": r[2], "first_at": r[3], "last_at": r[4]} for r in rows}
    if flt.sessions:
        known = {r[0] for r in con.execute("SELECT session_id FROM sessions WHERE session_id IN (SELECT unnest(?::VARCHAR[]))",
                                           [list(flt.sessions)]).fetchall()}
        missing = [s for s in flt.sessions if s not in known]
        if missing:
            raise UsageError(f"unknown session(s): {', '.join(missing)}; `pipeline sessions` lists the ids in this warehouse")
    return out


def sessions_of(values: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values or ()))
