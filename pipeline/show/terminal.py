"""A conversation in the terminal, with rich: one block per item, tool outputs folded, the hit highlighted."""

from __future__ import annotations

import re

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from pipeline.console import visible
from pipeline.show.conversation import Conversation, Item
from pipeline.show.folding import FOLD_LINES, fold

STYLES = {
    "user": "bold cyan", "assistant": "bold green", "thinking": "italic magenta", "tool call": "bold yellow",
    "tool result": "yellow", "marker": "bold white on blue", "other": "dim",
}
STATUS_STYLES = {"ok": "green", "rejected": "bold magenta", "error": "bold red"}


def _highlight(text: Text, hit: str | None) -> Text:
    if hit:
        text.highlight_regex(re.escape(hit), style="black on yellow")
    return text


def print_conversation(conv: Conversation, console: Console, *, hit: str | None = None, fold_lines: int = FOLD_LINES) -> None:
    head = Text()
    head.append(visible(conv.session_id, style="bold"))
    head.append(visible(f"  {conv.format}  {conv.slug or '-'}\n", style="dim"))
    head.append(f"{conv.first_at or '?'} → {conv.last_at or '?'}  lines {conv.start}–{conv.end} of {conv.line_count}", style="dim")
    if conv.parent_session_id:
        head.append(f"\nstarted from {conv.parent_session_id} (pipeline show {conv.parent_session_id})", style="dim")
    console.print(head)
    if conv.empty_note():
        console.print(Text(conv.empty_note() or "", style="italic"))
    for item in conv.items:
        _item(item, console, hit, fold_lines)


def _item(item: Item, console: Console, hit: str | None, fold_lines: int) -> None:
    if item.kind == "marker":
        title = f" {item.label}: {item.text} "
        if len(title) + 8 <= console.width:
            console.rule(visible(title, style=STYLES["marker"]), style="blue")
        else:  # a rule would cut its title (an id, a command): the marker gets a line of its own
            console.rule(style="blue")
            console.print(visible(title.strip(), style=STYLES["marker"]), overflow="fold")
        return
    line = Text()
    line.append(f"{item.line_no:>5} ", style="dim")
    line.append(visible(item.label, style=STYLES.get(item.kind, "")))
    if item.status:
        line.append(f"  [{item.status}]", style=STATUS_STYLES.get(item.status, "bold red"))
    if item.at:
        line.append(f"  {item.at}", style="dim")
    console.print(line)
    folded = fold(item.text, item.kind, fold_lines)
    body = visible(folded.shown, style="dim" if item.kind in ("thinking", "other") else "")
    console.print(Padding(_highlight(body, hit), (0, 0, 0, 6)))
    if folded.hidden_lines:
        more = f"{folded.hidden_lines} more line(s)"
        if hit and hit in folded.hidden:
            more += f", holding {folded.hidden.count(hit)} hit(s)"
        console.print(Text(f"      … {more} (--fold 0 shows everything)", style="dim italic"))
