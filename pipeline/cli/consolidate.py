"""Consolidation verbs: `consolidate` (one batch → artifact folder) and `check-answer`.

Both are thin skins: `pipeline.consolidator.batch.run_batch` and `pipeline.consolidator.contract.check_answer_file` do
the work, so a notebook gets exactly what the command line gets.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.cli.main import add_db, add_json, print_json
from pipeline.cli.model_options import add_model_options, model_options
from pipeline.consolidator import pending
from pipeline.consolidator.artifact import Budgets
from pipeline.consolidator.batch import parse_session_ids, run_batch
from pipeline.consolidator.batch_input import BatchInput
from pipeline.consolidator.context import Event
from pipeline.consolidator.contract import check_answer_file
from pipeline.consolidator.engine import engine_choices
from pipeline.warehouse import db

_DEFAULTS = Budgets()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "consolidate",
        help="consolidate one batch of sessions into an artifact folder (answer, logs, run record)",
        description=(
            "Run the consolidator over one batch and write its artifact folder. Exit 0 when an answer "
            "was accepted, 1 when not (run.json in the folder says why)."
        ),
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--sessions", action="append", metavar="ID[,ID…]", help="the batch (repeatable)")
    which.add_argument("--pending", action="store_true", help="every session with lines not yet consolidated")
    which.add_argument("--input", metavar="DIR",
                       help="a batch input folder (a night's <batch>/input/): consolidate its sessions from it; "
                       "the warehouse is not opened")
    p.add_argument("--engine", choices=engine_choices(), default="auto",
                   help="auto (default): openai when OPENAI_API_KEY is set, else the offline rules")
    p.add_argument("--model", metavar="M", help="model name for the openai engine (env PIPELINE_MODEL)")
    p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint (env OPENAI_BASE_URL)")
    p.add_argument("--out", metavar="DIR",
                   help="the batch folder to write (default <runs>/<YYYY-MM-DD>/<run-id>/<batch-id>/)")
    p.add_argument("--runs", metavar="DIR", help="runs folder for the default --out (env PIPELINE_RUNS)")
    p.add_argument("--run-id", metavar="ID", help="run id to record (default: a new one)")
    p.add_argument("--batch-id", metavar="ID", help="batch id to record (default: derived from the sessions)")
    p.add_argument("--max-tool-calls", type=int, default=_DEFAULTS.max_tool_calls, metavar="N",
                   help=f"reading-tool calls allowed (default {_DEFAULTS.max_tool_calls})")
    p.add_argument("--max-submits", type=int, default=_DEFAULTS.max_submits, metavar="N",
                   help=f"submit_answer attempts allowed (default {_DEFAULTS.max_submits})")
    p.add_argument("--max-tokens", type=int, default=_DEFAULTS.max_tokens, metavar="N",
                   help=f"prompt + completion tokens allowed over the batch (default {_DEFAULTS.max_tokens})")
    p.add_argument("--max-seconds", type=float, default=_DEFAULTS.max_seconds, metavar="S",
                   help=f"wall time allowed (default {_DEFAULTS.max_seconds:g})")
    p.add_argument("--max-retries", type=int, default=2, metavar="N",
                   help="retries of one model request on 429/5xx/timeouts (default 2)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds to wait for one model reply (default 120)")
    add_model_options(p, retries_and_timeout=False)
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_consolidate)

    p = sub.add_parser(
        "check-answer",
        help="check an answer file against the contract (always prints JSON)",
        description="Exit 0 with {\"accepted\": true}, or 1 with {\"accepted\": false, \"problems\": [...]}. "
        "The output is always one JSON document, so --json changes nothing.",
    )
    p.add_argument("answer", metavar="ANSWER.json", help="the answer file: one JSON object (candidates, commitments, readSessionIds)")
    p.add_argument("--sessions", action="append", required=True, metavar="ID[,ID…]",
                   help="the batch the answer may cite (repeatable)")
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_check_answer)


def _progress(event: Event) -> None:
    sys.stderr.write(f"{event.text}\n")
    sys.stderr.flush()


def cmd_consolidate(args: argparse.Namespace) -> int:
    if args.pending:
        with db.reading(args.db) as con:
            ids = pending.pending_ids(con)
        if not ids:
            sys.stderr.write("no pending sessions: nothing to consolidate\n")
            if args.json:
                print_json({"outcome": None, "reason": "no pending sessions", "outDir": None, "sessionIds": []})
            return 0
    elif args.input:
        ids = list(BatchInput.load(args.input).session_ids)
    else:
        ids = parse_session_ids(args.sessions)
    budgets = {k: getattr(args, k) for k in ("max_tool_calls", "max_submits", "max_tokens", "max_seconds")}
    result = run_batch(
        ids, db=args.db, batch_input=args.input, engine=args.engine, model=args.model, base_url=args.base_url,
        out_dir=args.out, runs=args.runs, budgets=budgets, run_id=args.run_id, batch_id=args.batch_id,
        on_event=_progress, **model_options(args),
    )
    if args.json:
        print_json(result.to_json())
    else:
        sys.stderr.write(f"{result.outcome}: wrote {result.out_dir}\n")
        sys.stdout.write(f"{result.out_dir}\n")
    return result.exit_code


def cmd_check_answer(args: argparse.Namespace) -> int:
    # Always JSON, with or without --json: an error is then the {"error", "exitCode"} document too (exit 2).
    args.json = True
    result = check_answer_file(args.answer, parse_session_ids(args.sessions), args.db)
    print_json(result.report())
    return 0 if result.accepted else 1
