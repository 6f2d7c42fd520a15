"""`pipeline search PHRASE`: every occurrence over every session (or those the flags select)."""

from __future__ import annotations

import argparse
import sys

from pipeline.cli.main import add_db, add_json, day_option, print_json
from pipeline.errors import UsageError

FORMATS = ("claude-code", "codex", "jsonl")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "search", help="find a phrase in every session (literal and case-sensitive; -i to ignore case, --regex for a pattern)",
        description="Every occurrence of PHRASE in the stored transcript lines, over every session or those the "
        "flags select: literal and case-sensitive unless -i or --regex, counted as `grep -F` counts them on the files "
        "(non-overlapping, left to right, 1-based columns in characters). Each hit shows its session, project, "
        "line, time, role and the decoded text around it (the message or output, not the JSON wrapper); `total` "
        "counts every occurrence even when the listing is cut. `pipeline search SESSION_ID PHRASE` is the same "
        "as --session SESSION_ID. A phrase that starts with '-' goes after '--': pipeline search -- '-m pytest'.",
    )
    p.add_argument("phrase", nargs="+", metavar="PHRASE", help="the exact text to find (or SESSION_ID PHRASE)")
    p.add_argument("--session", action="append", metavar="ID", help="only this session (repeatable)")
    p.add_argument("--project", metavar="P", help="only sessions of this project (slug, or the cwd)")
    p.add_argument("--since", metavar="D", help="only lines written on this UTC day or later (YYYY-MM-DD)")
    p.add_argument("--until", metavar="D", help="only lines written on this UTC day or earlier")
    p.add_argument("--format", choices=FORMATS, metavar="F", help="only sessions of this format: " + ", ".join(FORMATS))
    p.add_argument("--role", choices=("user", "assistant", "tool"), metavar="R",
                   help="only lines of this role: user, assistant (replies, thinking, tool calls) or tool (tool results)")
    p.add_argument("--regex", action="store_true", help="PHRASE is a Python regular expression (literal is the default)")
    p.add_argument("-i", "--ignore-case", action="store_true", dest="ignore_case",
                   help="match whatever the case (text and phrase lower-cased); columns and text shown stay the line's own")
    p.add_argument("--limit", "--max-hits", type=int, default=50, metavar="N", dest="limit",
                   help="occurrences listed (default 50; the total is always exact)")
    p.add_argument("--context", type=int, default=80, metavar="N", help="characters shown each side (default 80)")
    p.add_argument("--redact", action="store_true",
                   help="mask secrets ([REDACTED:kind]) as the consolidator's model sees them; without it you "
                        "see the raw transcript")
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    from pipeline.warehouse import db
    from pipeline.warehouse.search_all import SearchFilter, search_all, sessions_of

    words = list(args.phrase)
    if len(words) > 2:
        raise UsageError(f"give one PHRASE (quote it for the shell), or SESSION_ID PHRASE; got {len(words)} arguments")
    sessions = list(args.session or [])
    if len(words) == 2:
        sessions.insert(0, words.pop(0))
    phrase = words[0]
    flt = SearchFilter(sessions=sessions_of(sessions), project=args.project, since=day_option(args.since, "--since"),
                       until=day_option(args.until, "--until"), format=args.format, role=args.role)
    with db.reading(args.db) as con:
        result = search_all(con, phrase, flt, regex=args.regex, ignore_case=args.ignore_case, limit=args.limit, context=args.context,
                            redact=args.redact)
    if args.json:
        print_json(result)
        return 0
    _print_hits(result["hits"])
    more = f", {len(result['hits'])} listed (--limit)" if result["truncated"] else ""
    sys.stderr.write(f"{result['total']} occurrence(s) in {result['sessions']} session(s){more}\n")
    return 0


HIT_STYLE = "bold reverse"


def _print_hits(hits: list[dict]) -> None:
    """Each hit as its place, then the text around it indented by four spaces (every line of it).

    The match is marked by style alone (on a terminal); the text is the transcript's, character for
    character, so no bracket or symbol can be taken for part of it. Piped output has no styles: the
    column and length on the first line say where the match is."""
    from rich.text import Text

    from pipeline.console import console, visible

    out = console(None if sys.stdout.isatty() else 100_000)
    for h in hits:
        place = Text()
        place.append(visible(f"{h['sessionId']}  {h.get('project') or '-'}  "))
        place.append(f"{h['line']}:{h['column']}", style="bold")
        place.append(visible(f"  +{len(h['match'])}  {h['at'] or '-'}  {h['role'] or '-'}"))
        out.print(place, soft_wrap=True)
        body = Text()
        body.append(visible(h["before"]))
        body.append(visible(h["match"], style=HIT_STYLE))
        body.append(visible(h["after"]))
        for line in body.split("\n", allow_blank=True):
            out.print(Text("    ") + line, soft_wrap=True)
