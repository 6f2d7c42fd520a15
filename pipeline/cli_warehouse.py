"""Warehouse verbs: ingest, sql, sessions, search, read."""

from __future__ import annotations

import argparse
import csv
import sys
from typing import Any

from pipeline import db, ingest, tools
from pipeline.cli import add_db, add_json, print_json
from pipeline.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="read new transcript lines into the warehouse (incremental)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="transcript files or folders (every *.jsonl below)")
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("sql", help="run a SQL query against the warehouse (read-only)")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    add_db(p)
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("sessions", help="list sessions in the list_sessions shape")
    p.add_argument("--pending", action="store_true", help="only what the next night will offer")
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_sessions)

    p = sub.add_parser("search", help="literal, case-sensitive search in one session's transcript")
    p.add_argument("session_id", metavar="SESSION_ID")
    p.add_argument("phrase", metavar="PHRASE")
    p.add_argument("--max-hits", type=int, default=tools.MAX_HITS, metavar="N")
    p.add_argument("--context", type=int, default=tools.CONTEXT_CHARS, metavar="N", help="characters each side")
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("read", help="print lines START..END of one session")
    p.add_argument("session_id", metavar="SESSION_ID")
    p.add_argument("start", type=int, metavar="START")
    p.add_argument("end", type=int, metavar="END")
    p.add_argument("--width", type=int, default=tools.DEFAULT_WIDTH, metavar="N")
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_read)


def cmd_ingest(args: argparse.Namespace) -> int:
    with db.writing(args.db) as con:
        report = ingest.ingest(con, args.paths, progress=not args.json)
    for warning in report.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if args.json:
        print_json(report.to_json())
    else:
        sys.stderr.write(f"ingested {report.summary()} into {db.config.db_path(args.db)}\n")
    return 1 if report.errors else 0


def cmd_sql(args: argparse.Namespace) -> int:
    with db.reading(args.db) as con:
        try:
            cur = con.execute(args.query)
        except Exception as exc:  # duckdb raises many classes; all are the user's query
            raise UsageError(f"the query failed: {exc}") from exc
        columns = [d[0] for d in cur.description or []]
        rows = cur.fetchall()
    if args.format == "json":
        print_json([dict(zip(columns, r, strict=True)) for r in rows])
    elif args.format == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(columns)
        w.writerows(rows)
    else:
        _table(columns, rows)
    return 0


def _table(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(*columns, show_lines=False)
    for r in rows:
        table.add_row(*["" if v is None else str(v) for v in r])
    Console(width=200).print(table)
    sys.stderr.write(f"{len(rows)} rows\n")


def cmd_sessions(args: argparse.Namespace) -> int:
    with db.reading(args.db) as con:
        if args.pending:
            from pipeline import pending

            entries = pending.pending_sessions(con)
        else:
            entries = tools.list_sessions(con)
    if args.json:
        print_json(entries)
        return 0
    cols = ["sessionId", "slug", "firstAt", "lastAt", "prompts", "turns", "lineCount", "newFromLine"]
    _table([*cols, "memories"], [(*tuple(e[c] for c in cols), len(e["linkedMemories"])) for e in entries])
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    with db.reading(args.db) as con:
        result = tools.search_transcript(con, args.session_id, args.phrase, max_hits=args.max_hits, context=args.context)
    if args.json:
        print_json(result)
        return 0
    for h in result["hits"]:
        sys.stdout.write(f"{h['line']}:{h['column']}: …{h['before']}[{h['match']}]{h['after']}…\n")
    more = " (listing truncated)" if result["truncated"] else ""
    sys.stderr.write(f"{result['total']} occurrence(s) in {args.session_id}{more}\n")
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    with db.reading(args.db) as con:
        result = tools.read_lines(con, args.session_id, args.start, args.end, args.width)
    if args.json:
        print_json(result)
        return 0
    for line in result["lines"]:
        tail = " …[cut]" if line["cut"] else ""
        sys.stdout.write(f"{line['line']}\t{line['text']}{tail}\n")
    if result["truncated"]:
        sys.stderr.write(f"listing truncated at line {result['end']} (at most {tools.MAX_READ_LINES} lines per read)\n")
    return 0


__all__ = ["register"]
