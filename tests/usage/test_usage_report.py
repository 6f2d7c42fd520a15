"""Usage reports in ccusage's names, checked against SQL over the `usage` view of the sample warehouse."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from pipeline.errors import UsageError
from pipeline.usage import UsageFilter, usage_report
from pipeline.warehouse import db

KEYS = {"inputTokens", "cacheCreationTokens", "cacheReadTokens", "outputTokens", "totalTokens", "totalCost",
        "modelsUsed", "modelBreakdowns"}
SQL_TOKENS = """
    SELECT sum(prompt_tokens - coalesce(cached_tokens, 0) - coalesce(cache_write_tokens, 0)),
           sum(coalesce(cache_write_tokens, 0)), sum(coalesce(cached_tokens, 0)), sum(completion_tokens)
    FROM usage WHERE "at" IS NOT NULL
"""


def tokens(row: dict) -> tuple[int, int, int, int]:
    return row["inputTokens"], row["cacheCreationTokens"], row["cacheReadTokens"], row["outputTokens"]


@pytest.mark.parametrize(("kind", "array"), [("daily", "daily"), ("weekly", "weekly"), ("monthly", "monthly"),
                                              ("session", "sessions"), ("blocks", "blocks")])
def test_every_report_has_ccusage_names_and_adds_up_to_the_usage_rows(wh: Path, kind: str, array: str) -> None:
    with db.reading(wh) as con:
        report = usage_report(con, kind)
        want = tuple(int(v) for v in con.execute(SQL_TOKENS).fetchone())  # type: ignore[union-attr]
    assert set(report) == {array, "totals"}
    rows = report[array]
    assert rows and all(KEYS <= set(r) for r in rows)
    assert all(("sessionId" if kind == "session" else "period") in r for r in rows)
    summed = tuple(sum(tokens(r)[i] for r in rows) for i in range(4))
    assert summed == want == tokens(report["totals"])
    for r in rows:
        assert r["totalTokens"] == sum(tokens(r))
        assert tuple(sum(tokens(m)[i] for m in r["modelBreakdowns"]) for i in range(4)) == tokens(r)
        assert r["totalCost"] == pytest.approx(sum(m["cost"] for m in r["modelBreakdowns"]))
        assert r["modelsUsed"] == sorted(m["modelName"] for m in r["modelBreakdowns"])


def test_a_subagent_counts_with_the_session_that_spawned_it(wh: Path) -> None:
    with db.reading(wh) as con:
        parent, child = con.execute(
            "SELECT parent_session_id, session_id FROM sessions WHERE format = 'claude-code' AND parent_session_id IS NOT NULL "
            "AND parent_session_id IN (SELECT session_id FROM sessions) LIMIT 1").fetchone()  # type: ignore[misc]
        both = con.execute(
            "SELECT sum(completion_tokens) FROM usage WHERE session_id = ? OR session_id IN "
            "(SELECT session_id FROM sessions WHERE parent_session_id = ? AND format = 'claude-code')",
            [parent, parent]).fetchone()[0]  # type: ignore[index]
        report = usage_report(con, "session")
    ids = {r["sessionId"]: r for r in report["sessions"]}
    assert child not in ids
    assert ids[parent]["outputTokens"] == both


def test_days_follow_the_time_zone_asked_for(wh: Path) -> None:
    with db.reading(wh) as con:
        utc = {r["period"]: r for r in usage_report(con, "daily")["daily"]}
        tokyo = {r["period"]: r for r in usage_report(con, "daily", UsageFilter(tz="Asia/Tokyo"))["daily"]}
        local = con.execute(
            "SELECT strftime(timezone('Asia/Tokyo', \"at\"), '%Y-%m-%d') d, sum(completion_tokens) FROM usage "
            "WHERE \"at\" IS NOT NULL GROUP BY 1").fetchall()
    assert {d: r["outputTokens"] for d, r in tokyo.items()} == dict(local)
    assert sum(r["outputTokens"] for r in utc.values()) == sum(r["outputTokens"] for r in tokyo.values())


def test_since_until_source_and_project_narrow_the_calls(wh: Path) -> None:
    with db.reading(wh) as con:
        every = usage_report(con, "daily")["daily"]
        day = dt.date.fromisoformat(every[1]["period"])
        one = usage_report(con, "daily", UsageFilter(since=day, until=day))["daily"]
        codex = usage_report(con, "daily", UsageFilter(source="codex"))
        n_codex = con.execute("SELECT sum(completion_tokens) FROM usage WHERE source = 'codex'").fetchone()[0]  # type: ignore[index]
        slug = con.execute("SELECT slug FROM sessions WHERE format = 'codex' LIMIT 1").fetchone()[0]  # type: ignore[index]
        per_project = usage_report(con, "session", UsageFilter(project=slug))["sessions"]
    assert [r["period"] for r in one] == [every[1]["period"]] and one[0] == every[1]
    assert codex["totals"]["outputTokens"] == n_codex
    assert per_project and {r["projectPath"] for r in per_project} == {slug}


def test_a_model_without_a_price_is_named_not_priced(wh: Path) -> None:
    with db.reading(wh) as con:
        report = usage_report(con, "daily", UsageFilter(source="codex"))
    unknown = [m for r in report["daily"] for m in r["modelBreakdowns"] if m["modelName"] == "unknown"]
    assert unknown and all(m["cost"] == 0 for m in unknown)
    assert "unknown" in report["totals"]["unpricedModels"]


def test_a_claude_code_call_is_priced_at_list_price(wh: Path) -> None:
    from pipeline.calls.prices import PriceBook, call_cost

    with db.reading(wh) as con:
        rows = con.execute(
            "SELECT model, \"at\", prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens, cache_write_1h_tokens "
            "FROM usage WHERE source = 'claude-code' AND \"at\" IS NOT NULL").fetchall()
        total = usage_report(con, "session", UsageFilter(source="claude-code"))["totals"]["totalCost"]
    book = PriceBook()
    want = sum(call_cost(book.price(m, source="claude-code", when=at), p, c, w, o, written_1h=h) or 0.0
               for m, at, p, c, w, o, h in rows)
    assert want > 0 and total == pytest.approx(want)


@pytest.mark.parametrize(("flt", "message"), [(UsageFilter(tz="Mars/Olympus"), "unknown time zone"),
                                               (UsageFilter(start_of_week="someday"), "start-of-week")])
def test_bad_options_are_usage_errors(wh: Path, flt: UsageFilter, message: str) -> None:
    with db.reading(wh) as con, pytest.raises(UsageError, match=message):
        usage_report(con, "weekly", flt)
