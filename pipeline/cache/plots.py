"""PNG plots of the cache report (matplotlib, Agg canvas).

Figures are built on :class:`matplotlib.figure.Figure` with an Agg canvas rather than through
``pyplot``: no global figure state, no GUI backend, the same output from a notebook kernel, the CLI
or a test. Each function writes one PNG and returns its path; the notebook shows the file inline.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.dates import date2num
from matplotlib.figure import Figure

from pipeline.cache.analysis import CAUSES, CacheReport

__all__ = ["crossing_vs_other", "daily_cached_rate", "lost_by_cause", "plot_all", "sessions_table"]

_DPI = 110


def _save(fig: Figure, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(out, format="png", dpi=_DPI, bbox_inches="tight")
    return out


def daily_cached_rate(daily: pl.DataFrame, cutover: dt.date | None, path: str | Path) -> Path:
    """Token-weighted and request-weighted cached share per day, with the cutover marked (when there is one)."""
    fig = Figure(figsize=(9, 3.6))
    ax = fig.add_subplot()
    days = daily["local_date"].to_list()
    ax.plot(days, daily["token_share"].to_numpy(), marker="o", markersize=3, label="token-weighted")
    ax.plot(days, daily["request_share"].to_numpy(), marker=".", markersize=3, alpha=0.7, label="request-weighted")
    if cutover is not None:
        ax.axvline(date2num(cutover), color="tab:red", linestyle="--", linewidth=1)
        ax.annotate("cutover", (cutover, 0.02), xycoords=("data", "axes fraction"), color="tab:red", fontsize=8,
                    xytext=(3, 0), textcoords="offset points")
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("cached share of prompt tokens")
    ax.set_title("Daily cached-token rate")
    ax.legend(loc="lower left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    return _save(fig, path)


def crossing_vs_other(report: CacheReport, path: str | Path) -> Path:
    """Cached share of the first call after midnight vs other within-TTL calls, before and after."""
    groups = report.rates["groups"]
    labels = ["first call after midnight", "other within-TTL calls"]
    before = [groups.get(g, {}).get("before", {}).get("token_share") for g in ("crossing", "other")]
    after = [groups.get(g, {}).get("after", {}).get("token_share") for g in ("crossing", "other")]
    x = np.arange(2)
    fig = Figure(figsize=(6.5, 3.8))
    ax = fig.add_subplot()
    no_cutover = report.inputs.get("cutover") is None
    # A series with no calls at all (no calls after the cutover, or no cutover) is left out, not drawn empty.
    series = [(values, name) for values, name in ((before, "all calls" if no_cutover else "before cutover"),
                                                  (after, "after cutover")) if any(v is not None for v in values)]
    width = 0.76 / max(1, len(series))
    for k, (values, name) in enumerate(series):
        offset = (k - (len(series) - 1) / 2) * width
        heights = [np.nan if v is None else v for v in values]
        bars = ax.bar(x + offset, heights, width=width * 0.95, label=name)
        ax.bar_label(bars, labels=["—" if v is None else f"{v:.1%}" for v in values], fontsize=8, padding=2)
    e = report.effect
    if e.estimate is not None:
        ci = "" if e.ci_low is None else f" [{e.ci_low:+.3f}, {e.ci_high:+.3f}]"
        ax.set_title(f"Cached share, token-weighted · DiD {e.estimate:+.3f}{ci}", fontsize=10)
    else:
        ax.set_title("Cached share, token-weighted", fontsize=10)
    ax.set_xticks(x, labels)
    ax.set_ylim(0, 1.12)
    # Beside the axes, never over a bar or its label.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def lost_by_cause(report: CacheReport, path: str | Path) -> Path:
    """Spend lost to misses (USD), by cause."""
    by_cause: dict[str, Any] = report.cost["by_cause"]
    causes = [c for c in CAUSES if c != "hit"]
    lost = [by_cause[c]["lost_usd"] or 0.0 for c in causes]
    spend = [by_cause[c]["spend_usd"] or 0.0 for c in causes]
    fig = Figure(figsize=(7, 3.6))
    ax = fig.add_subplot()
    y = np.arange(len(causes))
    ax.barh(y - 0.2, spend, height=0.38, label="spend on uncached input + writes", color="tab:gray")
    bars = ax.barh(y + 0.2, lost, height=0.38, label="lost vs reading from cache", color="tab:orange")
    ax.bar_label(bars, labels=[f"${v:,.2f}" for v in lost], fontsize=8, padding=2)
    ax.set_yticks(y, causes)
    ax.invert_yaxis()
    ax.set_xlabel(f"{report.cost['currency']}, each call at its provider's list price for its model")
    ax.set_title("Spend lost per miss cause")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def sessions_table(cliffs: pl.DataFrame, path: str | Path) -> Path:
    """The sessions with the largest cache cliffs, as a table image."""
    columns = ["session_id", "at", "cause", "prev_prompt", "cached_tokens", "drop_tokens", "session_misses"]
    rows = [
        [
            str(r["session_id"])[:40],
            r["at"].strftime("%Y-%m-%d %H:%M") if r["at"] is not None else "",
            str(r["cause"]),
            f"{r['prev_prompt'] or 0:,}",
            f"{r['cached_tokens'] or 0:,}",
            f"{r['drop_tokens'] or 0:,}",
            f"{r['session_misses']}/{r['session_calls']}",
        ]
        for r in cliffs.iter_rows(named=True)
    ] or [["(no misses)"] + [""] * (len(columns) - 1)]
    fig = Figure(figsize=(12, 0.5 + 0.3 * len(rows)))
    ax = fig.add_subplot()
    ax.axis("off")
    labels = ["session", "at (UTC)", "cause", "previous prompt", "cached", "cliff (tokens)", "misses/calls"]
    # a session id is 36 characters: its column is sized to hold one whole
    widths = [0.36, 0.14, 0.11, 0.11, 0.08, 0.11, 0.09]
    table = ax.table(cellText=rows, colLabels=labels, colWidths=widths, loc="center", cellLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1, 1.2)
    ax.set_title("Sessions with the largest cache cliffs", fontsize=10)
    return _save(fig, path)


def plot_all(report: CacheReport, classified: pl.DataFrame, cliffs: pl.DataFrame, out_dir: str | Path) -> dict[str, Path]:
    """Every plot of the report into ``out_dir``; returns name → path."""
    from pipeline.cache.analysis import daily_rates

    out = Path(out_dir)
    given = report.inputs.get("cutover")
    cutover = dt.date.fromisoformat(str(given)) if given else None
    return {
        "daily_cached_rate": daily_cached_rate(daily_rates(classified), cutover, out / "daily_cached_rate.png"),
        "crossing_vs_other": crossing_vs_other(report, out / "crossing_vs_other.png"),
        "lost_by_cause": lost_by_cause(report, out / "lost_by_cause.png"),
        "cache_cliffs": sessions_table(cliffs, out / "cache_cliffs.png"),
    }
