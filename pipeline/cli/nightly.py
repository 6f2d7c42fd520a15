"""The nightly verb: ingest, consolidate every pending batch through papermill, apply, report."""

from __future__ import annotations

import argparse
import sys

from pipeline import config
from pipeline.cli.main import add_db, add_json, add_wait, positive_int, print_json
from pipeline.cli.model_options import add_model_options, model_options
from pipeline.consolidator.engine import engine_choices
from pipeline.nightly import driver as nightly


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "nightly", help="the nightly job: ingest, consolidate pending sessions in batches, apply, report",
        description="Ingests the sources, lands any batch an interrupted night finished, runs the consolidate "
        "notebook once per batch of pending sessions, applies each artifact, and writes the night's report "
        "under <runs>/<YYYY-MM-DD>/<run-id>/. Exit 1 when a batch of this run failed.",
    )
    p.add_argument("--source", action="append", default=[], metavar="PATH",
                   help="transcripts to ingest first (repeatable); without it, what is already in the warehouse")
    p.add_argument("--engine", choices=engine_choices(), default="auto",
                   help="auto: openai when OPENAI_API_KEY is set, else the offline rules engine")
    p.add_argument("--parallel", type=positive_int, default=2, metavar="N", help="batches run at once (default 2)")
    p.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="where batches run: local (processes beside this one, --parallel at a time) or dask "
                   "(the workers of a Dask cluster; needs --scheduler)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="the Dask scheduler, e.g. tcp://10.0.0.5:8786 (else PIPELINE_DASK_SCHEDULER)")
    p.add_argument("--batch-timeout", type=float, default=3600.0, metavar="SECONDS",
                   help="a batch still running after this long is stopped and counted failed (default 3600)")
    p.add_argument("--date", metavar="YYYY-MM-DD", help="the night's date for the run folder (default today, UTC)")
    p.add_argument("--no-report", action="store_true", help="skip the cache analysis and the HTML report")
    p.add_argument("--cutover", metavar="YYYY-MM-DD",
                   help="the day date anchoring was deployed, for the cache report's before/after (env PIPELINE_CUTOVER)")
    p.add_argument("--cutover-version", metavar="HARNESS@VERSION",
                   help="or compare by harness version, e.g. claude-code@2.1.0 (env PIPELINE_CUTOVER_VERSION)")
    p.add_argument("--tz", metavar="ZONE",
                   help="time zone of sessions whose transcript records none, for the cache report (env PIPELINE_TZ; default UTC)")
    p.add_argument("--model", help="openai engine: model (else PIPELINE_MODEL)")
    p.add_argument("--base-url", help="openai engine: endpoint (else OPENAI_BASE_URL)")
    add_model_options(p)
    p.add_argument("--max-sessions", type=positive_int, default=nightly.planner.MAX_SESSIONS, metavar="N",
                   help="sessions per batch at most (default %(default)s)")
    p.add_argument("--max-bytes", type=positive_int, default=nightly.planner.MAX_BYTES, metavar="B",
                   help="new transcript bytes per batch at most (default %(default)s)")
    for name in ("max-tool-calls", "max-submits", "max-tokens", "max-seconds"):
        p.add_argument(f"--{name}", type=float if name == "max-seconds" else int, metavar="N",
                       help="per-batch budget (default: the engine's)")
    add_db(p)
    add_wait(p)
    p.add_argument("--corpus", metavar="DIR", help="memory corpus (default data/corpus, env PIPELINE_CORPUS)")
    p.add_argument("--runs", metavar="DIR", help="run folders (default data/runs, env PIPELINE_RUNS)")
    add_json(p)
    p.set_defaults(func=cmd_nightly)


def cmd_nightly(args: argparse.Namespace) -> int:
    opts = nightly.NightlyOptions(
        sources=args.source, engine=args.engine, parallel=args.parallel, date=args.date, report=not args.no_report,
        db=args.db, corpus=args.corpus, runs=args.runs, model=args.model, base_url=args.base_url,
        max_sessions=args.max_sessions, max_bytes=args.max_bytes, cutover=args.cutover, cutover_version=args.cutover_version, tz=args.tz, wait=args.wait,
        executor=args.executor, scheduler=args.scheduler, batch_timeout=args.batch_timeout,
        budgets={k: getattr(args, k) for k in ("max_tool_calls", "max_submits", "max_tokens", "max_seconds")},
        engine_options=model_options(args),
    )
    result = nightly.run_nightly(opts)
    if args.json:
        print_json(result.to_json())
    else:
        _summary(result, args)
    return result.exit_code


def _summary(result: nightly.NightResult, args: argparse.Namespace) -> None:
    from rich.table import Table

    from pipeline.console import console as new_console
    from pipeline.console import visible

    # The night's outcome is the command's result: stdout, so `pipeline nightly … > night.log` keeps it.
    # Progress while it runs stays on stderr.
    console = new_console(160)
    table = Table(title=f"night {result.day} · run {result.run_id} · {result.engine_note}")
    keys = ["batch", "sessions", "status", "memories", "linked", "watermarked", "tasksProposed", "seconds", "reason"]
    if args.executor == "dask":  # which worker ran each batch
        keys.insert(-1, "where")
    for col in keys:
        table.add_column("tasks proposed" if col == "tasksProposed" else col)
    # Batches an interrupted run left behind come first, marked as such: one whose notebook never
    # finished is planned again tonight and may show up twice, once from each run.
    rows = [(b, "earlier run: ") for b in result.recovered] + [(b, "") for b in result.batches]
    for b, origin in rows:
        r = {**b.row(), "batch": origin + b.batch_id}
        table.add_row(*[visible(r[c]) for c in keys])
    console.print(table)
    w = sys.stdout.write
    phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.phase_seconds.items())
    w(f"sessions still pending: {result.pending_after}   wall time: {result.seconds:.1f} s"
      + (f" ({phases})" if phases else "") + "\n")
    w(f"warehouse: {config.db_path(args.db).absolute()}\n")
    w(f"corpus:    {config.corpus_path(args.corpus).absolute()}\n")
    w(f"run:       {result.run_dir.absolute()}\n")
    if result.report:
        w(f"report:    {result.report.absolute()}\n")
