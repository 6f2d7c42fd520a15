"""A conversation as one self-contained HTML page, in the style of the night report's evidence context
(`pipeline.nightly.evidence`): a numbered list of who-said-what, tool outputs folded, the hit marked.

Everything is in the file (styles inline, no script, no fetch), so it can be mailed or attached to an
issue. Ids and commands never wrap; text wraps anywhere rather than widen the page.
"""

from __future__ import annotations

from typing import Any

from pipeline.show.conversation import Conversation, Item
from pipeline.show.folding import FOLD_LINES, fold

CSS = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --card: #f6f8fa; --mark: #fff3b0; }
* { box-sizing: border-box; }
body { color: var(--ink); font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; }
main { max-width: 1180px; margin: 0 auto; padding: 16px 20px 40px; }
h1 { font-size: 18px; margin: 0 0 6px; }
table.meta { border-collapse: collapse; font-size: 12.5px; margin: 0 0 14px; max-width: 100%; }
table.meta th, table.meta td { text-align: left; vertical-align: top; padding: 2px 10px 2px 0; overflow-wrap: anywhere; }
table.meta th { color: var(--muted); font-weight: 600; white-space: nowrap; }
code.id, .nowrap, code.cmd { white-space: nowrap; overflow-wrap: normal; word-break: keep-all; }
code.id, code.cmd { font-size: 12px; background: #eff1f3; padding: 0 3px; border-radius: 3px; }
code.cmd { display: inline-block; max-width: 100%; overflow-x: auto; vertical-align: bottom; }
ol.context { list-style: none; margin: 0; padding: 0; border-left: 3px solid var(--line); background: var(--card); }
ol.context li { display: grid; grid-template-columns: 3.6em 10.5em minmax(0, 1fr); column-gap: 8px; padding: 4px 8px;
  font-size: 12.5px; border-top: 1px dotted var(--line); }
ol.context li:first-child { border-top: none; }
li .ln { color: var(--muted); text-align: right; font-variant-numeric: tabular-nums; }
li .who { color: var(--muted); overflow-wrap: anywhere; }
li .who .at { display: block; font-size: 11px; white-space: nowrap; }
li .text { white-space: pre-wrap; overflow-wrap: anywhere; min-width: 0; }
li.tool-call .text, li.tool-result .text, li.tool-result pre, li.tool-call pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
li.user { background: #eef6ff; } li.user .who { color: #0a3069; font-weight: 600; }
li.assistant .who { color: #116329; font-weight: 600; }
li.thinking .text { color: var(--muted); font-style: italic; }
li.other .text { color: var(--muted); }
ol.context li.marker { display: block; text-align: center; background: #ddf4ff; color: #0a3069; font-weight: 600; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; max-width: 100%; }
details { margin-top: 2px; } details summary { color: var(--muted); cursor: pointer; font-size: 12px; }
.badge { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 10px; margin-left: 4px; white-space: nowrap; }
.badge.ok { background: #dafbe1; color: #116329; } .badge.bad { background: #ffebe9; color: #82071e; }
.badge.rejected { background: #fbefff; color: #6e2a8c; }
mark { background: var(--mark); padding: 0 1px; }
"""


def _clock(at: str) -> str:
    """`2026-03-18T18:16:42.924Z` → `18:16:42`."""
    time = at.split("T", 1)[1] if "T" in at else at
    return time[:8]


def _badge(status: str) -> str:
    return "ok" if status == "ok" else ("rejected" if status == "rejected" else "bad")


def _item(item: Item, hit: str | None, fold_lines: int) -> dict[str, Any]:
    if item.kind == "marker":
        return {"kind": "marker", "label": item.label, "text": item.text, "line_no": item.line_no}
    folded = fold(item.text, item.kind, fold_lines)
    hits = f", {folded.hidden.count(hit)} hit(s)" if hit and hit in folded.hidden else ""
    # the time of day (UTC); the day is in the page's header and in each new-day marker
    return {"kind": item.kind, "label": item.label, "line_no": item.line_no, "status": item.status,
            "badge": _badge(item.status), "at": item.at, "clock": _clock(item.at) if item.at else "",
            "shown": folded.shown, "hidden": folded.hidden, "hidden_lines": folded.hidden_lines, "hidden_hits": hits}


def conversation_html(conv: Conversation, *, hit: str | None = None, fold_lines: int = FOLD_LINES) -> str:
    """The page (`templates/conversation.html.j2`): every value escaped by the template engine."""
    from pipeline.templates import render

    meta: list[tuple[str, Any, str]] = [
        ("session", conv.session_id, "id"), ("format", conv.format, "text"), ("project", conv.slug or "-", "id"),
        ("cwd", conv.cwd or "-", "text"), ("span", (conv.first_at or "?", conv.last_at or "?"), "span"),
        ("lines", f"{conv.start}–{conv.end} of {conv.line_count}", "text")]
    if conv.parent_session_id:
        meta.append(("started from", conv.parent_session_id, "id"))
    if hit:
        meta.append(("highlighted", hit, "hit"))
    return render("conversation.html.j2", conv=conv, css=CSS, meta=meta, hit=hit or None,
                  items=[_item(i, hit, fold_lines) for i in conv.items], note=conv.empty_note() or "")
