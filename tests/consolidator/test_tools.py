"""The three tools against grep -nF / sed -n and str.count, plus their bounds and refusals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.consolidator import tools
from pipeline.errors import ToolError
from pipeline.warehouse import ingest
from tests.helpers import write_jsonl

LINES = [
    {"type": "user", "sessionId": "S1", "message": {"role": "user", "content": 'say "hi" to C:\\Users\\ana and café ☕'}},
    {"type": "assistant", "sessionId": "S1", "message": {"role": "assistant", "content": [{"type": "text", "text": "aaa aaaa -m pytest"}]}},
    "plain text line with \\n escaped and a tab\tchar",
    {"type": "user", "sessionId": "S1", "message": {"role": "user", "content": "日本語のテキスト、日本語"}},
    {"type": "user", "sessionId": "S1", "toolUseResult": json.dumps({"stdout": 'nested "json" \\ here'})},
]


@pytest.fixture
def session(warehouse, tmp_path: Path):
    f = write_jsonl(tmp_path / "p" / "s.jsonl", LINES + [{"n": i, "sessionId": "S1", "t": "filler row"} for i in range(300)])
    ingest.ingest(warehouse, [f])
    return warehouse, f


def grep_lines(path: Path, phrase: str) -> list[int]:
    out = subprocess.run(["grep", "-nF", "--", phrase, str(path)], capture_output=True, check=False).stdout
    return [int(line.split(b":", 1)[0]) for line in out.splitlines()]


PHRASES = ['"hi"', "C:\\\\Users", "\\\\", "café", "☕", "aa", "-m pytest", '\\"json\\"', "日本語", "\\n", "\t", "filler", "absent"]


@pytest.mark.parametrize("phrase", PHRASES)
def test_search_agrees_with_grep_and_str_count(session, phrase: str) -> None:
    con, f = session
    result = tools.search_transcript(con, "S1", phrase, max_hits=10_000)
    file_lines = f.read_text(encoding="utf-8").split("\n")[:-1]
    assert sorted({h["line"] for h in result["hits"]}) == grep_lines(f, phrase)
    assert result["total"] == sum(line.count(phrase) for line in file_lines)
    for h in result["hits"]:
        line = file_lines[h["line"] - 1]
        assert line[h["column"] - 1 : h["column"] - 1 + len(phrase)] == phrase
        assert line[: h["column"] - 1].endswith(h["before"])
        assert line[h["column"] - 1 + len(phrase) :].startswith(h["after"])
        assert len(h["before"]) <= tools.CONTEXT_CHARS and len(h["after"]) <= tools.CONTEXT_CHARS


def test_search_non_overlapping_and_columns_in_characters(session) -> None:
    con, _ = session
    r = tools.search_transcript(con, "S1", "aa")
    line = json.dumps(LINES[1], ensure_ascii=False)
    first = line.find("aaa aaaa")
    # "aaa" holds one non-overlapping "aa", "aaaa" holds two
    assert [(h["line"], h["column"]) for h in r["hits"]] == [(2, first + 1), (2, first + 5), (2, first + 7)]
    assert r["total"] == 3
    r = tools.search_transcript(con, "S1", "日本語")
    assert r["total"] == 2
    line = json.dumps(LINES[3], ensure_ascii=False)
    assert [h["column"] for h in r["hits"]] == [line.find("日本語") + 1, line.rfind("日本語") + 1]


def test_search_reads_the_session_in_batches_and_lists_hits_in_line_order(session, monkeypatch) -> None:
    con, f = session
    monkeypatch.setattr(tools, "_BATCH_ROWS", 7)
    r = tools.search_transcript(con, "S1", "filler", max_hits=10_000)
    assert [h["line"] for h in r["hits"]] == grep_lines(f, "filler") == list(range(len(LINES) + 1, len(LINES) + 301))
    assert r["total"] == 300 and r["truncated"] is False


def test_search_truncates_listing_but_total_stays_exact(session) -> None:
    con, _ = session
    r = tools.search_transcript(con, "S1", "filler")
    assert r["total"] == 300 and r["truncated"] is True and len(r["hits"]) == tools.MAX_HITS
    r = tools.search_transcript(con, "S1", "filler", max_hits=3)
    assert len(r["hits"]) == 3 and r["total"] == 300


def test_search_refusals(session) -> None:
    con, _ = session
    with pytest.raises(ToolError, match="non-empty"):
        tools.search_transcript(con, "S1", "")
    with pytest.raises(ToolError, match="unknown session"):
        tools.search_transcript(con, "nope", "x")
    with pytest.raises(ToolError, match="not in this batch"):
        tools.search_transcript(con, "S1", "x", allowed={"S2"})


@pytest.mark.parametrize(("start", "end", "width"), [(1, 5, 400), (3, 3, 10), (200, 305, 4000), (1, 1, 1)])
def test_read_agrees_with_sed(session, start: int, end: int, width: int) -> None:
    con, f = session
    r = tools.read_lines(con, "S1", start, end, width)
    sed = subprocess.run(["sed", "-n", f"{start},{end}p", str(f)], capture_output=True, check=True).stdout.decode().split("\n")[:-1]
    assert [x["line"] for x in r["lines"]] == list(range(start, min(end, 305, start + tools.MAX_READ_LINES - 1) + 1))
    for got, want in zip(r["lines"], sed, strict=False):
        assert got["text"] == want[:width]
        assert got["cut"] == (len(want) > width)
    assert r["lineCount"] == 305


def test_read_bounds_and_refusals(session) -> None:
    con, _ = session
    r = tools.read_lines(con, "S1", 1, 305)
    assert len(r["lines"]) == tools.MAX_READ_LINES and r["truncated"] and r["end"] == tools.MAX_READ_LINES
    for args in [(0, 3), (5, 4), (400, 401)]:
        with pytest.raises(ToolError, match="bad range"):
            tools.read_lines(con, "S1", *args)
    with pytest.raises(ToolError, match="width"):
        tools.read_lines(con, "S1", 1, 2, 5000)
    with pytest.raises(ToolError, match="whole number"):
        tools.read_lines(con, "S1", "1", 2)  # type: ignore[arg-type]


def test_read_total_budget(warehouse, tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "p" / "s.jsonl", [{"sessionId": "B", "type": "user", "x": "y" * 5000}] * 50)
    ingest.ingest(warehouse, [f])
    r = tools.read_lines(warehouse, "B", 1, 50, width=4000)
    assert r["truncated"] and sum(len(x["text"]) for x in r["lines"]) <= tools.MAX_RESULT_CHARS
    assert r["end"] == r["lines"][-1]["line"] < 50


def test_list_sessions_has_no_transcript_text(session) -> None:
    con, _ = session
    (entry,) = tools.list_sessions(con)
    assert set(entry) == {"sessionId", "slug", "cwd", "firstAt", "lastAt", "prompts", "turns", "sizeBytes", "lineCount", "newFromLine", "linkedMemories"}
    assert entry["newFromLine"] == 1 and entry["linkedMemories"] == [] and entry["lineCount"] == 305
    assert "café" not in json.dumps(entry, ensure_ascii=False)


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=4))
def test_search_total_equals_str_count_for_any_phrase(session_module, phrase: str) -> None:
    con, lines = session_module
    r = tools.search_transcript(con, "P", phrase, max_hits=0)
    assert r["total"] == sum(line.count(phrase) for line in lines)


@pytest.fixture(scope="module")
def session_module(tmp_path_factory):
    from pipeline.warehouse import db

    d = tmp_path_factory.mktemp("prop")
    texts = ["abcabc", "a\\\"b", "ééé", "x y  z", "🎉a🎉", "\\u00e9"]
    f = write_jsonl(d / "p" / "s.jsonl", [{"sessionId": "P", "type": "user", "t": t} for t in texts])
    con = db.connect(d / "w.duckdb")
    ingest.ingest(con, [f])
    yield con, f.read_text(encoding="utf-8").split("\n")[:-1]
    con.close()
