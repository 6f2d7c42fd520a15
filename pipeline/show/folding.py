"""How long texts are folded when a conversation is shown: what is kept, and how many lines are hidden."""

from __future__ import annotations

from dataclasses import dataclass

# Lines of a tool's output (and of a tool call's input, and of thinking) shown before the rest is folded.
FOLD_LINES = 12
FOLDED_KINDS = ("tool result", "tool call", "thinking", "other")


@dataclass(frozen=True)
class Folded:
    shown: str
    hidden: str  # the rest, "" when nothing was folded
    hidden_lines: int


def fold(text: str, kind: str, lines: int = FOLD_LINES) -> Folded:
    """`text` cut after `lines` lines when its kind is folded (0 folds nothing); a single very long line
    is cut too, at 160 characters a line's worth."""
    text = text.strip("\n")
    if lines <= 0 or kind not in FOLDED_KINDS:
        return Folded(text, "", 0)
    if kind == "other":  # what the harness wrote (context, notices): a glance is enough
        lines = min(lines, 6)
    parts = text.split("\n")
    if len(parts) > lines:
        return Folded("\n".join(parts[:lines]), "\n".join(parts[lines:]), len(parts) - lines)
    limit = lines * 160
    if len(text) > limit:
        cut = text.rfind(" ", limit - 200, limit)
        cut = cut if cut > 0 else limit
        return Folded(text[:cut], text[cut:], text[cut:].count("\n") + 1)
    return Folded(text, "", 0)
