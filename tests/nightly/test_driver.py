"""Run status in `runs`: a run left `running` or `reporting` by a process that died is marked
`interrupted` (when and why) by the run that takes over; a run whose report failed says so."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.nightly import driver
from pipeline.warehouse import db
from tests.helpers import REPO, SAMPLES

T0 = dt.datetime(2026, 11, 30, 2, 0, tzinfo=dt.UTC)


def add_run(con, run_id: str, status: str, started: dt.datetime, batches: list[tuple[str, str, dt.datetime | None]] = ()) -> None:
    con.execute("INSERT INTO runs (run_id, started_at, status, details) VALUES (?, ?, ?, ?)",
                [run_id, started, status, json.dumps({"day": "2026-11-30"})])
    for batch_id, bstatus, at in batches:
        con.execute("INSERT INTO batches (run_id, batch_id, status, started_at) VALUES (?, ?, ?, ?)", [run_id, batch_id, bstatus, at])


def test_the_run_that_takes_over_marks_earlier_runs_interrupted(warehouse) -> None:
    add_run(warehouse, "r-done", "done", T0 - dt.timedelta(days=1))
    add_run(warehouse, "r-killed", "running", T0, [("b1", "applied", T0 + dt.timedelta(minutes=2)),
                                                   ("b2", "running", T0 + dt.timedelta(minutes=5))])
    add_run(warehouse, "r-report", "reporting", T0 + dt.timedelta(hours=1))
    marked = driver.mark_interrupted(warehouse, "r-new", {"runId": "r-killed", "pid": 4242})
    assert [m[0] for m in marked] == ["r-killed", "r-report"]
    rows = {r[0]: r[1:] for r in warehouse.execute("SELECT run_id, status, finished_at, details FROM runs").fetchall()}
    assert rows["r-done"][0] == "done"
    status, finished, details = rows["r-killed"]
    details = json.loads(details)
    assert status == "interrupted" and finished == T0 + dt.timedelta(minutes=5)  # its last sign of life
    assert details["reason"] == "its process (pid 4242) ended with 1 batch(es) unfinished (Ctrl-C, kill, crash or reboot)"
    assert details["takenOverBy"] == "r-new" and details["interruptedAt"] == "2026-11-30T02:05:00+00:00"
    assert details["day"] == "2026-11-30"  # what the run recorded is kept
    status, finished, details = rows["r-report"]
    assert status == "interrupted" and "while writing the night's report" in json.loads(details)["reason"]
    assert driver.mark_interrupted(warehouse, "r-new") == []  # nothing left to mark


def test_status_says_whether_batches_or_the_report_failed(tmp_path: Path) -> None:
    result = driver.NightResult("r1", "2026-11-30", "rules", "", tmp_path)
    result.batches = [driver.BatchOutcome("b1", ["s"], tmp_path, status="applied")]
    assert driver.run_status(result, reporting=True) == "reporting"
    assert driver.run_status(result) == "done"
    result.report_failed, result.report_note = True, "the cache-anchoring notebook failed: boom"
    assert driver.run_status(result) == "report-failed"
    result.batches.append(driver.BatchOutcome("b2", ["t"], tmp_path, status="failed"))
    assert driver.run_status(result) == "failed"
    # recorded with its reason
    path = tmp_path / "w.duckdb"
    with db.writing(path) as con:
        add_run(con, "r1", "reporting", T0)
    result.batches.pop()
    driver._finish_run(path, result, 0.0)
    with db.reading(path) as con:
        status, details = con.execute("SELECT status, details FROM runs").fetchall()[0]
    assert status == "report-failed"
    assert json.loads(details)["reason"] == "its batches landed but its report failed: the cache-anchoring notebook failed: boom"


@pytest.mark.slow
def test_a_night_killed_while_reporting_is_interrupted_not_done(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PIPELINE_CRASH_AT", "OPENAI_API_KEY")}
    cmd = [sys.executable, "-m", "pipeline", "nightly", "--source", str(SAMPLES), "--engine", "rules", "--json",
           "--db", str(tmp_path / "w.duckdb"), "--corpus", str(tmp_path / "corpus"), "--runs", str(tmp_path / "runs")]
    crashed = subprocess.run(cmd, cwd=REPO, env={**env, "PIPELINE_CRASH_AT": "nightly:report"}, capture_output=True,
                             text=True, timeout=300)
    assert crashed.returncode == 86, crashed.stderr[-2000:]
    with db.reading(tmp_path / "w.duckdb") as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("reporting",)]
    again = subprocess.run([*cmd, "--no-report"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "is marked interrupted: its process" in again.stderr
    with db.reading(tmp_path / "w.duckdb") as con:
        rows = con.execute("SELECT status, details FROM runs ORDER BY started_at").fetchall()
    assert [r[0] for r in rows] == ["interrupted", "done"]
    assert "while writing the night's report" in json.loads(rows[0][1])["reason"]
