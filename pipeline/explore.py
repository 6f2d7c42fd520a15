"""Small helpers the explore notebook (and analysts in any notebook) use to look at the warehouse."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.warehouse import db as warehouse


def query(sql: str, params: object = None, *, db: str | Path | None = None) -> pl.DataFrame:
    """Run one read-only query and return a polars DataFrame; the connection is closed at once."""
    with warehouse.reading(db) as con:
        return warehouse.frame(con, sql, params)


def overview(db: str | Path | None = None) -> pl.DataFrame:
    """One row per table or view with its row count."""
    with warehouse.reading(db) as con:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() AND table_schema = 'main' ORDER BY table_name"
        ).fetchall()]
        rows = []
        for name in names:
            # names come from the catalog, not from the user; quoting keeps odd names safe
            n = con.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0][0]
            rows.append({"name": name, "rows": n})
    return pl.DataFrame(rows)


def search(phrase: str, *, db: str | Path | None = None, regex: bool = False, limit: int = 50, context: int = 80,
           sessions: tuple[str, ...] = (), project: str | None = None, role: str | None = None,
           format: str | None = None) -> pl.DataFrame:
    """`pipeline search` as a DataFrame: one row per hit (sessionId, project, line, column, at, role, before,
    match, after); the frame's length is at most `limit`, the total is `search_all`'s."""
    from pipeline.warehouse.search_all import SearchFilter, search_all

    flt = SearchFilter(sessions=sessions, project=project, role=role, format=format)
    with warehouse.reading(db) as con:
        hits = search_all(con, phrase, flt, regex=regex, limit=limit, context=context)["hits"]
    columns = ["sessionId", "project", "line", "column", "at", "role", "before", "match", "after"]
    return pl.DataFrame(hits, schema=dict.fromkeys(columns, pl.String) | {"line": pl.Int64, "column": pl.Int64})


def usage(kind: str = "daily", *, db: str | Path | None = None, tz: str = "UTC", source: str | None = None) -> pl.DataFrame:
    """`pipeline usage KIND` as a DataFrame: one row per period (or session, or block) with the token
    counts by kind and the list-price cost, in ccusage's column names."""
    from pipeline.usage import UsageFilter, usage_report
    from pipeline.usage.report import KINDS

    with warehouse.reading(db) as con:
        rows = usage_report(con, kind, UsageFilter(tz=tz, source=source))[KINDS.get(kind, kind)]
    return pl.DataFrame([{k: v for k, v in r.items() if k != "modelBreakdowns"} for r in rows])


def show_html(session_id: str, start: int | None = None, end: int | None = None, *, hit: str | None = None,
              db: str | Path | None = None) -> str:
    """`pipeline show --html` as a string, for a notebook: `IPython.display.HTML(show_html(...))`."""
    from pipeline.show.conversation import conversation
    from pipeline.show.page import conversation_html

    with warehouse.reading(db) as con:
        return conversation_html(conversation(con, session_id, start, end), hit=hit)
