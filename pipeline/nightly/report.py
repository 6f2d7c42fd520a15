"""The night's report: a review page for the person who decides, each morning, what to keep.

For every memory written or linked tonight it shows the kind, claim and gist and each evidence
quote in its transcript context (`pipeline.nightly.evidence`), with the command that takes the
memory back; for every task waiting for review, its statement, actor, due day and quote in context,
with the commands that confirm or reject it; then what was not written and why, the batches, the
sessions read, what is still pending, and the prompt-cache analysis.

`tables()` and `review()` compute everything from the warehouse (read-only), the run folder and the
corpus; the report notebook shows them, and `write()` executes it and converts it to one HTML page
that needs nothing from the network (no scripts, fonts or styles from elsewhere). Every piece of
text on the page passes through the redaction of `pipeline.secrets.redact`.

The report is the last thing a night writes, so it has its own gate: the sessions of the night's
batches are scanned for secrets again, every value the report shows is masked against them before it
is rendered (the same `redacted` as every other output), and `write()` checks the text the finished
page shows once more, failing rather than editing markup.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import config
from pipeline.consolidator import pending
from pipeline.consolidator.batch_secrets import scan_sessions, scan_warehouse
from pipeline.corpus import apply as apply_mod
from pipeline.corpus import tasks as tasks_mod
from pipeline.corpus.git_corpus import Corpus
from pipeline.display import plain
from pipeline.errors import ReportError
from pipeline.nightly import notebook_html
from pipeline.nightly.evidence import EvidenceView, evidence_html, evidence_view
from pipeline.nightly.kernels import papermill_command, run_papermill
from pipeline.secrets.gate import SecretSet
from pipeline.secrets.redact import redacted
from pipeline.secrets.scan import spans
from pipeline.templates import macro, markup
from pipeline.templates.text import page_text
from pipeline.warehouse import db as warehouse

REPO = config.REPO
NOTEBOOK = config.NOTEBOOKS / "night_report.ipynb"
TEMPLATE_FILE = "report.html.j2"  # pipeline/templates/: every block of the page


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
    """Every text cell of `frame` masked as every output masks a value (`redacted`), before rendering."""
    if frame.is_empty():
        return frame
    cols = [c for c, t in frame.schema.items() if t == pl.String]
    return frame.with_columns(
        pl.col(c).map_elements(lambda v: redacted(v, known), return_dtype=pl.String, skip_nulls=True) for c in cols
    ) if cols else frame


def tables(db: str | Path, run_id: str, run_dir: str | Path) -> dict[str, Any]:
    """The run, its totals, its batches, the sessions read tonight and those still pending."""
    run_dir = Path(run_dir)
    with warehouse.reading(db) as con:
        known = night_secrets(con, run_id)
        batches = warehouse.frame(con, "SELECT batch_id, status, reason, len(sessions) AS sessions, artifact_dir, details "
                                "FROM batches WHERE run_id = ? ORDER BY batch_id", [run_id])
        # sum() of BIGINT is a 128-bit integer, which reaches Python as a Decimal: keep plain integers.
        calls = warehouse.frame(con, "SELECT batch_id, any_value(model) AS model, count(*) AS calls, "
                              "sum(prompt_tokens)::BIGINT AS prompt, sum(cached_tokens)::BIGINT AS cached, "
                              "sum(completion_tokens)::BIGINT AS completion "
                              "FROM llm_calls WHERE source = 'consolidator' AND run_id = ? GROUP BY batch_id", [run_id])
        read = warehouse.frame(con, "SELECT w.session_id, s.slug AS project, w.line_count AS lines, "
                                    "strftime(s.first_at, '%Y-%m-%d %H:%M') AS \"from (UTC)\", "
                                    "strftime(s.last_at, '%Y-%m-%d %H:%M') AS \"to (UTC)\" "
                                    "FROM watermarks w LEFT JOIN sessions s USING (session_id) WHERE w.run_id = ? "
                                    "ORDER BY s.slug, s.first_at, w.session_id", [run_id])
        run = warehouse.frame(con, "SELECT engine, model, status, started_at, finished_at, details FROM runs WHERE run_id = ?",
                       [run_id])
        still = pending.pending_sessions(con)
    by_batch = {r["batch_id"]: r for r in calls.iter_rows(named=True)}
    uses_model = bool(by_batch)
    rows = []
    for b in batches.iter_rows(named=True):
        d = json.loads(b["details"]) if b["details"] else {}
        c = by_batch.get(b["batch_id"], {})
        run_json = Path(b["artifact_dir"] or "") / "run.json"
        rj = json.loads(run_json.read_text()) if run_json.exists() else {}
        prompt, cached, completion = c.get("prompt"), c.get("cached"), c.get("completion")
        row: dict[str, Any] = {
            "batch": b["batch_id"], "status": b["status"], "outcome": rj.get("outcome"), "sessions": b["sessions"],
            "memories": len(d.get("memoriesWritten", [])), "linked": len(d.get("memoriesLinked", [])),
            "not written": len(d.get("candidatesRefused", [])),
            "tasks proposed": (d.get("tasks") or {}).get("proposed", 0), "sessions read": len(d.get("watermarked", [])),
        }
        if uses_model:
            row.update({"model calls": c.get("calls", 0), "prompt tokens": prompt,
                        "cached share": round(cached / prompt, 3) if prompt and cached is not None else None,
                        "cost usd": _cost(c.get("model"), prompt, cached, completion)})
        row.update({"notebook": f"{b['batch_id']}/notebook.ipynb", "reason": b["reason"]})
        rows.append(row)
    batch_table = pl.DataFrame(rows) if rows else pl.DataFrame(schema={"batch": pl.String, "status": pl.String})
    tokens = {k: sum((r.get(k) or 0) for r in by_batch.values()) for k in ("prompt", "cached", "completion")}
    costs = [r["cost usd"] for r in rows if r.get("cost usd") is not None]
    info = run.row(0, named=True) if run.height else {}
    totals = {
        "batches": len(rows), "applied": sum(r["status"] == "applied" for r in rows),
        "failed": sum(r["status"] != "applied" for r in rows),
        "memories written": sum(r["memories"] for r in rows), "memories linked": sum(r["linked"] for r in rows),
        "candidates not written": sum(r["not written"] for r in rows),
        "tasks proposed": sum(r["tasks proposed"] for r in rows), "sessions read": read.height,
        "sessions pending": len(still),
        # the consolidator's own model only (transcripts' usage is in the cache analysis)
        "consolidator model calls": sum(int(r.get("calls") or 0) for r in by_batch.values()),
        "consolidator prompt tokens": tokens["prompt"] if uses_model else None,
        "consolidator cached share": round(tokens["cached"] / tokens["prompt"], 3) if tokens["prompt"] else None,
        "consolidator cost usd": round(sum(costs), 4) if costs else (None if uses_model else 0.0),
        "engine": info.get("engine"),
        # What was masked, by kind and count only: a reviewer sees that secrets were there.
        "secrets masked": ", ".join(f"{kind} {n}" for kind, n in known.counts().items()) or "none",
    }
    run_table = run.drop("details") if run.height else run
    return {"run": _scrubbed(run_table, known), "totals": totals, "batches": _scrubbed(batch_table, known),
            "sessions": _scrubbed(read, known),
            "pending": pl.DataFrame([{"session_id": e["sessionId"], "project": e["slug"], "lines": e["lineCount"],
                                      "new from line": e["newFromLine"]} for e in still],
                                    schema={"session_id": pl.String, "project": pl.String, "lines": pl.Int64,
                                            "new from line": pl.Int64}),
            "day": (json.loads(info["details"]).get("day") if info.get("details") else None),
            "cache_dir": run_dir / "cache"}


# -- the review: memories and tasks with their evidence ---------------------------------------------------
@dataclass
class MemoryItem:
    memory_id: str
    kind: str
    claim: str
    gist: str
    how: str  # memory (written tonight) | link (tonight's evidence added to an earlier memory)
    batch_id: str
    sessions_total: int
    in_corpus: bool  # False when the memory has been taken back since
    status: str  # new | kept (a reviewer vouched for it) | dropped
    evidence: list[EvidenceView] = field(default_factory=list)
    batches: int = 1  # tonight's batches that wrote or linked it (batch_id: the first)
    quotes: int = 0  # tonight's distinct quotes for it; the first EVIDENCE_SHOWN are in `evidence`
    file: str = ""  # its file in the corpus, relative: where `git log` finds every quote
    _seen: set[tuple[str, str]] = field(default_factory=set, repr=False)


@dataclass
class TaskItem:
    task_id: str
    statement: str
    actor: str
    due_hint: str | None
    confidence: float
    created: str
    evidence: EvidenceView


@dataclass
class RefusedItem:
    batch_id: str
    claim: str
    problems: list[str]
    sessions: list[str]


@dataclass
class Review:
    memories: list[MemoryItem] = field(default_factory=list)
    tasks: list[TaskItem] = field(default_factory=list)
    refused: list[RefusedItem] = field(default_factory=list)


# Quotes shown in context per memory. A memory that many batches linked tonight (a large first night
# links the same finding from hundreds of sessions) is one card with its first quotes, not hundreds of
# cards: the page stays readable and its cost follows the memories, not every quote.
EVIDENCE_SHOWN = 5


def review(db: str | Path, run_id: str, corpus: str | Path | None = None) -> Review:
    """What a reviewer acts on: the memories written or linked by this run's batches (one card each,
    with up to EVIDENCE_SHOWN of tonight's quotes in context); every task waiting for review with its
    quote in context; the candidates not written."""
    out = Review()
    cards: dict[str, MemoryItem] = {}
    repo = Corpus(config.corpus_path(corpus or None))
    docs = apply_mod.existing_memories(repo) if (repo.git_dir / "HEAD").exists() else {}
    by_id = {d.id: d for d in docs.values()}
    files = {d.id: path.relative_to(repo.root).as_posix() for path, d in docs.items()}
    with warehouse.reading(db) as con:
        known = night_secrets(con, run_id)
        batches = con.execute("SELECT batch_id, artifact_dir, details FROM batches WHERE run_id = ? AND status = 'applied' "
                              "ORDER BY batch_id", [run_id]).fetchall()
        dropped = {r[0]: r[1] for r in con.execute("SELECT memory_id, claim FROM dropped_memories").fetchall()}
        for batch_id, folder, details in batches:
            d = json.loads(details) if details else {}
            answer_file = Path(folder or "") / "answer.json"
            answer = json.loads(answer_file.read_text(encoding="utf-8")) if answer_file.exists() else {}
            candidates = answer.get("candidates") or []
            for landed in d.get("candidatesLanded", []):
                i, mid = landed["candidate"], landed["memoryId"]
                cand = candidates[i] if i < len(candidates) else {}
                doc = by_id.get(mid)
                card = cards.get(mid)
                if card is None:
                    card = cards[mid] = MemoryItem(
                        memory_id=mid, kind=doc.kind if doc else cand.get("kind", ""),
                        claim=doc.claim if doc else dropped.get(mid, redacted(cand.get("claim", ""))),
                        gist=doc.gist if doc else "", how=landed["as"], batch_id=batch_id,
                        sessions_total=len(doc.sessions) if doc else 0, in_corpus=doc is not None,
                        status=doc.status if doc else "dropped", batches=0, file=files.get(mid, ""),
                    )
                    out.memories.append(card)
                card.batches += 1
                if landed["as"] != "link":
                    card.how = landed["as"]  # written tonight, whatever other batches linked to it
                for e in cand.get("evidence", []):
                    key = (e["sessionId"], e["quote"])
                    if key in card._seen:
                        continue
                    card._seen.add(key)
                    card.quotes += 1
                    if len(card.evidence) < EVIDENCE_SHOWN:
                        card.evidence.append(evidence_view(con, e["sessionId"], e["quote"], known=known))
            for r in d.get("candidatesRefused", []):
                out.refused.append(RefusedItem(batch_id, r.get("claim") or r.get("statement", ""),
                                               list(r.get("problems", [])), list(r.get("sessions", []))))
        if (repo.git_dir / "HEAD").exists():
            for _, t in tasks_mod.load_all(repo.root):
                if t.status != "proposed":
                    continue
                # The task file keeps its quote (redacted) and, when it could be found, its line.
                out.tasks.append(TaskItem(t.id, t.statement, t.actor, t.dueHint, t.confidence, t.created,
                                          evidence_view(con, t.session, t.evidence, line_no=t.line, known=known)))
    out.tasks.sort(key=lambda t: (t.created, t.task_id), reverse=True)
    return out


# -- HTML ---------------------------------------------------------------------------------------------------
PAGE_CSS = """
<style>
:root { --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --card: #f6f8fa; --mark: #fff3b0; }
body, .jp-Notebook { color: var(--ink); }
main { max-width: 1180px; margin: 0 auto; }
.jp-OutputArea-prompt, .jp-InputPrompt, .jp-OutputPrompt { display: none !important; }
.jp-OutputArea-output, .jp-RenderedHTMLCommon { max-width: 100%; overflow-wrap: anywhere; }
.jp-RenderedHTMLCommon table { display: table; table-layout: auto; width: auto; max-width: 100%;
  border-collapse: collapse; margin: 0.4em 0 1em; font-size: 13px; }
.jp-RenderedHTMLCommon th, .jp-RenderedHTMLCommon td { text-align: left !important; vertical-align: top;
  padding: 3px 8px; border-bottom: 1px solid var(--line); max-width: 36em; overflow-wrap: anywhere; }
.jp-RenderedHTMLCommon th { white-space: normal; font-weight: 600; }
.jp-RenderedHTMLCommon td.num { text-align: right !important; white-space: nowrap; }
.jp-RenderedHTMLCommon th.num { text-align: right !important; }
code.id, .nowrap, code.cmd { white-space: nowrap; overflow-wrap: normal; word-break: keep-all; }
code.cmd { display: inline-block; max-width: 100%; overflow-x: auto; vertical-align: bottom; }
code.id, code.cmd { font-size: 12px; background: #eff1f3; padding: 0 3px; border-radius: 3px; }
pre { white-space: pre-wrap !important; overflow-wrap: break-word !important; word-break: normal !important; max-width: 100%; }
img { max-width: 100%; height: auto; }
.card { border: 1px solid var(--line); border-radius: 6px; background: #fff; margin: 0 0 16px; padding: 10px 14px; }
.card h3 { margin: 0.1em 0 0.4em; font-size: 16px; line-height: 1.35; }
.card .meta { color: var(--muted); font-size: 12.5px; margin-bottom: 6px; }
.card .gist { white-space: pre-wrap; margin: 0.3em 0 0.6em; }
.badge { display: inline-block; font-size: 11.5px; padding: 0 6px; border-radius: 10px; background: #ddf4ff;
  color: #0a3069; margin-right: 6px; white-space: nowrap; }
.badge.link { background: #fbefff; color: #6e2a8c; } .badge.gone { background: #ffebe9; color: #82071e; }
.badge.late { background: #ffebe9; color: #82071e; }
.actions { margin-top: 8px; font-size: 12.5px; color: var(--muted); }
.actions div { margin: 2px 0; }
.evidence { border-left: 3px solid var(--line); background: var(--card); margin: 8px 0; padding: 6px 10px; }
.evidence .where { font-size: 12px; color: var(--muted); margin-bottom: 4px; }
.evidence ol.context { list-style: none; margin: 0; padding: 0; }
.evidence li { display: grid; grid-template-columns: 3.2em 9.5em minmax(0, 1fr); column-gap: 8px; padding: 2px 0;
  font-size: 12.5px; border-top: 1px dotted var(--line); }
.evidence li:first-child { border-top: none; }
.evidence li .ln { color: var(--muted); text-align: right; font-variant-numeric: tabular-nums; }
.evidence li .who { color: var(--muted); overflow-wrap: anywhere; }
.evidence li .text { white-space: pre-wrap; overflow-wrap: anywhere; font-family: var(--jp-code-font-family, monospace); }
.evidence li.quote { background: #fffbe6; }
.evidence mark { background: var(--mark); padding: 0 1px; }
.evidence .more { font-size: 12px; color: var(--muted); margin-top: 4px; }
ul.totals { margin: 0.2em 0 1em; padding-left: 1.2em; } ul.totals li { margin: 2px 0; }
.problems { margin: 4px 0 0; padding-left: 1.2em; }
</style>
"""


def page_css() -> str:
    return PAGE_CSS


def _e(text: object) -> str:
    """Text for the page: secrets masked, then HTML-escaped."""
    return html.escape(redacted("" if text is None else str(text)), quote=True)


_NUMERIC = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64, pl.Float32, pl.Float64)


def html_table(frame: pl.DataFrame, *, empty: str, link: str | None = None, ids: tuple[str, ...] = ()) -> str:
    """A table for people: text as it is and left-aligned, numbers right-aligned, blanks for nulls, times in
    ISO 8601, the `ids` columns (and the `link` column, as links relative to the report) unbroken."""
    if frame.is_empty():
        return macro(TEMPLATE_FILE, "empty", empty)
    numeric = [c for c, t in frame.schema.items() if isinstance(t, _NUMERIC) or t in _NUMERIC]
    rows = [[(col, "" if value is None else str(plain(value))) for col, value in row.items()]
            for row in frame.iter_rows(named=True)]
    return macro(TEMPLATE_FILE, "html_table", frame.columns, numeric, rows, link, list(ids))


def by_project_html(frame: pl.DataFrame, *, empty: str, ids: tuple[str, ...] = ("session_id",)) -> str:
    """A table per project (its name said once, above its sessions), so long project names take no column."""
    if frame.is_empty():
        return macro(TEMPLATE_FILE, "empty", empty)
    out = []
    for (project,), group in frame.group_by("project", maintain_order=True):
        out.append(macro(TEMPLATE_FILE, "project_heading", project, group.height)
                   + html_table(group.drop("project"), empty=empty, ids=ids))
    return "".join(out)


def header_html(run_id: str, t: dict[str, Any], note: str | None = None) -> str:
    run = t["run"].row(0, named=True) if t["run"].height else {}
    status = finished = started = None
    if run:
        status, finished = run.get("status"), plain(run.get("finished_at"))
        # The page is written during the night's last step, before the run records its end: a run
        # still `reporting` has landed every batch and is marked done once the page exists. A reader
        # the next morning must not take the night for one that never finished.
        if status == "reporting":
            status = "done"
        finished = finished or f"report written {plain(dt.datetime.now(dt.UTC).replace(microsecond=0))}"
        started = plain(run["started_at"]) if run.get("started_at") else None
    return macro(TEMPLATE_FILE, "header", run_id, t.get("day"), run, status, started, finished, note)


def totals_html(totals: dict[str, Any]) -> str:
    """The night in a few lines; the model figures say they are the consolidator's own, not the transcripts'."""
    n = totals
    items = [
        f"{n['batches']} batch(es): {n['applied']} applied, {n['failed']} not applied",
        f"{n['memories written']} memories written, {n['memories linked']} linked to earlier memories, "
        f"{n['candidates not written']} candidate(s) not written",
        f"{n['tasks proposed']} task(s) proposed tonight",
        f"{n['sessions read']} session(s) read and watermarked; {n['sessions pending']} still pending",
    ]
    if n["consolidator model calls"]:
        share = n["consolidator cached share"]
        cost = n["consolidator cost usd"]
        items.append(
            f"The consolidator's own model (not the transcripts' usage, which the prompt-cache section covers): "
            f"{n['consolidator model calls']} call(s), {n['consolidator prompt tokens'] or 0:,} prompt tokens"
            + (f", {share:.1%} read from cache" if share is not None else "")
            + (f", about ${cost:,.4f} at list prices" if cost is not None else ", cost unknown (model not in the price list)"))
    else:
        items.append("The consolidator's own model: none used tonight"
                     + (" (the offline rules engine)" if n.get("engine") == "rules" else "")
                     + ", so no tokens and no cost; the transcripts' own token usage is in the prompt-cache section.")
    return macro(TEMPLATE_FILE, "totals", items)


def memory_cards(rv: Review) -> str:
    if not rv.memories:
        return macro(TEMPLATE_FILE, "empty", "No memory was written or linked tonight.")
    evidence = [markup("".join(evidence_html(v) for v in m.evidence)) for m in rv.memories]
    return macro(TEMPLATE_FILE, "memory_cards", rv.memories, evidence)


def task_cards(rv: Review, today: str | None = None) -> str:
    if not rv.tasks:
        return macro(TEMPLATE_FILE, "empty", "No task is waiting for review.")
    today = today or dt.datetime.now(dt.UTC).date().isoformat()
    evidence = [markup(evidence_html(t.evidence)) for t in rv.tasks]
    return macro(TEMPLATE_FILE, "task_cards", rv.tasks, evidence, today)


def refused_html(rv: Review) -> str:
    if not rv.refused:
        return macro(TEMPLATE_FILE, "empty", "Every candidate of tonight's answers was written or linked.")
    return macro(TEMPLATE_FILE, "refused", rv.refused)


def cache_summary(metrics_file: str | Path) -> str:
    """The cache analysis of the night as a reviewer reads it (Markdown): the report's own text
    table and notes, and where the full figures are. The raw JSON stays in metrics.json."""
    from pipeline.cache.analysis import CacheReport
    from pipeline.cache.report import render_table

    path = Path(metrics_file)
    try:
        report = CacheReport.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"_The cache metrics in {path.name} could not be read: {_e(str(exc)[:200])}_"
    return (f"```\n{redacted(render_table(report))}\n```\n\n"
            f"Every figure: [{path.parent.name}/{path.name}]({path.parent.name}/{path.name})")


def write(run_id: str, run_dir: str | Path, db: str | Path, *, note: str | None = None,
          corpus: str | Path | None = None) -> Path:
    """Execute the report notebook into the run folder and convert it to `report.html` (no external assets)."""
    run_dir = Path(run_dir).absolute()
    run_dir.mkdir(parents=True, exist_ok=True)
    executed = run_dir / "night_report.ipynb"
    _run(report_command(run_id, run_dir, db, note=note, corpus=corpus), "the report notebook")
    html = run_dir / "report.html"
    _run(notebook_html.command(executed, html, no_input=True), "nbconvert")
    with warehouse.reading(db) as con:
        sessions = _night_sessions(con, run_id)
    known = scan_warehouse(db, sessions).known
    gate_file(html, known)
    gate_file(executed, known)
    return html


def _shown_texts(path: Path) -> Iterator[str]:
    raw = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        stack: list[Any] = [json.loads(raw)]
        while stack:
            value = stack.pop()
            if isinstance(value, str):
                yield value
                if "<" in value:  # an HTML output: what it shows, too
                    yield from _html_texts(value)
            elif isinstance(value, dict):
                stack.extend(value.values())
            elif isinstance(value, list):
                stack.extend(value)
        return
    yield from _html_texts(raw)


def _html_texts(markup: str) -> list[str]:
    return [page_text(markup, attributes=True, sep="\n")]


def gate_file(path: Path, known: SecretSet) -> None:
    """The page's last check, which never rewrites it: every value was masked before it was rendered
    (`redacted`), so a known secret in the text the page shows is a bug. The page is then removed and
    the report fails, naming only the kinds; markup is never edited (a mask written over rendered
    HTML once cut through a closing tag and broke the page)."""
    if not known or not path.exists():
        return
    kinds = sorted({sp.kind for text in _shown_texts(path) for sp in spans(text, known.secrets)})
    if kinds:
        path.unlink()
        raise ReportError(f"{path.name} would show a secret of this night's transcripts ({', '.join(kinds)}) that was "
                          "not masked before rendering; the file was removed. This is a bug: report it with the run id.")


def report_command(run_id: str, run_dir: str | Path, db: str | Path, *, note: str | None = None,
                   corpus: str | Path | None = None) -> list[str]:
    """The report notebook's command line: executed into `<run_dir>/night_report.ipynb`."""
    run_dir = Path(run_dir).absolute()
    params: dict[str, str] = {"db": str(Path(db).absolute()), "run_id": run_id, "run_dir": str(run_dir),
                              "note": note or ""}
    if corpus:
        params["corpus"] = str(Path(corpus).absolute())
    return papermill_command(NOTEBOOK, run_dir / "night_report.ipynb", params, cwd=REPO)


def _run(cmd: list[str], what: str) -> None:
    proc = run_papermill(cmd, cwd=REPO)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
        raise ReportError(f"{what} failed: {lines[-1] if lines else 'no output'}")
