"""Data is never markup on a terminal: hostile values through every terminal renderer come out as
they are (control and invisible characters as their styled escapes, `pipeline.console.shown`)."""

from __future__ import annotations

import io
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from pipeline import console as console_module
from pipeline.cli import search as search_cli
from pipeline.cli import sql as sql_cli
from pipeline.cli import warehouse as warehouse_cli
from pipeline.console import escape_of, shown, visible
from pipeline.show.conversation import Conversation, Item
from pipeline.show.terminal import print_conversation
from tests.strategies import HOSTILE, value


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.delenv("NO_COLOR", raising=False)


def _capture(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """Every console the package makes writes to one buffer, as a pipe would (no styles)."""
    buf = io.StringIO()
    real = console_module.console

    def to_buffer(width: int | None = None, *, stderr: bool = False) -> Console:
        made = real(width or 400, stderr=stderr)
        made.file = buf
        return made

    monkeypatch.setattr(console_module, "console", to_buffer)
    return buf


def test_visible_escapes_only_what_a_terminal_cannot_show() -> None:
    assert shown("if (!tree[dir]) [bold]x[/bold] :smile:") == "if (!tree[dir]) [bold]x[/bold] :smile:"
    assert shown("a\x1b[31mb") == "a\\x1b[31mb" and shown("\u202eabc") == "\\u202eabc"
    assert [s.style for s in visible("a\x1bb").spans] == ["reverse"]
    assert escape_of("\x00") == "\\x00" and escape_of("\u200b") == "\\u200b"
    assert shown("line one\nline two") == "line one\nline two"


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(v=value, header=value)
def test_sql_table_shows_values_and_headers_as_they_are(v: str, header: str, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    buf = _capture(monkeypatch)
    sql_cli.table([header or "h"], [(v,)])
    capsys.readouterr()
    out = buf.getvalue()
    assert shown(v) in out and shown(header or "h") in out


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(version=value, slug=value.filter(lambda v: cell_len(shown(v)) <= 26), model=value.filter(lambda v: cell_len(shown(v)) <= 26))
def test_sessions_table_shows_versions_projects_and_models_as_they_are(
    version: str, slug: str, model: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    buf = _capture(monkeypatch)
    # the project and models columns are 28 wide (a summary: --json has every value whole)
    entry = {"sessionId": "S1", "slug": slug, "firstAt": "2026-10-01T10:00:00Z", "models": [model],
             "harnessVersions": [version], "prompts": 1, "turns": 2, "toolCalls": 3, "totalTokens": 4, "cost": 0.5,
             "costComplete": True, "lineCount": 9, "linkedMemories": []}
    warehouse_cli._sessions_table([entry], pending=False)
    # piped, the grid is written to stdout as plain text; a row with a character to escape goes through a console
    out = capsys.readouterr().out + buf.getvalue()
    assert shown(version) in out and shown(slug) in out and shown(model) in out


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(before=value, match=value.filter(bool), after=value)
def test_search_hits_show_the_text_and_mark_the_match_by_style_only(
    before: str, match: str, after: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    buf = _capture(monkeypatch)
    hit = {"sessionId": "S1", "project": "p", "line": 3, "column": len(before) + 1, "at": None, "role": "tool",
           "before": before, "match": match, "after": after}
    search_cli._print_hits([hit])
    place, *body = buf.getvalue().split("\n")[:-1]
    assert place.startswith("S1  p  3:") and f"+{len(match)}" in place
    assert "\n".join(line.removeprefix("    ") for line in body) == shown(before + match + after)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(text=value, label=value)
def test_show_prints_items_as_they_are(text: str, label: str, monkeypatch: pytest.MonkeyPatch) -> None:
    buf = io.StringIO()
    out = console_module.console(400)
    out.file = buf
    conv = Conversation(session_id="S1", slug="p", format="claude-code", cwd=None, first_at=None, last_at=None,
                        line_count=1, start=1, end=1,
                        items=[Item(line_no=1, at=None, kind="tool result", label=label or "Bash", text=text)])
    print_conversation(conv, out, fold_lines=0)
    printed = buf.getvalue()
    for line in shown(text).split("\n"):
        assert line.rstrip() in printed
    assert shown(label or "Bash") in printed


# -- Markdown and HTML pages: what a viewer shows is the value ------------------------------------------------
class _Shown(HTMLParser):
    """The text of a page and whether its tags balance (void elements aside)."""

    VOID = frozenset({"meta", "br", "img", "hr", "input", "link", "col", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.open: list[str] = []
        self.bad: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.bad.append(tag)
        else:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _page(markup: str) -> _Shown:
    parsed = _Shown()
    parsed.feed(markup)
    parsed.close()
    return parsed


def _conv(text: str, label: str) -> Conversation:
    return Conversation(session_id="S1", slug=label[:30] or "p", format="claude-code", cwd=label, first_at=None,
                        last_at=None, line_count=2, start=1, end=2,
                        items=[Item(line_no=1, at=None, kind="user", label="user", text=text),
                               Item(line_no=2, at=None, kind="tool result", label=label or "tool result", text=text)])


# Markdown has no way to carry NUL or a lone carriage return (CommonMark replaces and splits them): the
# Markdown view is for reading, the terminal and JSON views show those characters.
MD_HOSTILE = [h for h in HOSTILE if not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in h)]
md_value = st.lists(st.one_of(st.sampled_from(MD_HOSTILE), st.text(st.characters(
    exclude_categories=("Cs", "Cc", "Zl", "Zp"), exclude_characters="\t\n"), max_size=6)), max_size=8).map("".join)


@settings(max_examples=60, deadline=None)
@given(text=md_value.filter(lambda v: v.strip()), label=md_value.filter(lambda v: v.strip()))
def test_show_markdown_renders_every_value_as_itself(text: str, label: str) -> None:
    from markdown_it import MarkdownIt

    from pipeline.show.markdown import conversation_markdown

    rendered = MarkdownIt("commonmark").render(conversation_markdown(_conv(text, label), fold_lines=0))
    page = _page(rendered)
    shown_text = "".join(page.text)
    assert not page.bad and not page.open
    assert text in shown_text  # in a fence, byte for byte
    assert label.strip() in shown_text.replace("\n", " ")  # escaped text or inline code
    assert "<script>" not in rendered


@settings(max_examples=60, deadline=None)
@given(text=value, label=value, hit=st.sampled_from(["", "[dir]", "<b>", "&amp;", "x"]))
def test_show_html_page_has_balanced_tags_and_every_value_as_itself(text: str, label: str, hit: str) -> None:
    from pipeline.show.page import conversation_html

    page = _page(conversation_html(_conv(text, label), hit=hit or None, fold_lines=0))
    shown_text = "".join(page.text)
    assert not page.bad and page.open == []
    assert text in shown_text and label in shown_text


@settings(max_examples=40, deadline=None)
@given(cells=st.lists(st.tuples(value, value), min_size=1, max_size=4), header=md_value.filter(bool))
def test_the_night_reports_tables_show_every_cell_masked_and_escaped(cells: list[tuple[str, str]], header: str) -> None:
    import polars as pl

    from pipeline.nightly.report import html_table
    from pipeline.secrets.redact import redacted

    frame = pl.DataFrame({"session_id": [a for a, _ in cells], header: [b for _, b in cells]},
                         schema={"session_id": pl.String, header: pl.String})
    page = _page(html_table(frame, empty="none", ids=("session_id",)))
    assert not page.bad and page.open == []
    shown_text = "".join(page.text)
    for a, b in cells:
        assert redacted(a) in shown_text and redacted(b) in shown_text
    assert redacted(header) in shown_text


@settings(max_examples=40, deadline=None)
@given(before=value, mark=value.filter(bool), after=value, label=value, sid=value)
def test_an_evidence_block_shows_its_text_and_marks_only_the_quote(before: str, mark: str, after: str, label: str,
                                                                    sid: str) -> None:
    from pipeline.nightly.evidence import EvidenceView, Shown, evidence_html

    view = EvidenceView(session_id=sid or "S", quote=mark, slug=label, line_no=3, at=None,
                        shown=[Shown(2, label, before), Shown(3, label, before, mark, after, kind="tool result")])
    markup = evidence_html(view)
    page = _page(markup)
    assert not page.bad and page.open == []
    assert before + mark + after in "".join(page.text)
    assert markup.count("<mark>") == 1


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(rows=st.lists(st.tuples(value, value, st.integers(0, 10**9).map(str)), min_size=1, max_size=6))
def test_a_grid_shows_every_value_on_its_own_line_in_aligned_columns(
    rows: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    buf = _capture(monkeypatch)
    columns = [console_module.Column("a"), console_module.Column("b", max_width=12), console_module.Column("n", right=True)]
    console_module.print_grid(console_module.console(), columns, [list(r) for r in rows])
    header, rule, *lines = buf.getvalue().split("\n")[:-1]
    assert header.split() == ["a", "b", "n"] and set(rule) <= {"─", " "}
    assert len(lines) == len(rows)
    widths = [cell_len(part) for part in rule.split("  ")]
    for (a, b, n), line in zip(rows, lines, strict=True):
        assert cell_len(line) == sum(widths) + 4  # every column padded to its width, the number on the right
        assert line.startswith(shown(a)) and line.endswith(n)
        b_shown = shown(b)
        assert b_shown in line if cell_len(b_shown) <= 12 else ("…" in line and shown(b)[:1] in line)
