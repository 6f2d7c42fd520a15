"""A conversation as Markdown: a heading per item, tool calls and outputs in code fences, long ones folded."""

from __future__ import annotations

import re

from pipeline.show.conversation import Conversation, Item
from pipeline.show.folding import FOLD_LINES, fold


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def code(text: str | None) -> str:
    """`text` as inline code that no backtick in it can end: data shown as it is (one line)."""
    value = (text or "").replace("\n", " ")
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or not value.strip() else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


# CommonMark lets a backslash escape any ASCII punctuation: the character is then shown as itself.
_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")


def text(value: str | None) -> str:
    """`value` as Markdown text that renders as exactly its characters (one line)."""
    return _SPECIAL.sub(r"\\\1", (value or "").replace("\n", " "))


# Of those, the characters that can start or end inline markup in CommonMark and GitHub's Markdown
# (emphasis, code, links, raw HTML, entities, strikethrough, table cells, the escape itself).
_INLINE = re.compile(r"([\\`*_\[\]<>&~|])")


# What opens a block when it starts a line, even a list item's: a heading, a quote, a list, a rule.
_BLOCK_START = re.compile(r"^(?:([#>+=-])|(\d+)([.)]))")


def inline(value: str | None) -> str:
    """`value` as the words of a line (a list item's): rendered as exactly its characters, with fewer
    escapes than `text` (for files a person or an agent reads raw)."""
    escaped = _INLINE.sub(r"\\\1", (value or "").replace("\n", " "))
    return _BLOCK_START.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", escaped, count=1)


def _hits(text: str, hit: str | None) -> str:
    """Where the hit is in an item, by column (a fence cannot mark it, and no mark is added to data)."""
    if not hit or hit not in text:
        return ""
    columns: list[str] = []
    at = text.find(hit)
    while at >= 0 and len(columns) < 5:
        columns.append(str(at + 1))
        at = text.find(hit, at + len(hit))
    more = " …" if at >= 0 else ""
    return f" · hit at character {', '.join(columns)}{more}"


def conversation_markdown(conv: Conversation, *, hit: str | None = None, fold_lines: int = FOLD_LINES) -> str:
    """Every value of the transcript is in a code fence or inline code, or escaped: a Markdown viewer
    shows it as it is and never reads it as Markdown or HTML."""
    out = [f"# Session {code(conv.session_id)}", "",
           f"- format: {code(conv.format)}", f"- project: {code(conv.slug or '-')}", f"- cwd: {code(conv.cwd or '-')}",
           f"- span: {code(conv.first_at or '?')} → {code(conv.last_at or '?')}",
           f"- lines {conv.start}–{conv.end} of {conv.line_count}"]
    if conv.parent_session_id:
        out.append(f"- started from {code(conv.parent_session_id)}")
    if hit:
        out.append(f"- hits of {code(hit)} are located by character in each heading")
    out.append("")
    if conv.empty_note():
        out += [f"*{text(conv.empty_note())}*", ""]
    for item in conv.items:
        out.extend(_item(item, hit, fold_lines))
    return "\n".join(out).rstrip() + "\n"


def _item(item: Item, hit: str | None, fold_lines: int) -> list[str]:
    if item.kind == "marker":
        return ["---", f"*{text(item.label)}:* {code(item.text)} (line {item.line_no})", "---", ""]
    status = f" · **{text(item.status)}**" if item.status else ""
    when = f" · {code(item.at)}" if item.at else ""
    folded = fold(item.text, item.kind, fold_lines)
    lines = [f"### {text(item.label)} · line {item.line_no}{status}{when}{_hits(folded.shown, hit)}", ""]
    fence = _fence(folded.shown)
    lines += [fence, folded.shown, fence]
    if folded.hidden_lines:
        lines += ["", f"*… {folded.hidden_lines} more line(s) folded*"]
    return [*lines, ""]
