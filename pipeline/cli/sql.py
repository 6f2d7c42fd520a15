"""`pipeline sql`: one query on a read-only connection, as a table, CSV or JSON.

Kept apart from the other warehouse verbs so that a query loop imports only DuckDB and the warehouse's
opening code (not the transcript tools, their secret detectors or polars).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
from typing import Any

from pipeline.cli.main import add_db, print_json
from pipeline.display import plain
from pipeline.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sql", help="run a SQL query against the warehouse (read-only)",
        description="Run one SQL query on a read-only connection. Tables and views: sessions, lines, messages, "
        "tool_calls, tool_results, usage, llm_calls, memories, tasks, watermarks, ingest_problems.",
    )
    p.add_argument("query", metavar="QUERY", help='e.g. "SELECT * FROM usage LIMIT 5" (quote it for the shell)')
    p.add_argument("--format", choices=("table", "csv", "json"), help="output format (default table)")
    p.add_argument("--json", action="store_true", dest="json_flag", help="same as --format json")
    add_db(p)
    p.set_defaults(func=cmd_sql)



def cmd_sql(args: argparse.Namespace) -> int:
    args.json = args.json_flag
    if args.json_flag and args.format not in (None, "json"):
        raise UsageError(f"--json asks for JSON and --format {args.format} for {args.format}: give one of them")
    args.format = "json" if args.json_flag else (args.format or "table")
    args.json = args.format == "json"  # an error is then a JSON document too
    from pipeline.warehouse import db

    with db.reading(args.db) as con:
        try:
            cur = con.execute(args.query)
        except Exception as exc:  # duckdb raises many classes; all are the user's query
            raise UsageError(f"the query failed: {exc}{_query_hint(con, exc, args.query)}") from exc
        columns = [d[0] for d in cur.description or []]
        rows = cur.fetchall()
    if args.format == "json":
        print_json([dict(zip(columns, r, strict=True)) for r in rows])
    elif args.format == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")  # shell pipelines expect \n, not CRLF
        w.writerow(columns)
        w.writerows([[plain(v) for v in r] for r in rows])
    else:
        table(columns, rows)
    return 0


def _query_hint(con: Any, exc: Exception, query: str) -> str:
    """What DuckDB's message leaves out for an analyst: the warehouse's own tables and views (DuckDB
    suggests its catalog's), and which of the warehouse's column names must be double-quoted."""
    import duckdb

    if isinstance(exc, duckdb.OutOfMemoryException):
        from pipeline.warehouse.hosts import memory_limit

        return (f"\nDuckDB may use {memory_limit()} in this command: run it again with more, e.g. "
                "PIPELINE_MEMORY_LIMIT=4GB pipeline sql …")
    try:
        if isinstance(exc, duckdb.CatalogException) and "does not exist" in str(exc):
            names = [r[0] for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
                "UNION SELECT view_name FROM duckdb_views() WHERE schema_name = 'main' AND NOT internal ORDER BY 1"
            ).fetchall()]
            return "\nthe warehouse's tables and views: " + ", ".join(names)
        if isinstance(exc, duckdb.ParserException):
            keywords = [r[0] for r in con.execute(
                "SELECT DISTINCT k.keyword_name FROM duckdb_keywords() k JOIN duckdb_columns() c "
                "ON c.column_name = k.keyword_name WHERE c.schema_name = 'main' AND k.keyword_category <> 'unreserved'"
            ).fetchall()]
            bare = [k for k in keywords if re.search(rf'(?<!["\w.]){re.escape(k)}(?![\w"])', query, re.IGNORECASE)]
            if bare:
                return "\n" + ", ".join(f'`{k}`' for k in bare) + " is a SQL keyword: write the column as " + \
                    ", ".join(f'"{k}"' for k in bare) + " (in double quotes)"
    except duckdb.Error:
        pass
    return ""


def table(columns: list[str], rows: list[tuple[Any, ...]], out: Any = None) -> None:
    """Rows as a rich table on stdout, or on the console `out` (the row count on stderr)."""
    from rich.table import Table

    from pipeline.console import console, visible

    t = Table(show_lines=False)
    for c in columns:
        t.add_column(visible(c))
    for r in rows:
        t.add_row(*[visible(None if v is None else str(plain(v))) for v in r])
    # A terminal's own width; piped output is not wrapped at 80 columns unless COLUMNS says so.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200
    (out or console(width)).print(t)
    sys.stderr.write(f"{len(rows)} rows\n")
