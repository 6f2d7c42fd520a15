"""Warehouse verbs: ingest, sessions, read, check-real (`sql` and `search` have modules of their own)."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from pipeline.cli.main import add_db, add_json, add_wait, day_option, positive_int, print_json
from pipeline.consolidator import limits
from pipeline.warehouse import db

DEFAULT_REAL = "../shared/real-transcripts"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ingest", help="read new transcript lines into the warehouse (incremental)",
        description="Store every line of every *.jsonl under PATH in the warehouse, reading each file from "
        "where the last ingest stopped. Lines that are not JSON or not UTF-8 are kept and counted as problems; "
        "see them with: pipeline sql \"SELECT * FROM ingest_problems\".",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="transcript files or folders (every *.jsonl below)")
    add_db(p)
    add_wait(p)
    add_json(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser(
        "sessions", help="list sessions: project, span, models, harness, prompts, turns, tool calls, tokens, cost",
        description="One row per session, filtered, sorted and cut as asked: project, format, span, models, harness "
        "versions, prompts (what the user typed), turns (model responses; README, Turns), tool calls, tokens by kind "
        "and list-price cost (a subagent's own calls; `pipeline usage session` counts them with the parent), line "
        "count, where the next night starts and linked memories. With --json: the list_sessions tool's shape, "
        "with those columns added.",
    )
    p.add_argument("--pending", action="store_true", help="only what the next night will offer")
    p.add_argument("--project", metavar="P", help="only sessions of this project (slug, or the cwd)")
    p.add_argument("--since", metavar="D", help="only sessions active on this UTC day or later (YYYY-MM-DD)")
    p.add_argument("--until", metavar="D", help="only sessions active on this UTC day or earlier")
    p.add_argument("--format", choices=("claude-code", "codex", "jsonl"), metavar="F",
                   help="only sessions of this format: claude-code, codex, jsonl")
    p.add_argument("--sort", metavar="COLUMN", help="sort by this column (its --json name, e.g. lastAt, cost, "
                   "totalTokens, turns; smallest first)")
    p.add_argument("--desc", action="store_true", help="with --sort: largest first")
    p.add_argument("--limit", type=positive_int, metavar="N", help="at most N sessions")
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_sessions)

    p = sub.add_parser(
        "read", help="print lines START..END of one session",
        description=f"Lines START to END (numbered from 1, both included) of one session, each cut at --width "
        f"characters; at most {limits.MAX_READ_LINES} lines and {limits.MAX_RESULT_CHARS:,} characters per read.",
    )
    p.add_argument("session_id", metavar="SESSION_ID", help="from `pipeline sessions`")
    p.add_argument("start", type=int, metavar="START", help="first line (1-based)")
    p.add_argument("end", type=int, metavar="END", help="last line, included")
    p.add_argument("--width", type=int, default=limits.DEFAULT_WIDTH, metavar="N",
                   help=f"characters per line (default {limits.DEFAULT_WIDTH}, at most {limits.MAX_WIDTH})")
    _add_redact(p)
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_read)

    p = sub.add_parser(
        "check-real", help="ingest a folder of real transcripts into a scratch warehouse and check the invariants",
        description="Ingests every *.jsonl under FOLDER into a scratch warehouse (deleted afterwards, unless --db) "
        "and prints one line per invariant with its figures: no negative token count, usage equal to an "
        "independent recount, exit codes parsed wherever recorded, prompts counted alike by sessions and "
        "messages, every line stored byte for byte, sessions whose model is not recorded, secrets found and masked "
        "per kind. Exit 1 when one fails.",
    )
    p.add_argument("folder", nargs="?", default=DEFAULT_REAL, metavar="FOLDER",
                   help=f"transcripts to check (default {DEFAULT_REAL})")
    p.add_argument("--db", metavar="FILE", help="keep the warehouse in FILE instead of a scratch file")
    add_json(p)
    p.set_defaults(func=cmd_check_real)


def _add_redact(p: argparse.ArgumentParser) -> None:
    p.add_argument("--redact", action="store_true",
                   help="mask secrets ([REDACTED:kind]) as the consolidator's model sees them; "
                        "without it you see the raw transcript")


def cmd_ingest(args: argparse.Namespace) -> int:
    from pipeline.calls import rates
    from pipeline.warehouse import ingest  # numpy and pyarrow: only ingest needs them

    # Nothing new (the usual nightly case on a quiet day): answered without a write session. Little new:
    # written into the published file itself rather than a copy of it (pipeline.warehouse.publish).
    preview = ingest.preview(args.db, args.paths)
    report = preview.report
    if report is None:
        with db.writing(args.db, wait=args.wait, in_place=preview.small) as con:
            report = ingest.ingest(con, args.paths, progress=not args.json, found=preview)
            rates.store_after_ingest(con, report.warnings)
    for warning in report.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if args.json:
        print_json(report.to_json())
    else:
        sys.stderr.write(f"ingested {report.summary()} into {db.config.db_path(args.db)}\n")
        if report.problems:
            noisy = sorted((f for f in report.files if f.problems), key=lambda f: -f.problems)
            for f in noisy[:5]:
                sys.stderr.write(f"  {f.problems} problem(s) in {f.path}\n")
            if len(noisy) > 5:
                sys.stderr.write(f"  … and {len(noisy) - 5} more file(s)\n")
            sys.stderr.write(
                "  each one, with its line: pipeline sql \"SELECT * FROM ingest_problems ORDER BY path, line_no\"\n"
            )
    return 1 if report.errors else 0


def cmd_sessions(args: argparse.Namespace) -> int:
    from pipeline.usage.session_table import SessionFilter, session_table

    flt = SessionFilter(project=args.project, since=day_option(args.since, "--since"), until=day_option(args.until, "--until"),
                        format=args.format)
    with db.reading(args.db) as con:
        if args.pending:
            from pipeline.consolidator import pending

            entries = pending.pending_sessions(con)
        else:
            from pipeline.consolidator import tools

            entries = tools.list_sessions(con, redact=False)
        entries = session_table(con, entries, flt, sort=args.sort, descending=args.desc, limit=args.limit)
    if args.json:
        print_json(entries)
        return 0
    if not entries:
        filtered = any(v is not None for v in (args.project, args.since, args.until, args.format))
        sys.stdout.write("no session matches these filters\n" if filtered else
                         "nothing pending: every session's lines have been read by a night\n" if args.pending
                         else "no sessions yet: run `pipeline ingest PATH` first\n")
        return 0
    _sessions_table(entries, pending=args.pending)
    return 0


def _minute(at: str | None) -> str:
    return at[:16].replace("T", " ") if at else ""


def _sessions_table(entries: list[dict[str, Any]], *, pending: bool) -> None:
    import os

    from pipeline.console import Column, grid_widths, print_grid
    from pipeline.console import console as new_console

    # a terminal gets a rich console (bold header, its own width); piped output is plain text, COLUMNS wide
    # when set, else 220, written without loading rich (`print_grid` with no console)
    console = new_console() if sys.stdout.isatty() else None
    columns_env = os.environ.get("COLUMNS", "")
    width = console.width if console is not None else int(columns_env) if columns_env.isdigit() else 220
    memories = any(e["linkedMemories"] for e in entries)
    counts = ("prompts", "turns", "tools", "tokens", "cost $", "lines", *(("next",) if pending else ()), *(("mem",) if memories else ()))

    columns = [Column("sessionId"), Column("project", max_width=28), Column("first (UTC)"), Column("models", max_width=28),
               Column("harness"), *(Column(name, right=True) for name in counts)]
    rows = []
    for e in entries:
        versions = e["harnessVersions"]
        harness = versions[-1] + (f" +{len(versions) - 1}" if len(versions) > 1 else "") if versions else ""
        cost = f"{e['cost']:.2f}" + ("" if e["costComplete"] else "+")  # + : some calls have no known price
        rows.append([e["sessionId"], e["slug"] or "", _minute(e["firstAt"]), ", ".join(e["models"]), harness,
                     str(e["prompts"]), str(e["turns"]), str(e["toolCalls"]), f"{e['totalTokens']:,}", cost,
                     str(e["lineCount"]), *((str(e["newFromLine"]),) if pending else ()),
                     *((str(len(e["linkedMemories"])),) if memories else ())])
    widths = grid_widths(columns, rows)
    # A narrow terminal loses the models, then the project (both are in --json), never an id or a count.
    for dropped in ((), (3,), (1, 3)):
        keep = [i for i in range(len(columns)) if i not in dropped]
        if sum(widths[i] for i in keep) + 2 * (len(keep) - 1) <= width or len(dropped) == 2:
            break
    print_grid(console, [columns[i] for i in keep], [[row[i] for i in keep] for row in rows] if dropped else rows,
               [widths[i] for i in keep])
    unpriced = " (cost +: some calls' model has no known list price)" if any(not e["costComplete"] for e in entries) else ""
    sys.stderr.write(f"{len(entries)} session(s){unpriced}; every column, and the last time, with --json\n")


def cmd_read(args: argparse.Namespace) -> int:
    from pipeline.consolidator import tools

    with db.reading(args.db) as con:
        result = tools.read_lines(con, args.session_id, args.start, args.end, args.width, redact=args.redact)
    if args.json:
        print_json(result)
        return 0
    if sys.stdout.isatty():
        # On a terminal the line's control characters are shown as styled escapes (they would move the
        # cursor or restyle the screen) and the cut is marked by style; piped, the text is as stored.
        from rich.text import Text

        from pipeline.console import console, visible

        out = console()
        for line in result["lines"]:
            row = Text()
            row.append(f"{line['line']}\t", style="dim")
            row.append(visible(line["text"]))
            if line["cut"]:
                row.append(" …cut", style="dim reverse")
            out.print(row, soft_wrap=True)
    else:
        for line in result["lines"]:
            tail = " …[cut]" if line["cut"] else ""
            sys.stdout.write(f"{line['line']}\t{line['text']}{tail}\n")
    shown_to = result["end"]
    if result["truncated"]:
        limit = (
            f"at most {limits.MAX_READ_LINES} lines per read" if len(result["lines"]) >= limits.MAX_READ_LINES
            else f"at most {limits.MAX_RESULT_CHARS:,} characters per read; a smaller --width fits more lines"
        )
        rest_to = min(args.end, result["lineCount"])
        sys.stderr.write(
            f"listing stopped after line {shown_to} ({limit}); "
            f"continue with: pipeline read {shlex.quote(args.session_id)} {shown_to + 1} {rest_to}\n"
        )
    elif args.end > shown_to:
        sys.stderr.write(f"session {args.session_id} has {result['lineCount']} lines; shown {args.start}..{shown_to}\n")
    return 0


__all__ = ["register"]


def cmd_check_real(args: argparse.Namespace) -> int:
    from pipeline.cli import fidelity  # noqa: F401 - registers the invariant "views show values"
    from pipeline.warehouse.checks import run_checks

    report = run_checks(args.folder, db=args.db)
    if args.json:
        print_json(report.to_json())
    else:
        sys.stdout.write(f"{report.files} transcripts under {report.folder}\n")
        sys.stdout.write("".join(line + "\n" for line in report.lines()))
    return 0 if report.ok else 1
