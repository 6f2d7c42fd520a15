"""An evidence quote in its transcript context, as the night report shows it to a reviewer.

The quote's line is found the way the contract verifies quotes (`pipeline.consolidator.quotes`); the
lines around it are shown as readable message text (`pipeline.warehouse.readable`): who spoke, which
tool was called with what, what it returned. Every piece of transcript text is masked before it is
shown, the way the consolidator's tools mask what they return (`pipeline.secrets.redact.LineMasker`): the
secrets detected anywhere on the stored line, and the night's known secrets, are masked in whatever
piece of the line is shown, then long texts are cut around the quote, which is highlighted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import duckdb

from pipeline.consolidator.quotes import WarehouseQuotes
from pipeline.secrets.gate import SecretSet
from pipeline.secrets.redact import LineMasker
from pipeline.secrets.scan import Secret, detect, render, spans
from pipeline.warehouse.readable import Entry, line_time, readable

__all__ = ["EvidenceView", "Shown", "evidence_html", "evidence_view"]

CONTEXT_BEFORE = 2  # readable entries shown before the quote's line
CONTEXT_AFTER = 2  # and after it
SCAN_LINES = 40  # how far from the quote's line to look for them
CONTEXT_CHARS = 360  # a context entry longer than this is cut
QUOTE_SIDE_CHARS = 280  # text kept on either side of the quote on its own line


@dataclass(frozen=True)
class Shown:
    """One readable entry as the page shows it: redacted text, split around the highlighted quote."""

    line_no: int
    label: str
    before: str
    mark: str = ""
    after: str = ""
    kind: str = "message"

    @property
    def is_quote(self) -> bool:
        return bool(self.mark)


@dataclass
class EvidenceView:
    session_id: str
    quote: str  # redacted
    slug: str | None = None
    line_no: int | None = None
    at: str | None = None
    shown: list[Shown] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.line_no is not None

    @property
    def read_command(self) -> str | None:
        if self.line_no is None:
            return None
        return f"pipeline show {self.session_id} {max(1, self.line_no - 5)} {self.line_no + 5}"


def _cut(text: str, limit: int = CONTEXT_CHARS) -> str:
    text = text.strip("\n")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _variants(quote: str) -> list[str]:
    """The quote as written, and as it reads once JSON escapes are decoded (a quote may be given either way)."""
    out = [quote]
    try:
        decoded = json.loads(f'"{quote}"')
    except ValueError:
        decoded = None
    if isinstance(decoded, str) and decoded != quote:
        out.append(decoded)
    return out


def _masked(text: str, secrets: frozenset[Secret]) -> str:
    """A piece of a line as it may be shown: the line's secrets, and any detected in the piece, masked."""
    found = spans(text, detect(text) | secrets)
    return render(text, found, 0, len(text)) if found else text


def _highlight(line_no: int, entry: Entry, quote: str, secrets: frozenset[Secret]) -> Shown | None:
    text = _masked(entry.text, secrets)
    for variant in _variants(quote):
        mark = _masked(variant, secrets)
        at = text.find(mark)
        if at >= 0 and mark:
            before, after = text[:at], text[at + len(mark):]
            if len(before) > QUOTE_SIDE_CHARS:
                before = "…" + before[-QUOTE_SIDE_CHARS:]
            if len(after) > QUOTE_SIDE_CHARS:
                after = after[:QUOTE_SIDE_CHARS] + "…"
            return Shown(line_no, entry.label, before, mark, after, entry.kind)
    return None


def _context(rows: dict[int, str], fmt: str | None, lines: range, want: int, masker: LineMasker, *,
             newest_first: bool) -> list[Shown]:
    found: list[Shown] = []
    for n in lines:
        if n not in rows:
            continue
        secrets = masker.secrets(rows[n])
        entries = [e for e in readable(rows[n], fmt) if not e.echo and e.text.strip()]
        shown = [Shown(n, e.label, _cut(_masked(e.text, secrets)), kind=e.kind) for e in entries]
        found.extend(reversed(shown) if newest_first else shown)
        if len(found) >= want:
            break
    found = found[:want]
    return list(reversed(found)) if newest_first else found


def evidence_view(con: duckdb.DuckDBPyConnection, session_id: str, quote: str, *, line_no: int | None = None,
                  known: SecretSet | None = None) -> EvidenceView:
    """Where `quote` sits in `session_id`, with a few readable entries before and after it. `known` holds
    the night's secrets, masked wherever they appear besides what is detected on each line."""
    masker = LineMasker(known)
    view = EvidenceView(session_id, _masked(quote, masker.known))
    meta = con.execute("SELECT format, slug FROM sessions WHERE session_id = ?", [session_id]).fetchone()
    if meta is None:
        return view
    fmt, view.slug = meta[0], masker.text(meta[1])
    if line_no is None:
        found = WarehouseQuotes(con).lines_with(session_id, quote, 1)
        line_no = found[0] if found else None
    if line_no is None:
        return view
    rows = dict(con.execute(
        "SELECT line_no, text FROM lines WHERE session_id = ? AND line_no BETWEEN ? AND ? ORDER BY line_no",
        [session_id, line_no - SCAN_LINES, line_no + SCAN_LINES],
    ).fetchall())
    text = rows.get(line_no)
    if text is None:
        return view
    secrets = masker.secrets(text)
    view.line_no, view.at, view.quote = line_no, line_time(text), _masked(quote, secrets)
    entries = readable(text, fmt)
    here: list[Shown] = []
    hit = None
    # The quote's own line: every entry, the one holding the quote highlighted (an echo only if nothing else has it).
    for entry in sorted(entries, key=lambda e: e.echo):
        if hit is None:
            hit = _highlight(line_no, entry, quote, secrets)
            if hit is not None:
                here.append(hit)
                continue
        if not entry.echo and entry.text.strip():
            here.append(Shown(line_no, entry.label, _cut(_masked(entry.text, secrets)), kind=entry.kind))
    if hit is None:
        # The quote spans the line's JSON (keys, escapes): show that stretch of the raw line.
        hit = _highlight(line_no, Entry("raw line", text, "other"), quote, secrets) or Shown(
            line_no, "raw line", _cut(_masked(text, secrets)), kind="other")
        here.insert(0, hit)
    view.shown = (
        _context(rows, fmt, range(line_no - 1, line_no - SCAN_LINES - 1, -1), CONTEXT_BEFORE, masker, newest_first=True)
        + here
        + _context(rows, fmt, range(line_no + 1, line_no + SCAN_LINES + 1), CONTEXT_AFTER, masker, newest_first=False)
    )
    return view


def evidence_html(view: EvidenceView) -> str:
    """The view as an HTML block (`templates/evidence.html.j2`; styles come with the report's page CSS)."""
    from pipeline.templates import render

    return render("evidence.html.j2", view=view)
