"""A conversation as Markdown: a heading per item, tool calls and outputs in code fences, long ones folded."""

from __future__ import annotations

import re

from pipeline.show.conversation import Conversation, Item
from pipeline.show.folding import FOLD_LINES, fold

CODE_KINDS = ("tool call", "tool result")


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.split("\n"))


def _mark(text: str, hit: str | None) -> str:
    return text.replace(hit, f"<mark>{hit}</mark>") if hit else text


def conversation_markdown(conv: Conversation, *, hit: str | None = None, fold_lines: int = FOLD_LINES) -> str:
    out = [f"# Session `{conv.session_id}`", "",
           f"- format: {conv.format}", f"- project: {conv.slug or '-'}", f"- cwd: `{conv.cwd or '-'}`",
           f"- span: {conv.first_at or '?'} → {conv.last_at or '?'}",
           f"- lines {conv.start}–{conv.end} of {conv.line_count}"]
    if conv.parent_session_id:
        out.append(f"- started from `{conv.parent_session_id}`")
    out.append("")
    if conv.empty_note():
        out += [f"*{conv.empty_note()}*", ""]
    for item in conv.items:
        out.extend(_item(item, hit, fold_lines))
    return "\n".join(out).rstrip() + "\n"


def _item(item: Item, hit: str | None, fold_lines: int) -> list[str]:
    if item.kind == "marker":
        return ["---", f"*{item.label}: {item.text}* (line {item.line_no})", "---", ""]
    status = f" · **{item.status}**" if item.status else ""
    when = f" · {item.at}" if item.at else ""
    has_hit = " · contains the hit" if hit and hit in item.text and item.kind in CODE_KINDS else ""
    lines = [f"### {item.label} · line {item.line_no}{status}{when}{has_hit}", ""]
    folded = fold(item.text, item.kind, fold_lines)
    if item.kind in CODE_KINDS:
        fence = _fence(folded.shown)
        lines += [fence, folded.shown, fence]
    elif item.kind in ("thinking", "other"):
        lines.append(_quote(_mark(folded.shown, hit)))
    else:
        lines.append(_mark(folded.shown, hit))
    if folded.hidden_lines:
        lines += ["", f"*… {folded.hidden_lines} more line(s) folded*"]
    return [*lines, ""]
