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
