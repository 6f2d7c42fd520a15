"""The committed sample corpus, ingested: every line verbatim, and every session fact as planted."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from pipeline.consolidator import tools
from pipeline.warehouse import db, ingest
from tests.helpers import SAMPLES

EXPECTED = json.loads((SAMPLES / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def samples_db(tmp_path_factory) -> duckdb.DuckDBPyConnection:
    con = db.connect(tmp_path_factory.mktemp("wh") / "w.duckdb")
    report = ingest.ingest(con, [SAMPLES])
    assert not report.errors and report.problems == 0
    yield con
    con.close()


def test_every_line_is_stored_byte_identical(samples_db) -> None:
    files = sorted(SAMPLES.rglob("*.jsonl"))
    assert len(files) == len(EXPECTED["sessions"])
    by_path = dict(samples_db.execute("SELECT path, session_id FROM sessions").fetchall())
    for f in files:
        sid = by_path[str(f.absolute())]
        stored = samples_db.execute("SELECT line_no, text FROM lines WHERE session_id = ? ORDER BY line_no", [sid]).fetchall()
        raw = f.read_bytes().split(b"\n")[:-1]
        assert [n for n, _ in stored] == list(range(1, len(raw) + 1)), f
        assert [t.encode("utf-8") for _, t in stored] == raw, f


@pytest.mark.parametrize("expected", EXPECTED["sessions"], ids=lambda s: s["label"])
def test_session_facts(samples_db, expected: dict) -> None:
    row = samples_db.execute(
        "SELECT format, slug, cwd, prompts, turns, line_count, size_bytes, first_at, last_at, parent_session_id, path "
        "FROM sessions WHERE session_id = ?",
        [expected["sessionId"]],
    ).fetchall()
    assert row, f"session {expected['sessionId']} missing"
    fmt, slug, cwd, prompts, turns, lines, size, first_at, last_at, parent, path = row[0]
    assert (fmt, slug, cwd) == (expected["format"], expected["slug"], expected["cwd"])
    assert (prompts, turns, lines) == (expected["prompts"], expected["turns"], expected["lines"])
    assert size == expected["bytes"] == Path(path).stat().st_size
    assert parent == expected.get("parent_session_id")
    iso = lambda t: t.isoformat(timespec="milliseconds").replace("+00:00", "Z") if t else None  # noqa: E731
    assert (iso(first_at), iso(last_at)) == (expected["first_at"], expected["last_at"])


@pytest.mark.parametrize("expected", [s for s in EXPECTED["sessions"] if s["usage"]["calls"]], ids=lambda s: s["label"])
def test_usage_counts_each_response_once(samples_db, expected: dict) -> None:
    got = samples_db.execute(
        "SELECT count(*), sum(prompt_tokens), sum(cached_tokens), sum(cache_write_tokens), sum(completion_tokens) "
        "FROM usage WHERE session_id = ?",
        [expected["sessionId"]],
    ).fetchall()[0]
    u = expected["usage"]
    assert got == (u["calls"], u["prompt_tokens"], u["cached_tokens"], u["cache_write_tokens"], u["completion_tokens"])


def test_cached_share_of_claude_code_usage_by_hand(samples_db) -> None:
    """Recompute the cached share straight from the files, deduplicating message id + request id."""
    last: dict[tuple[str, str], dict] = {}
    for f in sorted((SAMPLES / "claude").rglob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            msg = rec.get("message") or {}
            if rec.get("type") == "assistant" and msg.get("model") != "<synthetic>":
                last[(msg["id"], rec["requestId"])] = msg["usage"]
    prompt = sum(u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"] for u in last.values())
    cached = sum(u["cache_read_input_tokens"] for u in last.values())
    share, calls = samples_db.execute(
        "SELECT sum(cached_tokens) / sum(prompt_tokens), count(*) FROM usage WHERE source = 'claude-code'"
    ).fetchall()[0]
    assert calls == len(last)
    assert share == pytest.approx(cached / prompt)


def test_huge_line_and_its_search(samples_db) -> None:
    huge = EXPECTED["huge_line"]
    (length,) = samples_db.execute(
        "SELECT strlen(text) FROM lines WHERE session_id = ? AND line_no = ?", [huge["sessionId"], huge["line"]]
    ).fetchall()[0]
    assert length == huge["bytes"] > 1_000_000
    r = tools.read_lines(samples_db, huge["sessionId"], huge["line"], huge["line"])
    assert r["lines"][0]["cut"] and len(r["lines"][0]["text"]) == tools.DEFAULT_WIDTH


def test_planted_quotes_are_searchable(samples_db) -> None:
    for p in EXPECTED["patterns"]:
        for occ in p["occurrences"]:
            r = tools.search_transcript(samples_db, occ["sessionId"], occ["quote"].split("\n")[0][:40])
            assert occ["line"] in {h["line"] for h in r["hits"]} or r["truncated"], (p["id"], occ)


def test_views_show_messages_tool_calls_and_results(samples_db) -> None:
    counts = dict(samples_db.execute("SELECT role, count(*) FROM messages GROUP BY role").fetchall())
    assert counts["user"] > 20 and counts["assistant"] > 20
    errors = samples_db.execute("SELECT count(*) FROM tool_results WHERE is_error").fetchall()[0][0]
    assert errors >= len(EXPECTED["tool_errors"])
    names = {r[0] for r in samples_db.execute("SELECT DISTINCT name FROM tool_calls").fetchall()}
    assert {"Bash", "shell"} <= names
    # every tool result names the call it answers
    orphans = samples_db.execute(
        "SELECT count(*) FROM tool_results r ANTI JOIN tool_calls c USING (session_id, call_id)"
    ).fetchall()[0][0]
    assert orphans == 0


def test_messages_mark_exactly_the_prompts_that_sessions_count(samples_db) -> None:
    marked = dict(samples_db.execute(
        "SELECT s.session_id, count(m.line_no) FILTER (WHERE m.is_prompt) FROM sessions s "
        "LEFT JOIN messages m USING (session_id) GROUP BY s.session_id"
    ).fetchall())
    assert marked == {e["sessionId"]: e["prompts"] for e in EXPECTED["sessions"]}
    # Harness text (injected context, command output, interruptions) is a user row but not a prompt.
    leaked = samples_db.execute(
        "SELECT text FROM messages WHERE is_prompt AND (text LIKE '<environment_context>%' "
        "OR text LIKE '<local-command-stdout>%' OR text LIKE '[Request interrupted%' OR text LIKE '<user_instructions>%')"
    ).fetchall()
    assert leaked == []
    assert samples_db.execute("SELECT count(*) FROM messages WHERE role = 'user' AND NOT is_prompt").fetchall()[0][0] > 0
