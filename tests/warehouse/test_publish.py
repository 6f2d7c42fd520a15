"""The published warehouse and its working file: what readers see, first use, crashes while publishing."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

from pipeline.errors import OutcomeError
from pipeline.faults import CRASH_EXIT_CODE
from pipeline.warehouse import db, publish
from tests.helpers import REPO, write_jsonl

READER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
for line in sys.stdin:
    print(con.execute(line).fetchall()[0][0], flush=True)
"""


@contextlib.contextmanager
def held_open(wh: Path) -> Iterator[Callable[[str], str]]:
    """Another process holding the warehouse open read-only; yields `ask(sql)`, its answer's first value."""
    reader = subprocess.Popen([sys.executable, "-c", READER, str(wh)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert reader.stdin and reader.stdout
    stdin, stdout = reader.stdin, reader.stdout

    def ask(sql: str) -> str:
        stdin.write(sql + "\n")
        stdin.flush()
        return stdout.readline().strip()

    try:
        yield ask
    finally:
        reader.kill()
        reader.wait()


def session(folder: Path, sid: str, lines: int = 3) -> Path:
    return write_jsonl(folder / f"{sid}.jsonl", [
        {"type": "user", "sessionId": sid, "timestamp": f"2026-10-01T10:00:0{i}.000Z",
         "message": {"role": "user", "content": f"line {i} of {sid}"}} for i in range(lines)
    ])


def pipeline(*argv: str, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PIPELINE_CRASH_AT"}
    if crash_at:
        env["PIPELINE_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, "-m", "pipeline", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def count(path: Path, sql: str) -> int:
    with db.reading(path) as con:
        return int(con.execute(sql).fetchall()[0][0])


def test_a_writer_publishes_what_it_wrote_and_leaves_only_its_files(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    session(tmp_path / "src", "S1")
    assert pipeline("ingest", str(tmp_path / "src"), "--db", str(wh)).returncode == 0
    files = publish.Files(wh)
    assert count(wh, "SELECT count(*) FROM lines") == 3
    # published by renaming the working file: one copy of the warehouse on disk, and the state file
    assert not files.work.exists() and files.state.exists()
    assert not files.publishing.exists() and not files.db_wal.exists() and not files.work_wal.exists()
    assert json.loads(files.state.read_text()) == {"db": publish.identity(wh), "work": None}
    # nothing new for the ingest: it answers from the published file, opens no write session, copies nothing
    before = publish.identity(wh)
    assert pipeline("ingest", str(tmp_path / "src"), "--db", str(wh)).returncode == 0
    assert publish.identity(wh) == before and not files.work.exists()
    assert json.loads(files.state.read_text()) == {"db": before, "work": None}
    # a writer that writes nothing works on a copy, and publishes nothing (the file analysts hold is left alone)
    with db.writing(wh):
        pass
    assert publish.identity(wh) == before
    assert files.work.exists() and files.work.read_bytes() == wh.read_bytes()
    state = json.loads(files.state.read_text())
    assert state == {"db": before, "work": publish.identity(files.work)}
    # and that copy serves the writer after it: no second copy while nothing is published
    with db.writing(wh):
        pass
    assert publish.identity(files.work) == state["work"] and publish.identity(wh) == before


def test_the_copy_a_writer_starts_from_is_made_only_after_a_publish(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    with db.write_session(wh) as first, db.writing(wh) as con:  # a new warehouse: nothing to copy
        con.execute("INSERT INTO runs (run_id, status) VALUES ('r1', 'done')")
    assert first.copy_method == "" and first.published == 1
    with db.write_session(wh) as second, db.writing(wh) as con:  # after a publish: one copy, then the rename
        assert con.execute("SELECT run_id FROM runs").fetchall() == [("r1",)]
    assert second.copy_method in ("clone", "copy_file_range", "sendfile") and second.copy_seconds > 0
    assert second.published == 0  # it changed nothing, so its copy stays for the next writer
    with db.write_session(wh) as third, db.writing(wh) as con:
        con.execute("INSERT INTO runs (run_id, status) VALUES ('r2', 'done')")
    assert third.copy_method == "" and third.published == 1
    assert third.concurrency_seconds == third.publish_seconds > 0
    assert count(wh, "SELECT count(*) FROM runs") == 2


def test_a_connection_left_open_on_the_working_file_stops_the_rename(tmp_path: Path) -> None:
    """Renamed onto the published file, a connection still open on the working file would go on
    writing what readers read: the publish refuses, and the changes wait in the working file."""
    wh = tmp_path / "w.duckdb"
    files = publish.Files(wh)
    leaked = None
    with pytest.raises(duckdb.Error, match=r"already attached|in use|conflict"), db.write_session(wh):
        leaked = db.connect(files.work)
        leaked.execute("INSERT INTO runs (run_id, status) VALUES ('r', 'done')")
    assert leaked is not None
    leaked.close()
    assert not wh.exists() and files.work.exists()
    with db.write_session(wh) as again:
        pass
    assert again.published == 1 and count(wh, "SELECT count(*) FROM runs") == 1


def test_an_open_reader_keeps_its_view_and_the_next_connection_sees_the_new_state(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    session(tmp_path / "a", "S1")
    with db.writing(wh) as con:
        from pipeline.warehouse import ingest

        ingest.ingest(con, [tmp_path / "a"])
    with held_open(wh) as ask:
        assert ask("SELECT count(*) FROM sessions") == "1"
        session(tmp_path / "b", "S2")
        # The reader holds the published file all along: the writer neither waits nor fails.
        done = pipeline("ingest", str(tmp_path / "b"), "--db", str(wh), "--wait", "0")
        assert done.returncode == 0, done.stderr
        assert ask("SELECT count(*) FROM sessions") == "1"  # its consistent old view
        assert count(wh, "SELECT count(*) FROM sessions") == 2  # a new connection: the new state


def test_first_use_of_a_warehouse_written_directly_with_its_wal(tmp_path: Path) -> None:
    """A warehouse from before the working file, whose writer died and left a .wal beside it."""
    wh = tmp_path / "w.duckdb"
    db.connect(wh).close()
    script = (
        "import os, sys\nfrom pipeline.warehouse import db\ncon = db.connect(sys.argv[1])\n"
        "con.execute(\"INSERT INTO runs (run_id, status) VALUES ('from-the-wal', 'done')\")\nos._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(wh)], cwd=REPO, check=True)
    files = publish.Files(wh)
    assert files.db_wal.exists() and not files.work.exists()
    with db.writing(wh) as con:
        assert con.execute("SELECT run_id FROM runs").fetchall() == [("from-the-wal",)]
        con.execute("INSERT INTO runs (run_id, status) VALUES ('after', 'done')")
    assert not files.db_wal.exists()  # it belonged to the file that was replaced
    assert count(wh, "SELECT count(*) FROM runs") == 2


def test_a_warehouse_replaced_or_deleted_behind_the_pipeline_is_taken_as_it_is(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    with db.writing(wh) as con:
        con.execute("INSERT INTO runs (run_id, status) VALUES ('old', 'done')")
    backup = tmp_path / "backup.duckdb"
    backup.write_bytes(wh.read_bytes())
    with db.writing(wh) as con:
        con.execute("INSERT INTO runs (run_id, status) VALUES ('new', 'done')")
    os.replace(backup, wh)  # the analyst restores yesterday's file
    with db.writing(wh) as con:
        assert con.execute("SELECT run_id FROM runs").fetchall() == [("old",)]
    wh.unlink()  # and then starts afresh
    with db.writing(wh) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchall() == [(0,)]
    assert count(wh, "SELECT count(*) FROM runs") == 0


def test_unpublished_changes_and_a_changed_warehouse_are_not_merged_silently(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    with db.writing(wh) as con:
        con.execute("INSERT INTO runs (run_id, status) VALUES ('published', 'done')")
    files = publish.Files(wh)
    with db.write_session(wh):  # the next writer starts from a copy of the published file...
        pass
    con = db.connect(files.work)  # ...and is killed after writing it, before it published
    con.execute("INSERT INTO runs (run_id, status) VALUES ('unpublished', 'done')")
    con.close()
    con = db.connect(wh)  # and a program writes the published file itself
    con.execute("INSERT INTO runs (run_id, status) VALUES ('elsewhere', 'done')")
    con.close()
    with pytest.raises(OutcomeError, match="never published"), db.writing(wh):
        pass


def test_nested_sessions_publish_once(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    with db.write_session(wh) as outer:
        for i in range(3):
            with db.writing(wh) as con:
                con.execute("INSERT INTO runs (run_id, status) VALUES (?, 'done')", [f"r{i}"])
            with db.reading(wh) as con:  # a writer reads what it wrote, published or not
                assert con.execute("SELECT count(*) FROM runs").fetchall() == [(i + 1,)]
        assert not wh.exists() and outer.published == 0
    assert outer.published == 1 and count(wh, "SELECT count(*) FROM runs") == 3


@pytest.mark.parametrize("step", ["prepare:copying", "publish:renaming", "publish:replaced"])
def test_killed_while_publishing_then_run_again(tmp_path: Path, step: str) -> None:
    wh = tmp_path / "w.duckdb"
    session(tmp_path / "a", "S1")
    session(tmp_path / "b", "S2", lines=5)
    assert pipeline("ingest", str(tmp_path / "a"), "--db", str(wh)).returncode == 0
    crashed = pipeline("ingest", str(tmp_path / "b"), "--db", str(wh), crash_at=step)
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    # Readers meanwhile see a whole warehouse: the old one, or (killed after the rename) the new one.
    assert count(wh, "SELECT count(*) FROM sessions") == (2 if step == "publish:replaced" else 1)
    again = pipeline("ingest", str(tmp_path / "a"), str(tmp_path / "b"), "--db", str(wh))
    assert again.returncode == 0, again.stderr
    assert count(wh, "SELECT count(*) FROM lines") == 8  # every line once
    assert count(wh, "SELECT count(*) FROM lines WHERE session_id = 'S2'") == 5
    files = publish.Files(wh)
    assert not files.publishing.exists() and not files.work_copy.exists()
    if step == "publish:replaced":  # the rerun found everything published: it answered without a write session
        assert not files.work.exists() or files.work.read_bytes() == wh.read_bytes()
    else:  # the rerun published by renaming its working file
        assert not files.work.exists()
        assert json.loads(files.state.read_text()) == {"db": publish.identity(wh), "work": None}


def test_a_program_holding_the_warehouse_for_writing_is_named_and_nothing_is_replaced(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    with db.writing(wh) as con:
        con.execute("INSERT INTO runs (run_id, status) VALUES ('r', 'done')")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); "
         "sys.stdin.read()", str(wh)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout and holder.stdout.readline().strip() == "ready"
        before = publish.identity(wh)
        session(tmp_path / "a", "S1")
        out = pipeline("ingest", str(tmp_path / "a"), "--db", str(wh))
        assert out.returncode == 1 and f"PID {holder.pid}" in out.stderr and "read-only" in out.stderr
        assert publish.identity(wh) == before
    finally:
        holder.kill()
        holder.wait()


def test_the_published_file_opens_read_only_in_duckdb_itself(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    session(tmp_path / "a", "S1")
    assert pipeline("ingest", str(tmp_path / "a"), "--db", str(wh)).returncode == 0
    con = duckdb.connect(str(wh), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM messages").fetchall() == [(3,)]
    finally:
        con.close()


@pytest.mark.parametrize("refuse", ["nothing", "clone", "clone+copy_file_range"])
def test_the_copy_takes_the_cheapest_path_the_file_system_offers_and_is_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refuse: str
) -> None:
    src = tmp_path / "src.bin"
    # Larger than one copy chunk, and not a multiple of it, so the loop's last short step runs.
    monkeypatch.setattr(publish, "COPY_CHUNK", 1 << 16)
    src.write_bytes(os.urandom(5 * (1 << 16) + 123))
    cloned = {"tried": 0}

    def fake_clone(fin: int, fout: int) -> bool:
        cloned["tried"] += 1
        if refuse == "nothing":  # a copy-on-write file system: the clone shares every block
            os.sendfile(fout, fin, 0, os.fstat(fin).st_size)
            return True
        return False

    monkeypatch.setattr(publish, "_clone", fake_clone)
    if "copy_file_range" in refuse:
        def no_copy_file_range(*_a: object) -> int:
            raise OSError(38, "Function not implemented")  # ENOSYS: an old kernel
        monkeypatch.setattr(os, "copy_file_range", no_copy_file_range)
    method = publish._copy(src, tmp_path / "dst.bin")
    assert (tmp_path / "dst.bin").read_bytes() == src.read_bytes()
    assert cloned["tried"] == 1
    assert method == {"nothing": "clone", "clone": "copy_file_range", "clone+copy_file_range": "sendfile"}[refuse]


def test_a_clone_on_a_file_system_without_one_is_refused_not_raised(tmp_path: Path) -> None:
    # ext4 and tmpfs (these machines) answer FICLONE with EOPNOTSUPP or EXDEV: the copy falls back.
    (tmp_path / "a").write_bytes(b"x" * 4096)
    with (tmp_path / "a").open("rb") as fin, (tmp_path / "b").open("wb") as fout:
        result = publish._clone(fin.fileno(), fout.fileno())
    assert result in (True, False)
    if result:  # a copy-on-write file system after all: the blocks are shared
        assert (tmp_path / "b").read_bytes() == b"x" * 4096


def test_a_write_session_reports_how_it_published(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    with db.writing(wh) as con:
        con.execute("INSERT INTO runs (run_id, status) VALUES ('r0', 'test')")
    with db.write_session(wh) as s, db.writing(wh) as con:
        con.execute("INSERT INTO runs (run_id, status) VALUES ('r1', 'test')")
    assert s.published == 1
    assert s.copy_method in ("clone", "copy_file_range", "sendfile")


def test_the_lock_query_and_a_duckdb_open_agree_on_who_holds_the_warehouse(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    with db.writing(wh) as con:
        con.execute("INSERT INTO runs (run_id, status) VALUES ('r', 'done')")
    assert publish.read_write_holder(wh) is None and publish._probe_by_opening(wh) is None
    for read_only, held in ((True, False), (False, True)):
        holder = subprocess.Popen(
            [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == '1'); "
             "print('ready', flush=True); sys.stdin.read()", str(wh), "1" if read_only else "0"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout and holder.stdout.readline().strip() == "ready"
            asked, opened = publish.read_write_holder(wh), publish._probe_by_opening(wh)
            # a reader never stops a writer; a writer is named, program and pid, the same both ways
            assert asked == opened
            assert (asked is not None) == held
            if held:
                assert asked is not None and f"(PID {holder.pid})" in asked and "python" in asked
        finally:
            holder.kill()
            holder.wait()
