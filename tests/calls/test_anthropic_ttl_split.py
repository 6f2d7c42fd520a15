"""Imported Anthropic logs keep the cache writes' TTL split, as transcripts do (cache_write_1h_tokens)."""

from __future__ import annotations

from pathlib import Path

from pipeline.calls.importer import import_calls
from tests.helpers import write_jsonl


def _response(mid: str, at: str, usage: dict) -> dict:
    return {"id": mid, "model": "claude-sonnet-4-6", "created_at": at, "metadata": {"session": "s1"},
            "usage": {"input_tokens": 5, "output_tokens": 10, **usage}}


def test_one_hour_part_of_the_writes_is_kept(warehouse, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "anthropic.jsonl", [
        # 1,000 written for an hour, none for 5 minutes
        _response("m1", "2026-05-01T10:00:00Z", {"cache_creation_input_tokens": 1000, "cache_read_input_tokens": 0,
                                                 "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 1000}}),
        # the split says 5 minutes only: a known 0, not unknown
        _response("m2", "2026-05-01T10:01:00Z", {"cache_creation_input_tokens": 40, "cache_read_input_tokens": 1000,
                                                 "cache_creation": {"ephemeral_5m_input_tokens": 40}}),
        # no split reported: unknown
        _response("m3", "2026-05-01T10:02:00Z", {"cache_creation_input_tokens": 20, "cache_read_input_tokens": 1040}),
        # a 1-hour figure larger than the total is capped at the total
        _response("m4", "2026-05-01T10:03:00Z", {"cache_creation_input_tokens": 30, "cache_read_input_tokens": 1060,
                                                 "cache_creation": {"ephemeral_1h_input_tokens": 90}}),
    ])
    report = import_calls(warehouse, path, "anthropic", mapping={"session_id": "metadata.session"})
    assert report.calls == 4 and not report.problems
    rows = warehouse.execute(
        "SELECT call_id, cache_write_tokens, cache_write_1h_tokens FROM llm_calls ORDER BY call_id"
    ).fetchall()
    assert [r[1:] for r in rows] == [(1000, 1000), (40, 0), (20, None), (30, 30)]


def test_the_ttl_in_force_follows_the_imported_split(warehouse, tmp_path: Path) -> None:
    """20 minutes after a 1-hour write the cache is still alive: a miss then is no ttl_expiry."""
    path = write_jsonl(tmp_path / "anthropic.jsonl", [
        _response("m1", "2026-05-01T10:00:00Z", {"cache_creation_input_tokens": 1000, "cache_read_input_tokens": 0,
                                                 "cache_creation": {"ephemeral_1h_input_tokens": 1000}}),
        _response("m2", "2026-05-01T10:20:00Z", {"cache_creation_input_tokens": 1000, "cache_read_input_tokens": 0,
                                                 "cache_creation": {"ephemeral_1h_input_tokens": 1000}}),
        _response("m3", "2026-05-01T11:30:00Z", {"cache_creation_input_tokens": 1005, "cache_read_input_tokens": 0}),
    ])
    import_calls(warehouse, path, "anthropic", mapping={"session_id": "metadata.session"})
    rows = warehouse.execute("SELECT call_id, ttl_s, cause FROM cache_calls ORDER BY \"at\"").fetchall()
    assert [(r[1], r[2]) for r in rows] == [(300, "cold_start"), (3600, "prefix_change"), (3600, "ttl_expiry")]
