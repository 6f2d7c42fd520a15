"""Reading one value out of an imported record: dotted paths, token counts, times, lists.

Each parser returns the value or raises `BadValue` with a reason a person can act on; the caller
adds the file, line and field. Absent values are `MISSING` (callers turn them into NULL or, for a
required count, into a bad row): an unknown count is never read as 0.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from pipeline.errors import BadValue


class _Missing:
    """The field is absent or null: unknown, which the warehouse stores as NULL."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def as_object(value: Any) -> dict[str, Any] | None:
    """A dict, or a string holding a JSON object (a CSV cell, a logged body), else None."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def lookup(obj: dict[str, Any], path: str) -> Any:
    """The value at a dotted path, or MISSING.

    A key that itself contains dots ("usage.prompt_tokens" as a flat column name) wins over
    walking, so flat and nested spellings of one record both work; a string holding JSON is
    walked into, so a CSV column with a whole response body in it is reachable.
    """
    if path in obj:
        value = obj[path]
        return MISSING if value is None else value
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head not in obj:
            continue
        inner = as_object(obj[head])
        if inner is not None:
            found = lookup(inner, ".".join(parts[cut:]))
            if found is not MISSING:
                return found
    return MISSING


def first(objs: list[dict[str, Any]], paths: tuple[str, ...]) -> tuple[str, Any]:
    """The first path, in the first object, that has a value: (path, value), or ("", MISSING)."""
    for obj in objs:
        for path in paths:
            value = lookup(obj, path)
            if value is not MISSING:
                return path, value
    return "", MISSING


def _number(value: Any) -> float | int:
    if isinstance(value, bool):  # a JSON true is not a count, although Python says it is an int
        raise BadValue(f"not a number: {value!r}")
    if isinstance(value, int | float):
        number: float | int = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            number = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise BadValue(f"not a number: {value!r}") from None
    else:
        raise BadValue(f"not a number: {_short(value)}")
    if isinstance(number, float) and not math.isfinite(number):
        raise BadValue(f"not a finite number: {value!r}")
    return number


def count(value: Any) -> int:
    """A token count: a whole number ≥ 0 (12, 12.0 and "12" are all 12)."""
    number = _number(value)
    if isinstance(number, float):
        if not number.is_integer():
            raise BadValue(f"not a whole number: {value!r}")
        number = int(number)
    if number < 0:
        raise BadValue(f"negative count: {number}")
    return number


def duration_ms(value: Any, scale: float = 1.0) -> float:
    """A latency in milliseconds (after `scale`), ≥ 0."""
    number = float(_number(value)) * scale
    if number < 0:
        raise BadValue(f"negative latency: {value!r}")
    return number


# Epoch numbers are told apart by magnitude: 1e11 seconds is the year 5138, so anything larger is
# a finer unit. Harness logs use all four (time.time(), Date.now(), time_ns()).
_EPOCH_UNITS = ((1e11, 1.0), (1e14, 1e3), (1e17, 1e6), (math.inf, 1e9))
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NUMERIC = re.compile(r"[+-]?\d+(\.\d*)?")


def timestamp(value: Any) -> datetime:
    """A point in time, made time-zone aware.

    Accepted: ISO 8601 text (`2026-10-01T10:00:00Z`, with an offset, or naive = UTC); a date
    (midnight UTC); epoch numbers or numeric text in seconds, milliseconds, microseconds or
    nanoseconds (told apart by magnitude); a datetime from Parquet (naive = UTC).
    """
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        text = value.strip()
        # All-digit text is an epoch number (a CSV cell of `created`), never a basic-format date.
        if _NUMERIC.fullmatch(text):
            return _from_epoch(_number(text), value)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise BadValue(f"not an ISO 8601 time or epoch number: {value!r}") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _from_epoch(value, value)
    raise BadValue(f"not a time: {_short(value)}")


def _from_epoch(number: float | int, original: Any) -> datetime:
    if not math.isfinite(number):
        raise BadValue(f"not a time: {original!r}")
    for limit, per_second in _EPOCH_UNITS:
        if abs(number) < limit:
            try:
                return _EPOCH + timedelta(microseconds=round(number / per_second * 1e6))
            except OverflowError:
                break
    raise BadValue(f"epoch number out of range: {original!r}")


def text(value: Any) -> str:
    """An identifier or model name; numbers become their text, structures are refused."""
    if isinstance(value, dict | list):
        raise BadValue(f"expected text, found {_short(value)}")
    return str(value)


def sections(value: Any) -> list[str]:
    """Changed prompt sections: a list, a JSON array in text, or text separated by commas or
    semicolons (a CSV cell cannot hold a bare comma)."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                value = json.loads(stripped)
            except ValueError:
                raise BadValue(f"not a JSON array: {value!r}") from None
        else:
            return [part.strip() for part in re.split(r"[,;]", stripped) if part.strip()]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise BadValue(f"expected a list of section names, found {_short(value)}")


def _short(value: Any, limit: int = 60) -> str:
    shown = json.dumps(value, default=str, ensure_ascii=False)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
