"""Do the views show what the transcript holds? Every renderer's output for some sessions, compared
with the raw values of their lines. `pipeline check-real` runs it on real transcripts as the invariant
"views show values" (registered here: the renderers sit above the warehouse's own checks).

For each item a conversation shows (a message, thinking, a tool call's command, a tool's output):

* the item's text is made of the line's own JSON string values (each of its lines occurs in one of
  them, or in a JSON document inside one, as Codex nests its arguments); a tool call is a view of
  its input given on purpose (its command, an Edit's diff: `readable.tool_input`) and is left out;
* the terminal (`show`), Markdown (`show --markdown`, rendered by a CommonMark parser) and HTML
  (`show --html`, parsed) views each show that text whole, character for character: on a terminal
  as `pipeline.console.shown` writes it (control characters as escapes; a tab as the blanks to the
  next tab stop); in Markdown with the line endings and NUL CommonMark itself normalises; the
  blank lines that open or close an item are not part of a view;
* `read` returns every line as stored, and `sql` prints it as stored.

Nothing is folded for the comparison (`fold_lines=0`).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import duckdb

from pipeline.warehouse import checks


@dataclass
class FidelityReport:
    sessions: int = 0
    compared: dict[str, int] = field(default_factory=dict)
    differ: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def count(self, renderer: str, ok: bool, where: str) -> None:
        self.compared[renderer] = self.compared.get(renderer, 0) + 1
        if not ok:
            self.differ[renderer] = self.differ.get(renderer, 0) + 1
            if len(self.examples) < 10:
                self.examples.append(f"{renderer}: {where}")

    @property
    def total(self) -> int:
        return sum(self.compared.values())

    @property
    def differing(self) -> int:
        return sum(self.differ.values())


class _Cursor:
    """Finds texts in `haystack` in order, each from where the one before it was found."""

    def __init__(self, haystack: str) -> None:
        self.haystack = haystack
        self.at = 0

    def find(self, needle: str) -> bool:
        at = self.haystack.find(needle, self.at)
        if at < 0:
            at = self.haystack.find(needle)  # out of order (a marker between): still shown
            if at < 0:
                return False
            return True
        self.at = at
        return True


def _spaced(text: str) -> str:
    """A terminal shows a tab as spaces to the next tab stop: runs of blanks compare as one."""
    return re.sub(r"[ \t]+", " ", text).strip(" ")


def _commonmark(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")


def sample(con: duckdb.DuckDBPyConnection, per_format: int = 10) -> list[str]:
    """Sessions of each format in a fixed order that is not their size or their name (a spread)."""
    return [r[0] for r in con.execute(
        "SELECT session_id FROM (SELECT session_id, format, row_number() OVER (PARTITION BY format ORDER BY hash(session_id)) AS k "
        "FROM sessions WHERE line_count > 0) WHERE k <= ? ORDER BY format, k", [per_format]).fetchall()]


@contextlib.contextmanager
def _widths_measured_once() -> Iterator[None]:
    """rich measures the width of the same long texts again and again while it lays out a table or a
    conversation (a line of 100 kB holding one character outside its single-width ranges is summed
    character by character each time): for the comparison, each text is measured once, with the
    same answer (per distinct character rather than per character where no joiner or variation
    selector can change a width), and rich's own function is put back afterwards."""
    import rich.cells as cells

    own = cells._cell_len
    known: dict[tuple[str, str], int] = {}

    def measured(text: str, unicode_version: str = "auto") -> int:
        width = known.get((text, unicode_version))
        if width is None:
            if cells._is_single_cell_widths(text):
                width = len(text)
            elif "\u200d" not in text and "\ufe0f" not in text:
                size = cells.get_character_cell_size
                width = sum(size(c, unicode_version) * n for c, n in Counter(text).items())
            else:
                width = own(text, unicode_version)
            known[(text, unicode_version)] = width
        return width

    cells._cell_len = measured
    try:
        yield
    finally:
        cells._cell_len = own


def compare(con: duckdb.DuckDBPyConnection, session_ids: list[str]) -> FidelityReport:
    """Every renderer against the raw values of these sessions' lines."""
    with _widths_measured_once():
        return _compare(con, session_ids)


def _compare(con: duckdb.DuckDBPyConnection, session_ids: list[str]) -> FidelityReport:
    from markdown_it import MarkdownIt
    from rich.cells import cell_len

    from pipeline.cli import sql as sql_cli
    from pipeline.console import console, shown
    from pipeline.consolidator.quotes import searchable_strings
    from pipeline.consolidator.tools import read_lines
    from pipeline.show.conversation import conversation
    from pipeline.show.markdown import conversation_markdown
    from pipeline.show.page import conversation_html
    from pipeline.show.terminal import print_conversation
    from pipeline.templates.text import page_text

    report = FidelityReport()
    markdown = MarkdownIt("commonmark")
    for sid in session_ids:
        report.sessions += 1
        conv = conversation(con, sid)
        raw = dict(con.execute("SELECT line_no, text FROM lines WHERE session_id = ? ORDER BY line_no", [sid]).fetchall())
        out = io.StringIO()
        # wide enough that no line wraps, and no wider (rich pads every line to the width)
        term = console(max((cell_len(line) for i in conv.items for line in shown(i.text).split("\n")), default=80) + 40)
        term.file = out
        print_conversation(conv, term, fold_lines=0)
        terminal = _spaced(out.getvalue())
        md = page_text(markdown.render(conversation_markdown(conv, fold_lines=0)))
        page = page_text(conversation_html(conv, fold_lines=0))
        # Items are shown in order: each is looked for from where the one before it was found.
        seen = {"show": _Cursor(terminal), "show --markdown": _Cursor(md), "show --html": _Cursor(page)}
        for item in conv.items:
            if item.kind == "marker" or not item.text.strip():
                continue
            where = f"{sid} line {item.line_no} ({item.label})"
            if item.kind != "tool call":  # a call is shown as its command and compact JSON: a view of its input
                line = raw.get(item.line_no, "")
                is_json, values = searchable_strings(line)  # as a quote is verified: values, one level in
                values = values if is_json else [line]
                ok = all(any(line in v for v in values) for line in item.text.split("\n") if line.strip())
                report.count("value", ok, where)
            text = item.text.strip("\n")  # a view starts and ends at the item's first and last line
            report.count("show", all(seen["show"].find(_spaced(line)) for line in shown(text).split("\n")), where)
            report.count("show --markdown", seen["show --markdown"].find(_commonmark(text)), where)
            report.count("show --html", seen["show --html"].find(text), where)
        n = len(raw)
        got = read_lines(con, sid, 1, n, width=None, redact=False) if n else {"lines": []}
        for entry in got["lines"]:  # a line cut at the tool's width is its stored text's beginning
            stored = raw[entry["line"]]
            ok = stored.startswith(entry["text"]) if entry["cut"] else entry["text"] == stored
            report.count("read", ok, f"{sid} line {entry['line']}")
        first = list(raw.items())[:40]
        out = io.StringIO()
        table_console = console(max((cell_len(shown(t)) for _, t in first), default=80) + 40)
        table_console.file = out
        with contextlib.redirect_stderr(io.StringIO()):  # its row count
            sql_cli.table(["text"], [(text,) for _, text in first], out=table_console)
        printed = _spaced(out.getvalue())
        for line_no, text in first:
            report.count("sql", _spaced(shown(text)) in printed, f"{sid} line {line_no}")
    return report


@checks.invariant("views show values")
def views_show_values(real: checks.RealSet) -> checks.CheckResult:
    """Every renderer (`show` in the terminal, Markdown and HTML, `read`, `sql`) shows the values of
    ten sessions of each format as the transcript holds them."""
    ids = sample(real.con)
    got = compare(real.con, ids)
    per = ", ".join(f"{name} {n:,}" for name, n in sorted(got.compared.items()))
    summary = (f"{got.total:,} values of {got.sessions} sessions compared with their lines ({per}); "
               f"{got.differing} differ")
    return checks.CheckResult("views show values", got.differing == 0, summary,
                              {"sessions": got.sessions, "compared": got.compared, "differ": got.differ}, got.examples)


__all__ = ["FidelityReport", "compare", "sample", "views_show_values"]
