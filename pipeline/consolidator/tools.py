"""The three transcript tools: pure functions over the warehouse with bounded, JSON-ready output.

They take a connection on which the warehouse's tables can be queried: the warehouse itself (the
CLI and notebooks), or a batch's input folder (`pipeline.consolidator.batch_input`, what a running
batch reads instead of the warehouse). The consolidator's model, the CLI and notebooks all call these. Every limit (`pipeline.consolidator.limits`) is also
stated in the tool descriptions the model reads (prompts/tools.json), so change both together.

Secrets are masked (`[REDACTED:kind]`) in everything the tools return unless a caller asks for raw
text with `redact=False` (a person at their own terminal: `pipeline search` / `read` without
`--redact`); the tools given to a model always redact (`pipeline.consolidator.toolbox`). Masking is
the separate layer `pipeline.secrets.redact.LineMasker`: lines and columns still refer to the stored text.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import duckdb

from pipeline.consolidator.limits import (
    CONTEXT_CHARS,
    DEFAULT_WIDTH,
    MAX_HITS,
    MAX_READ_LINES,
    MAX_RESULT_CHARS,
    MAX_WIDTH,
)
from pipeline.consolidator.line_blocks import LineBlocks
from pipeline.errors import ToolError
from pipeline.warehouse import db

if TYPE_CHECKING:  # detect-secrets' plugins take a fifth of a second to import: only a masked answer needs them
    from pipeline.secrets.gate import SecretSet
    from pipeline.secrets.redact import LineMasker

# Rows per Arrow batch a search reads.
_BATCH_ROWS = 8192
def _check_id(session_id: str, allowed: Collection[str] | None) -> None:
    """Refuses a session id that is not a string, or outside `allowed`."""
    if not isinstance(session_id, str) or not session_id:
        raise ToolError("sessionId must be a non-empty string")
    if allowed is not None and session_id not in allowed:
        raise ToolError(f"session {session_id!r} is not in this batch; use a sessionId from list_sessions")


def _check_session(con: duckdb.DuckDBPyConnection, session_id: str, allowed: Collection[str] | None) -> int:
    """The session's line count; refuses sessions outside `allowed` or not in the warehouse."""
    _check_id(session_id, allowed)
    row = db.one(con, "SELECT line_count FROM sessions WHERE session_id = ?", [session_id])
    if row is None:
        raise ToolError(f"unknown session {session_id!r}; `pipeline sessions` lists the ids in this warehouse")
    return int(row[0])


# An instant as ISO 8601 in UTC with a Z, to the millisecond (to the microsecond when it has them), written
# by DuckDB: turning 13,000 zoned timestamps into Python datetimes cost a tenth of a second per listing.
_ISO = ("CASE WHEN epoch_us({at}) % 1000 = 0 THEN strftime(make_timestamp(epoch_us({at})), '%Y-%m-%dT%H:%M:%S.%g') "
        "ELSE strftime(make_timestamp(epoch_us({at})), '%Y-%m-%dT%H:%M:%S.%f') END || 'Z'")


def _masker(known: SecretSet | None) -> LineMasker:
    from pipeline.secrets.redact import LineMasker

    return LineMasker(known)


def _mask_re() -> re.Pattern[str]:
    from pipeline.secrets.redact import MASK_RE

    return MASK_RE


def list_sessions(
    con: duckdb.DuckDBPyConnection,
    session_ids: Sequence[str] | None = None,
    *,
    redact: bool = True,
    known: SecretSet | None = None,
) -> list[dict[str, Any]]:
    """The manifest: one entry per session, no transcript text. `newFromLine` is 1 for a never-read
    session, else the first line after its latest watermark."""
    masker = _masker(known) if redact else None
    params: list[Any] = []
    where = ""
    if session_ids is not None:
        where = "WHERE s.session_id IN (SELECT unnest(?::VARCHAR[]))"
        params.append(list(session_ids))
    cur = con.execute(
        f"""
        WITH wm AS (
            SELECT session_id, arg_max(line_count, "at") AS line_count, max("at") AS wm_at
            FROM watermarks GROUP BY session_id
        ), links AS (
            SELECT ml.session_id,
                   list({{'id': m.memory_id, 'kind': m.kind, 'claim': m.claim}} ORDER BY m.memory_id) AS linked
            FROM memory_links ml JOIN memories m USING (memory_id)
            GROUP BY ml.session_id
        )
        SELECT s.session_id, s.slug, s.cwd, {_ISO.format(at="s.first_at")} AS first_at,
               {_ISO.format(at="s.last_at")} AS last_at, s.prompts, s.turns, s.size_bytes,
               s.line_count,
               -- a file rewritten after its watermark is read again from the top
               CASE WHEN s.rewritten_at > wm.wm_at THEN 1 ELSE coalesce(wm.line_count, 0) + 1 END AS new_from_line,
               links.linked
        FROM sessions s LEFT JOIN wm USING (session_id) LEFT JOIN links USING (session_id)
        {where}
        ORDER BY s.slug NULLS LAST, s.first_at NULLS LAST, s.session_id
        """,  # `where` is one of two fixed strings, _ISO a constant; the ids are a bound parameter
        params or None,
    )
    # Plain rows, not a frame: a batch's kernel lists its sessions first, and would import polars
    # (0.3 s of CPU) for nothing else.
    names = [d[0] for d in cur.description]
    out: list[dict[str, Any]] = []
    for r in (dict(zip(names, row, strict=True)) for row in cur.fetchall()):
        out.append(
            {
                "sessionId": r["session_id"],
                "slug": masker.text(r["slug"]) if masker else r["slug"],
                "cwd": masker.text(r["cwd"]) if masker else r["cwd"],
                "firstAt": r["first_at"],
                "lastAt": r["last_at"],
                "prompts": r["prompts"],
                "turns": r["turns"],
                "sizeBytes": r["size_bytes"],
                "lineCount": r["line_count"],
                "newFromLine": r["new_from_line"],
                "linkedMemories": [
                    {**m, "claim": masker.text(m.get("claim"))} if masker else m for m in (r["linked"] or [])
                ],
            }
        )
    if session_ids is not None:
        listed = {e["sessionId"] for e in out}
        missing = [s for s in session_ids if s not in listed]
        if missing:
            raise ToolError(f"unknown session(s): {', '.join(missing)}")
    return out


def search_transcript(
    con: duckdb.DuckDBPyConnection,
    session_id: str,
    phrase: str,
    *,
    max_hits: int = MAX_HITS,
    context: int = CONTEXT_CHARS,
    allowed: Collection[str] | None = None,
    redact: bool = True,
    known: SecretSet | None = None,
) -> dict[str, Any]:
    """Every literal, case-sensitive occurrence of `phrase` (non-overlapping, left to right).

    `total` is exact; the listing stops at `max_hits` hits or MAX_RESULT_CHARS characters, and
    `truncated` says so. Columns are 1-based, in characters, in the stored line. With `redact`,
    secrets are masked in the context shown, and a phrase that holds a mask (copied from an earlier
    result) matches where the stored line has a secret of that kind at that place.
    """
    _check_session(con, session_id, allowed)
    if not isinstance(phrase, str) or phrase == "":
        raise ToolError("phrase must be a non-empty string (it is matched literally, no regex)")
    if max_hits < 0 or context < 0:
        raise ToolError("max_hits and context must be zero or more")
    masker = _masker(known) if redact else None
    if masker is not None and _mask_re().search(phrase):
        return _search_masked(con, session_id, phrase, masker, max_hits, context)
    line_nos, texts = _lines_holding(con, session_id, phrase)
    total = 0
    hits: list[dict[str, Any]] = []
    used = 0
    truncated = False
    for line_no, text in zip(line_nos, texts, strict=True):
        total += text.count(phrase)
        if truncated:
            continue
        # Secrets are looked for only on the lines whose hits are listed, once per line.
        found = masker.spans(text) if masker is not None else []
        start = text.find(phrase)
        while start >= 0:
            if len(hits) >= max_hits:
                truncated = True
                break
            end = start + len(phrase)
            hit: dict[str, Any] = {
                "line": line_no,
                "column": start + 1,
                "before": _show(text, found, max(0, start - context), start),
                # A phrase that lands on a secret is masked like the rest of the line.
                "match": _show(text, found, start, end),
                "after": _show(text, found, end, end + context),
            }
            size = len(hit["before"]) + len(hit["after"]) + len(hit["match"]) + 40
            if used + size > MAX_RESULT_CHARS:
                truncated = True
                break
            hits.append(hit)
            used += size
            start = text.find(phrase, end)
    if len(hits) < total:
        truncated = True
    return {"sessionId": session_id, "phrase": phrase, "total": total, "truncated": truncated, "hits": hits}


def _lines_holding(con: duckdb.DuckDBPyConnection, session_id: str, phrase: str) -> tuple[list[int], list[str]]:
    """(line numbers, texts) of the session's lines that hold `phrase`, in line order.

    The session's text goes from DuckDB to polars as Arrow buffers, with no Python string per line,
    and polars' substring test (memchr) picks the lines; only those become Python strings. Both
    DuckDB's contains() (slow on a phrase whose first letter is common) and building a Python
    string of every line cost more than the scan itself. A UTF-8 substring test agrees with
    `phrase in text`: UTF-8 is self-synchronising, so bytes match only at character boundaries.
    """
    import polars as pl

    rel = con.sql("SELECT line_no, text FROM lines WHERE session_id = $s", params={"s": session_id})
    parts = [
        pl.DataFrame(batch).filter(pl.col("text").str.contains(phrase, literal=True))
        for batch in rel.to_arrow_reader(_BATCH_ROWS)  # in batches: a huge session is never held whole
    ]
    if not parts:
        return [], []
    holding = pl.concat(parts).sort("line_no")
    return holding["line_no"].to_list(), holding["text"].to_list()


def _show(text: str, found: list[Any], start: int, end: int) -> str:
    if not found:
        return text[start:end]
    from pipeline.secrets import scan as secrets_scan

    return secrets_scan.render(text, found, start, end)


def _search_masked(
    con: duckdb.DuckDBPyConnection, session_id: str, phrase: str, masker: LineMasker, max_hits: int, context: int
) -> dict[str, Any]:
    """search_transcript for a phrase holding `[REDACTED:kind]`: matched in the masked lines,
    reported at the stored line's columns, context shown masked."""
    cur = con.execute("SELECT line_no, text FROM lines WHERE session_id = ? ORDER BY line_no", [session_id])
    total = 0
    hits: list[dict[str, Any]] = []
    used = 0
    truncated = False
    while batch := cur.fetchmany(4096):
        for line_no, text in batch:
            for raw_start, masked, at in masker.find_masked(text, phrase):
                total += 1
                if truncated:
                    continue
                if len(hits) >= max_hits:
                    truncated = True
                    continue
                hit = {
                    "line": line_no,
                    "column": raw_start + 1,
                    "before": masked[max(0, at - context) : at],
                    "match": phrase,
                    "after": masked[at + len(phrase) : at + len(phrase) + context],
                }
                size = len(hit["before"]) + len(hit["after"]) + len(phrase) + 40
                if used + size > MAX_RESULT_CHARS:
                    truncated = True
                    continue
                hits.append(hit)
                used += size
    if len(hits) < total:
        truncated = True
    return {"sessionId": session_id, "phrase": phrase, "total": total, "truncated": truncated, "hits": hits}


def read_lines(
    con: duckdb.DuckDBPyConnection,
    session_id: str,
    start: int,
    end: int,
    width: int | None = None,
    *,
    allowed: Collection[str] | None = None,
    redact: bool = True,
    known: SecretSet | None = None,
    blocks: LineBlocks | None = None,
) -> dict[str, Any]:
    """Lines start..end (1-based, inclusive), each cut at `width` characters, at most
    MAX_READ_LINES lines and MAX_RESULT_CHARS characters per call (`truncated` when cut short).
    With `redact`, secrets are found on the whole stored line and masked in the part shown.
    `blocks` serves the lines from blocks kept between calls, for a caller whose source is fixed
    (`pipeline.consolidator.line_blocks`)."""
    _check_id(session_id, allowed)
    width = DEFAULT_WIDTH if width is None else width
    for name, value in (("start", start), ("end", end), ("width", width)):
        if isinstance(value, bool) or not isinstance(value, int):
            _check_session(con, session_id, allowed)  # an unknown session is the first thing said
            raise ToolError(f"{name} must be a whole number, got {value!r}")
    if width < 1 or width > MAX_WIDTH:
        _check_session(con, session_id, allowed)
        raise ToolError(f"width must be between 1 and {MAX_WIDTH}, got {width}")
    if start < 1 or end < start:
        _check_session(con, session_id, allowed)
        raise ToolError(f"bad range {start}..{end}: lines are numbered from 1 and end must be ≥ start")
    # One query for the session's line count and the lines: a query costs more than reading 200 lines.
    # The lines asked for that exist are at most MAX_READ_LINES from `start`, whatever the count.
    upto = min(end, start + MAX_READ_LINES - 1)
    if blocks is not None:
        count, window = blocks.window(con, session_id, start, upto)
        if count is None:
            raise ToolError(f"unknown session {session_id!r}; `pipeline sessions` lists the ids in this warehouse")
        line_count = count
        got: list[tuple[Any, ...]] = [(None, n, text) for n, text in window]
        redact_rows = True  # whole stored lines, cut below
    else:
        params = {"s": session_id, "a": start, "b": upto}
        redact_rows = redact
        if redact:
            got = db.execute_parsed(
                con,
                "SELECT line_count, NULL, NULL FROM sessions WHERE session_id = $s UNION ALL "
                "SELECT NULL, line_no, text FROM lines WHERE session_id = $s AND line_no BETWEEN $a AND $b",
                params,
            ).fetchall()
        else:
            got = db.execute_parsed(
                con,
                "SELECT line_count, NULL, NULL, NULL FROM sessions WHERE session_id = $s UNION ALL "
                "SELECT NULL, line_no, substr(text, 1, $w), length(text) > $w FROM lines "
                "WHERE session_id = $s AND line_no BETWEEN $a AND $b",
                {**params, "w": width},
            ).fetchall()
        counts = [r[0] for r in got if r[1] is None]
        if not counts:
            raise ToolError(f"unknown session {session_id!r}; `pipeline sessions` lists the ids in this warehouse")
        line_count = int(counts[0])
    if start > line_count:
        raise ToolError(f"bad range {start}..{end}: session {session_id} has {line_count} lines")
    truncated = False
    last = min(end, line_count)
    if last - start + 1 > MAX_READ_LINES:
        last = start + MAX_READ_LINES - 1
        truncated = True
    found = sorted((r for r in got if r[1] is not None and r[1] <= last), key=lambda r: r[1])
    # Secrets are looked for on the whole stored line, and only on the lines shown: the listing
    # stops at MAX_RESULT_CHARS, so the lines after it are never masked.
    masker = _masker(known) if redact else None
    lines: list[dict[str, Any]] = []
    used = 0
    for row in found:
        if redact_rows:
            _, line_no, text = row
            head = masker.head(text, width) if masker is not None else text[:width]
            cut = len(text) > width
        else:
            _, line_no, head, cut = row
        if used + len(head) > MAX_RESULT_CHARS:
            truncated = True
            break
        lines.append({"line": line_no, "text": head, "cut": bool(cut)})
        used += len(head)
    end_out = lines[-1]["line"] if lines else start - 1
    return {
        "sessionId": session_id,
        "start": start,
        "end": end_out,
        "lineCount": line_count,
        "truncated": truncated,
        "lines": lines,
    }
