"""Ingest when DuckDB refuses a statement (out of memory, I/O), and folders reached through links.

A group DuckDB refuses is rolled back and redone a file at a time; a file that fails alone is set
aside with the step that failed and read by the next ingest, which then equals an uninterrupted one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipeline.warehouse import db, ingest
from tests.helpers import write_jsonl

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"


def _user(text: str, sid: str) -> dict:
    return {"type": "user", "sessionId": sid, "cwd": "/home/ana/src/app", "timestamp": "2026-10-01T10:00:00.000Z",
            "uuid": f"u-{sid}-{text}", "message": {"role": "user", "content": text}}


def _digest(path: Path) -> tuple:
    """What an ingest stores, keyed by file path (session ids of duplicate claims depend on order)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return (
            con.execute("SELECT path, format, prompts, turns, line_count, size_bytes, first_at, last_at, problems "
                        "FROM sessions ORDER BY path").fetchall(),
            con.execute("SELECT s.path, count(*), sum(hash(l.line_no, l.text)) FROM lines l JOIN sessions s USING (session_id) "
                        "GROUP BY s.path ORDER BY s.path").fetchall(),
            con.execute("SELECT s.path, count(*), sum(prompt_tokens), sum(cached_tokens), sum(completion_tokens) "
                        "FROM llm_calls c JOIN sessions s USING (session_id) GROUP BY s.path ORDER BY s.path").fetchall(),
        )
    finally:
        con.close()


def test_a_refused_group_is_redone_file_by_file_and_only_the_bad_file_is_set_aside(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for sid in ("S1", "S2", "S3"):
        write_jsonl(tmp_path / "p" / f"{sid}.jsonl", [_user("hello", sid), _user("again", sid)])
    real = ingest.derive.fold

    def refuses_s2(con, proj, targets):
        if "S2" in targets:
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 16.0 MiB")
        return real(con, proj, targets)

    monkeypatch.setattr(ingest.derive, "fold", refuses_s2)
    con = db.connect(db_path)
    report = ingest.ingest(con, [tmp_path / "p"])
    assert [(Path(f.path).name, f.action) for f in report.files] == [("S1.jsonl", "new"), ("S2.jsonl", "error"), ("S3.jsonl", "new")]
    message = report.errors[0].message
    assert message is not None
    assert "S2.jsonl: set aside, nothing of it stored" in message
    assert "while deriving the sessions' statistics and usage rows" in message
    assert "Out of Memory Error" in message and "run the same ingest again" in message
    assert report.warnings == [message]
    assert con.execute("SELECT session_id FROM sessions ORDER BY 1").fetchall() == [("S1",), ("S3",)]
    assert con.execute("SELECT count(*) FROM lines WHERE session_id = 'S2'").fetchall() == [(0,)]

    monkeypatch.setattr(ingest.derive, "fold", real)
    again = ingest.ingest(con, [tmp_path / "p"])
    assert not again.errors and [f.action for f in again.files] == ["unchanged", "new", "unchanged"]
    assert con.execute("SELECT session_id, line_count, prompts FROM sessions ORDER BY 1").fetchall() == [
        ("S1", 2, 2), ("S2", 2, 2), ("S3", 2, 2)]
    con.close()


def test_a_forced_out_of_memory_fails_cleanly_and_the_next_run_completes(tmp_path: Path) -> None:
    """The test hook lowers DuckDB's memory limit until the samples cannot be derived."""
    def run(db_file: Path, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pipeline", "ingest", str(SAMPLES), "--db", str(db_file)],
                              capture_output=True, text=True, timeout=300, env={**os.environ, **env})

    starved = run(tmp_path / "w.duckdb", PIPELINE_INGEST_MEMORY_LIMIT="4MB")
    assert starved.returncode == 1, starved.stderr
    assert "Traceback" not in starved.stderr
    assert "set aside, nothing of it stored: DuckDB failed while" in starved.stderr
    assert "Out of Memory Error" in starved.stderr and "transaction is aborted" not in starved.stderr
    assert "the next ingest tries them again" in starved.stderr

    finished = run(tmp_path / "w.duckdb")
    assert finished.returncode == 0, finished.stderr
    assert run(tmp_path / "fresh.duckdb").returncode == 0
    assert _digest(tmp_path / "w.duckdb") == _digest(tmp_path / "fresh.duckdb")


def test_an_impossible_memory_limit_is_a_usage_error(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "pipeline", "ingest", str(SAMPLES), "--db", str(tmp_path / "w.duckdb")],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PIPELINE_INGEST_MEMORY_LIMIT": "lots"})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "PIPELINE_INGEST_MEMORY_LIMIT" in out.stderr


def test_linked_folders_are_followed_once_and_loops_reported(warehouse, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude"
    write_jsonl(dotfiles / "projects" / "-home-ana-app" / "a.jsonl", [_user("hi", "A")])
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude").symlink_to(dotfiles)  # ~/.claude kept in a dotfiles repository
    (home / "again").symlink_to(dotfiles / "projects")  # a second way to the same files
    (dotfiles / "projects" / "-home-ana-app" / "up").symlink_to(dotfiles)  # a loop

    report = ingest.ingest(warehouse, [home])
    assert [f.path for f in report.files] == [str(home / ".claude" / "projects" / "-home-ana-app" / "a.jsonl")]
    loops = [w for w in report.warnings if "a loop" in w]
    assert loops and all("not followed" in w for w in loops)
    assert warehouse.execute("SELECT session_id, line_count FROM sessions").fetchall() == [("A", 1)]


def test_a_folder_named_through_a_link_is_read(warehouse, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "real" / "p" / "a.jsonl", [_user("hi", "A")])
    (tmp_path / "link").symlink_to(tmp_path / "real")
    report = ingest.ingest(warehouse, [tmp_path / "link"])
    assert [Path(f.path).name for f in report.files] == ["a.jsonl"] and not report.warnings


def test_a_copy_of_the_samples_through_a_link_equals_the_samples(tmp_path: Path) -> None:
    shutil.copytree(SAMPLES, tmp_path / "samples")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "transcripts").symlink_to(tmp_path / "samples")
    with db.opened(tmp_path / "a.duckdb") as con:
        linked = ingest.ingest(con, [tmp_path / "home"])
    with db.opened(tmp_path / "b.duckdb") as con:
        direct = ingest.ingest(con, [tmp_path / "samples"])
    assert len(linked.files) == len(direct.files) > 20
    assert not linked.errors and not direct.errors


def test_a_path_with_dot_dot_is_the_same_file(warehouse, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "home" / "p" / "a.jsonl", [_user("hi", "A")])
    first = ingest.ingest(warehouse, [tmp_path / "home" / "p" / ".." / "p"])
    again = ingest.ingest(warehouse, [tmp_path / "home" / "p"])
    assert [f.action for f in first.files] == ["new"] and [f.action for f in again.files] == ["unchanged"]
    assert warehouse.execute("SELECT path FROM sessions").fetchall() == [(str(tmp_path / "home" / "p" / "a.jsonl"),)]


def test_an_ingest_that_would_change_nothing_opens_no_write_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.cli.main import main

    write_jsonl(tmp_path / "p" / "a.jsonl", [_user("hi", "A")])
    held = tmp_path / "p" / "b.jsonl"
    held.write_bytes(b'{"type": "user", "sessionId": "B", "message": {"role": "user", "content": "x"}}\n{"unfinished": ')
    db_file = str(tmp_path / "w.duckdb")
    assert main(["ingest", str(tmp_path / "p"), "--db", db_file]) == 0
    capsys.readouterr()

    def no_write(*args, **kwargs):
        raise AssertionError("a write session was opened for an ingest with nothing to do")

    monkeypatch.setattr(db, "writing", no_write)
    assert main(["ingest", str(tmp_path / "p"), "--db", db_file]) == 0
    err = capsys.readouterr().err
    assert "2 files (0 changed), 0 new lines" in err and "b.jsonl: the last 15 bytes have no newline yet" in err

    # a grown file, a completed line, or a new file needs the write session again
    for change in (lambda: write_jsonl(tmp_path / "p" / "c.jsonl", [_user("new", "C")]),
                   lambda: held.write_bytes(held.read_bytes() + b"1}\n")):
        change()
        assert ingest.preview(db_file, [tmp_path / "p"]).report is None
