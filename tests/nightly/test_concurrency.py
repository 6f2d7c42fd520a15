"""A night while others use the warehouse: a reader holding it open, readers in a loop, another writer.

Everything here runs real processes (the nightly driver, its papermill batches, readers and
writers), never mocks: the point is what DuckDB's file locks let each of them do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.consolidator import pending
from pipeline.warehouse import db
from tests.helpers import REPO, SAMPLES, built_once, copy_samples, write_jsonl

pytestmark = pytest.mark.slow

EXPECTED = json.loads((SAMPLES / "expected.json").read_text())
WITH_LINES = sorted(s["sessionId"] for s in EXPECTED["sessions"] if s["lines"])

# Holds a read-only DuckDB connection to argv[1] and answers one query per line of stdin with it.
READER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print("open", flush=True)
for line in sys.stdin:
    print(con.execute(line).fetchall()[0][0], flush=True)
"""

# Until the file argv[2] exists, asks the warehouse argv[1] what an analyst would, every 0.3 s, through
# the CLI's own entry point; then prints {"queries": n, "failures": [...]}.
LOOP = """
import contextlib, io, json, os, sys, time
from pipeline.cli.main import main
wh, stop, sid = sys.argv[1], sys.argv[2], sys.argv[3]
asks = [["sql", "SELECT count(*) FROM sessions", "--format", "csv"], ["sessions", "--json"],
        ["search", sid, "pytest", "--json"], ["read", sid, "1", "5", "--json"]]
n, failures = 0, []
while not os.path.exists(stop):
    argv = asks[n % len(asks)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--db", wh])
    n += 1
    if code != 0:
        failures.append({"argv": argv, "code": code, "stderr": err.getvalue()[-500:]})
    time.sleep(0.3)
print(json.dumps({"queries": n, "failures": failures}))
"""

# Holds the warehouse's write lock until a line arrives on stdin.
WRITER = """
import sys
from pipeline.warehouse import db
with db.write_session(sys.argv[1]):
    print("holding", flush=True)
    sys.stdin.readline()
"""


def nightly_cmd(tmp: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pipeline", "nightly", "--source", str(SAMPLES), "--engine", "rules", "--json",
            "--db", str(tmp / "w.duckdb"), "--corpus", str(tmp / "corpus"), "--runs", str(tmp / "runs"), *extra]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PIPELINE_CRASH_AT", "OPENAI_API_KEY")}


def ingest_samples(tmp: Path, samples_warehouse: Path) -> Path:
    """The samples' warehouse in `tmp`: a copy of the one ingested once per test process."""
    return copy_samples(samples_warehouse, tmp)


def every_session_watermarked(wh: Path) -> None:
    with db.reading(wh) as con:
        assert pending.pending_ids(con) == []
        marked = {r[0] for r in con.execute("SELECT DISTINCT session_id FROM watermarks").fetchall()}
    assert marked == set(WITH_LINES)


@pytest.fixture(scope="module")
def night_among_readers(tmp_path_factory: pytest.TempPathFactory, samples_warehouse: Path) -> dict:
    """One night with its report, run once for the test run, while a reader holds the warehouse open and
    another asks it what an analyst would in a loop: what each of them saw, for the two tests below."""

    def build(tmp: Path) -> dict:
        wh = ingest_samples(tmp, samples_warehouse)
        stop = tmp / "stop"
        holder = subprocess.Popen([sys.executable, "-c", READER, str(wh)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        loop = subprocess.Popen([sys.executable, "-c", LOOP, str(wh), str(stop), WITH_LINES[0]], cwd=REPO, env=env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert holder.stdin and holder.stdout and holder.stdout.readline().strip() == "open"
            night = subprocess.run(nightly_cmd(tmp), cwd=REPO, env=env(), capture_output=True, text=True, timeout=300)
            holder.stdin.write("SELECT count(*) FROM watermarks\n")
            holder.stdin.flush()
            held = holder.stdout.readline().strip()
            holder_alive = holder.poll() is None
        finally:
            stop.touch()
            out, err = loop.communicate(timeout=120)
            holder.kill()
            holder.wait()
        return {"wh": str(wh), "code": night.returncode, "stdout": night.stdout, "stderr": night.stderr[-3000:],
                "held": held, "holderAlive": holder_alive, "loop": out.strip().splitlines()[-1], "loopErr": err[-2000:]}

    return built_once(tmp_path_factory, "night-among-readers", build)


def test_a_night_while_a_reader_holds_the_warehouse_open(night_among_readers: dict) -> None:
    night = night_among_readers
    assert night["code"] == 0, night["stderr"]
    result = json.loads(night["stdout"])
    assert result["batches"] and {b["status"] for b in result["batches"]} == {"applied"}
    assert result["report"]  # the report read the warehouse too
    assert night["held"] == "0"  # all night long, the state it opened
    assert night["holderAlive"]
    every_session_watermarked(Path(night["wh"]))  # a new connection sees the night


def test_readers_in_a_loop_during_a_night_never_fail(night_among_readers: dict) -> None:
    night = night_among_readers
    assert night["code"] == 0, night["stderr"]
    summary = json.loads(night["loop"])
    assert summary["failures"] == [] and summary["queries"] >= 4, (summary, night["loopErr"])
    every_session_watermarked(Path(night["wh"]))


def test_an_ingest_during_the_night_runs_while_the_batches_do(tmp_path: Path, samples_warehouse: Path) -> None:
    wh = ingest_samples(tmp_path, samples_warehouse)
    extra = write_jsonl(tmp_path / "later" / "late-session.jsonl", [
        {"type": "user", "sessionId": "late-session", "timestamp": "2026-10-01T10:00:00.000Z",
         "message": {"role": "user", "content": "written while the night ran"}}])
    night = subprocess.Popen(nightly_cmd(tmp_path, "--no-report"), cwd=REPO, env=env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not list((tmp_path / "runs").glob("*/*/progress.json")) and night.poll() is None:
            assert time.monotonic() < deadline, "the night never reached its batches"
            time.sleep(0.05)
        ingest = subprocess.run([sys.executable, "-m", "pipeline", "ingest", str(extra.parent), "--db", str(wh),
                                 "--json"], cwd=REPO, env=env(), capture_output=True, text=True, timeout=300)
        _, err = night.communicate(timeout=300)
    finally:
        night.kill()
        night.wait()
    assert ingest.returncode == 0, ingest.stderr
    assert night.returncode == 0, err[-3000:]
    with db.reading(wh) as con:
        assert pending.pending_ids(con) == ["late-session"]  # landed by the next night, not lost
        assert con.execute("SELECT count(*) FROM sessions").fetchall() == [(len(EXPECTED["sessions"]) + 1,)]


def test_a_night_that_cannot_get_the_write_lock_stops_naming_the_holder(tmp_path: Path, samples_warehouse: Path) -> None:
    wh = ingest_samples(tmp_path, samples_warehouse)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(wh)], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout and writer.stdout.readline().strip() == "holding"
        night = subprocess.run(nightly_cmd(tmp_path, "--no-report", "--wait", "1"), cwd=REPO, env=env(),
                               capture_output=True, text=True, timeout=120)
        assert night.returncode == 1
        assert f"still being written by PID {writer.pid}" in night.stderr and "Traceback" not in night.stderr
        assert json.loads(night.stdout)["exitCode"] == 1
    finally:
        writer.kill()
        writer.wait()
    again = subprocess.run(nightly_cmd(tmp_path, "--no-report"), cwd=REPO, env=env(), capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    every_session_watermarked(wh)
