"""Quote verification: does a piece of evidence really occur in the transcript it cites?

This module is the single place where that question is answered. A quote counts as verbatim for a
line of a session when it appears, character for character, in one of:

* the line's raw text;
* any string value of the line parsed as JSON, at any depth;
* any string value inside a string value that itself holds a JSON document (one level down, the way
  Codex stores tool-call `arguments`).

A line that does not parse as JSON only offers its raw text. Nothing is normalised: whitespace and
case must match exactly.

Two implementations of `QuoteIndex` share that rule: `WarehouseQuotes` reads a `lines` table through
DuckDB (transcripts can be megabytes, single lines over a megabyte): a running batch checks quotes
against its input folder (`pipeline.consolidator.batch_input`), and `apply` checks them again against
the warehouse; `MemoryQuotes` holds lines in a dict for tests and small tools.
The mask rule: engines only ever see transcripts with secrets masked (`[REDACTED:kind]`), so they
quote masked text. A quote that holds a mask is verbatim when the line, with its detected secrets
(and the batch's known ones) masked, holds it: that is, when the stored text has a detected secret
of that kind at that place. Passages shown back as "closest" are masked the same way.

Two implementations of `QuoteIndex` share that rule: `WarehouseQuotes` reads the `lines` table of
the DuckDB warehouse (transcripts can be megabytes, single lines over a megabyte), and `MemoryQuotes`
holds lines in a dict for tests and small tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import duckdb
from rapidfuzz import fuzz

from pipeline.secrets.gate import SecretSet
from pipeline.secrets.redact import MASK_RE, has_mask
from pipeline.secrets.scan import Secret, line_secrets, mask

__all__ = [
    "CLOSEST_SCAN_CHARS",
    "PASSAGE_CHARS",
    "MemoryQuotes",
    "QuoteIndex",
    "WarehouseQuotes",
    "anchor_words",
    "closest_passage",
    "escape_safe_needle",
    "masked_needle",
    "quote_in_line",
    "searchable_strings",
]

# How much transcript text one `closest` call may feed to the fuzzy matcher, in characters.
CLOSEST_SCAN_CHARS = 400_000
# How many lines `closest` considers, best pre-filter score first.
CLOSEST_MAX_LINES = 40
# A single string longer than this is not scanned whole: only windows around anchor words and its head.
LONG_PIECE_CHARS = 20_000
# The longest passage `closest` hands back.
PASSAGE_CHARS = 200
# Characters of context added on each side of the aligned passage.
_CONTEXT = 20
# Below this rapidfuzz score (0-100) nothing in the session is shown as "close".
MIN_CLOSEST_SCORE = 40.0

# Characters that every JSON writer we know of emits as themselves inside a string (json.dumps with
# or without ensure_ascii, JSON.stringify, serde_json, Go's encoding/json): ASCII letters, digits,
# the space, and punctuation other than the quote, the backslash, the solidus and the three
# characters Go escapes for HTML (< > &), plus the apostrophe for good measure. A run of such
# characters taken from a quote therefore appears unchanged in the raw line whenever the quote
# appears in a decoded string value, even one that was encoded twice.
_SAFE = re.compile(r"[A-Za-z0-9 !#$%()*+,\-.:;=?@\[\]^_`{|}~]+")
_ANCHOR = re.compile(r"[A-Za-z0-9_\-.:$#@%+=]{3,}")
_JSON_START = ("{", "[", '"')


def _walk_strings(value: Any) -> Iterator[str]:
    """Every string value inside a parsed JSON value (object keys are not values)."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _parse(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _embedded_document(value: str) -> tuple[bool, Any]:
    """Parse a string value that looks like it holds a JSON document of its own."""
    if not value.lstrip().startswith(_JSON_START):
        return False, None
    return _parse(value)


def searchable_strings(text: str) -> tuple[bool, list[str]]:
    """The decoded strings of a line, in document order: (is_json, strings).

    For a JSON line, each string value is listed; when a value is itself a JSON document, the
    document's own string values follow it. A line that is not JSON yields (False, []).
    """
    ok, parsed = _parse(text)
    if not ok:
        return False, []
    out: list[str] = []
    for value in _walk_strings(parsed):
        out.append(value)
        inner_ok, inner = _embedded_document(value)
        if inner_ok:
            out.extend(_walk_strings(inner))
    return True, out


def quote_in_line(quote: str, text: str, known: frozenset[Secret] = frozenset()) -> bool:
    """True when `quote` occurs verbatim in the line `text` (raw, or decoded as described above).

    The empty quote is never verbatim: there is nothing to check. A quote holding a mask is looked
    up in the line with its secrets (those detected on it, and `known`) masked.
    """
    if not quote:
        return False
    if has_mask(quote):
        return _masked_quote_in_line(quote, text, known)
    if quote in text:
        return True
    ok, parsed = _parse(text)
    if not ok:
        return False
    for value in _walk_strings(parsed):
        if quote in value:
            return True
        inner_ok, inner = _embedded_document(value)
        if inner_ok and any(quote in s for s in _walk_strings(inner)):
            return True
    return False


def _masked_quote_in_line(quote: str, text: str, known: frozenset[Secret]) -> bool:
    parts = [p for p in MASK_RE.split(quote)[::2] if p]
    if parts and not all(_part_may_be_in(p, text) for p in parts):
        return False
    secrets = line_secrets(text) | known
    if not secrets:
        return False
    if quote in mask(text, secrets):
        return True
    _, strings = searchable_strings(text)
    return any(quote in mask(s, secrets) for s in strings)


def _part_may_be_in(part: str, text: str) -> bool:
    """A cheap test that a plain stretch of a quote can be in the line, raw or decoded."""
    needle = escape_safe_needle(part)
    return not needle or needle in text


def masked_needle(quote: str) -> str:
    """escape_safe_needle over the plain stretches of a quote that holds masks."""
    runs = [escape_safe_needle(p) for p in MASK_RE.split(quote)[::2] if p]
    return max(runs, key=len) if runs else ""


def escape_safe_needle(quote: str) -> str:
    """The longest run of `quote` made only of characters JSON writers never escape ('' if none).

    Any line holding the quote, raw or in a decoded string value, holds this run in its raw text,
    which lets the warehouse narrow a search with a plain substring test.
    """
    runs = _SAFE.findall(quote)
    return max(runs, key=len) if runs else ""


def anchor_words(quote: str, limit: int = 6) -> list[str]:
    """A few distinctive words of the quote (longest first) used to rank lines for `closest`."""
    seen: dict[str, None] = {}
    for word in sorted(_ANCHOR.findall(quote), key=len, reverse=True):
        seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)


def _pieces(text: str, known: frozenset[Secret] = frozenset()) -> list[str]:
    """What a reader would see of a line: its decoded strings, or the raw text when it is not JSON,
    with its secrets masked (a passage shown back to a model never holds one)."""
    is_json, strings = searchable_strings(text)
    pieces = [text] if not is_json else ([s for s in strings if s.strip()] or [text])
    secrets = line_secrets(text) | known
    return [mask(p, secrets) for p in pieces] if secrets else pieces


def _windows(piece: str, quote: str, anchors: Sequence[str]) -> list[str]:
    if len(piece) <= LONG_PIECE_CHARS:
        return [piece]
    margin = len(quote) + PASSAGE_CHARS
    out = [piece[:LONG_PIECE_CHARS]]
    for word in anchors:
        at = piece.find(word, LONG_PIECE_CHARS // 2)
        if at >= 0:
            out.append(piece[max(0, at - margin) : at + len(word) + margin])
    return out


def _scan_windows(
    quote: str, rows: Iterable[tuple[int, str]], anchors: Sequence[str], known: frozenset[Secret]
) -> Iterator[tuple[int, str]]:
    for line_no, text in rows:
        for piece in _pieces(text, known):
            for window in _windows(piece, quote, anchors):
                yield line_no, window


def closest_passage(
    quote: str, rows: Iterable[tuple[int, str]], known: frozenset[Secret] = frozenset()
) -> tuple[int, str] | None:
    """The passage of `rows` (line number, text) most like `quote`, at most PASSAGE_CHARS long,
    with secrets masked.

    Bounded: at most CLOSEST_SCAN_CHARS characters are compared in all. Returns None when nothing
    scores at least MIN_CLOSEST_SCORE.
    """
    if not quote:
        return None
    anchors = anchor_words(quote)
    budget = CLOSEST_SCAN_CHARS
    best: tuple[float, int, str] | None = None
    for line_no, window in _scan_windows(quote, rows, anchors, known):
        if budget <= 0:
            break
        window = window[:budget]
        budget -= len(window)
        found = fuzz.partial_ratio_alignment(quote, window)
        if found is not None and (best is None or found.score > best[0]):
            # Widen the aligned stretch a little: the alignment can stop short of the end of the
            # quote, and a few characters of context help the reader see where it sits.
            extra = max(0, len(quote) - (found.dest_end - found.dest_start))
            start = max(0, found.dest_start - _CONTEXT)
            best = (found.score, line_no, window[start : found.dest_end + extra + _CONTEXT])
            if found.score >= 100.0:
                break
    if best is None or best[0] < MIN_CLOSEST_SCORE:
        return None
    passage = best[2]
    if len(passage) > PASSAGE_CHARS:
        passage = passage[: PASSAGE_CHARS - 1] + "…"
    return best[1], passage


@runtime_checkable
class QuoteIndex(Protocol):
    """Where quotes are looked up: the lines of each session."""

    def session_exists(self, session_id: str) -> bool:
        """True when the store holds a transcript under this id."""
        ...

    def contains(self, session_id: str, quote: str) -> bool:
        """True when `quote` is verbatim in some line of the session."""
        ...

    def closest(self, session_id: str, quote: str) -> tuple[int, str] | None:
        """(line number, passage of at most PASSAGE_CHARS characters) most like `quote`, or None."""
        ...

    def lines_with(self, session_id: str, quote: str, limit: int = 2) -> list[int]:
        """The first `limit` line numbers whose text holds `quote` verbatim."""
        ...


class MemoryQuotes:
    """A QuoteIndex over lines held in memory: {session_id: [line 1, line 2, ...]}."""

    def __init__(self, sessions: Mapping[str, Sequence[str]], known: SecretSet | None = None) -> None:
        self._sessions = {sid: list(lines) for sid, lines in sessions.items()}
        self._known = known.secrets if known is not None else frozenset()

    def session_exists(self, session_id: str) -> bool:
        return session_id in self._sessions

    def contains(self, session_id: str, quote: str) -> bool:
        return any(quote_in_line(quote, text, self._known) for text in self._sessions.get(session_id, ()))

    def lines_with(self, session_id: str, quote: str, limit: int = 2) -> list[int]:
        found = (
            i + 1 for i, text in enumerate(self._sessions.get(session_id, ())) if quote_in_line(quote, text, self._known)
        )
        return [n for n, _ in zip(found, range(limit), strict=False)]

    def closest(self, session_id: str, quote: str) -> tuple[int, str] | None:
        lines = self._sessions.get(session_id, [])
        anchors = anchor_words(quote)
        ranked = sorted(
            range(len(lines)),
            key=lambda i: (-sum(word in lines[i] for word in anchors), i),
        )[:CLOSEST_MAX_LINES]
        return closest_passage(quote, ((i + 1, lines[i]) for i in ranked), self._known)


class WarehouseQuotes:
    """A QuoteIndex over a `lines(session_id, line_no, text)` table: the warehouse's, or a batch input's.

    Lines are narrowed in SQL before Python looks at them: first the quote itself as a substring of
    the raw text, then (for quotes that only match once JSON is decoded) the quote's longest run of
    characters that JSON never escapes. A quote without such a run is checked against every line of
    the session. User text only ever reaches DuckDB as a bound parameter.
    """

    _FETCH = 64

    def __init__(self, con: duckdb.DuckDBPyConnection, known: SecretSet | None = None) -> None:
        self._con = con
        self._known = known.secrets if known is not None else frozenset()

    def session_exists(self, session_id: str) -> bool:
        row = self._con.execute(
            "SELECT EXISTS (SELECT 1 FROM lines WHERE session_id = ?)"
            " OR EXISTS (SELECT 1 FROM sessions WHERE session_id = ?)",
            [session_id, session_id],
        ).fetchone()
        return bool(row and row[0])

    def contains(self, session_id: str, quote: str) -> bool:
        if not quote:
            return False
        masked = has_mask(quote)
        if not masked:
            raw = self._con.execute(
                "SELECT 1 FROM lines WHERE session_id = ? AND contains(text, ?) LIMIT 1",
                [session_id, quote],
            ).fetchone()
            if raw:
                return True
        needle = masked_needle(quote) if masked else escape_safe_needle(quote)
        if needle:
            cur = self._con.execute(
                "SELECT text FROM lines WHERE session_id = ? AND contains(text, ?)",
                [session_id, needle],
            )
        else:
            cur = self._con.execute("SELECT text FROM lines WHERE session_id = ?", [session_id])
        while batch := cur.fetchmany(self._FETCH):
            if any(quote_in_line(quote, text, self._known) for (text,) in batch):
                return True
        return False

    def lines_with(self, session_id: str, quote: str, limit: int = 2) -> list[int]:
        if not quote:
            return []
        needle = masked_needle(quote) if has_mask(quote) else escape_safe_needle(quote)
        if needle:  # as in contains(): narrow with a run every matching line holds
            cur = self._con.execute(
                "SELECT line_no, text FROM lines WHERE session_id = ? AND (contains(text, ?) OR contains(text, ?)) "
                "ORDER BY line_no",
                [session_id, quote, needle],
            )
        else:
            cur = self._con.execute("SELECT line_no, text FROM lines WHERE session_id = ? ORDER BY line_no", [session_id])
        found: list[int] = []
        while len(found) < limit and (batch := cur.fetchmany(self._FETCH)):
            found += [int(n) for n, text in batch if quote_in_line(quote, text, self._known)]
        return found[:limit]

    def closest(self, session_id: str, quote: str) -> tuple[int, str] | None:
        if not quote:
            return None
        anchors = anchor_words(quote)
        # Lines holding more of the quote's distinctive words come first. Only placeholders are
        # formatted into the statement; the words themselves are bound parameters.
        score = " + ".join(["CAST(contains(text, ?) AS INTEGER)"] * len(anchors))
        order = f"{score} DESC, line_no" if anchors else "line_no"
        ranked = self._con.execute(
            f"SELECT line_no FROM lines WHERE session_id = ? ORDER BY {order} LIMIT ?",
            [session_id, *anchors, CLOSEST_MAX_LINES],
        ).fetchall()
        return closest_passage(quote, self._texts(session_id, [n for (n,) in ranked]), self._known)

    def _texts(self, session_id: str, line_nos: Sequence[int]) -> Iterator[tuple[int, str]]:
        # One line at a time, so a session of huge lines is never pulled into memory at once.
        for line_no in line_nos:
            row = self._con.execute(
                "SELECT text FROM lines WHERE session_id = ? AND line_no = ?", [session_id, line_no]
            ).fetchone()
            if row is not None:
                yield int(line_no), str(row[0])
