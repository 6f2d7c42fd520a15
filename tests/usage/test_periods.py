"""The periods of a usage report: days, weeks, months, and ccusage's 5-hour billing blocks."""

from __future__ import annotations

import datetime as dt
import itertools

from hypothesis import given
from hypothesis import strategies as st

from pipeline.usage import periods

T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
times = st.lists(st.integers(min_value=0, max_value=4 * 24 * 3600).map(lambda s: T0 + dt.timedelta(seconds=s)),
                 min_size=1, max_size=60)


@given(times)
def test_blocks_follow_ccusage_rule(ts: list[dt.datetime]) -> None:
    length = dt.timedelta(hours=periods.BLOCK_HOURS)
    blocks = list(periods.blocks(ts))
    # every call in exactly one block
    assert sorted(i for b in blocks for i in b.members) == list(range(len(ts)))
    for b in blocks:
        members = sorted(ts[i] for i in b.members)
        assert b.start == members[0].replace(minute=0, second=0, microsecond=0)  # the hour of its first call
        assert b.end == b.start + length and members[-1] - b.start <= length  # 5 hours from there
        assert all(later - earlier <= length for earlier, later in itertools.pairwise(members))
    for before, after in itertools.pairwise(blocks):
        first_next = min(ts[i] for i in after.members)
        # the next block starts only with a call past the block's end or after a gap of more than 5 hours
        assert first_next - before.start > length or first_next - before.last_call > length


def test_a_call_exactly_five_hours_after_the_start_stays_in_the_block() -> None:
    at = T0.replace(hour=9, minute=30)
    got = list(periods.blocks([at, T0.replace(hour=14), T0.replace(hour=14, second=1)]))
    assert [b.members for b in got] == [(0, 1), (2,)]
    assert got[0].start == T0.replace(hour=9) and got[1].start == T0.replace(hour=14)


@given(st.dates(min_value=dt.date(2020, 1, 1), max_value=dt.date(2030, 12, 31)), st.sampled_from(periods.WEEK_STARTS))
def test_a_week_is_named_by_its_first_day(day: dt.date, start: str) -> None:
    got = dt.date.fromisoformat(periods.week(dt.datetime.combine(day, dt.time(12)), start))
    assert got <= day < got + dt.timedelta(days=7)
    assert got.weekday() == periods.WEEK_STARTS.index(start)


def test_day_and_month_labels() -> None:
    local = dt.datetime(2026, 3, 1, 23, 59)
    assert periods.day(local) == "2026-03-01" and periods.month(local) == "2026-03"
    assert periods.week(local) == "2026-03-01"  # a Sunday: ccusage's weeks start on Sunday
