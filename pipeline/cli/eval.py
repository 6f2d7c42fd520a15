"""`pipeline eval`: measure an engine on labelled sessions (a thin skin over `pipeline.eval.evaluate`)."""

from __future__ import annotations

import argparse
import sys

from pipeline.cli.main import add_db, add_json, print_json
from pipeline.cli.model_options import add_model_options, model_options
from pipeline.consolidator.context import Event
from pipeline.consolidator.engine import engine_choices


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="run an engine over a gold file's reviewed sessions and score what it proposes",
        description=(
            "Plan the gold file's reviewed sessions into batches as the nightly job would, run the engine on "
            "each (artifact folders only: the corpus, tasks and watermarks are never touched), and score the "
            "proposed memories and commitments against the gold items: proposed, matched, matched only a "
            "borderline item, unmatched, precision, recall. Exit 0 when every batch ended with an accepted "
            "answer, 1 when one did not, 2 on a wrong invocation or a malformed gold file."
        ),
    )
    p.add_argument("--gold", required=True, metavar="FILE", help="gold JSONL (reviewed, memory, commitment, not_commitment)")
    p.add_argument("--engine", choices=engine_choices(), default="auto",
                   help="auto (default): openai when OPENAI_API_KEY is set, else the offline rules")
    p.add_argument("--model", metavar="M", help="model name for the openai engine (env PIPELINE_MODEL)")
    p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint (env OPENAI_BASE_URL)")
    p.add_argument("--out", metavar="DIR", help="folder for the batches' artifact folders (default: a new temporary folder)")
    for name in ("max-tool-calls", "max-submits", "max-tokens", "max-seconds"):
        p.add_argument(f"--{name}", type=float if name == "max-seconds" else int, metavar="N",
                       help="per-batch budget (default: the engine's)")
    add_model_options(p)
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_eval)


def _progress(event: Event) -> None:
    sys.stderr.write(f"{event.text}\n")
    sys.stderr.flush()


def cmd_eval(args: argparse.Namespace) -> int:
    from pipeline.eval.evaluate import evaluate, render_table

    result = evaluate(
        args.gold, db=args.db, engine=args.engine, model=args.model, base_url=args.base_url,
        out_dir=args.out, on_event=_progress,
        batch_options={**model_options(args), "budgets": {k: getattr(args, k) for k in (
            "max_tool_calls", "max_submits", "max_tokens", "max_seconds")}},
    )
    for warning in result.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if args.json:
        print_json(result.to_json())
    else:
        sys.stdout.write(render_table(result))
    return result.exit_code
