"""`pipeline usage daily|weekly|monthly|session|blocks`: tokens and list-price cost, in ccusage's names."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pipeline.cli.main import add_db, add_json, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "usage", help="tokens by kind and list-price cost by day, week, month, session or 5-hour block",
        description="Tokens (input neither read from nor written to the cache, cache writes, cache reads, output) "
        "and list-price cost of the model calls derived from transcripts, grouped as ccusage groups them: by "
        "local day, week (starting Sunday), month, session (a Claude Code subagent counts with its parent) or "
        "5-hour billing block (a block starts at the hour of its first call). --json prints ccusage's JSON names.",
    )
    p.add_argument("report", choices=("daily", "weekly", "monthly", "session", "blocks"), metavar="REPORT",
                   help="daily | weekly | monthly | session | blocks")
    p.add_argument("--breakdown", action="store_true", help="one line per model under each period (the table)")
    p.add_argument("--source", metavar="S", help="only calls from this source (claude-code, codex, consolidator, …; "
                   "default claude-code and codex)")
    p.add_argument("--project", metavar="P", help="only sessions of this project (the slug `pipeline sessions` shows)")
    p.add_argument("--since", metavar="D", help="first local day included (YYYY-MM-DD or YYYYMMDD)")
    p.add_argument("--until", metavar="D", help="last local day included")
    p.add_argument("--tz", default="UTC", metavar="Z", help="time zone of the days (IANA name, default UTC)")
    p.add_argument("--start-of-week", default="sunday", metavar="DAY", help="first day of a week (default sunday, as ccusage)")
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_usage)


def cmd_usage(args: argparse.Namespace) -> int:
    from pipeline.usage.report import UsageFilter, parse_day, usage_report
    from pipeline.warehouse import db

    flt = UsageFilter(
        source=args.source, project=args.project, tz=args.tz, start_of_week=args.start_of_week.lower(),
        since=parse_day(args.since) if args.since else None, until=parse_day(args.until) if args.until else None,
    )
    with db.reading(args.db) as con:
        report = usage_report(con, args.report, flt)
    if args.json:
        print_json(report)
        return 0
    _print(report, args.report, args.breakdown)
    return 0


def _n(value: int) -> str:
    return f"{value:,}"


def _print(report: dict[str, Any], kind: str, breakdown: bool) -> None:
    from rich.table import Table

    from pipeline.console import console, visible

    key = "sessions" if kind == "session" else kind
    rows = report[key]
    first = "session" if kind == "session" else ("block start (UTC)" if kind == "blocks" else kind.removesuffix("ly").replace("dai", "day"))
    table = Table(first, "models")
    for name in ("input", "cache write", "cache read", "output", "total tokens", "cost (USD)"):
        table.add_column(name, justify="right")
    for r in rows:
        models = f"{len(r['modelsUsed'])} model(s)" if breakdown and len(r["modelsUsed"]) > 1 else ", ".join(r["modelsUsed"])
        table.add_row(visible(r.get("sessionId") or r["period"]), visible(models),
                      *(_n(r[k]) for k in ("inputTokens", "cacheCreationTokens", "cacheReadTokens", "outputTokens", "totalTokens")),
                      f"{r['totalCost']:.2f}")
        if breakdown:
            for m in r["modelBreakdowns"]:
                table.add_row("", visible(f"└ {m['modelName']}"), *(_n(m[k]) for k in ("inputTokens", "cacheCreationTokens",
                              "cacheReadTokens", "outputTokens")), _n(sum(m[k] for k in ("inputTokens", "cacheCreationTokens",
                              "cacheReadTokens", "outputTokens"))), f"{m['cost']:.2f}", style="dim")
    t = report["totals"]
    table.add_section()
    table.add_row("total", "", *(_n(t[k]) for k in ("inputTokens", "cacheCreationTokens", "cacheReadTokens", "outputTokens",
                  "totalTokens")), f"{t['totalCost']:.2f}", style="bold")
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200
    console(width).print(table)
    if t.get("unpricedModels"):
        sys.stderr.write(f"no list price known for: {', '.join(t['unpricedModels'])} (their calls add no cost)\n")
