"""The `pipeline` command: a thin skin over library functions.

Each area of the product keeps its verbs in its own module of `pipeline/cli/` with a `register(subparsers)`
function; this file only assembles them and turns errors into exit codes:
0 done, 1 ran with a negative outcome, 2 wrong invocation.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from pipeline.display import plain
from pipeline.errors import PipelineError, UsageError

# Modules that contribute verbs, in the order `pipeline --help` lists them, with the verbs each
# registers. Knowing the verbs up front lets a command import only its own module: importing them
# all (pydantic models, the consolidator, the importers) cost more than a whole re-ingest of a
# few changed files. tests/cli/test_cli.py checks this table against what the modules register.
COMMANDS: dict[str, tuple[str, ...]] = {
    "pipeline.cli.warehouse": ("ingest", "sessions", "read", "check-real"),
    "pipeline.cli.sql": ("sql",),
    "pipeline.cli.search": ("search",),
    "pipeline.cli.show": ("show",),
    "pipeline.cli.consolidate": ("consolidate", "check-answer"),
    "pipeline.cli.corpus": ("apply", "memories", "tasks"),
    "pipeline.cli.mcp": ("mcp",),
    "pipeline.cli.nightly": ("nightly",),
    "pipeline.cli.eval": ("eval",),
    "pipeline.cli.calls": ("import-calls",),
    "pipeline.cli.cache": ("simulate", "cache-report", "cache-eval"),
    "pipeline.cli.export": ("export", "html"),
    "pipeline.cli.usage": ("usage",),
}
COMMAND_MODULES = tuple(COMMANDS)


# The command line being parsed, so that a usage error can honour --json (argparse does not say).
_argv: list[str] = []


def _options_part(argv: Sequence[str]) -> list[str]:
    return list(argv[: argv.index("--")] if "--" in argv else argv)


# Verbs whose output is JSON whether or not --json is given.
ALWAYS_JSON = frozenset({"check-answer"})


def _wants_json(argv: Sequence[str]) -> bool:
    options = _options_part(argv)
    if _verb_in(argv) in ALWAYS_JSON:
        return True
    if "--json" in options or "--format=json" in options:
        return True
    return any(a == "--format" and b == "json" for a, b in itertools.pairwise(options))


# Positional arguments that hold free text (a search phrase, an SQL query): a value of theirs that starts
# with '-' reads as an unknown option, and is the one case where `--` is the fix.
PHRASE_ARGUMENTS = frozenset({"phrase", "query"})


def _verb_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The subparser of the verb on this command line (argparse reports unknown arguments from the top)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            verb = _verb_in(argv)
            if verb in action.choices:
                return action.choices[verb]
    return parser


def dash_hint_applies(parser: argparse.ArgumentParser, message: str, argv: Sequence[str]) -> bool:
    """True when a phrase that starts with '-' is the likely cause of this usage error: the verb takes a
    free-text positional, and the command line holds a dash token that is none of the verb's options and
    looks like a phrase rather than a mistyped flag (one dash, or spaces inside), or the phrase itself is
    reported missing because such a token swallowed its place."""
    verb = _verb_parser(parser, argv)
    if not any(not a.option_strings and a.dest in PHRASE_ARGUMENTS for a in verb._actions):
        return False
    options = _options_part(argv)
    unknown = [a for a in options if a.startswith("-") and a != "-"
               and a.split("=")[0] not in verb._option_string_actions and a not in ("--db",)]
    if not unknown:
        return False
    if "the following arguments are required" in message:
        return True
    return "unrecognized arguments" in message and any(not a.startswith("--") or " " in a for a in unknown)


class Parser(argparse.ArgumentParser):
    """argparse that says what to do next on a usage error (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        hint = ""
        if dash_hint_applies(self, message, _argv):
            hint = "\n(an argument that starts with '-' goes after '--', e.g. pipeline search -- ID '-m pytest')"
        full = f"{self.prog}: error: {message}{hint}\n(see `{self.prog} --help`)\n"
        if _wants_json(_argv):
            print_json({"error": f"{message}{hint}", "exitCode": 2})
        self.exit(2, full)


def add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="FILE", help="warehouse file (default data/warehouse.duckdb, env PIPELINE_DB)")


def add_wait(parser: argparse.ArgumentParser) -> None:
    """`--wait SECONDS` for a verb that writes the warehouse (while another writing command runs)."""
    parser.add_argument(
        "--wait", type=non_negative_float, default=600.0, metavar="SECONDS",
        help="while another command writes the warehouse, wait this long for it (default 600), then stop "
        "with exit 1 naming it; 0 stops at once",
    )


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more")
    return value


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")


def day_option(text: str | None, flag: str) -> Any:
    """A --since / --until value as a date (None when not given); a usage error names the flag."""
    import datetime as dt

    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a day: write YYYY-MM-DD") from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return value


def print_json(data: Any) -> None:
    """`data` as JSON: objects are spread over lines down to the first array, and each item of an array
    is one compact line (a report's row, a session), which `grep` and `jq` read alike. json's C encoder
    writes only unindented JSON; indenting every level went through its Python encoder, most of a
    second for the sessions of a heavy home."""
    out: list[str] = []
    _json_lines(data, 0, out)
    out.append("\n")
    sys.stdout.write("".join(out))


_COMPACT = json.JSONEncoder(ensure_ascii=False, default=plain, separators=(", ", ": "))


def _json_lines(value: Any, depth: int, out: list[str]) -> None:
    if not isinstance(value, dict | list | tuple) or not value:
        out.append(_COMPACT.encode(value))
        return
    inner = "\n" + "  " * (depth + 1)
    if isinstance(value, dict):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            out.append(("" if i == 0 else ",") + inner + _COMPACT.encode(str(key)) + ": ")
            _json_lines(item, depth + 1, out)
        out.append("\n" + "  " * depth + "}")
    else:
        out.append("[" + inner + ("," + inner).join(_COMPACT.encode(item) for item in value) + "\n" + "  " * depth + "]")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trace-pipeline")
    except PackageNotFoundError:
        return "(not installed)"


class _VersionAction(argparse.Action):
    """`--version`, looked up only when asked for (reading the package metadata costs a command's start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kw: Any) -> None:
        sys.stdout.write(f"{parser.prog} {_version()}\n")
        parser.exit(0)


def _verb_in(argv: Sequence[str]) -> str | None:
    """The verb of a command line, when it can be told without parsing (global --db skipped)."""
    args = iter(argv)
    for arg in args:
        if arg == "--db":
            next(args, None)
        elif not arg.startswith("--db="):
            return None if arg.startswith("-") else arg
    return None


def build_parser(argv: Sequence[str] | None = None) -> Parser:
    """The parser for `argv`: with only the module of its verb when that is known, else with all."""
    parser = Parser(prog="pipeline", description="Agent transcripts → DuckDB warehouse → memory corpus; cache analytics.")
    parser.add_argument("--db", dest="global_db", metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    verb = _verb_in(argv) if argv is not None else None
    owners = [m for m, verbs in COMMANDS.items() if verb in verbs]
    for name in owners or COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def _validation_error(exc: BaseException) -> bool:
    """A pydantic ValidationError, told without importing pydantic (a verb that never loaded it raised none)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(exc, pydantic.ValidationError)


def _validation_message(exc: Any) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "value"
        parts.append(f"{where.replace('_', '-')}: {err['msg']}")
    return "; ".join(parts)


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    sys.stderr.write(f"pipeline {args.verb}: {message}\n")
    if getattr(args, "json", False):
        print_json({"error": message, "exitCode": code})
    return code


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _argv[:] = argv
    if argv[:1] == ["--version"]:  # answered before any verb's module is imported
        sys.stdout.write(f"pipeline {_version()}\n")
        return 0
    parser = build_parser(argv)
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse leaves a verb's unknown flags to the top parser, whose usage says nothing of the
        # verb's own flags: the verb's parser reports them, with its usage.
        verbs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        own = verbs.choices.get(args.verb) if verbs and args.verb else None
        (own or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    if hasattr(args, "db") and args.db is None and args.global_db:
        args.db = args.global_db
    try:
        result = args.func(args)
    except PipelineError as exc:
        return _fail(args, str(exc), exc.exit_code)
    except BrokenPipeError:
        # the reader (`| head`) went away: stop quietly, as other Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(args, f"{where}{exc.strerror or exc}", 1)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except Exception as exc:
        if _validation_error(exc):  # options checked by a pydantic model at the library boundary
            return _fail(args, f"invalid option: {_validation_message(exc)}", 2)
        if type(exc).__module__.lstrip("_").startswith("duckdb"):
            # out of memory, an I/O error, a full disk: DuckDB rolled the transaction back
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            fix = "free memory or disk space and run it again"
            if type(exc).__name__ == "OutOfMemoryException":
                from pipeline.warehouse.hosts import memory_limit

                fix = (f"DuckDB may use {memory_limit()} here: run it again with more, e.g. PIPELINE_MEMORY_LIMIT=4GB "
                       "(what it cannot hold in memory it writes beside the warehouse, so keep disk space free)")
            return _fail(args, f"DuckDB stopped this command: {first}. Its open transaction was rolled back "
                               f"(what it had committed stays); {fix}.", 1)
        raise
    return int(result or 0)
