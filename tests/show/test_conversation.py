"""`pipeline show`: a session read as a conversation, and its three renderings."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.errors import UsageError
from pipeline.show.conversation import conversation
from pipeline.show.folding import fold
from pipeline.show.markdown import conversation_markdown
from pipeline.show.page import conversation_html
from pipeline.show.terminal import print_conversation
from pipeline.warehouse import db, ingest
from tests.helpers import write_jsonl

T = "2026-10-01T10:00:0{}.000Z"


def claude(n: int, kind: str, content, **extra) -> dict:
    return {"type": kind, "sessionId": "S", "cwd": "/x", "uuid": f"u{n}", "timestamp": extra.pop("at", T.format(n % 10)),
            "version": "2.1.0", "message": {"role": kind, "content": content, **extra}}


@pytest.fixture
def session(warehouse, tmp_path: Path):
    write_jsonl(tmp_path / "p" / "S.jsonl", [
        claude(1, "user", "run the tests <script>alert(1)</script>"),
        claude(2, "assistant", [{"type": "thinking", "thinking": "the suite first"},
                                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -q"}}],
               id="m1", model="claude-sonnet-4-5"),
        claude(3, "user", [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                            "content": "Exit code 1\n" + "\n".join(f"line {i}" for i in range(40))}]),
        claude(4, "assistant", [{"type": "tool_use", "id": "t2", "name": "Agent",
                                 "input": {"subagent_type": "Explore", "description": "find the config", "prompt": "look"}}],
               id="m2", model="claude-sonnet-4-5"),
        claude(5, "user", [{"type": "tool_result", "tool_use_id": "t2", "is_error": True,
                            "content": "The user doesn't want to proceed with this tool use. The tool use was rejected."}]),
        {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted", "timestamp": T.format(6),
         "compactMetadata": {"trigger": "auto", "preTokens": 1234}, "sessionId": "S"},
        claude(7, "user", "<local-command-stdout>ok</local-command-stdout>"),
        claude(8, "user", "next day now", at="2026-10-02T09:00:00.000Z"),
    ])
    ingest.ingest(warehouse, [tmp_path / "p"])
    return warehouse


def test_a_session_reads_as_a_conversation(session) -> None:
    conv = conversation(session, "S")
    got = [(i.line_no, i.kind, i.label, i.status) for i in conv.items]
    assert got == [
        (1, "marker", "day", ""),
        (1, "user", "user", ""),
        (2, "thinking", "assistant (thinking)", ""),
        (2, "tool call", "tool call Bash", ""),
        (3, "tool result", "tool result", "exit 1"),
        (4, "tool call", "subagent Explore: find the config", ""),
        (5, "tool result", "tool result", "rejected"),
        (6, "marker", "compaction", ""),
        (7, "other", "user (harness)", ""),
        (8, "marker", "new day", ""),
        (8, "user", "user", ""),
    ]
    assert "1,234 tokens before" in conv.items[7].text


def test_a_range_and_its_errors(session) -> None:
    conv = conversation(session, "S", 3, 5)
    assert {i.line_no for i in conv.items} == {3, 4, 5} and (conv.start, conv.end) == (3, 5)
    for args, message in ((("nope",), "unknown session"), (("S", 5, 3), "bad range"), (("S", 99, 100), "past its end")):
        with pytest.raises(UsageError, match=message):
            conversation(session, *args)


def test_folding_keeps_the_first_lines_and_counts_the_rest() -> None:
    text = "\n".join(str(i) for i in range(30))
    f = fold(text, "tool result", 12)
    assert f.shown.split("\n") == [str(i) for i in range(12)] and f.hidden_lines == 18
    assert f.shown + "\n" + f.hidden == text
    assert fold(text, "user", 12).hidden_lines == 0  # what a person wrote is never folded
    assert fold(text, "tool result", 0).hidden_lines == 0
    assert fold("x " * 5000, "tool result", 12).hidden_lines > 0  # one very long line is folded too


def test_the_page_is_self_contained_escaped_and_folds_outputs(session) -> None:
    page = conversation_html(conversation(session, "S"), hit="pytest")
    assert page.startswith("<!DOCTYPE html>") and "<script>" not in page and "&lt;script&gt;" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched
    assert "<mark>pytest</mark>" in page
    assert "<details><summary>29 more line(s)</summary>" in page
    assert 'class="badge rejected">rejected<' in page and 'class="badge bad">exit 1<' in page
    assert '<code class="id">S</code>' in page


def test_markdown_fences_every_text_and_locates_the_hit_without_marking_data(session) -> None:
    md = conversation_markdown(conversation(session, "S"), hit="tests")
    assert "### tool call Bash · line 2" in md and "```\npytest -q\n```" in md
    assert "<mark>" not in md and "*… 29 more line(s) folded*" in md
    assert re.search(r"### user · line \d+ · `[^`]+` · hit at character \d+", md)
    fence = conversation_markdown(conversation(session, "S"))  # a fence longer than any backtick run inside
    assert fence.count("```") % 2 == 0


def test_the_terminal_rendering_shows_every_item(session) -> None:
    out = io.StringIO()
    print_conversation(conversation(session, "S"), Console(file=out, width=100, color_system=None), hit="pytest")
    text = out.getvalue()
    assert "tool call Bash" in text and "[exit 1]" in text and "[rejected]" in text
    assert "29 more line(s)" in text and "compaction" in text and "new day" in text


def test_a_subagent_is_named_where_it_starts(wh: Path) -> None:
    with db.reading(wh) as con:
        parent, child = con.execute(
            "SELECT parent_session_id, session_id FROM sessions WHERE parent_session_id IN (SELECT session_id FROM sessions) "
            "ORDER BY 1 LIMIT 1").fetchone()  # type: ignore[misc]
        conv = conversation(con, parent)
    starts = [i for i in conv.items if i.label == "subagent starts"]
    assert child in [i.session_link for i in starts]
    assert all(f"pipeline show {i.session_link}" in i.text for i in starts)


def test_every_sample_session_renders_in_every_form(wh: Path) -> None:
    with db.reading(wh) as con:
        ids = [r[0] for r in con.execute("SELECT session_id FROM sessions").fetchall()]
        for sid in ids:
            conv = conversation(con, sid)
            assert bool(conv.items) != bool(conv.empty_note()), sid
            assert (conv.empty_note() or "") in conversation_html(conv)
            conversation_markdown(conv)
            json.dumps(conv.to_json())
            print_conversation(conv, Console(file=io.StringIO(), width=80))
