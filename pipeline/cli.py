"""The `pipeline` command: a thin skin over library functions.

Each area of the product keeps its verbs in its own `cli_*.py` module with a `register(subparsers)`
function; this file only assembles them and turns errors into exit codes:
0 done, 1 ran with a negative outcome, 2 wrong invocation.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from pipeline.errors import PipelineError

# Modules that contribute verbs, in the order `pipeline --help` lists them.
COMMAND_MODULES = (
    "pipeline.cli_warehouse",
    "pipeline.cli_consolidate",
    "pipeline.cli_corpus",
    "pipeline.cli_nightly",
    "pipeline.cli_calls",
    "pipeline.cli_cache",
)


class Parser(argparse.ArgumentParser):
    """argparse that says what to do next on a usage error (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n(see `{self.prog} --help`)\n")


def add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="FILE", help="warehouse file (default data/warehouse.duckdb, env PIPELINE_DB)")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    sys.stdout.write("\n")


def build_parser() -> Parser:
    parser = Parser(prog="pipeline", description="Agent transcripts → DuckDB warehouse → memory corpus; cache analytics.")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        result = args.func(args)
    except PipelineError as exc:
        sys.stderr.write(f"pipeline {args.verb}: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    return int(result or 0)
