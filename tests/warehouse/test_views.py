"""The analyst views on what real logs do: every exit-status format, harness-written user lines,
Codex's doubled messages, and the 2025 Codex format."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.warehouse import db, ingest, prompt_rules
from tests.helpers import EXPECTED, write_jsonl

QUIRKS = EXPECTED["real_log_quirks"]


def rows(con, sql: str, params: object = None) -> list[tuple]:
    return con.execute(sql, params).fetchall() if params is not None else con.execute(sql).fetchall()


@pytest.mark.parametrize("status", QUIRKS["exit_statuses"], ids=lambda s: f"{s['form']}-{s['line']}")
def test_exit_code_and_is_error_for_each_status_format(wh: Path, status: dict) -> None:
    with db.reading(wh) as con:
        got = rows(con, "SELECT exit_code, is_error FROM tool_results WHERE session_id = ? AND line_no = ?",
                   [status["sessionId"], status["line"]])
    assert got == [(status["exit_code"], status["is_error"])]


def test_is_error_is_exactly_the_listed_failures(wh: Path) -> None:
    with db.reading(wh) as con:
        failed = set(rows(con, "SELECT session_id, line_no FROM tool_results WHERE is_error"))
        unknown = rows(con, "SELECT count(*) FROM tool_results WHERE is_error IS NULL")[0][0]
    assert failed == {(e["sessionId"], e["line"]) for e in EXPECTED["tool_errors"]}
    assert unknown == 0


def test_every_status_format_is_planted() -> None:
    forms = {s["form"] for s in QUIRKS["exit_statuses"]}
    assert {"Exit code: N", "Process exited with code N", "metadata.exit_code", "failed in sandbox",
            "apply_patch verification failed", "Process running with session ID", "Claude Code Exit code N"} <= forms


def test_harness_written_user_lines_are_never_prompts(wh: Path) -> None:
    with db.reading(wh) as con:
        for line in QUIRKS["harness_user_lines"]:
            got = rows(con, "SELECT role, is_prompt FROM messages WHERE session_id = ? AND line_no = ?",
                       [line["sessionId"], line["line"]])
            assert got == [("user", False)], line
        for line in QUIRKS["not_harness_prompts"]:
            got = rows(con, "SELECT is_prompt FROM messages WHERE session_id = ? AND line_no = ?", [line["sessionId"], line["line"]])
            assert got == [(True,)], line
    kinds = {line["kind"] for line in QUIRKS["harness_user_lines"]}
    assert {"turn_aborted", "user_action", "user_shell_command", "bash-stdout", "task-notification", "compact summary"} <= kinds


def test_sessions_and_messages_count_prompts_alike_everywhere(wh: Path) -> None:
    with db.reading(wh) as con:
        disagree = rows(con, "SELECT s.session_id FROM sessions s LEFT JOIN (SELECT session_id, count(*) n FROM messages "
                             "WHERE is_prompt GROUP BY 1) m USING (session_id) WHERE s.prompts <> coalesce(m.n, 0)")
    assert disagree == []


def test_codex_doubled_assistant_message_is_one_message(wh: Path) -> None:
    d = QUIRKS["doubled_assistant_message"]
    with db.reading(wh) as con:
        got = rows(con, "SELECT line_no FROM messages WHERE session_id = ? AND line_no IN (?, ?)",
                   [d["sessionId"], d["event_line"], d["item_line"]])
        texts = rows(con, "SELECT text, count(*) FROM messages WHERE session_id = ? AND role = 'assistant' GROUP BY 1 "
                          "HAVING count(*) > 1", [d["sessionId"]])
    assert got == [(d["item_line"],)]
    assert texts == []


def test_the_2025_codex_format_is_read_like_the_newer_one(wh: Path) -> None:
    sid = QUIRKS["codex_2025_format"]
    with db.reading(wh) as con:
        fmt, model, cwd = rows(con, "SELECT format, model, cwd FROM sessions WHERE session_id = ?", [sid])[0]
        prompts = rows(con, "SELECT text FROM messages WHERE session_id = ? AND is_prompt ORDER BY line_no", [sid])
        calls = rows(con, "SELECT c.name, r.exit_code, r.is_error FROM tool_calls c JOIN tool_results r USING (session_id, call_id) "
                          "WHERE session_id = ? ORDER BY r.line_no", [sid])
    assert (fmt, model) == ("codex", None) and cwd == "/home/ana/src/infra-tools"
    assert [p[0] for p in prompts] == ["Write a README section on restoring one file from a backup.", "Good."]
    assert calls == [("shell", 0, False), ("shell", 2, True)]


def test_prompt_prefixes_cover_what_the_samples_plant() -> None:
    planted = {"turn_aborted": "<turn_aborted>", "user_action": "<user_action>", "user_shell_command": "<user_shell_command>",
               "bash-stdout": "<bash-stdout>", "task-notification": "<task-notification>"}
    for kind, prefix in planted.items():
        assert prefix in prompt_rules.CLAUDE_NOT_PROMPT + prompt_rules.CODEX_INJECTED, kind


def test_claude_code_exit_code_only_from_an_error_text(warehouse, tmp_path: Path) -> None:
    def result(n: int, text: str, is_error: bool) -> dict:
        block = {"type": "tool_result", "tool_use_id": f"t{n}", "content": text}
        if is_error:
            block["is_error"] = True
        return {"type": "user", "sessionId": "S", "cwd": "/x", "uuid": f"u{n}", "timestamp": "2026-10-01T10:00:00.000Z",
                "message": {"role": "user", "content": [block]}}
    f = write_jsonl(tmp_path / "p" / "S.jsonl", [
        result(1, "Exit code 2\nls: cannot access 'x'", True),
        result(2, "Exit code 0 is what the docs say", False),  # an output that merely mentions a status
        result(3, "File does not exist.", True),
    ])
    ingest.ingest(warehouse, [f])
    assert rows(warehouse, "SELECT call_id, exit_code, is_error FROM tool_results ORDER BY line_no") == [
        ("t1", 2, True), ("t2", None, False), ("t3", None, True)]


def test_codex_status_is_read_from_the_header_not_the_output(warehouse, tmp_path: Path) -> None:
    def out(n: int, text: str) -> dict:
        return {"timestamp": "2026-10-01T10:00:00.000Z", "type": "response_item",
                "payload": {"type": "function_call_output", "call_id": f"c{n}", "output": text}}
    f = write_jsonl(tmp_path / "r.jsonl", [
        {"timestamp": "2026-10-01T10:00:00.000Z", "type": "session_meta", "payload": {"id": "R", "cwd": "/x"}},
        out(1, "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nExit code: 7\n"),
        out(2, "Wall time: 13.9 seconds\naborted by user"),
        out(3, "exec command rejected by user"),
    ])
    ingest.ingest(warehouse, [f])
    assert rows(warehouse, "SELECT call_id, exit_code, is_error FROM tool_results ORDER BY line_no") == [
        ("c1", 0, False), ("c2", None, False), ("c3", None, False)]
