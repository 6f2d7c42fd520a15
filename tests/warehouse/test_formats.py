"""Format detection from content: the 2025 Codex rollout, and Codex rollouts forked from another."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pipeline.warehouse import formats
from tests.helpers import SAMPLES


def head(*records: dict) -> list[bytes]:
    return [json.dumps(r).encode() for r in records]


def test_2025_codex_rollout_is_codex_with_its_id_and_cwd() -> None:
    ident = formats.sniff(head(
        {"id": "536e9fe6-0000-4000-8000-000000000001", "timestamp": "2025-09-24T01:08:12.049Z", "instructions": "# Guidelines"},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>E:\\ANPR</cwd>\n</environment_context>"}]},
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
    ))
    assert ident == formats.Identity("codex", "536e9fe6-0000-4000-8000-000000000001", None, "E:\\ANPR")


def test_a_header_alone_is_not_enough_for_codex() -> None:
    # a generic log whose first record happens to carry id and timestamp stays plain JSONL
    ident = formats.sniff(head({"id": "x", "timestamp": "2025-01-01T00:00:00Z"}, {"role": "user", "content": "hi"}))
    assert ident.format == "jsonl"


def test_forked_and_spawned_rollouts_name_their_parent() -> None:
    meta = {"id": "child", "cwd": "/w", "forked_from_id": "parent-a"}
    assert formats.sniff(head({"type": "session_meta", "payload": meta})).parent_session_id == "parent-a"
    spawned = {"id": "child", "cwd": "/w", "source": {"subagent": {"thread_spawn": {"parent_thread_id": "parent-b"}}}}
    assert formats.sniff(head({"type": "session_meta", "payload": spawned})).parent_session_id == "parent-b"
    plain = {"id": "solo", "cwd": "/w", "source": "cli"}
    assert formats.sniff(head({"type": "session_meta", "payload": plain})).parent_session_id is None


@pytest.mark.parametrize(("cwd", "slug"), [
    ("/home/ana/src/checkout-api", "-home-ana-src-checkout-api"),
    ("C:\\Users\\logan\\Documents\\VAULT", "C--Users-logan-Documents-VAULT"),
    ("c:\\Users\\logan\\Documents\\VAULT", "C--Users-logan-Documents-VAULT"),
    ("e:/ANPR/new", "E--ANPR-new"),
    ("cargo:build", "cargo-build"),
])
def test_one_folder_is_one_slug_whatever_the_drive_letter_case(cwd: str, slug: str) -> None:
    assert formats.slug_for(cwd) == slug


# Lines of every kind the sniff tells apart, for the property below: Claude Code records with and
# without their id and cwd (a subagent's, a summary's), Codex records with a payload, the 2025
# rollout's header, bare items and state line, plain JSONL records, a key written with a \u escape,
# and lines that are not a JSON object.
_KINDS: list[bytes] = [
    *head(
        {"type": "user", "sessionId": "S1", "cwd": "/home/a/p", "message": {"role": "user", "content": "hi"}},
        {"type": "assistant", "sessionId": "S1", "message": {"id": "m1", "content": [{"type": "text", "text": "ok"}]}},
        {"type": "user", "sessionId": "S1", "isSidechain": True, "agentId": "a1", "cwd": "/home/a/q"},
        {"type": "summary", "leafUuid": "u1", "summary": "earlier"},
        {"type": "system", "messageId": "x", "cwd": ""},
        {"type": "file-history-snapshot", "messageId": "y"},
        {"type": "session_meta", "payload": {"id": "C1", "cwd": "/c", "forked_from_id": "C0"}},
        {"type": "turn_context", "payload": {"cwd": "/c2", "model": "gpt-5"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user"}},
        {"id": "L1", "timestamp": "2025-09-24T01:08:12.049Z", "instructions": "# Guidelines"},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context><cwd>/l</cwd>"}]},
        {"type": "function_call", "name": "shell"},
        {"role": "user", "session_id": "G1", "cwd": "/g"},
        {"type": "note", "time": "2026-01-01"},
    ),
    b'{"type": "event_msg", "\\u0070ayload": {"type": "token_count"}}',
    b'{"type": "user", "sessionId": "S2", "message": {"content": "caf\\u00e9"}}',
    b"not json",
    b"[1, 2]",
    b"",
]


@given(st.lists(st.sampled_from(range(len(_KINDS))), max_size=80))
# a 2025 rollout's header, then a Claude Code line with id and cwd, then a bare item: a rollout after all
@example([17, 9, 0, 12])
# a Claude Code line with id and cwd, then a Codex record whose `payload` key is written with a \u escape
@example([0, 15])
def test_skipping_lines_a_claude_code_head_does_not_need_never_changes_what_the_sniff_decides(picks: list[int]) -> None:
    lines = [_KINDS[i] for i in picks]
    every = [r for r in (formats._parse(raw) for raw in lines[: formats.SNIFF_LINES]) if r is not None]
    assert formats.sniff(lines) == formats.identify(every)


def test_the_sample_transcripts_sniff_as_when_every_head_line_is_parsed() -> None:
    files = sorted(SAMPLES.rglob("*.jsonl"))
    assert len(files) > 10
    for path in files:
        lines = path.read_bytes().split(b"\n")[: formats.SNIFF_LINES]
        every = [r for r in (formats._parse(raw) for raw in lines) if r is not None]
        assert formats.sniff(lines) == formats.identify(every), path
