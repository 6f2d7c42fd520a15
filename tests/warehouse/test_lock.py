"""The write lock: one writing command at a time, the others wait (bounded by --wait) and name the holder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.warehouse import db, publish
from pipeline.warehouse.lock import HolderLock, describe_holder
from tests.helpers import REPO, write_jsonl

# Holds the write lock of the warehouse argv[1] until a line arrives on stdin.
HOLDER = """
import sys
from pipeline.warehouse import db
with db.write_session(sys.argv[1]):
    print("holding", flush=True)
    sys.stdin.readline()
"""


def session(folder: Path, sid: str) -> Path:
    return write_jsonl(folder / f"{sid}.jsonl", [
        {"type": "user", "sessionId": sid, "timestamp": "2026-10-01T10:00:00.000Z",
         "message": {"role": "user", "content": f"hello from {sid}"}}
    ])


def start_holder(wh: Path) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(wh)], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout and holder.stdout.readline().strip() == "holding"
    return holder


def test_a_lock_names_its_holder_and_is_free_again_once_released(tmp_path: Path) -> None:
    first, second = HolderLock(tmp_path / "x.lock"), HolderLock(tmp_path / "x.lock")
    assert first.try_acquire(runId="r1")
    assert not second.try_acquire()
    holder = second.holder()
    assert holder and holder["pid"] == os.getpid() and holder["runId"] == "r1"
    assert f"PID {os.getpid()}" in describe_holder(holder)
    first.release()
    assert second.try_acquire()
    second.release()


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    holder = start_holder(wh)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    lock = HolderLock(publish.Files(wh).write_lock)
    assert lock.acquire(0) is None  # free at once: the kernel released it with the process
    assert lock.previous and lock.previous["pid"] == holder.pid  # the dead holder's note, now replaced
    lock.release()


def test_a_second_writer_gives_up_after_wait_naming_the_holder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = tmp_path / "w.duckdb"
    session(tmp_path / "src", "S1")
    holder = start_holder(wh)
    try:
        code = main(["ingest", str(tmp_path / "src"), "--db", str(wh), "--wait", "0.5"])
        err = capsys.readouterr().err
        assert code == 1
        assert "waiting for it to finish" in err  # it said it would wait, and whom for
        assert f"still being written by PID {holder.pid}" in err and "--wait" in err and "Traceback" not in err
        assert "-c" in err  # the holder's command line
        assert not wh.exists()  # nothing was written
    finally:
        holder.kill()
        holder.wait()


def test_a_second_writer_waits_for_the_first_and_then_runs(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    session(tmp_path / "src", "S1")
    holder = start_holder(wh)
    try:
        waiter = subprocess.Popen([sys.executable, "-m", "pipeline", "ingest", str(tmp_path / "src"), "--db", str(wh),
                                   "--wait", "120"], cwd=REPO, stderr=subprocess.PIPE, text=True)
        assert waiter.stderr
        said = waiter.stderr.readline()
        assert f"is being written by PID {holder.pid}" in said and "waiting" in said
        assert holder.stdin
        holder.stdin.write("done\n")
        holder.stdin.flush()
        assert holder.wait(timeout=60) == 0
        assert waiter.wait(timeout=120) == 0, waiter.stderr.read()
    finally:
        holder.kill()
        holder.wait()
    with db.reading(wh) as con:
        assert con.execute("SELECT session_id FROM sessions").fetchall() == [("S1",)]


def test_two_ingests_at_once_land_everything_once(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    for i in range(6):
        session(tmp_path / "a", f"A{i}")
        session(tmp_path / "b", f"B{i}")
    procs = [subprocess.Popen([sys.executable, "-m", "pipeline", "ingest", str(tmp_path / folder), str(tmp_path / "a"),
                               "--db", str(wh)], cwd=REPO, stderr=subprocess.PIPE, text=True) for folder in ("a", "b")]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    assert [code for code, _ in results] == [0, 0], results
    with db.reading(wh) as con:
        assert con.execute("SELECT count(*), count(DISTINCT session_id) FROM sessions").fetchall() == [(12, 12)]
        assert con.execute("SELECT count(*) FROM lines").fetchall() == [(12,)]


def test_wait_must_be_a_number_of_seconds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["ingest", str(tmp_path), "--db", str(tmp_path / "w.duckdb"), "--wait", "-1"])
    assert exc.value.code == 2 and "must be 0 or more" in capsys.readouterr().err
