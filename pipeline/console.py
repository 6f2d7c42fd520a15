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
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# rich is imported where it is used, not here: a piped `pipeline sessions` of thousands of rows writes
# plain text and needs none of it (importing it is a twentieth of that command's time).

# C0 and C1 controls but \t and \n; zero-width and direction marks, embeddings, overrides and isolates;
# the byte-order mark; the line and paragraph separators a terminal would break on.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
ESCAPE_STYLE = "reverse"


def console(width: int | None = None, *, stderr: bool = False) -> Console:
    """A rich console that prints every string as text: no markup, no emoji codes, no highlighting."""
    from rich.console import Console

    return Console(width=width, stderr=stderr, markup=False, emoji=False, highlight=False)


def escape_of(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value: Any, style: str = "") -> Text:
    """`value` as a rich Text that shows exactly its characters (None as the empty string)."""
    from rich.text import Text

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


@dataclass(frozen=True)
class Column:
    header: str
    right: bool = False  # numbers line up on the right
    max_width: int | None = None  # longer values end in an ellipsis


def grid_widths(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[int]:
    """The width of each column of these rows (a header's at least, a column's max_width at most);
    a table needs their sum and two spaces between columns."""
    widths = []
    for j, column in enumerate(columns):
        values = [row[j] for row in rows]
        plain = "".join(values)
        if plain.isascii() and not _HIDDEN.search(plain):
            widest = max(map(len, values), default=0)
        else:
            widest = max(map(_len, values), default=0)
        width = max(widest, _len(column.header))
        widths.append(min(width, column.max_width) if column.max_width else width)
    return widths


def print_grid(out: Console | None, columns: Sequence[Column], rows: Sequence[Sequence[str]],
               widths: Sequence[int] | None = None) -> None:
    """A table of plain columns: a bold header, a rule, a line per row, every value shown as
    :func:`visible` shows it. rich's Table measures and wraps every cell as an object of its own (twelve
    seconds for the 6,844 sessions of a heavy home); here the columns are padded a whole column at a
    time, and only a row with characters to escape goes through rich, as styled pieces. With `out`
    None (output that is not a terminal) the grid is written to stdout without styles, and rich is
    loaded only if a row has a character to escape."""
    widths = list(widths) if widths is not None else grid_widths(columns, rows)
    last = len(columns) - 1
    header = "  ".join(_fit(c.header, w, c.right, i == last) for i, (c, w) in enumerate(zip(columns, widths, strict=True)))
    if out is None:
        sys.stdout.write(header + "\n")
    else:
        out.print(header, style="bold", no_wrap=True, overflow="ignore", crop=False, soft_wrap=True)
    padded = []
    for j, (column, width) in enumerate(zip(columns, widths, strict=True)):
        values = [row[j] for row in rows]
        if "".join(values).isascii() and max(map(len, values), default=0) <= width:  # nothing to cut or measure
            padded.append([v.rjust(width) for v in values] if column.right else
                          values if j == last else [v.ljust(width) for v in values])
        else:
            padded.append([_fit(v, width, column.right, j == last) for v in values])
    lines = ["  ".join(cells) for cells in zip(*padded, strict=True)] if padded else []
    plain = ["  ".join("─" * w for w in widths)]
    for row, line in zip(rows, lines, strict=True):
        if _HIDDEN.search("\n".join(row)):
            _write(out, plain)
            plain = []
            out = out if out is not None else console(100_000)
            out.print(_styled_row(columns, widths, row), no_wrap=True, overflow="ignore", crop=False, soft_wrap=True)
        else:
            plain.append(line)
    _write(out, plain)


def _write(out: Console | None, lines: list[str]) -> None:
    # Lines without a character to escape or a style are written as they are: rich would make an
    # object of every line only to write the same characters.
    if lines:
        file = out.file if out is not None else sys.stdout
        file.write("\n".join(lines) + "\n")
        file.flush()


def _styled_row(columns: Sequence[Column], widths: Sequence[int], row: Sequence[str]) -> Text:
    from rich.text import Text

    line = Text()
    for i, (column, width, value) in enumerate(zip(columns, widths, row, strict=True)):
        cell = visible(value)
        cell.truncate(width, overflow="ellipsis")
        gap = " " * (width - cell.cell_len)
        if column.right:
            line.append(gap)
        line.append_text(cell)
        if not column.right and i != len(columns) - 1:
            line.append(gap)
        if i != len(columns) - 1:
            line.append("  ")
    return line


def _len(value: str) -> int:
    hidden = _HIDDEN.search(value) is not None
    if value.isascii() and not hidden:
        return len(value)
    from rich.cells import cell_len

    return cell_len(shown(value)) if hidden else cell_len(value)


def _fit(value: str, width: int, right: bool, last: bool) -> str:
    """`value` cut to `width` with an ellipsis, padded to it (the last column on the left is not padded)."""
    if value.isascii():
        n = len(value)
        if n > width:
            value, n = value[: width - 1] + "…", width
    else:
        from rich.cells import cell_len, set_cell_size

        n = cell_len(value)
        if n > width:
            value, n = set_cell_size(value, width - 1) + "…", width
    gap = " " * (width - n)
    return gap + value if right else value if last else value + gap


__all__ = ["ESCAPE_STYLE", "Column", "console", "escape_of", "grid_widths", "print_grid", "shown", "visible"]
