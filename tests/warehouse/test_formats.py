"""Format detection from content: the 2025 Codex rollout, and Codex rollouts forked from another."""

from __future__ import annotations

import json

import pytest

from pipeline.warehouse import formats


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
