"""`pipeline show SESSION [FROM TO]`: a session as a conversation (terminal, --markdown, --html FILE)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pipeline.cli.main import add_db, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "show", help="a session as a conversation: messages, thinking, tool calls and results, markers",
        description="The session (or lines FROM..TO) as a person reads it: user and assistant messages, thinking, "
        "each tool call with its input and its result with the exit status, error flag or refusal, tool outputs "
        "folded after --fold lines, and markers where the conversation was compacted, a new (UTC) day began, or a "
        "subagent started. In the terminal by default; --markdown prints Markdown, --html FILE writes one "
        "self-contained page. Shows the raw transcript (secrets unmasked), as `pipeline read` does.",
    )
    p.add_argument("session_id", metavar="SESSION", help="from `pipeline sessions`")
    p.add_argument("start", nargs="?", type=int, metavar="FROM", help="first line (default 1)")
    p.add_argument("end", nargs="?", type=int, metavar="TO", help="last line, included (default the last)")
    p.add_argument("--hit", metavar="PHRASE", help="highlight every occurrence of PHRASE")
    p.add_argument("--fold", type=int, default=12, metavar="N", help="lines of a tool's output shown before folding (default 12; 0: all)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true", help="print Markdown instead")
    out.add_argument("--html", metavar="FILE", help="write a self-contained HTML page to FILE")
    out.add_argument("--json", action="store_true", help="print the entries as one JSON document (nothing folded)")
    add_db(p)
    p.set_defaults(func=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    from pipeline.errors import UsageError
    from pipeline.show.conversation import conversation
    from pipeline.warehouse import db

    if args.start is not None and args.end is None:
        raise UsageError("give both FROM and TO, or neither")
    if args.fold < 0:
        raise UsageError("--fold must be 0 or more")
    with db.reading(args.db) as con:
        conv = conversation(con, args.session_id, args.start, args.end)
    if args.json:
        print_json(conv.to_json())
        return 0
    if args.html:
        from pipeline.show.page import conversation_html

        path = Path(args.html)
        path.write_text(conversation_html(conv, hit=args.hit, fold_lines=args.fold), encoding="utf-8")
        sys.stderr.write(f"wrote {path} ({len(conv.items)} entries, lines {conv.start}–{conv.end})\n")
        return 0
    if args.markdown:
        from pipeline.show.markdown import conversation_markdown

        sys.stdout.write(conversation_markdown(conv, hit=args.hit, fold_lines=args.fold))
        return 0
    from pipeline.console import console
    from pipeline.show.terminal import print_conversation

    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 120
    print_conversation(conv, console(width), hit=args.hit, fold_lines=args.fold)
    return 0
