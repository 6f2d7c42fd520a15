"""How values look to people, the same in every output: times in ISO 8601 with UTC as Z."""

from __future__ import annotations

import datetime as dt
from typing import Any


def plain(value: Any) -> Any:
    """A JSON-ready form of a value from DuckDB or polars; anything unknown becomes its str()."""
    if isinstance(value, dt.datetime):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` with its noun in the right number: "1 memory", "2 memories", "1,204 sessions"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
