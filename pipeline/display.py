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
