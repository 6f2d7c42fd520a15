"""A kill at any step of apply, then a re-run, ends exactly like an uninterrupted apply."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.corpus.git_corpus import Corpus
from pipeline.faults import CRASH_EXIT_CODE
from pipeline.warehouse import db
from tests import helpers as A
from tests.helpers import REPO, copy_samples

PG = A.occurrences("pg-connection-refused")
MOD = A.occurrences("module-not-found")
SESSIONS = sorted({o["sessionId"] for o in PG + MOD} | {A.commitment("user-rotate-staging-credentials")["sessionId"],
                                                         A.commitment("agent-regression-test-dates")["sessionId"]})
STEPS = [
    "apply:checked", "apply:memory-file-written", "apply:memory-file-written:2", "apply:memory-committed",
    "apply:memory-committed:2", "apply:link-file-written", "apply:link-committed", "apply:task-files-written",
    "apply:tasks-committed", "apply:before-warehouse", "apply:in-transaction", "apply:committed",
]


@pytest.fixture(scope="module")
def template(tmp_path_factory, samples_warehouse: Path) -> tuple[Path, Path]:
    """An ingested warehouse and an artifact with two memories, a duplicate to link, and tasks."""
    d = tmp_path_factory.mktemp("crash")
    wh = copy_samples(samples_warehouse, d)
    with db.writing(wh) as con:
        pg = A.candidate("pg-connection-refused", "Postgres on the dev box refuses connections until restarted.")
        art = A.write_artifact(d / "art", con, SESSIONS, candidates=[
            pg,
            A.candidate("module-not-found", "Test-only packages are missing, so test imports fail."),
            {**pg, "claim": "Postgres on the dev box refuses connections until it is restarted."},
        ], commitments=[
            A.commitment_entry("user-rotate-staging-credentials"),
            A.commitment_entry("agent-regression-test-dates"),
        ])
    return wh, art


def run_apply(wh: Path, corpus: Path, art: Path, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PIPELINE_CRASH_AT"}
    if crash_at:
        env["PIPELINE_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, "-m", "pipeline", "apply", str(art), "--db", str(wh), "--corpus", str(corpus), "--json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def state(wh: Path, corpus: Path) -> dict:
    c = Corpus(corpus)
    files = {str(p.relative_to(corpus)): p.read_text() for p in sorted(corpus.rglob("*.md")) if ".git" not in p.parts}
    subjects = sorted(s for s in c.git("log", "--format=%s").splitlines())
    fsck = subprocess.run(["git", "--git-dir", str(corpus / ".git"), "fsck", "--no-progress"], capture_output=True, text=True)
    with db.reading(wh) as con:
        q = lambda sql: sorted(con.execute(sql).fetchall())  # noqa: E731
        tables = {
            "memories": q("SELECT memory_id, path, kind, claim FROM memories"),
            "links": q("SELECT memory_id, session_id FROM memory_links"),
            "tasks": q("SELECT task_id, status, path FROM tasks"),
            "watermarks": q("SELECT session_id, line_count, size_bytes FROM watermarks"),
            "calls": q("SELECT call_id FROM llm_calls WHERE source = 'consolidator'"),
            "applied": q("SELECT artifact_id FROM applied_artifacts"),
        }
    return {"files": files, "subjects": subjects, "fsck": fsck.returncode, "tables": tables,
            "clean": c.git("status", "--porcelain") == ""}


@pytest.fixture(scope="module")
def reference(template, tmp_path_factory) -> dict:
    wh, art = template
    d = tmp_path_factory.mktemp("ref")
    shutil.copy(wh, d / "w.duckdb")
    out = run_apply(d / "w.duckdb", d / "corpus", art)
    assert out.returncode == 0, out.stderr
    s = state(d / "w.duckdb", d / "corpus")
    assert sum(x.startswith("memory: ") for x in s["subjects"]) == 2
    assert sum(x.startswith("link: ") for x in s["subjects"]) == 1
    assert sum(x.startswith("tasks: ") for x in s["subjects"]) == 1
    return s


@pytest.mark.slow
@pytest.mark.parametrize("step", STEPS)
def test_crash_at_step_then_rerun_matches_uninterrupted(template, reference, tmp_path: Path, step: str) -> None:
    wh, art = template
    shutil.copy(wh, tmp_path / "w.duckdb")
    crashed = run_apply(tmp_path / "w.duckdb", tmp_path / "corpus", art, crash_at=step)
    assert crashed.returncode == CRASH_EXIT_CODE, (crashed.returncode, crashed.stderr)
    again = run_apply(tmp_path / "w.duckdb", tmp_path / "corpus", art)
    assert again.returncode == 0, again.stderr
    assert state(tmp_path / "w.duckdb", tmp_path / "corpus") == reference
    third = run_apply(tmp_path / "w.duckdb", tmp_path / "corpus", art)
    assert json.loads(third.stdout)["status"] == "already-applied"


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.15, 0.25, 0.35, 0.45])
def test_real_kill_9_then_rerun_matches_uninterrupted(template, reference, tmp_path: Path, delay: float) -> None:
    wh, art = template
    shutil.copy(wh, tmp_path / "w.duckdb")
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "apply", str(art), "--db", str(tmp_path / "w.duckdb"),
                             "--corpus", str(tmp_path / "corpus")], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(delay)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the process and any git child it is waiting on
    except ProcessLookupError:
        pass
    proc.wait()
    again = run_apply(tmp_path / "w.duckdb", tmp_path / "corpus", art)
    assert again.returncode == 0, again.stderr
    assert state(tmp_path / "w.duckdb", tmp_path / "corpus") == reference
