"""The night's report: what each batch did, what landed, what is still pending, and what it cost.

`tables()` computes everything from the warehouse (read-only) and the run folder; the report
notebook shows those tables, and `write()` executes it and converts it to one HTML page.

The report is the last thing a night writes, so it has its own gate: the sessions of the night's
batches are scanned for secrets again, every text the report shows is scrubbed against them
(masked, and any stretch that shares 12+ normalised characters with one cut out), and `write()`
checks the finished page once more.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import config
from pipeline.consolidator import pending
from pipeline.consolidator.batch_secrets import scan_sessions, scan_warehouse
from pipeline.display import plain
from pipeline.errors import ReportError
from pipeline.nightly.kernels import papermill_command, run_papermill
from pipeline.secret_gate import SecretSet
from pipeline.warehouse import db as warehouse

REPO = config.REPO
NOTEBOOK = config.NOTEBOOKS / "night_report.ipynb"


def _cost(model: str | None, prompt: int | None, cached: int | None, completion: int | None) -> float | None:
    """What a batch's consolidator calls cost at its model's price today (None for a model without one)."""
    if not prompt and not completion:
        return 0.0
    from pipeline.calls.prices import call_cost, load_prices

    price = load_prices().price(model, source="consolidator")
    return call_cost(price, prompt, cached, 0, completion)


def _night_sessions(con: Any, run_id: str) -> list[str]:
    rows = con.execute("SELECT DISTINCT unnest(sessions) FROM batches WHERE run_id = ?", [run_id]).fetchall()
    return sorted(str(r[0]) for r in rows)


def night_secrets(con: Any, run_id: str) -> SecretSet:
    """The secrets of every session a batch of this run was offered."""
    return scan_sessions(con, _night_sessions(con, run_id))


def _scrubbed(frame: pl.DataFrame, known: SecretSet) -> pl.DataFrame:
    """Every text cell of `frame` as the report may show it."""
    if not known or frame.is_empty():
        return frame
    cols = [c for c, t in frame.schema.items() if t == pl.String]
    return frame.with_columns(
        pl.col(c).map_elements(known.scrub, return_dtype=pl.String, skip_nulls=True) for c in cols
    ) if cols else frame


def tables(db: str | Path, run_id: str, run_dir: str | Path) -> dict[str, Any]:
    run_dir = Path(run_dir)
    with warehouse.reading(db) as con:
        known = night_secrets(con, run_id)
        batches = warehouse.frame(con, "SELECT batch_id, status, reason, len(sessions) AS sessions, artifact_dir, details "
                                "FROM batches WHERE run_id = ? ORDER BY batch_id", [run_id])
        memories = warehouse.frame(con, "SELECT memory_id, kind, claim, path FROM memories WHERE run_id = ? ORDER BY path", [run_id])
        # sum() of BIGINT is a 128-bit integer, which reaches Python as a Decimal: keep plain integers.
        calls = warehouse.frame(con, "SELECT batch_id, any_value(model) AS model, count(*) AS calls, "
                              "sum(prompt_tokens)::BIGINT AS prompt, sum(cached_tokens)::BIGINT AS cached, "
                              "sum(completion_tokens)::BIGINT AS completion "
                              "FROM llm_calls WHERE source = 'consolidator' AND run_id = ? GROUP BY batch_id", [run_id])
        wm = warehouse.frame(con, "SELECT session_id, line_count FROM watermarks WHERE run_id = ? ORDER BY session_id", [run_id])
        tasks_all = warehouse.frame(con, "SELECT task_id, status, actor, statement, due_hint FROM tasks ORDER BY status, task_id")
        run = warehouse.frame(con, "SELECT engine, model, status, started_at, finished_at FROM runs WHERE run_id = ?", [run_id])
        still_pending = pending.pending_ids(con)
    by_batch = {r["batch_id"]: r for r in calls.iter_rows(named=True)}
    rows = []
    for b in batches.iter_rows(named=True):
        d = json.loads(b["details"]) if b["details"] else {}
        c = by_batch.get(b["batch_id"], {})
        run_json = Path(b["artifact_dir"] or "") / "run.json"
        rj = json.loads(run_json.read_text()) if run_json.exists() else {}
        prompt, cached, completion = c.get("prompt"), c.get("cached"), c.get("completion")
        rows.append({
            "batch": b["batch_id"], "status": b["status"], "sessions": b["sessions"],
            "memories": len(d.get("memoriesWritten", [])), "linked": len(d.get("memoriesLinked", [])),
            "tasks proposed": (d.get("tasks") or {}).get("proposed", 0), "watermarked": len(d.get("watermarked", [])),
            "outcome": rj.get("outcome"), "model calls": c.get("calls", 0), "prompt tokens": prompt,
            "cached share": round(cached / prompt, 3) if prompt and cached is not None else None,
            "cost usd": _cost(c.get("model"), prompt, cached, completion),
            "notebook": f"{b['batch_id']}/notebook.ipynb", "reason": b["reason"],
        })
    batch_table = pl.DataFrame(rows) if rows else pl.DataFrame(schema={"batch": pl.String, "status": pl.String})
    tokens = {k: sum((r.get(k) or 0) for r in by_batch.values()) for k in ("prompt", "cached", "completion")}
    costs = [r["cost usd"] for r in rows if r.get("cost usd") is not None]
    totals = {
        "batches": len(rows), "applied": sum(r["status"] == "applied" for r in rows),
        "failed": sum(r["status"] != "applied" for r in rows), "memories written": memories.height,
        "tasks proposed": sum(r["tasks proposed"] for r in rows), "sessions watermarked": wm.height,
        "sessions pending": len(still_pending), "prompt tokens": tokens["prompt"],
        "cached share": round(tokens["cached"] / tokens["prompt"], 3) if tokens["prompt"] else None,
        "cost usd": round(sum(costs), 4) if costs else 0.0,
        # What was masked, by kind and count only: a reviewer sees that secrets were there.
        "secrets masked": ", ".join(f"{kind} {n}" for kind, n in known.counts().items()) or "none",
    }
    return {"run": _scrubbed(run, known), "totals": totals, "batches": _scrubbed(batch_table, known),
            "memories": _scrubbed(memories, known),
            "tasks": _scrubbed(tasks_all.filter(pl.col("status") == "proposed"), known), "watermarks": wm,
            "pending": pl.DataFrame({"session_id": still_pending}, schema={"session_id": pl.String}),
            "cache_dir": run_dir / "cache"}


def html_table(frame: pl.DataFrame, *, empty: str, link: str | None = None) -> str:
    """A table for people: text as it is (polars' own HTML quotes strings), blanks for nulls, times
    in ISO 8601, and the `link` column, if any, as links (relative to the report)."""
    if frame.is_empty():
        return f"<p><em>{_esc(empty)}</em></p>"
    head = "".join(f"<th>{_esc(c)}</th>" for c in frame.columns)
    body = []
    for row in frame.iter_rows(named=True):
        cells = []
        for col, value in row.items():
            text = "" if value is None else _esc(str(plain(value)))
            cells.append(f'<td><a href="{text}">{text}</a></td>' if col == link and text else f"<td>{text}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def cache_summary(metrics_file: str | Path) -> str:
    """The cache analysis of the night as a reviewer reads it (Markdown): the report's own text
    table and notes, and where the full figures are. The raw JSON stays in metrics.json."""
    from pipeline.cache.analysis import CacheReport
    from pipeline.cache.report import render_table

    path = Path(metrics_file)
    try:
        report = CacheReport.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"_The cache metrics in {path.name} could not be read: {_esc(str(exc)[:200])}_"
    return f"```\n{render_table(report)}\n```\n\nEvery figure: [{path.parent.name}/{path.name}]({path.parent.name}/{path.name})"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def write(run_id: str, run_dir: str | Path, db: str | Path, *, note: str | None = None) -> Path:
    """Execute the report notebook into the run folder and convert it to `report.html`."""
    run_dir = Path(run_dir).absolute()
    run_dir.mkdir(parents=True, exist_ok=True)
    executed = run_dir / "night_report.ipynb"
    _run(report_command(run_id, run_dir, db, note=note), "the report notebook")
    _run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--no-input", str(executed),
          "--output", "report", "--output-dir", str(run_dir)], "nbconvert")
    html = run_dir / "report.html"
    with warehouse.reading(db) as con:
        sessions = _night_sessions(con, run_id)
    known = scan_warehouse(db, sessions)
    gate_file(html, known)
    gate_file(executed, known)
    return html


def gate_file(path: Path, known: SecretSet) -> bool:
    """The page's last check: rewrite it scrubbed if it still holds anything of a night's secret
    (True when it had to)."""
    if not known or not path.exists():
        return False
    text = path.read_text(encoding="utf-8")
    if not known.check(text):
        return False
    path.write_text(known.scrub(text), encoding="utf-8")
    return True


def report_command(run_id: str, run_dir: str | Path, db: str | Path, *, note: str | None = None) -> list[str]:
    """The report notebook's command line: executed into `<run_dir>/night_report.ipynb`."""
    run_dir = Path(run_dir).absolute()
    return papermill_command(NOTEBOOK, run_dir / "night_report.ipynb",
                             {"db": str(Path(db).absolute()), "run_id": run_id, "run_dir": str(run_dir),
                              "note": note or ""}, cwd=REPO)


def _run(cmd: list[str], what: str) -> None:
    proc = run_papermill(cmd, cwd=REPO)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
        raise ReportError(f"{what} failed: {lines[-1] if lines else 'no output'}")
