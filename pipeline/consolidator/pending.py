"""Which sessions the next night offers: never read, grown since their watermark, or rewritten."""

from __future__ import annotations

from typing import Any

import duckdb

from pipeline.consolidator import tools


def pending_sessions(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """list_sessions entries that hold lines no accepted batch has read yet."""
    # The planner and a person at their terminal read these: raw, like `pipeline sessions`.
    return [e for e in tools.list_sessions(con, redact=False) if e["lineCount"] >= e["newFromLine"]]


def pending_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [e["sessionId"] for e in pending_sessions(con)]
