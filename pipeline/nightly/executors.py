"""Where a night's batches run: beside the driver (`local`), or on the workers of a Dask cluster.

The narrow interface between the driver and an executor is one batch: a `BatchJob` (the batch's
papermill parameters, its folder on the driver, its time limit) goes in; a `BatchRun` (how it
ended, how long it took, where it ran) and, from a remote worker, the artifact folder's files come
back. The driver stays the only writer: it starts jobs, collects what they hand back, and then
applies each artifact itself (the corpus, the warehouse, the watermarks).

- `LocalExecutor` runs `--parallel` batches at once, each a papermill process in its own process
  group (so a stale-lock takeover can end it), from a thread pool in the driver.
- `DaskExecutor` submits each batch to a `dask.distributed` scheduler. A worker runs the batch in a
  private temporary folder laid out as `<day>/<run-id>/<batch-id>/` and returns every file of it;
  the driver writes them into the batch folder, `run.json` last, so an artifact is complete or is
  not there. The batch's inputs named in `BatchJob.ship` (a folder per notebook parameter) travel
  with the job, so a worker needs the package installed and nothing else of the driver's disk.
  Worker loss, a batch over its time limit and a worker that never answers all end the same way
  as a failed batch: the reason is recorded, no file lands, and the sessions stay pending.

A runner is the function that executes one job in a folder (`run_notebook`, papermill; a test or a
benchmark may name another by its dotted path in `BatchJob.runner`).
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import math
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from pipeline import config
from pipeline.errors import UsageError
from pipeline.nightly import papermill_server
from pipeline.nightly.kernels import KERNEL_START_RETRIES, log_says_kernel_did_not_start, papermill_command

CONSOLIDATE_NOTEBOOK = config.NOTEBOOKS / "consolidate.ipynb"
DEFAULT_RUNNER = "pipeline.nightly.executors:run_notebook"
# How long past its own time limit a batch on a Dask worker may stay silent before the driver gives
# up on it (the worker enforces the limit itself; this catches a worker that stopped answering).
NO_ANSWER_GRACE = 30.0
# How long the scheduler must go on showing a batch elsewhere than where it started (or its worker
# gone) before the driver calls the worker lost: under load its view blinks (a steal attempt, a
# late heartbeat), and a batch that went on to finish was once failed for it.
LOST_CONFIRM = 2.0
# How long the driver keeps trying to reach the Dask scheduler before the night stops with a usage
# error (`PIPELINE_DASK_CONNECT_TIMEOUT` overrides it: a scheduler still starting needs a while, a
# mistyped address only wastes it).
CONNECT_TIMEOUT = 20.0
RUN_FILE = "run.json"
START_TOPIC = "pipeline-batch-started"
EXECUTORS = ("local", "dask")


@dataclass(frozen=True)
class BatchJob:
    """One batch, as the driver hands it to an executor (picklable: it travels to Dask workers)."""

    run_id: str
    day: str
    batch_id: str
    folder: str                      # the batch folder on the driver
    parameters: dict[str, Any]       # papermill parameters, except out_dir (the executor sets it)
    timeout: float
    env: dict[str, str] = field(default_factory=dict)
    notebook: str = str(CONSOLIDATE_NOTEBOOK)
    runner: str = DEFAULT_RUNNER
    # Notebook parameters naming a folder of the batch's input on the driver: its files travel with
    # the job, and on a worker the parameter names the copy.
    ship: dict[str, str] = field(default_factory=dict)
    shipped: dict[str, dict[str, bytes]] = field(default_factory=dict)
    notebook_text: str | None = None
    # The driver's own command line for the batch, used when it runs into its own folder (local).
    command: list[str] | None = None


@dataclass
class BatchRun:
    """How one batch ended, as the executor saw it. `failed` means no artifact may be applied."""

    batch_id: str
    returncode: int | None
    seconds: float
    where: str
    failed: bool = False
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    killed: bool = False  # stopped at its time limit


Runner = Callable[[BatchJob, Path, Callable[[int], None] | None], BatchRun]


def resolve_runner(name: str) -> Runner:
    module, _, attr = name.partition(":")
    try:
        fn: Runner = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"no batch runner {name!r} ({exc})") from exc
    return fn


# -- the runner: papermill on the consolidate notebook -----------------------------------------------------------
def notebook_command(job: BatchJob, out_dir: Path, notebook: Path) -> list[str]:
    if job.command is not None and Path(job.folder) == out_dir:
        return job.command
    params = {**job.parameters, "out_dir": str(out_dir)}
    return papermill_command(notebook, out_dir / "notebook.ipynb", params, cwd=config.REPO)


def notebook_error(log: Path) -> str:
    """The line of a papermill log that says what went wrong."""
    try:
        lines = [ln.strip() for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "the batch notebook failed (no log)"
    errors = [ln for ln in lines if "Error" in ln or "Exception" in ln]
    text = errors[-1] if errors else (lines[-1] if lines else "the batch notebook failed")
    return text[:300]


def run_notebook(job: BatchJob, out_dir: Path, on_start: Callable[[int], None] | None = None) -> BatchRun:
    """Run the consolidate notebook for one batch into `out_dir`, killing it past `job.timeout`;
    again (at most KERNEL_START_RETRIES times) when its kernel never started."""
    out_dir.mkdir(parents=True, exist_ok=True)
    notebook = Path(job.notebook)
    if job.notebook_text is not None:  # on a worker: the driver's copy of the notebook
        notebook = out_dir.parent / f".{job.batch_id}.ipynb"
        notebook.write_text(job.notebook_text, encoding="utf-8")
    env = {**os.environ, **job.env, "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    notes: list[str] = []
    log_path = out_dir / "papermill.log"
    for attempt in range(KERNEL_START_RETRIES + 1):
        # Forked by the night's papermill server when one runs, else a process of its own.
        proc = papermill_server.spawn(notebook_command(job, out_dir, notebook), cwd=config.REPO, env=env,
                                      stdout=log_path)
        if on_start is not None:
            on_start(proc.pid)
        reason = None
        try:
            code = proc.wait(timeout=max(0.0, job.timeout - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
            reason = f"timed out after {job.timeout:.0f} s"
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        done = (out_dir / RUN_FILE).exists()
        if (code != 0 and reason is None and not done and attempt < KERNEL_START_RETRIES
                and log_says_kernel_did_not_start(log_path)):
            # Nothing ran: Jupyter sometimes loses a kernel while several start at once.
            log_path.replace(out_dir / f"papermill.attempt{attempt + 1}.log")
            notes.append(f"batch {job.batch_id}: its kernel did not start; starting it again")
            continue
        break
    failed = code != 0 and not (out_dir / RUN_FILE).exists()
    if reason is not None:  # a killed notebook may have left a run.json of an earlier try: never trust it
        failed = True
    return BatchRun(job.batch_id, code, round(time.monotonic() - t0, 2), "local", failed,
                    (reason or notebook_error(log_path)) if failed else None, notes, killed=reason is not None)


# -- executors ---------------------------------------------------------------------------------------------------
@dataclass
class Finished:
    job: BatchJob
    run: BatchRun


class Executor(Protocol):
    name: str

    def capacity(self) -> int:
        """Batches worth starting now (the rest wait in the driver's queue)."""
        ...

    def start(self, job: BatchJob) -> None: ...

    def pids(self) -> dict[str, int]:
        """Batch → process group of the batches running here (none for a remote executor)."""
        ...

    def poll(self, wait: float) -> list[Finished]:
        """Batches that ended since the last call, waiting at most `wait` seconds for one."""
        ...

    def close(self, *, kill: bool) -> None: ...


class LocalExecutor:
    """`--parallel` batches at once beside the driver, each in its own process group."""

    name = "local"

    def __init__(self, parallel: int, *, on_start: Callable[[int], None] | None = None,
                 on_end: Callable[[int], None] | None = None):
        self.parallel = parallel
        self._pool = cf.ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="batch")
        self._futures: dict[cf.Future[BatchRun], BatchJob] = {}
        self._groups: set[int] = set()
        self._pids: dict[str, int] = {}
        self._lock = threading.Lock()
        self._on_start = on_start
        self._on_end = on_end

    def capacity(self) -> int:
        return self.parallel - len(self._futures)

    def _run(self, job: BatchJob) -> BatchRun:
        pids: list[int] = []

        def started(pid: int) -> None:
            pids.append(pid)
            with self._lock:
                self._groups.add(pid)
                self._pids[job.batch_id] = pid
                if self._on_start:
                    self._on_start(pid)

        try:
            return resolve_runner(job.runner)(job, Path(job.folder), started)
        finally:
            with self._lock:
                self._pids.pop(job.batch_id, None)
                for pid in pids:
                    self._groups.discard(pid)
                    if self._on_end:
                        self._on_end(pid)

    def start(self, job: BatchJob) -> None:
        Path(job.folder).mkdir(parents=True, exist_ok=True)
        self._futures[self._pool.submit(self._run, job)] = job

    def pids(self) -> dict[str, int]:
        with self._lock:
            return dict(self._pids)

    def poll(self, wait: float) -> list[Finished]:
        if not self._futures:
            return []
        done, _ = cf.wait(list(self._futures), timeout=wait, return_when=cf.FIRST_COMPLETED)
        out = []
        for fut in done:
            job = self._futures.pop(fut)
            try:
                run = fut.result()
            except Exception as exc:  # a runner that raised: the batch failed, the night goes on
                run = BatchRun(job.batch_id, None, 0.0, "local", True, f"{type(exc).__name__}: {exc}")
            out.append(Finished(job, run))
        return out

    def close(self, *, kill: bool) -> None:
        if kill:
            with self._lock:
                for pid in list(self._groups):
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        self._pool.shutdown(wait=True, cancel_futures=True)


def _pack(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _unpack(files: dict[str, bytes], folder: Path) -> None:
    for rel, data in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def run_on_worker(job: BatchJob) -> tuple[BatchRun, dict[str, bytes]]:
    """What a Dask worker runs: the batch in a private folder, whose files go back to the driver."""
    where = "dask"
    try:
        from distributed import get_worker

        worker = get_worker()
        where = worker.address
        # Tell the driver where the batch started: a second start means its first worker was lost
        # and the scheduler is running it again, which the driver counts as a failed batch.
        worker.log_event(START_TOPIC, {"run": job.run_id, "batch": job.batch_id, "worker": where})
    except (ImportError, ValueError):
        pass
    with tempfile.TemporaryDirectory(prefix="pipeline-batch-") as tmp:
        # The layout <day>/<run-id>/<batch-id> is how a notebook's artifact learns its ids.
        out_dir = Path(tmp) / job.day / job.run_id / job.batch_id
        out_dir.mkdir(parents=True)
        params = dict(job.parameters)
        for param, files in job.shipped.items():
            inputs = Path(tmp) / "inputs" / param
            inputs.mkdir(parents=True)
            _unpack(files, inputs)
            params[param] = str(inputs)
        local = replace(job, parameters=params, shipped={}, command=None)
        # A warm papermill (and warm kernels) for the night's batches on this worker, as on the driver.
        with papermill_server.serving_run(job.run_id):
            run = resolve_runner(job.runner)(local, out_dir, None)
        run.where = where
        # A failed batch's files come back too (its notebook and log say why), but never run.json.
        files = _pack(out_dir)
        if run.failed:
            files.pop(RUN_FILE, None)
        return run, files


def land_files(files: dict[str, bytes], folder: Path) -> None:
    """Write a remote batch's files into its folder on the driver, `run.json` last: a folder is
    complete exactly when `run.json` is there, whatever moment the driver is stopped at."""
    folder.mkdir(parents=True, exist_ok=True)
    _unpack({k: v for k, v in files.items() if k != RUN_FILE}, folder)
    if RUN_FILE in files:
        tmp = folder / f".{RUN_FILE}.tmp"
        tmp.write_bytes(files[RUN_FILE])
        os.replace(tmp, folder / RUN_FILE)


class DaskExecutor:
    """Batches on a Dask distributed cluster; the driver keeps the queue and writes every result."""

    name = "dask"

    def __init__(self, address: str, *, connect_timeout: float = CONNECT_TIMEOUT, grace: float = NO_ANSWER_GRACE):
        try:
            from distributed import Client
        except ImportError as exc:
            raise UsageError("--executor dask needs the distributed package: pip install distributed") from exc
        try:
            self.client = Client(address, timeout=connect_timeout, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise UsageError(f"--scheduler {address}: no Dask scheduler answered ({exc}); start one with "
                             "`dask scheduler` and workers with `dask worker ADDRESS`") from exc
        self.address = address
        self.grace = grace
        self._futures: dict[str, tuple[Any, BatchJob]] = {}
        # key → (worker, when, announced) of each start: announced by the worker's event, or only
        # seen in the scheduler's processing list
        self._starts: dict[str, list[tuple[str, float, bool]]] = {}
        self._starts_lock = threading.Lock()
        self._watched = 0.0
        self._suspect: dict[str, float] = {}  # batch key -> when its worker first looked lost
        self._done: Any = None  # distributed.as_completed, made with the first future
        self._no_workers_since: float | None = None
        self.client.subscribe_topic(START_TOPIC, self._on_start)

    @staticmethod
    def _key(run_id: str, batch_id: str) -> str:
        return f"batch-{run_id}-{batch_id}"

    def _on_start(self, event: Any) -> None:
        # Called on the client's event loop thread with (time, message).
        msg = event[1] if isinstance(event, tuple | list) else event
        if not isinstance(msg, dict):
            return
        with self._starts_lock:
            starts = self._starts.setdefault(self._key(msg["run"], msg["batch"]), [])
            if starts and not starts[-1][2]:
                # The start the driver guessed from the scheduler's queues: this is where it really
                # began (the scheduler may have moved it to another worker before it started).
                starts[-1] = (msg["worker"], starts[-1][1], True)
            else:
                starts.append((msg["worker"], time.monotonic(), True))

    def threads(self) -> int:
        return int(sum(self.client.nthreads().values()))

    def pids(self) -> dict[str, int]:
        return {}

    def capacity(self) -> int:
        # Everything goes to the scheduler at once; it queues what its workers cannot take yet.
        return 1 << 30

    def start(self, job: BatchJob) -> None:
        Path(job.folder).mkdir(parents=True, exist_ok=True)
        shipped = {p: _pack(Path(d)) for p, d in job.ship.items()}
        notebook_text = Path(job.notebook).read_text(encoding="utf-8")
        remote = replace(job, shipped=shipped, notebook_text=notebook_text)
        key = self._key(job.run_id, job.batch_id)
        fut = self.client.submit(run_on_worker, remote, key=key, pure=False, retries=0)
        self._futures[key] = (fut, job)
        if self._done is None:
            from distributed import as_completed

            self._done = as_completed([fut], loop=self.client.loop)
        else:
            self._done.add(fut)

    def poll(self, wait: float) -> list[Finished]:
        if not self._futures:
            return []
        out: list[Finished] = []
        deadline = time.monotonic() + wait
        while not self._done.has_ready() and time.monotonic() < deadline:
            time.sleep(0.02)
        ready = self._done.next_batch(block=False) if self._done.has_ready() else []
        for fut in ready:
            key = fut.key
            if key not in self._futures:  # given up on by _watch already
                continue
            job = self._futures.pop(key)[1]
            out.append(Finished(job, self._result(key, fut, job)))
        if time.monotonic() - self._watched >= 0.5:
            self._watched = time.monotonic()
            try:
                out.extend(self._watch())
            except OSError as exc:
                out.extend(self._all_failed(f"lost the connection to the Dask scheduler at {self.address}: {exc}"))
        return out

    def _result(self, key: str, fut: Any, job: BatchJob) -> BatchRun:
        with self._starts_lock:
            starts = self._starts.pop(key, [])
        self._suspect.pop(key, None)
        worker = starts[0][0] if starts else "a Dask worker"
        if len(starts) > 1:  # finished, but only on a second try after its first worker was lost
            return BatchRun(job.batch_id, None, 0.0, worker, True, f"the worker running it ({worker}) was lost")
        try:
            run, files = fut.result()
        except Exception as exc:
            name = type(exc).__name__
            why = (f"the worker running it ({worker}) was lost" if name == "KilledWorker"
                   else f"{name} on {worker}: {exc}")
            return BatchRun(job.batch_id, None, 0.0, worker, True, why)
        land_files(files, Path(job.folder))
        return run

    def _watch(self) -> list[Finished]:
        """Batches whose worker went away, or that stayed silent past their time limit; and every
        batch, once no worker at all has been connected for the grace period."""
        now = time.monotonic()
        processing = self.client.processing()
        workers = set(processing)
        if not workers:
            self._no_workers_since = self._no_workers_since or now
            if now - self._no_workers_since > self.grace:
                return self._all_failed(f"no Dask worker was connected to {self.address} for {self.grace:.0f} s")
        else:
            self._no_workers_since = None
        running_on = {key: w for w, keys in processing.items() for key in keys}
        out = []
        for key, (fut, job) in list(self._futures.items()):
            if fut.done():
                continue
            with self._starts_lock:
                starts = list(self._starts.get(key, []))
                # A worker that hangs before it could announce the batch: the scheduler still says
                # where the batch went, and the time limit counts from when the driver saw it there.
                if not starts and key in running_on:
                    self._starts[key] = starts = [(running_on[key], now, False)]
            if not starts:
                continue
            first, since, _ = starts[0]
            why = None
            elsewhere = first not in workers or running_on.get(key, first) != first
            if not elsewhere:
                self._suspect.pop(key, None)
            if len(starts) > 1 or (elsewhere and now - self._suspect.setdefault(key, now) >= LOST_CONFIRM):
                why = f"the worker running it ({first}) was lost"
            elif now - since > job.timeout + self.grace:
                why = f"no answer from the worker running it ({first}) within {job.timeout + self.grace:.0f} s"
            if why:
                fut.cancel()
                del self._futures[key]
                self._suspect.pop(key, None)
                with self._starts_lock:
                    self._starts.pop(key, None)
                out.append(Finished(job, BatchRun(job.batch_id, None, round(now - since, 2), first, True, why)))
        return out

    def _all_failed(self, why: str) -> list[Finished]:
        out = [Finished(job, BatchRun(job.batch_id, None, 0.0, "dask", True, why)) for _, job in self._futures.values()]
        self._futures.clear()
        return out

    def close(self, *, kill: bool) -> None:
        if kill:
            for fut, _ in self._futures.values():
                fut.cancel()
        self._futures.clear()
        self.client.close()


def make_executor(name: str, *, parallel: int, scheduler: str | None,
                  on_start: Callable[[int], None] | None = None, on_end: Callable[[int], None] | None = None) -> Executor:
    if name == "local":
        if scheduler:
            raise UsageError("--scheduler goes with --executor dask")
        return LocalExecutor(parallel, on_start=on_start, on_end=on_end)
    if name == "dask":
        address = scheduler or os.environ.get("PIPELINE_DASK_SCHEDULER")
        if not address:
            raise UsageError("--executor dask needs --scheduler ADDRESS (e.g. tcp://10.0.0.5:8786), "
                             "or PIPELINE_DASK_SCHEDULER")
        return DaskExecutor(address, connect_timeout=connect_timeout())
    raise UsageError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")



def connect_timeout() -> float:
    """Seconds to keep trying to reach the scheduler: `PIPELINE_DASK_CONNECT_TIMEOUT`, else CONNECT_TIMEOUT."""
    text = os.environ.get("PIPELINE_DASK_CONNECT_TIMEOUT", "").strip()
    if not text:
        return CONNECT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not (seconds > 0 and math.isfinite(seconds)):
        raise UsageError(f"PIPELINE_DASK_CONNECT_TIMEOUT={text!r} is not a number of seconds above 0")
    return seconds
