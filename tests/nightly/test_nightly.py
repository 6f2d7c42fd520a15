"""The nightly driver end to end: real papermill notebooks, a failing batch, interruptions, the lock."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from pipeline.consolidator import pending
from pipeline.corpus.git_corpus import Corpus
from pipeline.errors import LockedError
from pipeline.nightly import planner
from pipeline.nightly.lock import NightlyLock, lock_path
from pipeline.warehouse import db
from tests.helpers import REPO, SAMPLES, not_camel_case, write_jsonl

pytestmark = pytest.mark.slow

EXPECTED = json.loads((SAMPLES / "expected.json").read_text())
LEDGER = sorted(s["sessionId"] for s in EXPECTED["sessions"] if s["slug"] == "-home-ana-src-ledger-sync-v2" and s["lines"])


def nightly_command(tmp: Path, *extra: str, crash_at: str | None = None, report: bool = False,
                    env_extra: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a night on the samples into `tmp`."""
    env = {k: v for k, v in os.environ.items() if k not in ("PIPELINE_CRASH_AT", "OPENAI_API_KEY")}
    env.update(env_extra or {})
    if crash_at:
        env["PIPELINE_CRASH_AT"] = crash_at
    cmd = [sys.executable, "-m", "pipeline", "nightly", "--source", str(SAMPLES), "--engine", "rules", "--json",
           "--db", str(tmp / "w.duckdb"), "--corpus", str(tmp / "corpus"), "--runs", str(tmp / "runs"), *extra]
    if not report:
        cmd.append("--no-report")
    return cmd, env


def nightly(tmp: Path, *extra: str, crash_at: str | None = None, report: bool = False,
            timeout: float = 180, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd, env = nightly_command(tmp, *extra, crash_at=crash_at, report=report, env_extra=env_extra)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def memory_files(corpus: Path) -> dict[str, str]:
    """Memory files by path, with their claims (the run that wrote them is allowed to differ)."""
    out = {}
    for p in sorted(corpus.rglob("*.md")):
        if ".git" in p.parts or "tasks" in p.parts or p.name == "README.md":
            continue
        claim = next(line for line in p.read_text().splitlines() if line.startswith("claim:"))
        out[str(p.relative_to(corpus))] = claim
    return out


def fsck_ok(corpus: Path) -> bool:
    return subprocess.run(["git", "--git-dir", str(corpus / ".git"), "fsck", "--no-progress"],
                          capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def reference(samples_night: dict) -> dict:
    tmp, result = Path(samples_night["dir"]), samples_night["result"]
    files = memory_files(tmp / "corpus")
    assert files and result["pendingAfter"] == 0
    return {"files": files, "result": result, "dir": tmp}


# The interrupted nights plan two batches of 11 sessions rather than three of at most 8: each of the
# 34 nights those tests run then starts one notebook fewer, and two batches still give every crash
# point its place (between two applies, the second rename after landing them).
TWO_BATCHES = ("--max-sessions", "11")


@pytest.fixture(scope="module")
def two_batch_reference(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("two-batches")
    out = nightly(tmp, *TWO_BATCHES)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert len(result["batches"]) == 2 and result["pendingAfter"] == 0
    files = memory_files(tmp / "corpus")
    assert files
    return {"files": files, "result": result, "dir": tmp}


def test_reference_night_lands_everything_and_reports(reference, tmp_path: Path) -> None:
    result, tmp = reference["result"], reference["dir"]
    assert all(b["status"] == "applied" for b in result["batches"]) and len(result["batches"]) >= 2
    assert not_camel_case(result) == []  # "tasks proposed" was the one key with a space
    run_dir = Path(result["runDir"])
    report = (run_dir / "report.html").read_text()
    for b in result["batches"]:
        assert (run_dir / b["batch"] / "notebook.ipynb").exists()  # the executed notebook is kept
        assert f'<a href="{b["batch"]}/notebook.ipynb">' in report  # and linked from the report
    assert "<td>&quot;" not in report and "<td>null</td>" not in report  # table cells show text, not its repr
    assert "<td>applied</td>" in report
    progress = json.loads((run_dir / "progress.json").read_text())  # kept in the run folder while batches ran
    assert progress["runId"] == result["runId"]
    assert {b["batch"]: b["status"] for b in progress["batches"]} == {b["batch"]: "finished" for b in result["batches"]}
    assert all(b["startedAt"] and b["finishedAt"] and b["pid"] is None for b in progress["batches"])
    subjects = Corpus(tmp / "corpus").git("log", "--format=%s").splitlines()
    assert sum(s.startswith("memory: ") for s in subjects) == len(reference["files"])
    with db.reading(tmp / "w.duckdb") as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("done",)]
        assert {r[0] for r in con.execute("SELECT status FROM batches").fetchall()} == {"applied"}
    # a second night has nothing to do and lands nothing (on a copy, as a backup would be restored:
    # the published warehouse without its working file; other tests read the reference)
    shutil.copytree(tmp, tmp_path / "again", ignore=shutil.ignore_patterns("w.duckdb.*"))
    again = nightly(tmp_path / "again")
    assert again.returncode == 0 and json.loads(again.stdout)["batches"] == []
    assert Corpus(tmp_path / "again" / "corpus").git("log", "--format=%s").splitlines() == subjects


def test_failed_batch_stays_pending_and_the_next_night_picks_it_up(tmp_path: Path, reference) -> None:
    # the batch that holds the ledger project's first session, as the reference night planned it
    with db.reading(reference["dir"] / "w.duckdb") as con:
        failing, held = next((b, s) for b, s in con.execute("SELECT batch_id, sessions FROM batches").fetchall()
                             if LEDGER[0] in s)
    assert failing == planner.batch_id_for(held)
    first = nightly(tmp_path, crash_at=f"consolidate:{failing}")
    assert first.returncode == 1, first.stderr
    result = json.loads(first.stdout)
    statuses = {b["batch"]: b["status"] for b in result["batches"]}
    assert statuses.pop(failing) == "failed" and set(statuses.values()) == {"applied"}
    with db.reading(tmp_path / "w.duckdb") as con:
        assert set(pending.pending_ids(con)) == set(held)
        reason = con.execute("SELECT reason FROM batches WHERE batch_id = ?", [failing]).fetchall()[0][0]
    assert reason
    run_dir = Path(result["runDir"])
    # the failed batch keeps its input, to be run again by hand; the landed ones do not
    assert [p.parent.name for p in run_dir.glob("*/input")] == [failing]
    assert [p.parent.name for p in run_dir.glob("*/notebook.ipynb") if p.parent.name != failing]
    second = nightly(tmp_path)
    assert second.returncode == 0, second.stderr
    assert [b["batch"] for b in json.loads(second.stdout)["batches"]] == [failing]
    with db.reading(tmp_path / "w.duckdb") as con:
        assert pending.pending_ids(con) == []
    assert set(memory_files(tmp_path / "corpus").values()) == set(reference["files"].values())


STEPS = ["nightly:ingested", "nightly:recovered", "nightly:planned", "nightly:batch-started", "nightly:batches-done",
         "nightly:between-applies", "apply:memory-committed", "apply:in-transaction", "nightly:report",
         # publishing: the first rename (before the batches); the copy of the published file that the
         # landing step starts from; the second rename (after landing them), before and after it
         "publish:renaming", "prepare:copying", "publish:renaming:2", "publish:replaced:2",
         # writing the batches' inputs
         "batch-input:staged"]


@pytest.mark.parametrize("step", STEPS)
def test_interrupted_night_then_rerun_gives_the_same_corpus(tmp_path: Path, two_batch_reference, step: str) -> None:
    crashed = nightly(tmp_path, *TWO_BATCHES, crash_at=step, report=step == "nightly:report")
    assert crashed.returncode == 86, (crashed.returncode, crashed.stderr[-2000:])
    again = nightly(tmp_path, *TWO_BATCHES)
    assert again.returncode == 0, again.stderr[-2000:]
    assert memory_files(tmp_path / "corpus") == two_batch_reference["files"]
    assert fsck_ok(tmp_path / "corpus")
    with db.reading(tmp_path / "w.duckdb") as con:
        assert pending.pending_ids(con) == []
        dup = con.execute("SELECT claim, count(*) FROM memories GROUP BY claim HAVING count(*) > 1").fetchall()
    assert dup == []
    # every batch landed or was planned again: no copy of a transcript is left in the run folders
    assert [p for p in (tmp_path / "runs").rglob("*") if p.name.startswith(("input", ".input"))] == []


@pytest.mark.parametrize("delay", [1.0, 2.5, 4.0])
def test_kill_9_of_the_driver_and_its_batches_then_rerun(tmp_path: Path, two_batch_reference, delay: float) -> None:
    cmd, env = nightly_command(tmp_path, *TWO_BATCHES)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    time.sleep(delay)
    lock = lock_path(tmp_path / "w.duckdb")
    groups = []
    if lock.exists():
        try:
            groups = json.loads(lock.read_text() or "{}").get("batchGroups", [])
        except ValueError:
            groups = []
    for pgid in [proc.pid, *groups]:  # the driver and everything it started
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    again = nightly(tmp_path, *TWO_BATCHES)
    assert again.returncode == 0, again.stderr[-2000:]
    assert memory_files(tmp_path / "corpus") == two_batch_reference["files"]
    assert fsck_ok(tmp_path / "corpus")


def test_second_nightly_is_refused_while_one_runs(tmp_path: Path) -> None:
    lock = NightlyLock(tmp_path / "w.duckdb", "run-a")
    lock.acquire()
    try:
        with pytest.raises(LockedError, match=f"process {os.getpid()}"):
            NightlyLock(tmp_path / "w.duckdb", "run-b").acquire()
        out = nightly(tmp_path)
        assert out.returncode == 1 and "another nightly run holds" in out.stderr and str(os.getpid()) in out.stderr
    finally:
        lock.release()


def test_stale_lock_is_taken_over_and_its_batches_ended(tmp_path: Path) -> None:
    # A dead run left its lock file, naming a batch process group that is still alive.
    batch = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "papermill"],
                             env={**os.environ, "PIPELINE_RUN_ID": "dead-run"}, start_new_session=True)
    for _ in range(100):  # until the child has exec'd and shows its own command line
        if b"papermill" in Path(f"/proc/{batch.pid}/cmdline").read_bytes():
            break
        time.sleep(0.02)
    lock_path(tmp_path / "w.duckdb").write_text(json.dumps({"pid": 999999, "runId": "dead-run", "batchGroups": [batch.pid]}))
    lock = NightlyLock(tmp_path / "w.duckdb", "new-run")
    lock.acquire()
    try:
        assert lock.previous and lock.previous["runId"] == "dead-run"
        assert batch.wait(timeout=10) == -signal.SIGKILL
    finally:
        lock.release()


@pytest.mark.parametrize("failures", [1, 5])
def test_a_batch_whose_kernel_did_not_start_is_started_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failures: int) -> None:
    from pipeline.nightly import driver as night

    wh = tmp_path / "w.duckdb"
    db.connect(wh).close()
    fake = tmp_path / "fake_papermill.py"
    fake.write_text(
        "import pathlib, sys\n"
        "folder = pathlib.Path(sys.argv[1])\n"
        "tries = len(list(folder.glob('papermill.attempt*.log')))\n"
        f"if tries < {failures}:\n"
        "    print('RuntimeError: Kernel died before replying to kernel_info')\n"
        "    sys.exit(1)\n"
        "(folder / 'run.json').write_text('{}')\n"
    )
    monkeypatch.setattr(night, "_papermill_cmd", lambda b, *_: [sys.executable, str(fake), str(b.folder)])

    class NoLock:
        def add_group(self, pgid: int) -> None: ...
        def remove_group(self, pgid: int) -> None: ...

    batch = night.BatchOutcome("b-1", ["s1"], tmp_path / "b-1")
    said: list[str] = []
    night._run_batch_processes([batch], "rules", "r1", wh, night.NightlyOptions(), NoLock(), said.append, lambda: None)
    retried = [s for s in said if "kernel did not start; starting it again" in s]
    from pipeline.nightly.kernels import KERNEL_START_RETRIES

    if failures <= KERNEL_START_RETRIES:
        assert batch.status != "failed" and (batch.folder / "run.json").exists() and len(retried) == failures
    else:
        assert batch.status == "failed" and "Kernel died" in (batch.reason or "")
        assert len(retried) == KERNEL_START_RETRIES


def test_run_papermill_runs_again_only_when_the_kernel_did_not_start(tmp_path: Path) -> None:
    from pipeline.nightly.kernels import run_papermill

    counter = tmp_path / "n"
    script = (
        "import pathlib, sys\n"
        f"p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) if p.exists() else 0; p.write_text(str(n + 1))\n"
        "if n == 0: sys.exit('RuntimeError: Kernel died before replying to kernel_info')\n"
        "if n == 1: sys.exit('ValueError: a real failure in a cell')\n"
    )
    first = run_papermill([sys.executable, "-c", script], cwd=tmp_path)
    assert first.returncode == 1 and "a real failure" in first.stderr and counter.read_text() == "2"


def test_a_session_whose_id_is_all_digits_reaches_the_notebook_as_text(tmp_path: Path) -> None:
    # A plain JSONL file whose records carry no id is named after the file: session "20261001".
    # Passed with papermill's -p it arrived as the int 20261001 and the batch failed.
    src = tmp_path / "src"
    write_jsonl(src / "20261001.jsonl", [
        {"role": "user", "content": "the build fails on import", "timestamp": "2026-10-01T10:00:00Z"},
        {"role": "assistant", "content": "ModuleNotFoundError: No module named 'ledger'", "timestamp": "2026-10-01T10:00:05Z"},
    ])
    env = {k: v for k, v in os.environ.items() if k not in ("PIPELINE_CRASH_AT", "OPENAI_API_KEY")}
    out = subprocess.run(
        [sys.executable, "-m", "pipeline", "nightly", "--source", str(src), "--engine", "rules", "--json", "--no-report",
         "--db", str(tmp_path / "w.duckdb"), "--corpus", str(tmp_path / "corpus"), "--runs", str(tmp_path / "runs")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    [batch] = result["batches"]
    assert batch["status"] == "applied" and batch["watermarked"] == 1, batch
    folder = Path(result["runDir"]) / batch["batch"]
    executed = nbformat.read(folder / "notebook.ipynb", as_version=4)
    injected = next(c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert 'session_ids = "20261001"' in injected.source
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [s["sessionId"] for s in manifest["sessions"]] == ["20261001"]


def test_a_failed_batch_records_the_cell_that_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.nightly import driver as night
    from pipeline.nightly.kernels import papermill_command
    from tests.helpers import raising_notebook

    wh = tmp_path / "w.duckdb"
    with db.writing(wh) as con:
        con.execute("INSERT INTO batches (run_id, batch_id, status, sessions, artifact_dir) VALUES ('r1', 'b-1', 'planned', ['s1'], ?)",
                    [str(tmp_path / "b-1")])
    notebook = raising_notebook(tmp_path / "raises.ipynb")
    monkeypatch.setattr(night, "_papermill_cmd", lambda b, *_: papermill_command(
        notebook, b.folder / "notebook.ipynb", {"session_ids": "20261001"}, cwd=tmp_path))

    class NoLock:
        def add_group(self, pgid: int) -> None: ...
        def remove_group(self, pgid: int) -> None: ...

    batch = night.BatchOutcome("b-1", ["s1"], tmp_path / "b-1")
    night._run_batch_processes([batch], "rules", "r1", wh, night.NightlyOptions(), NoLock(), lambda _: None, lambda: None)
    night._land(batch, wh, night.NightlyOptions(), "r1", lambda _: None)
    assert batch.status == "failed"
    assert batch.error is not None and (batch.error["name"], batch.error["message"]) == ("TypeError", "'int' object is not iterable")
    assert batch.reason == f"cell {batch.error['cell']} (In [4]) raised TypeError: 'int' object is not iterable"
    with db.reading(wh) as con:
        status, reason, details = con.execute("SELECT status, reason, details FROM batches WHERE batch_id = 'b-1'").fetchone()
    assert (status, reason) == ("failed", batch.reason)
    assert json.loads(details) == {"error": batch.error}
