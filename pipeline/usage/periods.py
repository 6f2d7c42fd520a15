"""How calls fall into a report's periods: local days, weeks, months, and ccusage's 5-hour billing blocks."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

BLOCK_HOURS = 5
# ccusage's weeks start on Sunday unless told otherwise (`--start-of-week`).
WEEK_STARTS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def day(local: dt.datetime) -> str:
    return local.date().isoformat()


def month(local: dt.datetime) -> str:
    return f"{local.year:04d}-{local.month:02d}"


def week(local: dt.datetime, start_of_week: str = "sunday") -> str:
    """The first day of the week holding `local` (weeks start on `start_of_week`)."""
    first = WEEK_STARTS.index(start_of_week)
    back = (local.weekday() - first) % 7
    return (local.date() - dt.timedelta(days=back)).isoformat()


@dataclass(frozen=True)
class Block:
    """A 5-hour billing block: from the hour of its first call, `BLOCK_HOURS` long."""

    start: dt.datetime
    end: dt.datetime
    first_call: dt.datetime
    last_call: dt.datetime
    members: tuple[int, ...]  # indexes of the calls it holds, in time order


def blocks(times: Iterable[dt.datetime], hours: int = BLOCK_HOURS) -> Iterator[Block]:
    """ccusage's block rule over call times (any order): a block starts at the hour (floored, in UTC)
    of its first call and lasts `hours`; a call after the block's end, or more than `hours` after the
    previous call, starts the next block."""
    length = dt.timedelta(hours=hours)
    order = sorted(enumerate(times), key=lambda p: p[1])
    current: list[int] = []
    start = last = first = None
    for index, at in order:
        if start is not None and last is not None and (at - start > length or at - last > length):
            assert first is not None
            yield Block(start, start + length, first, last, tuple(current))
            current, start = [], None
        if start is None:
            start, first = at.replace(minute=0, second=0, microsecond=0), at
        current.append(index)
        last = at
    if start is not None and first is not None and last is not None:
        yield Block(start, start + length, first, last, tuple(current))
