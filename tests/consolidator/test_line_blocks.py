"""read_lines served from kept blocks answers exactly as read_lines querying every time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.consolidator import line_blocks, tools
from pipeline.consolidator.line_blocks import LineBlocks
from pipeline.errors import ToolError
from pipeline.warehouse import db, ingest
from tests.helpers import write_jsonl

N_LINES = 700  # a few blocks, the last one partial


def _line(i: int) -> dict:
    # Lengths vary from a few characters to past the long-line limit used below; some lines hold
    # a secret, so that masking is exercised on both paths.
    body = "x" * ((i * 37) % 900) + ("é☕" * (i % 5))
    if i % 97 == 0:
        body += " AKIAIOSFODNN7EXAMPLE is the key"
    return {"sessionId": "B1", "n": i, "t": body}


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("blocks")
    f = write_jsonl(tmp / "p" / "b.jsonl", [_line(i) for i in range(N_LINES)])
    path = tmp / "w.duckdb"
    con = db.connect(path)
    ingest.ingest(con, [f])
    con.close()
    return path


@pytest.fixture(scope="module")
def con(published: Path):
    c = db.connect(published, read_only=True)
    yield c
    c.close()


@settings(max_examples=50, deadline=None)
@given(
    reads=st.lists(
        st.tuples(st.integers(1, N_LINES + 30), st.integers(0, 260), st.integers(1, 500), st.booleans()),
        min_size=1, max_size=5,
    ),
    max_line_chars=st.sampled_from([50, 400, 10_000]),
    max_bytes=st.sampled_from([1, 20_000, 10**8]),
    block_lines=st.sampled_from([7, 37, 256, line_blocks.BLOCK_LINES]),
)
def test_kept_blocks_answer_as_a_fresh_query(con, reads, max_line_chars: int, max_bytes: int, block_lines: int) -> None:
    blocks = LineBlocks(max_bytes=max_bytes, max_line_chars=max_line_chars, block_lines=block_lines)
    for start, span, width, redact in reads:
        end = start + span
        try:
            want = tools.read_lines(con, "B1", start, end, width, redact=redact)
        except ToolError as exc:
            with pytest.raises(ToolError, match=re.escape(str(exc))):
                tools.read_lines(con, "B1", start, end, width, redact=redact, blocks=blocks)
            continue
        assert tools.read_lines(con, "B1", start, end, width, redact=redact, blocks=blocks) == want
        assert blocks.bytes <= max_bytes or len(blocks._blocks) == 1  # one block is kept whatever its size


@pytest.mark.parametrize("block_lines", [256, line_blocks.BLOCK_LINES])
def test_paging_through_a_session_queries_once_per_block(con, block_lines: int) -> None:
    blocks = LineBlocks(block_lines=block_lines)
    for start in range(1, N_LINES + 1, 200):
        tools.read_lines(con, "B1", start, start + 199, blocks=blocks)
    assert blocks.queries == -(-N_LINES // block_lines)
    again = blocks.queries
    tools.read_lines(con, "B1", 301, 500, blocks=blocks)  # read again: nothing fetched
    assert blocks.queries == again


def test_a_line_too_long_to_keep_is_fetched_each_time_it_is_shown(con) -> None:
    blocks = LineBlocks(max_line_chars=100)
    first = tools.read_lines(con, "B1", 1, 10, 2000, redact=False, blocks=blocks)
    long_lines = sum(1 for line in first["lines"] if len(line["text"]) > 100)
    # the block, then the read's long lines together (one query for all of them, not one each)
    assert long_lines > 1 and blocks.queries == 2
    assert tools.read_lines(con, "B1", 1, 10, 2000, redact=False, blocks=blocks) == first
    assert blocks.queries == 3


def test_long_lines_are_fetched_once_per_block_a_read_crosses(con) -> None:
    blocks = LineBlocks(max_line_chars=100, block_lines=7)
    fresh = tools.read_lines(con, "B1", 5, 16, 2000, redact=False)
    kept = tools.read_lines(con, "B1", 5, 16, 2000, redact=False, blocks=blocks)
    assert kept == fresh
    # lines 5..16 lie in blocks 0, 1 and 2 (of 7 lines each): three block queries, and one
    # long-line query for each of them that holds a long line among the lines read
    long_by_block = {(line["line"] - 1) // 7 for line in fresh["lines"] if len(line["text"]) > 100}
    assert long_by_block and blocks.queries == 3 + len(long_by_block)


def test_the_oldest_block_is_dropped_past_the_memory_cap(con) -> None:
    blocks = LineBlocks(max_bytes=150_000, block_lines=256)
    for start in (1, 257, 513):
        tools.read_lines(con, "B1", start, start + 10, blocks=blocks)
    assert blocks.bytes <= 150_000 or len(blocks._blocks) == 1
    assert ("B1", 0) not in blocks._blocks and ("B1", 2) in blocks._blocks
    tools.read_lines(con, "B1", 1, 5, blocks=blocks)  # fetched again when read again
    assert blocks.queries == 4


def test_an_unknown_session_is_refused_as_without_blocks(con) -> None:
    with pytest.raises(ToolError, match="unknown session 'nope'"):
        tools.read_lines(con, "nope", 1, 5, blocks=LineBlocks())
