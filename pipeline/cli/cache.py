"""Cache-analytics verbs: simulate (a harness workload with a known truth) and cache-report."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from pydantic import ValidationError

from pipeline.cli.main import add_db, add_json, positive_int, print_json
from pipeline.errors import UsageError

DEFAULT_START = "2026-09-01"


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date; write YYYY-MM-DD") from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="simulate a harness workload through a provider prefix cache; write llm_calls rows (Parquet)",
        description="Replays a workload of sessions through the request builder and a provider cache model, "
        "rolling dates before the cutover and anchored dates from it on. Deterministic for a seed.",
    )
    p.add_argument("--start", type=_date, default=_date(DEFAULT_START), metavar="DATE", help=f"first day (default {DEFAULT_START})")
    p.add_argument("--days", type=positive_int, default=42, metavar="N", help="days to simulate (default 42)")
    p.add_argument("--cutover", type=_date, metavar="DATE", help="deploy day of anchored dates (default: day 22)")
    p.add_argument("--seed", type=int, default=1, metavar="S", help="random seed (default 1)")
    p.add_argument("--out", required=True, metavar="FILE", help="Parquet file to write (llm_calls columns)")
    p.add_argument("--provider", choices=("anthropic", "openai"), default="anthropic",
                   help="whose prompt-cache rules and prices to simulate (default anthropic)")
    p.add_argument("--tz", default="UTC", metavar="ZONE", help="the harness's time zone (default UTC)")
    p.add_argument("--retention", choices=("short", "long"), default="short",
                   help="cache lifetime: short = 5 min (Anthropic) / in-memory (OpenAI); long = 1 h / 24 h")
    p.add_argument("--scale", type=float, default=1.0, metavar="F", help="multiply the number of sessions (default 1)")
    p.add_argument("--bulk", type=positive_int, metavar="N", help="generate exactly N calls fast (vectorised) instead")
    add_json(p)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser(
        "cache-report",
        help="classify cache misses, price them, and (with --cutover) estimate the effect of date anchoring",
        description="Reads llm_calls from the warehouse (read-only) or a Parquet, JSONL or CSV file.",
    )
    source = p.add_mutually_exclusive_group()
    add_db(source)  # a group has the same add_argument
    source.add_argument("--calls", metavar="FILE",
                        help="a Parquet, JSONL or CSV file of llm_calls rows instead of the warehouse")
    side = p.add_mutually_exclusive_group()
    side.add_argument("--cutover", type=_date, metavar="DATE",
                      help="the day anchored dates were deployed (each session's local day; the day itself is left out); "
                      "without a cutover every call counts as before it: rates, causes, costs, shares per harness version")
    side.add_argument("--cutover-version", metavar="HARNESS@VERSION",
                      help="compare by harness version instead: that harness's calls at or above VERSION are after "
                      "(e.g. claude-code@2.1.0, codex@0.80.0); other harnesses are left out of the effect")
    p.add_argument("--source", metavar="S", help="only calls of this source (default: all)")
    p.add_argument("--tz", default=None, metavar="ZONE",
                   help="time zone of sessions whose transcript records none (default $PIPELINE_TZ, else UTC)")
    p.add_argument("--ttl", type=positive_int, default=None, metavar="SECONDS",
                   help="override the TTL in force (default: 1 hour after a call that wrote with a 1-hour TTL, "
                   "else 5 minutes for Anthropic and 10 for OpenAI); above 300 s, writes that do not report their TTL split "
                   "are priced at the 1-hour price")
    p.add_argument("--min-sessions", type=positive_int, default=5, metavar="N",
                   help="sessions each before/after cell needs for an effect estimate (default 5)")
    p.add_argument("--min-calls", type=positive_int, default=20, metavar="N",
                   help="calls each before/after cell needs for an effect estimate (default 20)")
    p.add_argument("--provider", choices=("anthropic", "openai"), default="anthropic",
                   help="provider for calls that neither their source nor their model name place (default anthropic); "
                   "every other call is priced by its own provider")
    p.add_argument("--prices", metavar="FILE",
                   help='JSON {"models": {"NAME": {"input", "cache_read", "output", ["cache_write_5m", "cache_write_1h"]}}} '
                   "(USD per million tokens): adds or overrides entries of the price database")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="bootstrap seed (default 0)")
    add_json(p)
    p.set_defaults(func=cmd_cache_report)

    p = sub.add_parser(
        "cache-eval",
        help="score the cache causes against labels given from reading the raw lines (make eval runs it)",
        description="Each --gold file (JSONL of {sessionId, line, cause}) is scored on its own against the "
        "warehouse's cache_calls: agreement overall and per cause, the confusion table and every disagreement.",
    )
    add_db(p)
    p.add_argument("--gold", action="append", required=True, metavar="FILE", help="a gold file; repeat for several")
    p.add_argument("--tz", default=None, metavar="ZONE", help="zone of sessions that record none (default $PIPELINE_TZ, else UTC)")
    add_json(p)
    p.set_defaults(func=cmd_cache_eval)


def cmd_simulate(args: argparse.Namespace) -> int:
    from pipeline.cache.workload import WorkloadConfig, simulate, write_calls
    from pipeline.cache.workload_bulk import simulate_bulk

    try:
        cfg = WorkloadConfig(
            start=args.start, days=args.days, cutover=args.cutover, seed=args.seed, provider=args.provider,
            tz=args.tz, retention=args.retention, scale=args.scale,
        )
    except ValidationError as exc:
        problems = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise UsageError(f"bad workload: {problems}") from None
    what = f"{args.bulk:,} bulk calls" if args.bulk else "the workload"
    sys.stderr.write(f"simulating {what} ({cfg.provider}, seed {cfg.seed}, {cfg.days} days from {cfg.start}, cutover {cfg.cutover_date})\n")
    result = simulate_bulk(args.bulk, cfg) if args.bulk else simulate(cfg)
    summary = result.summary.model_copy(update={"out": str(args.out)})
    write_calls(result.frame, args.out, summary)
    if args.json:
        print_json(summary.model_dump(mode="json"))
        return 0
    te = "—" if summary.true_effect is None else f"{summary.true_effect:+.4f}"
    sys.stdout.write(
        f"wrote {summary.calls:,} calls in {summary.sessions:,} sessions to {args.out}\n"
        f"causes: " + ", ".join(f"{k} {v:,}" for k, v in summary.causes.items()) + "\n"
        f"true effect of anchoring on the first call after midnight: {te}\n"
    )
    return 0


def cmd_cache_report(args: argparse.Namespace) -> int:
    from pipeline.cache.analysis import AnalysisConfig
    from pipeline.cache.causes import VersionCutover
    from pipeline.cache.report import ReportInputs, render_table, run_report

    tz = default_tz(args.tz)
    version = VersionCutover.parse(args.cutover_version) if args.cutover_version else None
    try:
        config = AnalysisConfig(
            cutover=args.cutover, cutover_version=version, tz=tz, ttl_seconds=args.ttl, provider=args.provider,
            source=args.source, bootstrap=args.bootstrap, seed=args.seed, min_sessions=args.min_sessions,
            min_calls=args.min_calls,
        )
    except ValidationError as exc:
        raise UsageError(f"bad option: {exc.errors()[0]['msg']}") from None
    inputs = ReportInputs(db=args.db, calls=args.calls, config=config, prices=args.prices)
    report, _ = run_report(inputs)
    if args.json:
        print_json(report.model_dump(mode="json"))
    else:
        sys.stdout.write(render_table(report) + "\n")
    return 0


def cmd_cache_eval(args: argparse.Namespace) -> int:
    from pipeline.cache.cause_eval import score, score_text
    from pipeline.cache.causes import classify_warehouse

    classified = classify_warehouse(args.db, tz=default_tz(args.tz))
    results = [score(path, classified) for path in args.gold]
    if args.json:
        print_json({"gold": [r.model_dump(mode="json") for r in results]})
    else:
        sys.stdout.write("\n\n".join(score_text(r) for r in results) + "\n")
    return 0


def default_tz(tz: str | None) -> str:
    """--tz, else $PIPELINE_TZ, else UTC: the zone of sessions whose transcript records none."""
    import os

    zone = tz or os.environ.get("PIPELINE_TZ") or "UTC"
    _check_zone(zone, "--tz" if tz else "PIPELINE_TZ")
    return zone


def _check_zone(tz: str, where: str = "--tz") -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"{where}: unknown time zone {tz!r}; use an IANA name such as UTC or Asia/Shanghai") from None
