"""A transcript line as a person reads it, for each format: who spoke, which tool with what, what came back."""

from __future__ import annotations

import json

from pipeline.warehouse.formats import CLAUDE, CODEX, JSONL
from pipeline.warehouse.readable import line_time, readable


def j(value: object) -> str:
    return json.dumps(value)


def test_claude_code_messages_tool_calls_and_results() -> None:
    said = j({"type": "user", "timestamp": "2026-10-12T09:15:18Z", "message": {"role": "user", "content": "run the tests"}})
    assert [(e.label, e.text) for e in readable(said, CLAUDE)] == [("user", "run the tests")]
    assert line_time(said) == "2026-10-12T09:15:18Z"
    call = j({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "look first"}, {"type": "text", "text": "Running them."},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -q", "description": "tests"}}]}})
    assert [(e.label, e.text, e.kind) for e in readable(call, CLAUDE)] == [
        ("assistant (thinking)", "look first", "thinking"), ("assistant", "Running them.", "message"),
        ("tool call Bash", "pytest -q", "tool call")]
    result = j({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": [{"type": "text", "text": "E   boom"}]}]}})
    assert [(e.label, e.text) for e in readable(result, CLAUDE)] == [("tool result (error)", "E   boom")]
    assert readable(j({"type": "file-history-snapshot", "snapshot": {}}), CLAUDE) == []


def test_codex_messages_calls_outputs_and_echoes() -> None:
    msg = j({"type": "response_item", "payload": {"type": "message", "role": "user",
                                                   "content": [{"type": "input_text", "text": "why?"}]}})
    assert [(e.label, e.text) for e in readable(msg, CODEX)] == [("user", "why?")]
    call = j({"type": "response_item", "payload": {"type": "function_call", "name": "shell", "call_id": "c",
              "arguments": json.dumps({"command": ["bash", "-lc", "ip -brief link"], "workdir": "/w"})}})
    assert [(e.label, e.text) for e in readable(call, CODEX)] == [("tool call shell", "ip -brief link")]
    out = j({"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c",
             "output": json.dumps({"output": "refused\n", "metadata": {"exit_code": 1}})}})
    assert [(e.label, e.text) for e in readable(out, CODEX)] == [("tool result (exit 1)", "refused\n")]
    echo = j({"type": "event_msg", "payload": {"type": "user_message", "message": "why?"}})
    [entry] = readable(echo, CODEX)
    assert entry.echo and entry.text == "why?"
    assert readable(j({"type": "event_msg", "payload": {"type": "token_count"}}), CODEX) == []


def test_plain_jsonl_and_lines_that_are_not_json() -> None:
    assert [(e.label, e.text) for e in readable(j({"role": "assistant", "content": "ok"}), JSONL)] == [("assistant", "ok")]
    assert [(e.label, e.text) for e in readable("not json at all", JSONL)] == [("line", "not json at all")]
    assert readable("   ", JSONL) == [] and line_time("nope") is None
