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

__all__ = ["alt_text", "crossing_vs_other", "daily_cached_rate", "lost_by_cause", "plot_all", "sessions_table"]

_DPI = 110


def _save(fig: Figure, path: str | Path, alt: str) -> Path:
    """Write the PNG with its alt text (the figure's numbers in words) in the file's Description."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(out, format="png", dpi=_DPI, bbox_inches="tight", metadata={"Description": alt})
    return out


def alt_text(path: str | Path) -> str:
    """The alt text a plot of this module carries (its Description), for a page or a notebook."""
    from PIL import Image

    with Image.open(path) as img:
        return str(getattr(img, "text", {}).get("Description", ""))


def _gaps(days: list[dt.date], values: np.ndarray) -> tuple[list[dt.date], np.ndarray]:
    """Insert a break (NaN) between two days with no day of data between them: a line must not
    suggest rates for days without calls."""
    out_days: list[dt.date] = []
    out_values: list[float] = []
    for i, (day, value) in enumerate(zip(days, values, strict=True)):
        if i and (day - days[i - 1]).days > 1:
            out_days.append(days[i - 1] + dt.timedelta(days=1))
            out_values.append(np.nan)
        out_days.append(day)
        out_values.append(float(value) if value is not None else np.nan)
    return out_days, np.array(out_values, dtype=float)


def _pct(v: float | None) -> str:
    return "no data" if v is None or not np.isfinite(v) else f"{v:.1%}"


def daily_cached_rate(daily: pl.DataFrame, cutover: dt.date | None, path: str | Path) -> Path:
    """Token-weighted and request-weighted cached share per day, with the cutover marked (when there is one)."""
    fig = Figure(figsize=(9, 3.6))
    ax = fig.add_subplot()
    daily = daily.filter(pl.col("local_date").is_not_null()).sort("local_date")
    days = daily["local_date"].to_list()
    tok_days, tok = _gaps(days, daily["token_share"].to_numpy())
    req_days, req = _gaps(days, daily["request_share"].to_numpy())
    ax.plot(date2num(tok_days), tok, marker="o", markersize=3, label="token-weighted")
    ax.plot(date2num(req_days), req, marker=".", markersize=3, alpha=0.7, label="request-weighted")
    if cutover is not None:
        ax.axvline(date2num(cutover), color="tab:red", linestyle="--", linewidth=1)
        ax.annotate("cutover", (cutover, 0.02), xycoords=("data", "axes fraction"), color="tab:red", fontsize=8,
                    xytext=(3, 0), textcoords="offset points")
    ax.xaxis_date()
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("cached share of prompt tokens")
    ax.set_title("Daily cached-token rate (local days; gaps are days without calls)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    if days:
        low = daily.sort("token_share").row(0, named=True)
        alt = (f"Daily token-weighted cached share over {len(days)} days with calls, {days[0]} to {days[-1]}: "
               f"mean {_pct(float(np.nanmean(tok)))}, lowest {_pct(low['token_share'])} on {low['local_date']} "
               f"({low['calls']} calls)" + (f"; cutover {cutover}" if cutover else ""))
    else:
        alt = "Daily cached share: no calls"
    return _save(fig, path, alt)


def crossing_vs_other(report: CacheReport, path: str | Path) -> Path:
    """Cached share of the first call on a new date vs other within-TTL calls, before and after,
    each bar labelled with its share and the calls and sessions it rests on."""
    groups = report.rates["groups"]
    labels = ["first call on a new date", "other within-TTL calls"]
    cells = {side: [groups.get(g, {}).get(side, {}) for g in ("crossing", "other")] for side in ("before", "after")}
    x = np.arange(2)
    fig = Figure(figsize=(7.5, 4.0))
    ax = fig.add_subplot()
    no_cutover = report.inputs.get("cutover") is None and report.inputs.get("cutover_version") is None
    # A series with no calls at all (no calls after the cutover, or no cutover) is left out, not drawn empty.
    series = [(cells[side], name) for side, name in (("before", "all calls" if no_cutover else "before cutover"),
                                                     ("after", "after cutover"))
              if any(c.get("calls") for c in cells[side])]
    width = 0.76 / max(1, len(series))
    words: list[str] = []
    for k, (values, name) in enumerate(series):
        offset = (k - (len(series) - 1) / 2) * width
        heights = [np.nan if not v.get("calls") or v.get("token_share") is None else v["token_share"] for v in values]
        bars = ax.bar(x + offset, heights, width=width * 0.95, label=name)
        texts = [f"{_pct(v.get('token_share'))}\n{v.get('calls', 0):,} calls\n{v.get('sessions', 0):,} sessions"
                 if v.get("calls") else "no calls" for v in values]
        ax.bar_label(bars, labels=texts, fontsize=7, padding=2)
        words += [f"{label}, {name}: {text.replace(chr(10), ', ')}" for label, text in zip(labels, texts, strict=True)]
    e = report.effect
    if e.estimate is not None:
        ci = "" if e.ci_low is None else f" [{e.ci_low:+.3f}, {e.ci_high:+.3f}]"
        title = f"Cached share, token-weighted · DiD {e.estimate:+.3f}{ci}"
    elif not no_cutover:
        title = "Cached share, token-weighted · too few calls to estimate an effect"
    else:
        title = "Cached share, token-weighted (no cutover given)"
    ax.set_title(title, fontsize=10)
    ax.set_xticks(x, labels)
    ax.set_ylim(0, 1.35)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    # Beside the axes, never over a bar or its label.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(axis="y", alpha=0.3)
    alt = f"{title}. " + "; ".join(words) + (f". {e.reason}" if e.reason else "")
    return _save(fig, path, alt)


def lost_by_cause(report: CacheReport, path: str | Path) -> Path:
    """Spend lost to misses (USD), by cause."""
    by_cause: dict[str, Any] = report.cost["by_cause"]
    causes = [c for c in CAUSES if c not in ("hit", "cold_start", "no_cache_reported")]
    lost = [by_cause[c]["lost_usd"] or 0.0 for c in causes]
    spend = [by_cause[c]["spend_usd"] or 0.0 for c in causes]
    fig = Figure(figsize=(7, 3.6))
    ax = fig.add_subplot()
    y = np.arange(len(causes))
    ax.barh(y - 0.2, spend, height=0.38, label="list-price spend of these calls", color="tab:gray")
    bars = ax.barh(y + 0.2, lost, height=0.38, label="lost vs reading from cache", color="tab:orange")
    ax.bar_label(bars, labels=[f"${v:,.2f}" for v in lost], fontsize=8, padding=2)
    ax.set_yticks(y, causes)
    ax.invert_yaxis()
    ax.set_xlabel(f"{report.cost['currency']}, each call at its provider's list price for its model")
    ax.set_title("Spend lost per miss cause")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(axis="x", alpha=0.3)
    calls = {c: report.causes[c]["calls"] for c in causes}
    alt = "Spend lost per miss cause (USD): " + "; ".join(
        f"{c} {calls[c]:,} calls, spend ${s:,.2f}, lost ${v:,.2f}" for c, s, v in zip(causes, spend, lost, strict=True)
    )
    return _save(fig, path, alt)


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
    alt = "Sessions with the largest cache cliffs: " + ("; ".join(
        f"{r[0]} at {r[1]}, {r[2]}, {r[5]} tokens" for r in rows) if cliffs.height else "no misses")
    return _save(fig, path, alt)


def plot_all(report: CacheReport, classified: pl.DataFrame, cliffs: pl.DataFrame, out_dir: str | Path) -> dict[str, Path]:
    """Every plot of the report into ``out_dir``; returns name → path."""
    from pipeline.cache.analysis import daily_rates

    out = Path(out_dir)
    given = report.inputs.get("cutover")  # a version cutover marks no day
    cutover = dt.date.fromisoformat(str(given)) if given else None
    return {
        "daily_cached_rate": daily_cached_rate(daily_rates(classified), cutover, out / "daily_cached_rate.png"),
        "crossing_vs_other": crossing_vs_other(report, out / "crossing_vs_other.png"),
        "lost_by_cause": lost_by_cause(report, out / "lost_by_cause.png"),
        "cache_cliffs": sessions_table(cliffs, out / "cache_cliffs.png"),
    }
