"""Values on a terminal as they are: the one place a terminal view is set up.

rich reads `[bold]…[/bold]`, `[dir]` and `:smile:` in any string it prints as markup or emoji
codes, so a transcript's `if (!tree[dir])` would lose `[dir]`. Every console of the package comes
from :func:`console`, which turns all of that off, and every value goes through :func:`visible`.

What a terminal cannot show as it is (control characters, which would move the cursor or restyle the
screen, and the invisible or direction-changing characters that make text read differently from what
it holds) is written as its escape (`\\x1b`, `\\u202e`) in reverse video: the escape is styled, so it
cannot be confused with the same six characters typed in the data. Newlines and tabs stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.text import Text

# C0 and C1 controls but \t and \n; zero-width and direction marks, embeddings, overrides and isolates;
# the byte-order mark; the line and paragraph separators a terminal would break on.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
ESCAPE_STYLE = "reverse"


def console(width: int | None = None, *, stderr: bool = False) -> Console:
    """A rich console that prints every string as text: no markup, no emoji codes, no highlighting."""
    return Console(width=width, stderr=stderr, markup=False, emoji=False, highlight=False)


def escape_of(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value: Any, style: str = "") -> Text:
    """`value` as a rich Text that shows exactly its characters (None as the empty string)."""
    raw = "" if value is None else value if isinstance(value, str) else str(value)
    text = Text(style=style)
    pos = 0
    for m in _HIDDEN.finditer(raw):
        if m.start() > pos:
            text.append(raw[pos:m.start()])
        text.append(escape_of(m.group()), style=ESCAPE_STYLE)
        pos = m.end()
    if pos < len(raw):
        text.append(raw[pos:])
    return text


def shown(value: Any) -> str:
    """The characters :func:`visible` puts on the screen, as a str (tests compare it with a rendering)."""
    return visible(value).plain


__all__ = ["ESCAPE_STYLE", "console", "escape_of", "shown", "visible"]
