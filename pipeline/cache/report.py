"""The cache report as the CLI and the notebook deliver it: inputs, a readable table, metrics, a closing note.

:mod:`pipeline.cache.analysis` computes; this module decides where the calls come from (a file, the
warehouse, or a small simulated workload when neither is given), writes the metrics JSON, and turns
a report into text for people.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline import config
from pipeline.cache.analysis import CAUSES, AnalysisConfig, CacheReport, analyze, load_calls
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

# The workload the notebook simulates when it is given neither a warehouse nor a calls file:
# the default mix at a quarter of its size, so a run takes seconds.
NOTEBOOK_SIMULATION = WorkloadConfig(scale=0.25)
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
    tz: str = "UTC",
    ttl_seconds: int = 300,
    provider: str = "anthropic",
    out_dir: str | Path = "data/cache_report",
) -> ReportInputs:
    """Resolve the notebook's parameters. With neither ``db`` nor ``calls``, simulate a small
    workload into ``out_dir`` (in the notebook's ``tz`` and ``provider``) and analyse that."""
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
    config = AnalysisConfig(cutover=day, tz=tz, ttl_seconds=ttl_seconds, provider=provider, source=source)
    return ReportInputs(db=db, calls=str(calls) if calls else None, config=config, simulation=simulation, out_dir=str(out))


def run_report(inputs: ReportInputs) -> tuple[CacheReport, pl.DataFrame]:
    """Load the calls (the warehouse is opened read-only and closed at once), analyse, attach the
    simulation summary when the calls file carries one."""
    frame = load_calls(db=inputs.db, calls=inputs.calls, source=inputs.config.source)
    where = {"calls": inputs.calls} if inputs.calls else {"db": str(inputs.db) if inputs.db else "default warehouse"}
    prices = load_prices(inputs.prices, fallback_provider=inputs.config.provider)
    report, classified = analyze(frame, inputs.config, prices=prices, inputs=where)
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


def render_table(report: CacheReport) -> str:
    """The report as aligned text for a terminal."""
    lines: list[str] = []
    e = report.effect
    cfg = report.inputs
    left = sum(report.left_out.values())
    no_cutover = cfg.get("cutover") is None
    lines.append(
        f"{report.calls:,} calls in {report.sessions:,} sessions"
        + (f" ({left:,} more left out: no time or no session)" if left else "")
        + f" · cutover {cfg['cutover'] or 'none given'} · tz {cfg['tz']} · TTL {cfg['ttl_seconds']} s"
    )
    lines.append("")
    if no_cutover:
        _rates_without_cutover(report, lines)
        return "\n".join(lines)
    lines.append(
        f"effect of anchoring (DiD, token-weighted): {_num(e.estimate)}"
        f"  [{_num(e.ci_low)}, {_num(e.ci_high)}] {int(e.confidence * 100)} % bootstrap CI over {e.sessions} sessions"
    )
    r = report.effect_requests
    lines.append(f"same, request-weighted:                    {_num(r.estimate)}  [{_num(r.ci_low)}, {_num(r.ci_high)}]")
    if report.simulation and report.simulation.get("true_effect") is not None:
        lines.append(f"true effect (simulator):                   {_num(report.simulation['true_effect'])}")
    lines.append("")
    header = f"{'cached share':<28}{'before':>12}{'after':>12}{'calls b/a':>18}"
    lines.append(header)
    groups = report.rates["groups"]
    for name, label in (("crossing", "first call after midnight"), ("other", "other within-TTL calls")):
        cells = groups.get(name, {})
        b, a = cells.get("before", {}), cells.get("after", {})
        counts = f"{b.get('calls', 0):,}/{a.get('calls', 0):,}"
        lines.append(f"{label:<28}{_pct(b.get('token_share')):>12}{_pct(a.get('token_share')):>12}{counts:>18}")
    lines.append("")
    _cause_lines(report, lines)
    prices = report.cost.get("prices") or {}
    if prices:
        lines.append("")
        lines.append(f"{'prices (USD / M tokens)':<34}{'input':>9}{'cache read':>12}{'cache write':>13}{'output':>9}  provider")
        for model, p in prices.items():
            write = p.get("cache_write_5m")
            lines.append(
                f"{model[:33]:<34}{p['input']:>9.3f}{p['cache_read']:>12.3f}{'—' if write is None else f'{write:.3f}':>13}"
                f"{p['output']:>9.3f}  {p.get('provider') or p.get('source')}"
            )
    if report.agreement:
        lines.append("")
        lines.append(f"classification agrees with true_cause on {_pct(report.agreement['rate'])} of {report.agreement['calls']:,} calls")
    if report.notes:
        lines.append("")
        lines.extend(f"note: {note}" for note in report.notes)
    return "\n".join(lines)


def _cause_lines(report: CacheReport, lines: list[str]) -> None:
    """The miss causes with their spend, as both forms of the text report show them."""
    lines.append(f"{'cause':<16}{'calls':>10}{'share':>10}{'spend USD':>14}{'lost USD':>14}")
    for cause in CAUSES:
        c = report.causes[cause]
        cost = report.cost["by_cause"][cause]
        lines.append(
            f"{cause:<16}{c['calls']:>10,}{_pct(c['share_of_calls']):>10}"
            f"{cost['spend_usd'] or 0:>14,.2f}{cost['lost_usd'] or 0:>14,.2f}"
        )


def _rates_without_cutover(report: CacheReport, lines: list[str]) -> None:
    """The table for calls with no cutover date: one column of rates, the causes, the notes."""
    groups = report.rates["groups"]
    lines.append(f"{'cached share (all calls)':<28}{'tokens':>12}{'calls':>10}")
    for name, label in (("crossing", "first call after midnight"), ("other", "other within-TTL calls")):
        b = groups.get(name, {}).get("before", {})
        lines.append(f"{label:<28}{_pct(b.get('token_share')):>12}{b.get('calls', 0):>10,}")
    lines.append("")
    _cause_lines(report, lines)
    if report.notes:
        lines.append("")
        lines.extend(f"note: {note}" for note in report.notes)


def closing_note(report: CacheReport, bench: dict[str, Any] | None = None) -> str:
    """The notebook's closing note (Markdown): true effect, estimate and CI, agreement, benchmark."""
    e = report.effect
    parts = [
        "### Closing note",
        "",
        f"- Estimated effect of date anchoring on the cached-token share of the first call after midnight"
        f" (difference-in-differences, cutover day left out): **{_num(e.estimate)}**,"
        f" {int(e.confidence * 100)} % CI [{_num(e.ci_low)}, {_num(e.ci_high)}] (bootstrap over {e.sessions} sessions).",
    ]
    true_effect = (report.simulation or {}).get("true_effect")
    if true_effect is not None:
        inside = e.ci_low is not None and e.ci_high is not None and e.ci_low <= true_effect <= e.ci_high
        parts.append(
            f"- True effect known to the simulator: **{_num(true_effect)}** — "
            + ("inside the interval." if inside else "outside the interval.")
        )
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
