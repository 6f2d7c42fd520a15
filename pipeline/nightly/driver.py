"""`pipeline nightly`: ingest, plan, run one papermill notebook per batch, apply, report.

The driver is the only process of the night that writes the warehouse, and it writes it only when
no batch process is alive. A night has three steps:

1. Holding the warehouse's write lock (`pipeline.warehouse.db.write_session`: the private working
   file, published when the step ends): ingest the sources, land what an interrupted night left
   behind, plan the batches, and write each batch's input into its folder (`<batch>/input/`, see
   `pipeline.consolidator.batch_input`). The publish at the end lets analysts see tonight's
   sessions while the batches run.
2. Without the lock: run the batch notebooks, `--parallel` at a time. They read only their input
   folders, never the warehouse, and the driver keeps its progress in the run folder
   (`progress.json`, `pipeline.nightly.progress`); other writing commands may run meanwhile.
3. Holding the write lock again (waiting up to `--wait` seconds for it): land each batch
   (`apply`), record the run, publish; then the report, which reads the published warehouse.

Every step is safe to interrupt: a re-run of the same command first lands any batch that finished
before the interruption, then offers whatever is still pending.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipeline import config
from pipeline.calls import rates
from pipeline.consolidator import pending
from pipeline.consolidator.batch import new_run_id
from pipeline.consolidator.batch_input import INPUT_DIR, discard, write_inputs
from pipeline.consolidator.batch_secrets import Scan, scan_warehouse
from pipeline.consolidator.engine import resolve_engine
from pipeline.corpus import apply as apply_mod
from pipeline.display import counted
from pipeline.errors import ReportError, UsageError
from pipeline.faults import crash_point
from pipeline.nightly import executors, papermill_server, planner
from pipeline.nightly.executors import BatchJob, Executor
from pipeline.nightly.kernels import Parameter, notebook_failure, papermill_command, run_papermill
from pipeline.nightly.lock import nightly_lock
from pipeline.nightly.progress import Progress
from pipeline.warehouse import db as warehouse
from pipeline.warehouse import ingest
from pipeline.warehouse.db import WRITE_WAIT_SECONDS

REPO = config.REPO
CONSOLIDATE_NOTEBOOK = config.NOTEBOOKS / "consolidate.ipynb"
CACHE_NOTEBOOK = config.NOTEBOOKS / "cache_anchoring.ipynb"
REPORT_NOTEBOOK = config.NOTEBOOKS / "night_report.ipynb"
TERMINAL = ("applied", "refused", "no-answer", "failed")
# Notebook parameters of notebooks/consolidate.ipynb that carry NightlyOptions.engine_options.
ENGINE_OPTION_PARAMETERS = ("max_retries", "timeout", "tool_choice", "parallel_tool_calls", "context_tokens",
                            "max_reply_tokens")


class NightlyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sources: list[str] = Field(default_factory=list)
    engine: str = "auto"
    parallel: int = Field(default=2, ge=1)
    date: str | None = None
    report: bool = True
    db: str | None = None
    corpus: str | None = None
    runs: str | None = None
    model: str | None = None
    base_url: str | None = None
    max_sessions: int = Field(default=planner.MAX_SESSIONS, ge=1)
    max_bytes: int = Field(default=planner.MAX_BYTES, ge=1)
    budgets: dict[str, Any] = Field(default_factory=dict)
    # The openai engine's options for a local server (max_retries, timeout, tool_choice,
    # parallel_tool_calls, context_tokens, max_reply_tokens): passed to each batch's notebook when set.
    engine_options: dict[str, Any] = Field(default_factory=dict)
    batch_timeout: float = Field(default=3600.0, gt=0)
    executor: str = "local"     # local | dask
    scheduler: str | None = None  # the Dask scheduler's address, for --executor dask
    runner: str = executors.DEFAULT_RUNNER  # what runs one batch (a dotted path; benchmarks swap it)
    wait: float = Field(default=WRITE_WAIT_SECONDS, ge=0)  # seconds to wait for the write lock
    cutover: str | None = None  # the day date anchoring was deployed, for the cache report
    tz: str | None = None  # the cache report's zone for sessions that record none (else $PIPELINE_TZ, UTC)
    cutover_version: str | None = None  # or the harness version that shipped anchoring (HARNESS@VERSION)


@dataclass
class BatchOutcome:
    batch_id: str
    session_ids: list[str]
    folder: Path
    status: str = "planned"  # applied | refused | no-answer | failed
    reason: str | None = None
    started_at: dt.datetime | None = None
    seconds: float | None = None
    where: str | None = None  # local, or the Dask worker that ran it
    memories: int = 0
    linked: int = 0
    watermarked: int = 0
    tasks: dict[str, int] = field(default_factory=dict)
    error: dict[str, Any] | None = None  # the failing cell of its notebook: cell, executionCount, name, message

    def row(self) -> dict[str, Any]:
        return {"batch": self.batch_id, "sessions": len(self.session_ids), "status": self.status,
                "memories": self.memories, "linked": self.linked, "watermarked": self.watermarked,
                "tasksProposed": self.tasks.get("proposed", 0), "seconds": self.seconds, "reason": self.reason,
                "where": self.where}


@dataclass
class NightResult:
    run_id: str
    day: str
    engine: str
    engine_note: str
    run_dir: Path
    ingest_summary: str = ""
    recovered: list[BatchOutcome] = field(default_factory=list)
    batches: list[BatchOutcome] = field(default_factory=list)
    pending_after: int = 0
    report: Path | None = None
    report_note: str | None = None
    seconds: float = 0.0

    report_failed: bool = False
    # What concurrent use costs this night: copying the published file into working files and publishing
    # them (db.WriteSession.concurrency_seconds), and writing the batch inputs.
    publish_seconds: float = 0.0
    inputs_seconds: float = 0.0
    # Where the night's time went, phase by phase (the write lock's waits included in each).
    phase_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.report_failed or any(b.status != "applied" for b in self.batches) else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id, "day": self.day, "engine": self.engine, "engineNote": self.engine_note,
            "runDir": str(self.run_dir), "ingest": self.ingest_summary,
            "recovered": [b.row() for b in self.recovered], "batches": [b.row() for b in self.batches],
            "pendingAfter": self.pending_after, "report": str(self.report) if self.report else None,
            "reportNote": self.report_note, "seconds": round(self.seconds, 2),
            "publishSeconds": round(self.publish_seconds, 2), "inputsSeconds": round(self.inputs_seconds, 2),
            "phaseSeconds": {k: round(v, 2) for k, v in self.phase_seconds.items()},
            "exitCode": self.exit_code,
        }


Say = Callable[[str], None]


def _stderr(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def run_nightly(opts: NightlyOptions, *, say: Say = _stderr) -> NightResult:
    t0 = time.monotonic()
    # Batches run with the project as their working folder: every path they get must be absolute.
    db = config.db_path(opts.db).absolute()
    runs_root = config.runs_path(opts.runs).absolute()
    opts = opts.model_copy(update={"corpus": str(config.corpus_path(opts.corpus).absolute())})
    engine, why = resolve_engine(opts.engine, api_key=os.environ.get("OPENAI_API_KEY"))
    day = opts.date or dt.datetime.now(dt.UTC).date().isoformat()
    try:
        dt.date.fromisoformat(day)
    except ValueError:
        raise UsageError(f"--date {day!r} is not a date (YYYY-MM-DD)") from None
    for src in opts.sources:
        if not Path(src).exists():
            raise UsageError(f"--source {src}: no such file or directory")
    if opts.executor not in executors.EXECUTORS:
        raise UsageError(f"unknown executor {opts.executor!r}; choose one of {', '.join(executors.EXECUTORS)}")
    _check_cutover(opts)
    run_id = new_run_id()
    run_dir = runs_root / day / run_id
    result = NightResult(run_id, day, engine, why, run_dir)
    say(f"nightly {run_id}: {why}")
    # A Dask scheduler that does not answer stops the night before anything is ingested or planned.
    # One warm papermill for every notebook of the night; it imports while the batch inputs are written.
    with papermill_server.serving({"PIPELINE_RUN_ID": run_id}, convert=opts.report), \
            _remote_executor(opts, say) as remote, nightly_lock(db, run_id) as lock:
        if lock.previous and lock.previous.get("runId"):
            say(f"taking over from interrupted run {lock.previous['runId']} (pid {lock.previous.get('pid')} is gone)")
        recorded = False
        phase = time.monotonic()

        def ended(name: str) -> None:
            nonlocal phase
            now = time.monotonic()
            result.phase_seconds[name] = now - phase
            phase = now

        try:
            with warehouse.write_session(db, wait=opts.wait, say=say) as session:
                with warehouse.writing(db) as con:
                    for earlier, why_ in mark_interrupted(con, run_id, lock.previous):
                        say(f"run {earlier} is marked interrupted: {why_}")
                    if opts.sources:
                        report = ingest.ingest(con, opts.sources, progress=True)
                        rates.store_after_ingest(con, report.warnings)
                        for w in report.warnings:
                            say(f"warning: {w}")
                        result.ingest_summary = report.summary()
                        say(f"ingested {result.ingest_summary}")
                    con.execute(
                        "INSERT INTO runs (run_id, started_at, engine, model, status, details) VALUES (?, ?, ?, ?, 'running', ?)",
                        [run_id, dt.datetime.now(dt.UTC), engine, opts.model, json.dumps({"day": day, "sources": opts.sources})],
                    )
                recorded = True
                ended("ingest")
                crash_point("nightly:ingested")

                result.recovered = _land_leftovers(db, runs_root, opts, say)
                crash_point("nightly:recovered")

                plan = _plan(db, opts)
                if (plan and remote is None) or opts.report:
                    # Only a night with a notebook to run starts the server (0.7 s of CPU for its imports).
                    papermill_server.warm_up()
                run_dir.mkdir(parents=True, exist_ok=True)
                outcomes = [BatchOutcome(b.batch_id, b.session_ids, run_dir / b.batch_id) for b in plan]
                with warehouse.writing(db) as con:
                    for b in outcomes:
                        con.execute(
                            "INSERT INTO batches (run_id, batch_id, status, sessions, artifact_dir) VALUES (?, ?, 'planned', ?, ?)",
                            [run_id, b.batch_id, b.session_ids, str(b.folder.absolute())],
                        )
                    # Then their inputs, in one pass over the lines. Killed before they are all written,
                    # the batches never ran: the next night marks them failed, removes what was
                    # written, and plans their sessions again.
                    started = time.monotonic()
                    write_inputs(con, [(b.session_ids, b.folder / INPUT_DIR) for b in outcomes], db=db)
                    result.inputs_seconds = time.monotonic() - started
                say(f"{len(outcomes)} batch(es) planned from {sum(len(b.session_ids) for b in outcomes)} pending session(s)")
                crash_point("nightly:planned")
            # Published: analysts now see tonight's sessions. No lock is held while the batches run.
            result.publish_seconds += session.concurrency_seconds
            ended("plan")

            with _prescans(db, outcomes) as scans:
                _run_batches(outcomes, engine, run_id, db, opts, lock, say, remote)
                ended("batches")
                crash_point("nightly:batches-done")

                with warehouse.write_session(db, wait=opts.wait, say=say) as session:
                    for b in outcomes:
                        _land(b, db, opts, run_id, say, scans.get(b.batch_id))
                        crash_point("nightly:between-applies")
                    result.batches = outcomes

                    with warehouse.reading(db) as con:
                        result.pending_after = len(pending.pending_ids(con))
                    # Until its report is written a run is `reporting`, never `done`: a night stopped during
                    # the report step is then found interrupted, not finished without a report.
                    ended("apply")
                    _finish_run(db, result, t0, reporting=opts.report)
            result.publish_seconds += session.concurrency_seconds
            if opts.report:
                crash_point("nightly:report")
                phase = time.monotonic()
                result.report, result.report_note = _report(run_id, run_dir, db, opts, say)
                result.report_failed = result.report is None
                ended("report")
                with warehouse.write_session(db, wait=opts.wait, say=say) as session:
                    _finish_run(db, result, t0)
                result.publish_seconds += session.concurrency_seconds
        except KeyboardInterrupt:
            # Ctrl-C: say so now; a kill -9 leaves `running`, and the next run marks it interrupted.
            if recorded:
                _stop(db, run_id, "interrupted", "stopped by Ctrl-C (KeyboardInterrupt) before it finished")
            raise
        except Exception as exc:
            if recorded:
                _stop(db, run_id, "failed", f"stopped by an error: {type(exc).__name__}: {exc}")
            raise
    return result



def run_status(result: NightResult, *, reporting: bool = False) -> str:
    """`failed` when a batch of the run failed, `report-failed` when only its report did,
    `reporting` while its report is being written, else `done`."""
    if any(b.status != "applied" for b in result.batches):
        return "failed"
    if result.report_failed:
        return "report-failed"
    return "reporting" if reporting else "done"


def _finish_run(db: Path, result: NightResult, t0: float, *, reporting: bool = False) -> None:
    result.seconds = time.monotonic() - t0
    status = run_status(result, reporting=reporting)
    details = result.to_json()
    if status == "report-failed":
        details["reason"] = f"its batches landed but its report failed: {result.report_note or 'no report was written'}"
    with warehouse.writing(db) as con:
        con.execute(
            "UPDATE runs SET finished_at = ?, status = ?, details = ? WHERE run_id = ?",
            [None if reporting else dt.datetime.now(dt.UTC), status, json.dumps(details), result.run_id],
        )


def _stop(db: Path, run_id: str, status: str, reason: str) -> None:
    """Record why this run stopped early (best effort: the warehouse may be what failed)."""
    now = dt.datetime.now(dt.UTC)
    # The original error is what the user must see. No waiting for the write lock: when another
    # command holds it (or this run gave up waiting for it), the next night marks this run interrupted.
    with contextlib.suppress(Exception), warehouse.writing(db, wait=0) as con:
        con.execute(
            "UPDATE runs SET status = ?, finished_at = ?, details = json_merge_patch(coalesce(details, '{}'), ?) "
            "WHERE run_id = ? AND status IN ('running', 'reporting')",
            [status, now, json.dumps({"reason": reason, "interruptedAt": now.isoformat(timespec="seconds")}), run_id],
        )


def mark_interrupted(con: Any, run_id: str, holder: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """Mark every earlier run still `running` or `reporting` as `interrupted`, saying when and why.

    Only one nightly run holds the lock, so a run in either state found by the run that took the
    lock over is one whose process ended before it finished (Ctrl-C, kill -9, a crash, a reboot).
    `finished_at` is its last sign of life (its latest batch event, else its start); `details`
    gains `reason`, `interruptedAt`, `detectedAt` and `takenOverBy`. Returns (run id, reason) pairs.
    """
    now = dt.datetime.now(dt.UTC)
    rows = con.execute(
        "SELECT r.run_id, r.status, r.started_at, greatest(max(b.started_at), max(b.finished_at)), "
        "count(b.batch_id) FILTER (WHERE b.status IN ('planned', 'running')) "
        "FROM runs r LEFT JOIN batches b USING (run_id) WHERE r.status IN ('running', 'reporting') AND r.run_id <> ? "
        "GROUP BY ALL ORDER BY r.started_at",
        [run_id],
    ).fetchall()
    marked = []
    for earlier, status, started, last_batch, unfinished in rows:
        last = max(t for t in (started, last_batch) if t is not None) if (started or last_batch) else None
        pid = holder.get("pid") if holder and holder.get("runId") == earlier else None
        who = f"its process (pid {pid})" if pid else "its process"
        if status == "reporting":
            why = f"{who} ended while writing the night's report; its batches had landed, no report was written"
        elif unfinished:
            why = f"{who} ended with {unfinished} batch(es) unfinished (Ctrl-C, kill, crash or reboot)"
        else:
            why = f"{who} ended before the run finished (Ctrl-C, kill, crash or reboot)"
        details = {"reason": why, "interruptedAt": last.isoformat(timespec="seconds") if last else None,
                   "detectedAt": now.isoformat(timespec="seconds"), "takenOverBy": run_id}
        con.execute(
            "UPDATE runs SET status = 'interrupted', finished_at = ?, "
            "details = json_merge_patch(coalesce(details, '{}'), ?) WHERE run_id = ?",
            [last, json.dumps(details), earlier],
        )
        marked.append((earlier, why))
    return marked


# -- recovery ------------------------------------------------------------------------------------------
def _land_leftovers(db: Path, runs_root: Path, opts: NightlyOptions, say: Say) -> list[BatchOutcome]:
    """Apply every finished artifact an interrupted run left behind without landing it."""
    with warehouse.reading(db) as con:
        rows = con.execute(
            "SELECT run_id, batch_id, status, artifact_dir, sessions FROM batches WHERE status IN ('planned', 'running') "
            "ORDER BY run_id, rowid"  # plan order, so memories and links land as they would have
        ).fetchall()
    landed = []
    for run_id, batch_id, _status, folder, sessions in rows:
        out = BatchOutcome(batch_id, list(sessions or []), Path(folder))
        if (out.folder / "run.json").exists():
            say(f"landing batch {batch_id} of interrupted run {run_id}")
            _land(out, db, opts, run_id, say)
        else:
            out.status, out.reason = "failed", "interrupted before its notebook finished; its sessions are planned again"
            _mark(db, run_id, out)
            discard(out.folder)
        landed.append(out)
    return landed


def _plan(db: Path, opts: NightlyOptions) -> list[planner.PlannedBatch]:
    with warehouse.reading(db) as con:
        entries = pending.pending_sessions(con)
        wm = dict(con.execute(
            'SELECT session_id, arg_max(size_bytes, "at") FROM watermarks GROUP BY session_id').fetchall())
    return planner.plan(entries, wm, max_sessions=opts.max_sessions, max_bytes=opts.max_bytes)


# -- batches ---------------------------------------------------------------------------------------------
def batch_parameters(b: BatchOutcome, engine: str, db: Path, opts: NightlyOptions) -> dict[str, Parameter]:
    """The consolidate notebook's parameters for one batch (INTERFACES.md names them). No `db`: the
    batch reads only its input folder, never the warehouse."""
    params: dict[str, Parameter] = {"batch_input": str((b.folder / INPUT_DIR).absolute()),
                                    "session_ids": ",".join(b.session_ids), "engine": engine,
                                    "out_dir": str(b.folder.absolute())}
    if opts.model:
        params["model"] = opts.model
    if opts.base_url:
        params["base_url"] = opts.base_url
    for k in ("max_tool_calls", "max_submits", "max_tokens", "max_seconds"):
        if opts.budgets.get(k) is not None:
            params[k] = opts.budgets[k]
    for k in ENGINE_OPTION_PARAMETERS:
        if opts.engine_options.get(k) is not None:
            params[k] = opts.engine_options[k]
    return params


def _papermill_cmd(b: BatchOutcome, engine: str, db: Path, opts: NightlyOptions) -> list[str]:
    return papermill_command(CONSOLIDATE_NOTEBOOK, b.folder / "notebook.ipynb",
                             batch_parameters(b, engine, db, opts), cwd=REPO)


def _job(b: BatchOutcome, engine: str, run_id: str, db: Path, opts: NightlyOptions) -> BatchJob:
    """One batch for an executor. Its input folder travels with it, so a remote worker needs nothing
    of the driver's disk; locally the command is the one `_papermill_cmd` gives."""
    params = {k: v for k, v in batch_parameters(b, engine, db, opts).items() if k != "out_dir"}
    folder = b.folder.absolute()
    return BatchJob(run_id=run_id, day=folder.parent.parent.name, batch_id=b.batch_id, folder=str(folder),
                    parameters=params, timeout=opts.batch_timeout, env={"PIPELINE_RUN_ID": run_id},
                    notebook=str(CONSOLIDATE_NOTEBOOK), runner=opts.runner,
                    ship={"batch_input": str(folder / INPUT_DIR)},
                    command=_papermill_cmd(b, engine, db, opts))


@contextlib.contextmanager
def _remote_executor(opts: NightlyOptions, say: Say) -> Iterator[Executor | None]:
    if opts.executor != "dask":
        yield None
        return
    remote = executors.make_executor("dask", parallel=opts.parallel, scheduler=opts.scheduler)
    try:
        if isinstance(remote, executors.DaskExecutor):
            say(f"batches run on the Dask cluster at {remote.address} ({remote.threads()} worker thread(s) now)")
        yield remote
    finally:
        remote.close(kill=True)


def _run_batches(outcomes: list[BatchOutcome], engine: str, run_id: str, db: Path, opts: NightlyOptions,
                 lock: Any, say: Say, remote: Executor | None = None) -> None:
    if not outcomes:
        return
    if sys.stderr.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        from pipeline.console import console

        with Bar("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                 TimeElapsedColumn(), console=console(stderr=True), transient=True) as bar:
            task = bar.add_task("batches", total=len(outcomes))
            _run_batch_processes(outcomes, engine, run_id, db, opts, lock, bar.console.print,
                                 lambda: bar.advance(task), remote)
    else:
        _run_batch_processes(outcomes, engine, run_id, db, opts, lock, say, lambda: None, remote)


def _run_batch_processes(outcomes: list[BatchOutcome], engine: str, run_id: str, db: Path, opts: NightlyOptions,
                         lock: Any, say: Say, advance: Callable[[], None], remote: Executor | None = None) -> None:
    """Hand every batch to the executor (local processes, or the Dask cluster) and collect how each
    ended. Only this thread writes progress.json; nothing writes the warehouse meanwhile."""
    executor = remote or executors.make_executor("local", parallel=opts.parallel, scheduler=None,
                                                 on_start=lock.add_group, on_end=lock.remove_group)
    outcomes[0].folder.parent.mkdir(parents=True, exist_ok=True)
    progress = Progress(outcomes[0].folder.parent, run_id, [(b.batch_id, len(b.session_ids)) for b in outcomes])
    progress.write()
    queue = list(outcomes)
    by_id = {b.batch_id: b for b in outcomes}
    verb = "submitted" if executor.name == "dask" else "started"
    shown: dict[str, int] = {}
    done = 0
    try:
        while queue or done < len(outcomes):
            while queue and executor.capacity() > 0:
                b = queue.pop(0)
                b.started_at = b.started_at or dt.datetime.now(dt.UTC)
                executor.start(_job(b, engine, run_id, db, opts))
                progress.update(b.batch_id, status="running", startedAt=b.started_at.isoformat(timespec="seconds"))
                say(f"batch {b.batch_id}: {verb} ({len(b.session_ids)} sessions)")
                crash_point("nightly:batch-started")
            finished = executor.poll(0.2)
            for batch_id, pid in executor.pids().items():
                if shown.get(batch_id) != pid:
                    shown[batch_id] = pid
                    progress.started(batch_id, pid)
            for fin in finished:
                b = by_id[fin.job.batch_id]
                for note in fin.run.notes:
                    say(note)
                done += 1
                advance()
                b.seconds, b.where = fin.run.seconds, fin.run.where
                if fin.run.failed:
                    b.status, b.reason = "failed", fin.run.reason
                    # A notebook that ran and raised names its failing cell; a killed or lost one cannot.
                    failure = notebook_failure(b.folder / "notebook.ipynb") if fin.run.returncode and not fin.run.killed else None
                    if failure is not None:
                        b.error = failure.to_json()
                        b.reason = str(failure)[:300]
                progress.ended(b.batch_id, failed=b.status == "failed", seconds=b.seconds or 0.0, reason=b.reason)
                on = f" on {b.where}" if executor.name == "dask" else ""
                say(f"batch {b.batch_id}: notebook finished in {fin.run.seconds:.1f} s{on} ({done}/{len(outcomes)})"
                    + (f" — failed: {b.reason}" if b.status == "failed" else ""))
    except BaseException:
        executor.close(kill=True)
        raise
    if remote is None:
        executor.close(kill=False)


def _mark(db: Path, run_id: str, b: BatchOutcome, status: str | None = None) -> None:
    details = json.dumps({"error": b.error}) if b.error else None
    now = dt.datetime.now(dt.UTC)
    with warehouse.writing(db) as con:
        con.execute(
            "UPDATE batches SET status = ?, reason = ?, started_at = coalesce(started_at, ?), "
            "finished_at = CASE WHEN ? IN ('failed') THEN ? ELSE finished_at END, details = coalesce(?, details) "
            "WHERE run_id = ? AND batch_id = ?",
            [status or b.status, b.reason, b.started_at or now, status or b.status, now, details, run_id, b.batch_id],
        )


@contextlib.contextmanager
def _prescans(db: Path, outcomes: list[BatchOutcome]) -> Iterator[dict[str, Future[Scan]]]:
    """The secrets of each batch's sessions, detected on a thread of the driver while the batches
    run (the driver only waits then, and the notebooks leave a core idle between them), for its
    apply to check against: the apply then need not scan the same lines again while it holds the
    writer. Read from the warehouse by the night itself, never from an artifact; a scan that failed
    is made again by its apply. A thread, not a process: a killed night leaves nothing behind."""
    from concurrent.futures import ThreadPoolExecutor

    if not outcomes:
        yield {}
        return
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prescan")
    try:
        yield {b.batch_id: pool.submit(scan_warehouse, db, list(b.session_ids)) for b in outcomes}
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _prescanned(future: Future[Scan] | None) -> Scan | None:
    if future is None:
        return None
    try:
        return future.result()
    except Exception:  # DuckDB refused (out of memory, say): the apply scans for itself
        return None


def _land(b: BatchOutcome, db: Path, opts: NightlyOptions, run_id: str, say: Say,
          scan: Future[Scan] | None = None) -> None:
    if b.status == "failed" or not (b.folder / "run.json").exists():
        b.status = "failed"
        b.reason = b.reason or "the notebook wrote no finished artifact"
        _mark(db, run_id, b)
        return
    r = apply_mod.apply(b.folder, db=db, corpus=opts.corpus, scan=_prescanned(scan))
    b.status = "applied" if r.status in ("applied", "already-applied") else r.status
    b.reason = r.reason
    b.memories, b.linked, b.watermarked, b.tasks = (len(r.memories_written), len(r.memories_linked),
                                                    len(r.watermarked), r.tasks)
    if r.status == "already-applied":
        b.reason = "landed earlier"
    # Its artifact says what the batch did: the input goes (the warehouse holds all of it). Only a
    # batch whose notebook failed keeps its input, to be looked at or run again by hand
    # (pipeline consolidate --input FOLDER/input).
    discard(b.folder)
    say(f"batch {b.batch_id}: {b.status}" + (f" ({b.reason})" if b.reason and b.status != "applied" else "")
        + f"; {counted(b.memories, 'memory', 'memories')} written, {b.linked} linked, "
          f"{counted(b.watermarked, 'session')} watermarked")


# -- report ----------------------------------------------------------------------------------------------
def _cutovers(opts: NightlyOptions) -> tuple[str | None, str | None]:
    return (opts.cutover or os.environ.get("PIPELINE_CUTOVER") or None,
            opts.cutover_version or os.environ.get("PIPELINE_CUTOVER_VERSION") or None)


def _check_cutover(opts: NightlyOptions) -> None:
    """Before any work: a cutover the cache report could not read would only fail after the batches."""
    from pipeline.cache.causes import VersionCutover

    cutover, version = _cutovers(opts)
    if cutover and version:
        raise UsageError("give a cutover date or a cutover version, not both (--cutover / --cutover-version, "
                         "PIPELINE_CUTOVER / PIPELINE_CUTOVER_VERSION)")
    if cutover:
        try:
            dt.date.fromisoformat(cutover)
        except ValueError:
            raise UsageError(f"the cutover {cutover!r} is not a date; write it as YYYY-MM-DD") from None
    if version:
        VersionCutover.parse(version)


def _report(run_id: str, run_dir: Path, db: Path, opts: NightlyOptions, say: Say) -> tuple[Path | None, str | None]:
    note = None
    cutover, version = _cutovers(opts)
    if not cutover and not version:
        # Without a deployment date every call counts as "before": rates and causes are still shown.
        note = ("no cutover configured, so every call counts as before it; pass --cutover DATE or --cutover-version "
                "HARNESS@VERSION (or set PIPELINE_CUTOVER / PIPELINE_CUTOVER_VERSION) to compare cached-token rates "
                "before and after anchoring")
    if CACHE_NOTEBOOK.exists():
        cache_dir = run_dir / "cache"
        cache_dir.mkdir(parents=True, exist_ok=True)
        tz = opts.tz or os.environ.get("PIPELINE_TZ") or None
        proc = run_papermill(cache_command(cache_dir, db, cutover, tz, version), cwd=REPO)
        if proc.returncode != 0:
            note = f"the cache-anchoring notebook failed: {_tail(proc.stderr)}"
            say(note)
        elif note:
            say(note)
    else:
        note = "the cache-anchoring notebook (notebooks/cache_anchoring.ipynb) does not exist yet; skipped"
        say(note)
    from pipeline.nightly import report as night_report

    try:
        html = night_report.write(run_id, run_dir, db, note=note, corpus=opts.corpus)
    except ReportError as exc:
        say(f"report: {exc}")
        return None, f"{note + '; ' if note else ''}{exc}"
    say(f"report: {html}")
    return html, note


def cache_command(cache_dir: Path, db: Path, cutover: str | None, tz: str | None = None,
                  cutover_version: str | None = None) -> list[str]:
    """The cache-anchoring notebook over the warehouse, writing its plots and metrics to `cache_dir`; with no
    cutover (None) every call counts as before it, and nothing marks a deployment day; `tz` is the zone of
    sessions whose transcript records none (None: the notebook's default); `cutover_version` splits by
    harness version instead of a date."""
    params: dict[str, str | None] = {"db": str(db.absolute()), "out_dir": str(cache_dir.absolute()), "cutover": cutover}
    if tz is not None:
        params["tz"] = tz
    if cutover_version is not None:
        params["cutover_version"] = cutover_version
    return papermill_command(CACHE_NOTEBOOK, cache_dir / "cache_anchoring.ipynb", params, cwd=REPO)


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


__all__ = ["NightResult", "NightlyOptions", "mark_interrupted", "run_nightly", "run_status"]
