"""Batches on a real Dask cluster on this machine: a `dask scheduler` and two `dask worker`
processes, started here, as an operator would start them (no in-process cluster, no mocks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.consolidator import pending
from pipeline.errors import UsageError
from pipeline.nightly import driver as night
from pipeline.nightly import executors
from pipeline.nightly.executors import BatchJob, BatchRun, DaskExecutor, run_notebook
from pipeline.warehouse import db
from tests.helpers import REPO, SAMPLES
from tests.nightly.test_nightly import memory_files, nightly, nightly_command

pytestmark = pytest.mark.slow
DASK = str(Path(sys.executable).with_name("dask"))
HOLD = "PIPELINE_TEST_HOLD"


class Cluster:
    def __init__(self, folder: Path):
        self.folder = folder
        self.env = {**os.environ, "PYTHONPATH": str(REPO), HOLD: str(folder / "release")}
        self.env.pop("OPENAI_API_KEY", None)
        info = folder / "scheduler.json"
        self.scheduler = subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(info)],
            cwd=REPO, env=self.env, stdout=subprocess.DEVNULL, stderr=(folder / "scheduler.log").open("w"))
        self.workers: dict[str, subprocess.Popen] = {}
        deadline = time.monotonic() + 60
        while not info.exists() or not info.read_text().strip():
            assert time.monotonic() < deadline and self.scheduler.poll() is None, (folder / "scheduler.log").read_text()
            time.sleep(0.1)
        time.sleep(0.2)
        self.address = json.loads(info.read_text())["address"]

    def start_worker(self, name: str, threads: int = 2) -> None:
        self.workers[name] = subprocess.Popen(
            [DASK, "worker", self.address, "--name", name, "--nthreads", str(threads), "--no-nanny", "--no-dashboard",
             "--memory-limit", "0", "--local-directory", str(self.folder / name)],
            cwd=REPO, env=self.env, stdout=subprocess.DEVNULL, stderr=(self.folder / f"{name}.log").open("w"))

    def client(self) -> Any:
        from distributed import Client

        return Client(self.address, timeout=30, set_as_default=False)

    def wait_for_workers(self, n: int) -> None:
        with self.client() as c:
            c.wait_for_workers(n, timeout=90)

    def close(self) -> None:
        for proc in [*self.workers.values(), self.scheduler]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        # A clean shutdown takes well under a second; a worker whose task was cancelled under it
        # (the worker that stops answering) can hang on SIGTERM, and nothing here needs it to finish.
        for proc in [*self.workers.values(), self.scheduler]:
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    (tmp_path / "cluster").mkdir()
    c = Cluster(tmp_path / "cluster")
    yield c
    c.close()


def held_notebook(job: BatchJob, out_dir: Path, on_start: Callable[[int], None] | None = None) -> BatchRun:
    """The consolidate notebook, started once the test creates the hold file (named by the
    workers' environment): the test can see where each batch is before any of them runs."""
    from distributed import get_worker

    hold = Path(os.environ[HOLD])
    (hold.parent / f"started-{get_worker().name}").touch()  # the batch is running on this worker
    deadline = time.monotonic() + 120
    while not hold.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return run_notebook(job, out_dir, on_start)


def sleeping_runner(job: BatchJob, out_dir: Path, on_start: Callable[[int], None] | None = None) -> BatchRun:
    seconds = float(job.parameters["sleep"])
    time.sleep(seconds)
    (out_dir / "run.json").write_text("{}")
    return BatchRun(job.batch_id, 0, seconds, "here")


def test_a_night_on_dask_gives_the_corpus_of_a_local_night(tmp_path: Path, cluster: Cluster) -> None:
    local, remote = tmp_path / "local", tmp_path / "dask"
    # The local night runs while the workers start and register (seconds of waiting on them), and
    # beside the Dask night: the two write to separate folders.
    cmd, env = nightly_command(local, "--max-sessions", "5")
    local_log = tmp_path / "local-night.log"  # a file, not a pipe nobody reads while the Dask night runs
    with local_log.open("w") as log:
        local_night = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        cluster.start_worker("w1")
        cluster.start_worker("w2")
        cluster.wait_for_workers(2)
        out_dask = nightly(remote, "--max-sessions", "5", "--executor", "dask", "--scheduler", cluster.address, timeout=600)
        local_night.wait(timeout=600)
    finally:
        if local_night.poll() is None:
            local_night.kill()
            local_night.wait()
    assert local_night.returncode == 0, local_log.read_text()
    assert out_dask.returncode == 0, out_dask.stderr
    result = json.loads(out_dask.stdout)
    assert len(result["batches"]) >= 3 and result["pendingAfter"] == 0
    assert {b["where"] for b in result["batches"]} <= set(_worker_addresses(cluster)) and all(
        b["seconds"] for b in result["batches"])
    assert memory_files(remote / "corpus") == memory_files(local / "corpus") != {}
    # The artifact folders came back whole: notebook, manifest, run record.
    run_dir = Path(result["runDir"])
    for b in result["batches"]:
        assert {"notebook.ipynb", "manifest.json", "run.json"} <= {p.name for p in (run_dir / b["batch"]).iterdir()}


def _worker_addresses(cluster: Cluster) -> dict[str, str]:
    with cluster.client() as c:
        return {addr: w["name"] for addr, w in c.scheduler_info()["workers"].items()}


def test_a_killed_worker_fails_its_batches_and_the_next_night_lands_them(tmp_path: Path, cluster: Cluster) -> None:
    cluster.start_worker("w1")
    cluster.start_worker("w2")
    cluster.wait_for_workers(2)
    opts = night.NightlyOptions(sources=[str(SAMPLES)], engine="rules", report=False, db=str(tmp_path / "w.duckdb"),
                                corpus=str(tmp_path / "corpus"), runs=str(tmp_path / "runs"), max_sessions=3,
                                executor="dask", scheduler=cluster.address,
                                runner="tests.nightly.test_executors:held_notebook")
    results: list[night.NightResult] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(night.run_nightly(opts, say=lambda _m: None))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 120
    started: list[Path] = []
    while not started and time.monotonic() < deadline:
        started = sorted(cluster.folder.glob("started-*"))
        time.sleep(0.1)
    assert started, "no batch started on a worker"
    name = started[0].name.removeprefix("started-")
    with cluster.client() as c:
        victim = next(a for a, w in c.scheduler_info()["workers"].items() if w["name"] == name)
    cluster.workers[name].kill()
    cluster.workers[name].wait()
    (cluster.folder / "release").write_text("go")
    thread.join(timeout=600)
    assert not errors and results, errors
    first = results[0]
    failed = [b for b in first.batches if b.status == "failed"]
    assert failed and first.exit_code == 1
    assert all("was lost" in (b.reason or "") and victim in (b.reason or "") for b in failed)
    assert all(not (b.folder / "run.json").exists() for b in failed)  # nothing of theirs landed
    with db.reading(tmp_path / "w.duckdb") as con:
        still = set(pending.pending_ids(con))
        rows = dict(con.execute("SELECT batch_id, reason FROM batches WHERE status = 'failed'").fetchall())
    assert {s for b in failed for s in b.session_ids} <= still
    assert {b.batch_id for b in failed} <= set(rows)

    # The next night, on the worker that is left, lands them.
    second = night.run_nightly(opts.model_copy(update={"runner": executors.DEFAULT_RUNNER, "sources": []}),
                               say=lambda _m: None)
    assert second.exit_code == 0 and second.pending_after == 0
    assert {s for b in failed for s in b.session_ids} <= {s for b in second.batches for s in b.session_ids}


def test_a_worker_that_stops_answering_fails_its_batch_after_the_time_limit(tmp_path: Path, cluster: Cluster,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cluster.start_worker("w1", threads=1)
    cluster.start_worker("w2", threads=1)
    cluster.wait_for_workers(2)
    executor = DaskExecutor(cluster.address, grace=1.0)
    jobs = [BatchJob(run_id="r", day="2026-10-01", batch_id=f"b-{i}", folder=str(tmp_path / f"b-{i}"),
                     parameters={"sleep": 1}, timeout=5.0, runner="tests.nightly.test_executors:sleeping_runner")
            for i in range(2)]
    try:
        stopped = None
        for job in jobs:
            executor.start(job)
        finished: list[executors.Finished] = []
        deadline = time.monotonic() + 60
        while len(finished) < 2 and time.monotonic() < deadline:
            finished.extend(executor.poll(0.2))
            if stopped is None:
                busy = [a for a, keys in executor.client.processing().items() if keys]
                if busy:
                    name = executor.client.scheduler_info()["workers"][busy[0]]["name"]
                    stopped = cluster.workers[name]
                    stopped.send_signal(signal.SIGSTOP)
        by_id = {f.job.batch_id: f.run for f in finished}
        assert len(by_id) == 2
        silent = [r for r in by_id.values() if r.failed]
        assert len(silent) == 1 and "no answer from the worker" in (silent[0].reason or "")
        ok = [r for r in by_id.values() if not r.failed]
        assert ok and (Path(jobs[0].folder).parent / ok[0].batch_id / "run.json").exists()
    finally:
        if stopped is not None:
            stopped.send_signal(signal.SIGCONT)
        executor.close(kill=True)


def test_dask_without_a_scheduler_is_a_usage_error(tmp_path: Path) -> None:
    out = nightly(tmp_path, "--executor", "dask", timeout=120)
    assert out.returncode == 2 and "--scheduler" in out.stderr
    # Nothing listens on port 9: waiting the default 20 s for it would only make the test slower.
    out = nightly(tmp_path, "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9", timeout=120,
                  env_extra={"PIPELINE_DASK_CONNECT_TIMEOUT": "2"})
    assert out.returncode == 2 and "no Dask scheduler answered" in out.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("value", ["soon", "0", "-3", "nan", "inf"])
def test_a_connect_timeout_that_is_not_seconds_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("PIPELINE_DASK_CONNECT_TIMEOUT", value)
    with pytest.raises(UsageError, match="PIPELINE_DASK_CONNECT_TIMEOUT"):
        executors.make_executor("dask", parallel=1, scheduler="tcp://127.0.0.1:9")


def test_the_connect_timeout_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIPELINE_DASK_CONNECT_TIMEOUT", raising=False)
    assert executors.connect_timeout() == executors.CONNECT_TIMEOUT == 20.0
    monkeypatch.setenv("PIPELINE_DASK_CONNECT_TIMEOUT", " 2.5 ")
    assert executors.connect_timeout() == 2.5


def test_with_no_worker_at_all_the_batches_fail_after_the_grace_period(tmp_path: Path, cluster: Cluster) -> None:
    executor = DaskExecutor(cluster.address, grace=1.0)
    job = BatchJob(run_id="r", day="2026-10-01", batch_id="b-0", folder=str(tmp_path / "b-0"), parameters={"sleep": 0},
                   timeout=5.0, runner="tests.nightly.test_executors:sleeping_runner")
    try:
        executor.start(job)
        finished: list[executors.Finished] = []
        deadline = time.monotonic() + 30
        while not finished and time.monotonic() < deadline:
            finished.extend(executor.poll(0.2))
        assert [f.run.failed for f in finished] == [True]
        assert "no Dask worker was connected" in (finished[0].run.reason or "")
        assert not (tmp_path / "b-0" / "run.json").exists()
    finally:
        executor.close(kill=True)


class _FakeFuture:
    def __init__(self) -> None:
        self.cancelled = False

    def done(self) -> bool:
        return False

    def cancel(self) -> None:
        self.cancelled = True


class _FakeClient:
    def __init__(self) -> None:
        self.view: dict[str, list[str]] = {}

    def processing(self) -> dict[str, list[str]]:
        return self.view


def _watched_executor(monkeypatch: pytest.MonkeyPatch) -> tuple[DaskExecutor, _FakeClient, list[float], str]:
    """A DaskExecutor's bookkeeping around one running batch, with a scheduler view and a clock we set."""
    ex = object.__new__(DaskExecutor)
    client = _FakeClient()
    clock = [100.0]
    monkeypatch.setattr(executors.time, "monotonic", lambda: clock[0])
    job = BatchJob(run_id="r", day="2026-12-01", batch_id="b1", folder="/nowhere", parameters={}, timeout=600)
    key = DaskExecutor._key("r", "b1")
    ex.client, ex.address, ex.grace = client, "tcp://s:1", executors.NO_ANSWER_GRACE
    ex._futures = {key: (_FakeFuture(), job)}
    ex._starts, ex._starts_lock, ex._suspect, ex._watched = {}, threading.Lock(), {}, 0.0
    ex._no_workers_since = None
    return ex, client, clock, key


def test_a_batch_the_scheduler_moves_before_it_starts_is_not_a_lost_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    ex, client, clock, key = _watched_executor(monkeypatch)
    client.view = {"tcp://a:1": [key], "tcp://b:1": []}
    assert ex._watch() == []  # the driver guesses it started on a, from the scheduler's queues
    client.view = {"tcp://a:1": [], "tcp://b:1": [key]}  # stolen by b before it started
    ex._on_start((0, {"run": "r", "batch": "b1", "worker": "tcp://b:1"}))
    for _ in range(5):
        clock[0] += 1.0
        assert ex._watch() == []
    assert ex._starts[key] == [("tcp://b:1", 100.0, True)]


def test_a_blink_in_the_schedulers_view_is_not_a_lost_worker_but_a_lasting_one_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ex, client, clock, key = _watched_executor(monkeypatch)
    client.view = {"tcp://a:1": [key]}
    ex._on_start((0, {"run": "r", "batch": "b1", "worker": "tcp://a:1"}))
    assert ex._watch() == []
    client.view = {"tcp://a:1": [], "tcp://c:1": [key]}  # a steal attempt shows it on c for a moment
    clock[0] += 0.5
    assert ex._watch() == []
    client.view = {"tcp://a:1": [key], "tcp://c:1": []}
    clock[0] += 0.5
    assert ex._watch() == []
    client.view = {"tcp://c:1": []}  # a is gone, and stays gone
    clock[0] += 0.5
    assert ex._watch() == []
    clock[0] += executors.LOST_CONFIRM
    lost = ex._watch()
    assert [f.run.reason for f in lost] == ["the worker running it (tcp://a:1) was lost"] and lost[0].run.failed


def test_a_second_start_is_a_lost_worker_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    ex, client, _clock, key = _watched_executor(monkeypatch)
    client.view = {"tcp://a:1": [], "tcp://b:1": [key]}
    ex._on_start((0, {"run": "r", "batch": "b1", "worker": "tcp://a:1"}))
    ex._on_start((0, {"run": "r", "batch": "b1", "worker": "tcp://b:1"}))  # the scheduler ran it again
    lost = ex._watch()
    assert [f.run.reason for f in lost] == ["the worker running it (tcp://a:1) was lost"]
