"""A session's lines in blocks, kept by a reader whose source cannot change while it reads.

A read of 200 lines is one DuckDB query, and most of its ~2 ms is DuckDB binding and planning that
query, not fetching the lines. A model pages through a session (1..200, 201..400, ...) and reads
some lines again; so a reader that knows its source is fixed (a batch's input folder, a read-only
connection to a published warehouse: a publish renames a new file over the old one, and an open
connection keeps reading the old one) can fetch BLOCK_LINES lines at a time and serve the reads
inside a block from memory.

Only the caller can know that its source is fixed, so nothing is cached unless it passes a
`LineBlocks` (`pipeline.consolidator.toolbox` does, for a batch's input). A line longer than
MAX_CACHED_CHARS is not kept, but fetched again by each read that shows it (the long lines a read
shows from one block come in one query, not one each: tool outputs past the limit often come in
runs), and the blocks kept total at most MAX_CACHED_BYTES, the least recently read dropped first.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from pipeline.warehouse import db

BLOCK_LINES = 1024
MAX_CACHED_CHARS = 64 * 1024
MAX_CACHED_BYTES = 64 * 1024 * 1024

_BLOCK_QUERY = (
    "SELECT line_count, NULL, NULL FROM sessions WHERE session_id = $s UNION ALL "
    "SELECT NULL, line_no, CASE WHEN length(text) <= $m THEN text END FROM lines "
    "WHERE session_id = $s AND line_no BETWEEN $a AND $b"
)
_LONG_QUERY = (
    "SELECT line_no, text FROM lines WHERE session_id = $s AND line_no BETWEEN $a AND $b AND length(text) > $m"
)

class LineBlocks:
    """Blocks of lines read through one fixed source; `window` is what `read_lines` asks for."""

    def __init__(self, max_bytes: int = MAX_CACHED_BYTES, max_line_chars: int = MAX_CACHED_CHARS,
                 block_lines: int = BLOCK_LINES) -> None:
        self.block_lines = block_lines
        self.max_bytes = max_bytes
        self.max_line_chars = max_line_chars
        self.bytes = 0
        self.queries = 0  # how many block or line queries ran (for tests and the bench)
        self._counts: dict[str, int | None] = {}
        self._blocks: OrderedDict[tuple[str, int], tuple[list[tuple[int, str | None]], int]] = OrderedDict()

    def window(self, con: Any, session_id: str, first: int, last: int) -> tuple[int | None, list[tuple[int, str]]]:
        """The session's line count (None for a session the source does not have) and its lines
        first..last that exist, in order."""
        rows: list[tuple[int, str]] = []
        block = (first - 1) // self.block_lines
        while True:
            lines = self._block(con, session_id, block)
            count = self._counts[session_id]
            if count is None:
                return None, []
            if lines and lines[-1][0] - lines[0][0] == len(lines) - 1:  # numbered without gaps: slice
                base = lines[0][0]
                inside = lines[max(first - base, 0) : max(last - base + 1, 0)]
            else:
                inside = [line for line in lines if first <= line[0] <= last]
            long = [line_no for line_no, kept in inside if kept is None]
            fetched = self._long(con, session_id, long[0], long[-1]) if long else {}
            rows.extend((line_no, kept if kept is not None else fetched[line_no]) for line_no, kept in inside)
            block += 1
            if block * self.block_lines + 1 > min(last, count):
                return count, rows

    def _block(self, con: Any, session_id: str, block: int) -> list[tuple[int, str | None]]:
        key = (session_id, block)
        found = self._blocks.get(key)
        if found is not None:
            self._blocks.move_to_end(key)
            return found[0]
        first = block * self.block_lines + 1
        self.queries += 1
        got = db.execute_parsed(
            con, _BLOCK_QUERY, {"s": session_id, "a": first, "b": first + self.block_lines - 1, "m": self.max_line_chars}
        ).fetchall()
        counts = [r[0] for r in got if r[1] is None]
        self._counts[session_id] = int(counts[0]) if counts else None
        lines = sorted(((r[1], r[2]) for r in got if r[1] is not None), key=lambda r: r[0])
        size = sum(len(text) for _, text in lines if text is not None)
        self._blocks[key] = (lines, size)
        self.bytes += size
        while self.bytes > self.max_bytes and len(self._blocks) > 1:
            _, (_, dropped) = self._blocks.popitem(last=False)
            self.bytes -= dropped
        return lines

    def _long(self, con: Any, session_id: str, first: int, last: int) -> dict[int, str]:
        """The lines longer than the limit among first..last of one block, in one query."""
        self.queries += 1
        got = db.execute_parsed(
            con, _LONG_QUERY, {"s": session_id, "a": first, "b": last, "m": self.max_line_chars}
        ).fetchall()
        return {int(line_no): str(text) for line_no, text in got}
