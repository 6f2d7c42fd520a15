"""LLM-call verbs: `import-calls` brings a provider's or a harness's call log into `llm_calls`.

Exit codes: 0 when the file was read (bad rows included: they are listed on stderr and in the
JSON report, and kept out of the table); 2 when the file is missing, unreadable or of an unknown
format, or the flags are wrong; 1 when another command kept the warehouse longer than `--wait`.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.calls.conventions import FORMATS, MAPPABLE
from pipeline.calls.importer import ImportReport, parse_mapping, read_calls, store_calls
from pipeline.cli.main import add_db, add_json, add_wait, print_json
from pipeline.warehouse import db

# Enough to see what is wrong with a file; the JSON report always lists every problem.
STDERR_PROBLEMS = 50


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-calls",
        help="import a log of LLM calls (API responses or a harness table) into llm_calls",
        description=(
            "Read JSONL, CSV/TSV or Parquet (by extension, else by content) with one API response or one "
            "harness call per row, and add its calls to llm_calls as source import:NAME. Importing the "
            "same file again adds nothing. Bad rows are reported with file:line:field and not stored."
        ),
    )
    p.add_argument("file", metavar="FILE", help="the call log: JSONL, CSV, TSV or Parquet (told from its content and suffix)")
    p.add_argument("--format", required=True, choices=FORMATS, help="the token convention of the rows")
    p.add_argument("--name", metavar="NAME", help="source name: rows get source import:NAME (default: the file's stem)")
    p.add_argument(
        "--map", action="append", default=[], metavar="COL=FIELD",
        help=(
            "take llm_calls column COL from FIELD (a column name or dotted JSON path); repeat, or "
            f"comma-separate. COL: {', '.join(MAPPABLE)} (token columns only with --format columns)"
        ),
    )
    add_db(p)
    add_wait(p)
    add_json(p)
    p.set_defaults(func=cmd_import_calls)


def cmd_import_calls(args: argparse.Namespace) -> int:
    mapping = parse_mapping(args.map)
    # Read and check the file before opening the warehouse: a typo in FILE must not create or
    # lock a warehouse.
    batch = read_calls(args.file, args.format, name=args.name, mapping=mapping)
    with db.writing(args.db, wait=args.wait) as con:
        report = store_calls(con, batch)
    _print_problems(report)
    for warning in report.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if args.json:
        print_json(report.to_json())
    sys.stderr.write(f"imported {report.summary()}\n")
    if report.rows and not report.good_rows:
        # Nothing usable came out of a non-empty file: a negative outcome, not a success.
        sys.stderr.write(f"no row of {report.file} could be read as {report.format}; is --format right?\n")
        return 1
    return 0


def _print_problems(report: ImportReport) -> None:
    for problem in report.problems[:STDERR_PROBLEMS]:
        sys.stderr.write(f"bad row: {problem.message}\n")
    rest = len(report.problems) - STDERR_PROBLEMS
    if rest > 0:
        sys.stderr.write(f"… and {rest} more problems (pass --json for the full list)\n")
