"""`pipeline sessions` as a table: filters, sorting, the limit, and the columns added to list_sessions."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from pipeline.consolidator import tools
from pipeline.errors import UsageError
from pipeline.usage import usage_report
from pipeline.usage.session_table import SessionFilter, session_table
from pipeline.warehouse import db


def table(wh: Path, flt: SessionFilter | None = None, **kw) -> list[dict]:
    with db.reading(wh) as con:
        return session_table(con, tools.list_sessions(con, redact=False), flt, **kw)


def test_every_entry_keeps_the_list_sessions_shape_and_gains_the_columns(wh: Path) -> None:
    rows = table(wh)
    with db.reading(wh) as con:
        plain = tools.list_sessions(con, redact=False)
        calls = dict(con.execute("SELECT session_id, count(*) FROM tool_calls GROUP BY 1").fetchall())
        out = dict(con.execute("SELECT session_id, sum(completion_tokens) FROM usage GROUP BY 1").fetchall())
        formats = dict(con.execute("SELECT session_id, format FROM sessions").fetchall())
    assert [{k: r[k] for k in plain[0]} for r in rows] == plain
    for r in rows:
        assert r["toolCalls"] == calls.get(r["sessionId"], 0)
        assert r["outputTokens"] == out.get(r["sessionId"], 0)
        assert r["format"] == formats[r["sessionId"]]
        assert r["totalTokens"] == r["inputTokens"] + r["cacheCreationTokens"] + r["cacheReadTokens"] + r["outputTokens"]
    assert any(r["harnessVersions"] for r in rows if r["format"] == "claude-code")
    assert any(r["harnessVersions"] for r in rows if r["format"] == "codex")


def test_costs_add_up_to_the_usage_report(wh: Path) -> None:
    with db.reading(wh) as con:
        total = usage_report(con, "daily")["totals"]["totalCost"]
    assert sum(r["cost"] for r in table(wh)) == pytest.approx(total)


def test_filters_sort_and_limit(wh: Path) -> None:
    every = table(wh)
    codex = table(wh, SessionFilter(format="codex"))
    assert codex == [r for r in every if r["format"] == "codex"] and codex
    slug = every[0]["slug"]
    assert table(wh, SessionFilter(project=slug)) == [r for r in every if r["slug"] == slug]
    assert table(wh, SessionFilter(project=every[0]["cwd"])) == [r for r in every if r["cwd"] == every[0]["cwd"]]
    day = dt.date.fromisoformat(max(r["firstAt"] for r in every if r["firstAt"])[:10])
    late = table(wh, SessionFilter(since=day))
    assert late and all(r["lastAt"][:10] >= day.isoformat() for r in late)
    top = table(wh, sort="cost", descending=True, limit=3)
    assert [r["cost"] for r in top] == sorted((r["cost"] for r in every), reverse=True)[:3]
    oldest = table(wh, sort="firstAt", limit=1)[0]
    assert oldest["firstAt"] == min(r["firstAt"] for r in every if r["firstAt"])


@pytest.mark.parametrize(("kw", "message"), [({"sort": "colour"}, "--sort"), ({"limit": 0}, "--limit")])
def test_a_bad_sort_or_limit_is_a_usage_error(wh: Path, kw: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        table(wh, **kw)
