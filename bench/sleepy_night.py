"""A simulated night of 500 batches whose engine waits a fixed 2 s (a stand-in for LLM latency),
run by the nightly driver through `--executor local --parallel 8` and through Dask (a scheduler and
2 workers x 8 threads started here), then once more on Dask with one worker killed half way.

Each batch is one small session. The runner (`sleeping_batch`) calls the real `run_batch` in the
worker's process with an engine that waits 2 s and proposes nothing, so the batch writes a real
artifact and the driver really applies it (watermarks), while the figures measure how well the
executor keeps its slots busy, not how long a Jupyter kernel takes to start (on a 2-core machine
500 kernels cost several CPU-minutes). Prints one JSON document; `bench/run.py` shows it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out" / "night"
BATCHES = 500
SLEEP = 2.0
LOCAL_PARALLEL = 8
WORKERS, THREADS = 2, 8


def sleeping_engine(ctx: Any, recorder: Any) -> Any:
    """The engine of the simulated night: waits SLEEP seconds (the model's latency), reads each
    session once (so the batch may watermark it) and proposes nothing."""
    from pipeline.consolidator.context import EngineResult, utc_now
    from pipeline.consolidator.contract import Answer

    time.sleep(SLEEP)
    at = utc_now()
    for sid in ctx.session_ids:
        recorder.tool("scan", {"sessionId": sid}, session_id=sid, ok=True, result_chars=0, at=at)
    answer = Answer.model_validate({"candidates": [], "commitments": [], "readSessionIds": list(ctx.session_ids)})
    return EngineResult("accepted", f"slept {SLEEP:.0f} s", answer=answer, submits=1)


def sleeping_batch(job: Any, out_dir: Path, on_start: Any = None) -> Any:
    """Runner: one batch through `run_batch` in this process (no Jupyter kernel), with the engine
    `sleep` registered here, reading the batch's own input folder."""
    from pipeline.consolidator import batch
    from pipeline.consolidator.engine import Prepared, register
    from pipeline.nightly.executors import BatchRun

    register("sleep", lambda options: Prepared(sleeping_engine))
    t0 = time.monotonic()
    try:
        batch.run_batch(job.parameters["session_ids"], batch_input=job.parameters["batch_input"], engine="sleep",
                        out_dir=out_dir, run_id=job.run_id, batch_id=job.batch_id)
    except Exception as exc:
        return BatchRun(job.batch_id, 1, round(time.monotonic() - t0, 2), "here", True, f"{type(exc).__name__}: {exc}")
    return BatchRun(job.batch_id, 0, round(time.monotonic() - t0, 2), "here")


def build(folder: Path) -> Path:
    """500 small sessions, one project each (so one batch each), ingested into a warehouse."""
    from pipeline.warehouse import db, ingest

    src = folder / "transcripts"
    wh = folder / "base.duckdb"
    if wh.exists():
        return wh
    shutil.rmtree(src, ignore_errors=True)
    for i in range(BATCHES):
        sid = f"{i:08d}-0000-4000-8000-000000000000"
        path = src / f"-home-dev-p{i}" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [{"type": "user", "sessionId": sid, "cwd": f"/home/dev/p{i}", "timestamp": "2026-10-01T09:00:00Z",
                  "message": {"role": "user", "content": f"please tidy module {i}"}},
                 {"type": "assistant", "sessionId": sid, "timestamp": "2026-10-01T09:00:05Z", "requestId": f"r{i}",
                  "message": {"id": f"m{i}", "role": "assistant", "content": [{"type": "text", "text": "Done."}]}}]
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    with db.writing(wh) as con:
        ingest.ingest(con, [src])
    return wh


class Cluster:
    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        dask = str(Path(sys.executable).with_name("dask"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH), str(BENCH.parent)])}
        info = folder / "scheduler.json"
        info.unlink(missing_ok=True)
        self.procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                        "--scheduler-file", str(info)], env=env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)]
        while not info.exists() or not info.read_text().strip():
            time.sleep(0.1)
        time.sleep(0.2)
        self.address = json.loads(info.read_text())["address"]
        self.workers = {}
        for n in range(WORKERS):
            name = f"w{n}"
            self.workers[name] = subprocess.Popen(
                [dask, "worker", self.address, "--name", name, "--nthreads", str(THREADS), "--no-nanny",
                 "--no-dashboard", "--memory-limit", "0", "--local-directory", str(folder / name)],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(self.workers[name])
        from distributed import Client

        with Client(self.address, set_as_default=False, timeout=60) as c:
            c.wait_for_workers(WORKERS, timeout=120)

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def night(base: Path, name: str, executor: str, scheduler: str | None = None,
          on_message: Any = None) -> dict[str, Any]:
    from pipeline.nightly.driver import NightlyOptions, run_nightly

    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    wh = folder / "w.duckdb"
    shutil.copyfile(base, wh)
    stamps: list[tuple[float, str]] = []

    def say(msg: str) -> None:
        stamps.append((time.monotonic(), msg))
        if on_message:
            on_message(msg)

    opts = NightlyOptions(engine="rules", report=False, db=str(wh), corpus=str(folder / "corpus"),
                          runs=str(folder / "runs"), max_sessions=1, parallel=LOCAL_PARALLEL, executor=executor,
                          scheduler=scheduler, runner="sleepy_night:sleeping_batch", batch_timeout=120)
    t0 = time.monotonic()
    result = run_nightly(opts, say=say)
    total = time.monotonic() - t0
    starts = [t for t, m in stamps if re.search(r": (started|submitted) \(", m)]
    ends = [t for t, m in stamps if "notebook finished" in m]
    concurrency = LOCAL_PARALLEL if executor == "local" else WORKERS * THREADS
    ideal = BATCHES * SLEEP / concurrency
    failed = [b for b in result.batches if b.status == "failed"]
    return {
        "batches": len(result.batches), "applied": sum(b.status == "applied" for b in result.batches),
        "failed": len(failed), "failed_sessions_pending": result.pending_after,
        "failed_reasons": sorted({re.sub(r"tcp://\S+", "tcp://…", b.reason or "") for b in failed}),
        "batch_phase_s": round(max(ends) - min(starts), 2) if starts and ends else None,
        "night_s": round(total, 2), "concurrency": concurrency, "ideal_s": ideal,
        "batch_s_mean": round(sum(b.seconds or 0 for b in result.batches) / max(1, len(result.batches)), 2),
    }


def main() -> int:
    global BATCHES, OUT
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=BATCHES)
    ap.add_argument("--only", default="local,dask,dask_kill", help="which nights, comma-separated")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if args.batches != BATCHES:  # a smaller night (a smoke run) gets its own folder
        BATCHES, OUT = args.batches, OUT.with_name(f"night-{args.batches}")
    sys.path.insert(0, str(BENCH))
    OUT.mkdir(parents=True, exist_ok=True)
    base = build(OUT)
    results: dict[str, Any] = {}
    if "local" in only:
        results["local"] = night(base, "local", "local")
    if "dask" in only:
        cluster = Cluster(OUT / "cluster")
        try:
            results["dask"] = night(base, "dask", "dask", cluster.address)
        finally:
            cluster.close()
    if "dask_kill" not in only:
        print(json.dumps(results))
        return 0

    # Once more, killing one worker when a third of the batches are done.
    cluster = Cluster(OUT / "cluster-kill")
    finished = [0]
    killed: list[str] = []

    def watch(msg: str) -> None:
        if "notebook finished" in msg:
            finished[0] += 1
            if finished[0] == BATCHES // 3 and not killed:
                killed.append("w0")
                threading.Thread(target=cluster.workers["w0"].kill).start()

    try:
        results["dask_kill"] = night(base, "dask-kill", "dask", cluster.address, on_message=watch)
    finally:
        cluster.close()
    results["dask_kill"]["killed_worker"] = killed[0] if killed else None
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
