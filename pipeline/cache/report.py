"""The cache report as the CLI and the notebook deliver it: inputs, a readable table, metrics, a closing note.

:mod:`pipeline.cache.analysis` computes; this module decides where the calls come from (a file, the
warehouse, or a small simulated workload when neither is given), writes the metrics JSON, and turns
a report into text for people.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline import config
from pipeline.cache.analysis import CAUSES, AnalysisConfig, CacheReport, analyze, load_calls
from pipeline.cache.causes import VersionCutover, classify_warehouse, left_out_counts
from pipeline.cache.workload import SimulationSummary, WorkloadConfig, read_summary, simulate, write_calls
from pipeline.calls.prices import load_prices
from pipeline.errors import UsageError

__all__ = [
    "NOTEBOOK_SIMULATION",
    "ReportInputs",
    "bench_figures",
    "closing_note",
    "notebook_inputs",
    "render_table",
    "run_report",
    "write_metrics",
]

# The workload the notebook simulates when it is given neither a warehouse nor a calls file: the
# default mix at a third of its size, so a run takes seconds and each before/after cell still holds
# the 5 sessions an estimate needs (at a quarter, the crossing cells hold 4).
NOTEBOOK_SIMULATION = WorkloadConfig(scale=0.35)
SIMULATED_CALLS_FILE = "simulated_calls.parquet"
METRICS_FILE = "metrics.json"
_REPO = config.REPO


class ReportInputs(BaseModel):
    """Where the calls come from and how to read them."""

    model_config = ConfigDict(frozen=True)

    db: str | None = None
    calls: str | None = None
    config: AnalysisConfig
    simulation: SimulationSummary | None = None
    out_dir: str | None = None
    prices: str | None = None


def _as_date(value: str | dt.date | None) -> dt.date | None:
    if value is None or isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise UsageError(f"the cutover {value!r} is not a date; write it as YYYY-MM-DD") from None


def notebook_inputs(
    *,
    db: str | None = None,
    calls: str | None = None,
    source: str | None = None,
    cutover: str | dt.date | None = None,
    tz: str | None = None,
    ttl_seconds: int | None = None,
    provider: str = "anthropic",
    out_dir: str | Path = "data/cache_report",
    cutover_version: str | None = None,
    min_sessions: int = 5,
    min_calls: int = 20,
) -> ReportInputs:
    """Resolve the notebook's parameters. With neither ``db`` nor ``calls``, simulate a small
    workload into ``out_dir`` (in the notebook's ``tz`` and ``provider``) and analyse that. ``tz``
    None: ``$PIPELINE_TZ``, else UTC (the zone of sessions whose transcript records none)."""
    tz = tz or os.environ.get("PIPELINE_TZ") or "UTC"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    simulation: SimulationSummary | None = None
    if db is None and calls is None:
        settings = {**NOTEBOOK_SIMULATION.model_dump(), "tz": tz, "provider": provider}
        if cutover is not None:
            settings["cutover"] = _as_date(cutover)
        try:
            cfg = WorkloadConfig.model_validate(settings)
        except ValidationError as exc:
            raise UsageError(f"cannot simulate the default workload: {exc}") from None
        result = simulate(cfg)
        target = out / SIMULATED_CALLS_FILE
        path = write_calls(result.frame, target, result.summary.model_copy(update={"out": str(target)}))
        calls = str(path)
        simulation = result.summary
        cutover = cfg.cutover_date
    elif calls is not None:
        simulation = read_summary(calls)
    day = _as_date(cutover)
    if day is None and simulation is not None:
        day = simulation.cutover
    # Still None: no deployment date is known, and every call counts as before it.
    version = VersionCutover.parse(cutover_version) if cutover_version else None
    config = AnalysisConfig(cutover=None if version else day, cutover_version=version, tz=tz, ttl_seconds=ttl_seconds or None,
                            provider=provider, source=source, min_sessions=min_sessions, min_calls=min_calls)
    return ReportInputs(db=db, calls=str(calls) if calls else None, config=config, simulation=simulation, out_dir=str(out))


def run_report(inputs: ReportInputs) -> tuple[CacheReport, pl.DataFrame]:
    """Load the calls (the warehouse is opened read-only and closed at once), analyse, attach the
    simulation summary when the calls file carries one."""
    cfg = inputs.config
    dropped: dict[str, int] | None = None
    if inputs.calls is None:
        # The warehouse's calls with their transcripts: the same classification as the cache_calls view.
        frame: pl.DataFrame | pl.LazyFrame = classify_warehouse(
            inputs.db, source=cfg.source, hit_share=cfg.hit_share, ttl_seconds=cfg.ttl_seconds, tz=cfg.tz
        )
        dropped = left_out_counts(inputs.db, source=cfg.source)
    else:
        frame = load_calls(calls=inputs.calls, source=cfg.source)
    where = {"calls": inputs.calls} if inputs.calls else {"db": str(inputs.db) if inputs.db else "default warehouse"}
    prices = load_prices(inputs.prices, fallback_provider=inputs.config.provider)
    report, classified = analyze(frame, inputs.config, prices=prices, inputs=where, left_out=dropped)
    simulation = inputs.simulation or (read_summary(inputs.calls) if inputs.calls else None)
    if simulation is not None:
        report.simulation = simulation.model_dump(mode="json")
    return report, classified


def write_metrics(report: CacheReport, out_dir: str | Path, extra: dict[str, Any] | None = None) -> Path:
    path = Path(out_dir) / METRICS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    document = report.model_dump(mode="json")
    if extra:
        document.update(extra)
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def bench_figures(path: str | Path | None = None) -> dict[str, Any] | None:
    """The latest cache-report benchmark figures: bench/out/cache_report.json (written by
    bench/cache_report.py) or bench/out/results.json (``make bench``), whichever is newer."""
    keys = ("cache_report_s", "cache_report_peak_rss_mb", "cache_report_calls")
    files = [Path(path)] if path else [_REPO / "bench" / "out" / n for n in ("cache_report.json", "results.json")]
    found: list[tuple[float, dict[str, Any]]] = []
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            mtime = file.stat().st_mtime
        except (OSError, ValueError):
            continue
        figures = {k: data[k] for k in keys if k in data}
        if len(figures) == len(keys):
            found.append((mtime, figures))
    return max(found, key=lambda item: item[0])[1] if found else None


# --------------------------------------------------------------------------- text


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.2f} %"


def _num(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:+.{digits}f}"


def _share_cell(cell: dict[str, Any]) -> str:
    """A share with the calls and sessions it rests on: a share alone says nothing of its weight."""
    if not cell or not cell.get("calls"):
        return "— (0 calls)"
    calls, sessions = cell["calls"], cell.get("sessions", 0)
    return (f"{_pct(cell.get('token_share'))} ({calls:,} call{'' if calls == 1 else 's'}, "
            f"{sessions:,} session{'' if sessions == 1 else 's'})")


def _effect_lines(report: CacheReport, lines: list[str]) -> None:
    e, r = report.effect, report.effect_requests
    if e.estimate is None:
        lines.append(f"effect of anchoring: no estimate — {e.reason or 'a cell has no tokens'}")
    else:
        lines.append(
            f"effect of anchoring (DiD, token-weighted): {_num(e.estimate)}"
            f"  [{_num(e.ci_low)}, {_num(e.ci_high)}] {int(e.confidence * 100)} % bootstrap CI,"
            f" {e.resampled_sessions:,} sessions resampled {e.bootstrap:,} times"
        )
        lines.append(f"same, request-weighted:                    {_num(r.estimate)}  [{_num(r.ci_low)}, {_num(r.ci_high)}]")
    if report.simulation and report.simulation.get("true_effect") is not None:
        lines.append(f"true effect (simulator):                   {_num(report.simulation['true_effect'])}")


def render_table(report: CacheReport) -> str:
    """The report as aligned text for a terminal."""
    lines: list[str] = []
    cfg = report.inputs
    left = sum(report.left_out.values())
    cutover = cfg.get("cutover_version") or cfg.get("cutover")
    zones = report.time_zones or {}
    ttl = f"TTL {cfg['ttl_seconds']} s (--ttl)" if cfg.get("ttl_seconds") else "TTL in force per call"
    lines.append(
        f"{report.calls:,} calls in {report.sessions:,} sessions"
        + (f" ({left:,} more left out: no time or no session)" if left else "")
        + f" · cutover {cutover or 'none given'} · {ttl}"
        + f" · time zones: {zones.get('fell_back', 0):,} sessions on the default {cfg['tz']}"
    )
    lines.append("")
    groups = report.rates["groups"]
    if cutover:
        _effect_lines(report, lines)
        lines.append("")
        lines.append(f"{'cached share (tokens)':<30}{'before':<44}{'after':<44}")
        for name, label in (("crossing", "first call on a new date"), ("other", "other within-TTL calls")):
            cells = groups.get(name, {})
            lines.append(f"{label:<30}{_share_cell(cells.get('before', {})):<44}{_share_cell(cells.get('after', {})):<44}")
    else:
        lines.append(f"{'cached share, within the TTL':<30}tokens (a call after a longer gap is a ttl_expiry, left out here)")
        for name, label in (("crossing", "first call on a new date"), ("other", "other within-TTL calls")):
            lines.append(f"{label:<30}{_share_cell(groups.get(name, {}).get('before', {}))}")
    lines.append("")
    _harness_lines(report, lines)
    lines.append("")
    _cause_lines(report, lines)
    _spend_lines(report, lines)
    prices = report.cost.get("prices") or {}
    if prices:
        lines.append("")
        lines.append(f"{'prices (USD / M tokens)':<34}{'input':>9}{'cache read':>12}{'write 5m':>10}{'write 1h':>10}{'output':>9}  provider")
        for model, p in prices.items():
            w5, w1 = p.get("cache_write_5m"), p.get("cache_write_1h")
            lines.append(
                f"{model[:33]:<34}{p['input']:>9.3f}{p['cache_read']:>12.3f}{'—' if w5 is None else f'{w5:.3f}':>10}"
                f"{'—' if w1 is None else f'{w1:.3f}':>10}{p['output']:>9.3f}  {p.get('provider') or p.get('source')}"
            )
    if report.agreement:
        lines.append("")
        lines.append(f"classification agrees with true_cause on {_pct(report.agreement['rate'])} of {report.agreement['calls']:,} calls")
    if report.notes:
        lines.append("")
        lines.extend(f"note: {note}" for note in report.notes)
    return "\n".join(lines)


def _harness_lines(report: CacheReport, lines: list[str]) -> None:
    """Crossing and other shares per harness and date placement: anchoring as harnesses shipped it."""
    rows = report.rates.get("by_harness") or []
    if not rows:
        return
    lines.append("cached share by harness (tokens; within-TTL calls):")
    for row in rows:
        lines.append(f"  {row['harness']} {row['versions'] or ''} · {row['era']}")
        lines.append(f"      first call on a new date {_share_cell(row['crossing'])} · other {_share_cell(row['other'])}")


def _cause_lines(report: CacheReport, lines: list[str]) -> None:
    """The causes with their list-price spend and what the misses lost."""
    lines.append(f"{'cause':<19}{'calls':>8}{'share':>10}{'spend USD':>12}{'lost USD':>11}")
    for cause in CAUSES:
        c = report.causes[cause]
        cost = report.cost["by_cause"][cause]
        lines.append(
            f"{cause:<19}{c['calls']:>8,}{_pct(c['share_of_calls']):>10}"
            f"{cost['spend_usd'] or 0:>12,.2f}{cost['lost_usd'] or 0:>11,.2f}"
        )


def _spend_lines(report: CacheReport, lines: list[str]) -> None:
    total = report.cost.get("total") or {}
    if not total:
        return
    lines.append("")
    lines.append(
        f"spend at list price: {total.get('spend_usd', 0):,.2f} USD = input {total.get('input_usd', 0):,.2f}"
        f" + cache reads {total.get('cache_read_usd', 0):,.2f} + cache writes 5m {total.get('cache_write_5m_usd', 0):,.2f}"
        f" + 1h {total.get('cache_write_1h_usd', 0):,.2f} + output {total.get('output_usd', 0):,.2f};"
        f" misses lost {total.get('lost_usd', 0):,.2f}"
    )
    models = report.cost.get("by_model") or []
    if models:
        lines.append(f"{'by model':<34}{'calls':>8}{'spend USD':>12}{'lost USD':>11}{'if misses hit':>16}")
        for m in models[:10]:
            lines.append(
                f"{str(m['key'] or '(no model)')[:33]:<34}{m['calls']:>8,}{m['spend_usd'] or 0:>12,.2f}"
                f"{m['lost_usd'] or 0:>11,.2f}{m['counterfactual_usd'] or 0:>16,.2f}"
            )


def closing_note(report: CacheReport, bench: dict[str, Any] | None = None) -> str:
    """The notebook's closing note (Markdown): true effect, estimate and CI, agreement, benchmark."""
    e = report.effect
    parts = [
        "### Closing note",
        "",
        (f"- Estimated effect of date anchoring on the cached-token share of the first call on a new date"
         f" (difference-in-differences): **{_num(e.estimate)}**,"
         f" {int(e.confidence * 100)} % CI [{_num(e.ci_low)}, {_num(e.ci_high)}] (bootstrap over {e.resampled_sessions} sessions)."
         if e.estimate is not None else f"- No effect estimate: {e.reason or 'a cell has no tokens'}."),
    ]
    true_effect = (report.simulation or {}).get("true_effect")
    if true_effect is not None:
        if e.ci_low is None or e.ci_high is None:
            where = "no interval to hold it (no estimate)."
        else:
            where = "inside the interval." if e.ci_low <= true_effect <= e.ci_high else "outside the interval."
        parts.append(f"- True effect known to the simulator: **{_num(true_effect)}** — {where}")
    else:
        parts.append("- True effect: not known for these calls (not a simulated workload).")
    if report.agreement:
        parts.append(
            f"- Classification agrees with the simulator's true cause on **{_pct(report.agreement['rate'])}**"
            f" of {report.agreement['calls']:,} calls."
        )
    else:
        parts.append("- Classification agreement: no true causes in these calls.")
    if bench:
        parts.append(
            f"- Benchmark (`make bench`): cache-report over {bench.get('cache_report_calls', 0):,} calls in"
            f" {bench.get('cache_report_s', float('nan')):.1f} s, peak RSS {bench.get('cache_report_peak_rss_mb', float('nan')):.0f} MB"
            " (goal ≤ 30 s, ≤ 4096 MB)."
        )
    else:
        parts.append("- Benchmark: not run yet on this machine (`make bench` writes bench/out/results.json).")
    parts.extend(f"- Note: {note}" for note in report.notes)
    return "\n".join(parts)
