"""The analyst views on what real logs do: every exit-status format, harness-written user lines,
Codex's doubled messages, and the 2025 Codex format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


def test_a_code_mode_script_s_result_is_its_text_and_its_first_failing_status(warehouse, tmp_path: Path) -> None:
    """Codex's code mode (`exec`): the output is a list of text items, the script's own header and one per
    command it ran; the view shows their text and reads the first non-zero status."""
    def out(n: int, items: list[str]) -> dict:
        return {"timestamp": "2026-10-01T10:00:00.000Z", "type": "response_item",
                "payload": {"type": "custom_tool_call_output", "call_id": f"c{n}",
                            "output": json.dumps([{"type": "input_text", "text": t} for t in items])}}
    ok = "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nC:\\a\\b.lua\r\n"
    f = write_jsonl(tmp_path / "r.jsonl", [
        {"timestamp": "2026-10-01T10:00:00.000Z", "type": "session_meta", "payload": {"id": "R", "cwd": "/x"}},
        out(1, ["Script completed\nWall time 0.2 seconds\nOutput:\n", ok]),
        out(2, ["Script failed\nWall time 0.2 seconds\nOutput:\n", ok, "Script error:\nExit code: 1\nWall time: 0.2 "
                "seconds\nOutput:\nINFO: Could not find files for the given pattern(s).\r\n"]),
        out(3, ["Script failed\nWall time 0.0 seconds\nOutput:\n", "Script error:\n`tools.x` is not a function"]),
        out(4, ["Script completed\nWall time 0.1 seconds\nOutput:\n", "Plan updated"]),
    ])
    ingest.ingest(warehouse, [f])
    got = rows(warehouse, "SELECT call_id, exit_code, is_error, text FROM tool_results ORDER BY line_no")
    assert [g[:3] for g in got] == [("c1", 0, False), ("c2", 1, True), ("c3", None, True), ("c4", None, False)]
    assert got[0][3] == "Script completed\nWall time 0.2 seconds\nOutput:\n\n" + ok
    assert "INFO: Could not find files" in got[1][3]


def test_a_refusal_or_an_abort_is_rejected_not_a_failure_of_the_tool(warehouse, tmp_path: Path) -> None:
    def claude(n: int, text: str) -> dict:
        return {"type": "user", "sessionId": "S", "cwd": "/x", "uuid": f"u{n}", "timestamp": "2026-10-01T10:00:00.000Z",
                "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text,
                                                         "is_error": True}]}}

    def codex(n: int, text: str) -> dict:
        return {"timestamp": "2026-10-01T10:00:00.000Z", "type": "response_item",
                "payload": {"type": "function_call_output", "call_id": f"c{n}", "output": text}}

    cc = write_jsonl(tmp_path / "p" / "S.jsonl", [
        claude(1, "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
                  "the new_string was NOT written to the file). STOP what you are doing and wait for the user."),
        claude(2, "The user doesn't want to take this action right now. STOP what you are doing and wait for the user."),
        claude(3, "[Request interrupted by user for tool use]"),
        claude(4, "Exit code 1\nThe user doesn't want to proceed"),  # a failure whose output quotes the words
        claude(5, "<tool_use_error>Cancelled: parallel tool call Bash(ls) errored</tool_use_error>"),  # the harness, not the user
    ])
    cx = write_jsonl(tmp_path / "r.jsonl", [
        {"timestamp": "2026-10-01T10:00:00.000Z", "type": "session_meta", "payload": {"id": "R", "cwd": "/x"}},
        codex(1, "Wall time: 13.9 seconds\naborted by user"),
        codex(2, "exec command rejected by user"),
        codex(3, "aborted"),
        codex(4, "Exit code: 0\nWall time: 0.1 seconds\nOutput:\naborted by user\n"),  # an output that says it
        codex(5, json.dumps({"output": "patch rejected by user", "metadata": {"exit_code": 1}})),
    ])
    ingest.ingest(warehouse, [cc, cx])
    got = rows(warehouse, "SELECT call_id, rejected, is_error FROM tool_results ORDER BY session_id, line_no")
    assert got == [
        ("c1", True, False), ("c2", True, False), ("c3", True, False), ("c4", False, False), ("c5", True, True),
        ("t1", True, True), ("t2", True, True), ("t3", True, True), ("t4", False, True), ("t5", False, True),
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.builds(
    lambda a, b, c: a + b + c,
    st.sampled_from(["", "Wall time: 1.0 seconds\n", "Exit code: 0\n", "x"]),
    st.one_of(st.sampled_from(["aborted", "aborted by user", "exec command rejected by user", "patch aborted by user",
                               "command rejected by user"]), st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)),
    st.sampled_from(["", "\n", "\nmore", " x", "!"]),
))
def test_only_the_harness_words_of_a_refusal_make_a_result_rejected(warehouse, tmp_path_factory, text: str) -> None:
    """The rule for Codex: an output is rejected exactly when it is Codex's refusal or abort notice (after the
    `Wall time:` header of a command that had started), whatever follows on later lines; DuckDB's regex
    engine (RE2) and Python's agree on it."""
    from pipeline.warehouse.views import CODEX_REJECTION_RE

    folder = tmp_path_factory.mktemp("r")
    rec = {"timestamp": "2026-10-01T10:00:00.000Z", "type": "response_item",
           "payload": {"type": "function_call_output", "call_id": "c", "output": text}}
    sid = f"R{abs(hash(text))}"
    f = write_jsonl(folder / "r.jsonl", [
        {"timestamp": "2026-10-01T10:00:00.000Z", "type": "session_meta", "payload": {"id": sid, "cwd": "/x"}}, rec])
    ingest.ingest(warehouse, [f])
    got = rows(warehouse, "SELECT rejected FROM tool_results WHERE session_id = ?", [sid])
    want = re.match(CODEX_REJECTION_RE.replace("$", r"\Z"), text) is not None
    assert got == [(want,)]
