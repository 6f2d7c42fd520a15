"""`show` works out which user lines are prompts from the lines' text, not through the `messages`
view (whose copy relation reads every parent session): both must agree, on every line of a range."""

from __future__ import annotations

from pathlib import Path

import duckdb

from pipeline.show.conversation import _has_message_items, _prompts
from pipeline.warehouse import db


def _lines(con: duckdb.DuckDBPyConnection, sid: str, lo: int, hi: int) -> list[tuple[int, str]]:
    return con.execute("SELECT line_no, text FROM lines WHERE session_id = ? AND line_no BETWEEN ? AND ? ORDER BY line_no",
                       [sid, lo, hi]).fetchall()


def test_prompts_agree_with_the_messages_view_on_every_sample_session(wh: Path) -> None:
    with db.reading(wh) as con:
        sessions = con.execute("SELECT session_id, format, parent_session_id, line_count FROM sessions").fetchall()
        assert any(parent for _, _, parent, _ in sessions), "the samples hold subagents"
        compared = 0
        for sid, fmt, parent, n in sessions:
            for lo, hi in ((1, max(1, n)), (2, max(2, n // 2)), (max(1, n // 2), max(1, n) + 5)):
                view = dict(con.execute(
                    "SELECT line_no, bool_or(is_prompt) FROM messages WHERE session_id = ? AND role = 'user' "
                    "AND line_no BETWEEN ? AND ? GROUP BY line_no", [sid, lo, hi]).fetchall())
                assert _prompts(con, sid, fmt, parent, _lines(con, sid, lo, hi)) == view, (sid, lo, hi)
                compared += len(view)
            has = con.execute("SELECT count(*) FROM messages WHERE session_id = ?", [sid]).fetchone()[0]  # type: ignore[index]
            if fmt == "codex":
                assert _has_message_items(con, sid) == bool(has), sid
        assert compared, "some user messages were compared"


def test_a_subagents_copies_of_its_parents_prompts_are_not_its_prompts(wh: Path) -> None:
    with db.reading(wh) as con:
        copied = con.execute(
            "SELECT m.session_id, m.line_no FROM messages m JOIN sessions s USING (session_id) "
            "WHERE s.parent_session_id IS NOT NULL AND m.role = 'user' AND NOT m.is_prompt").fetchall()
        assert copied, "the samples hold a subagent that opens with a copy of its parent's lines"
        for sid, line_no in copied:
            fmt, parent = con.execute("SELECT format, parent_session_id FROM sessions WHERE session_id = ?", [sid]).fetchone()  # type: ignore[misc]
            assert _prompts(con, sid, fmt, parent, _lines(con, sid, line_no, line_no)) == {line_no: False}
