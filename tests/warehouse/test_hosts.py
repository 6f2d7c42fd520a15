"""Kept DuckDB instances (pipeline.warehouse.hosts): a block's file is closed and unlocked when it
ends, nothing of one block's session reaches the next, and a forked child starts with none."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from pipeline.errors import WarehouseBusyError
from pipeline.warehouse import db, hosts

WRITE_FROM_ANOTHER_PROCESS = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE TABLE IF NOT EXISTS other (a INT)")
con.close()
print("wrote")
"""


def _write_elsewhere(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WRITE_FROM_ANOTHER_PROCESS, str(path)], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "w.duckdb"
    with db.opened(path) as con:  # creates it, with every migration
        con.execute("CREATE TABLE t (a INT)")
        con.execute("INSERT INTO t VALUES (1), (2)")
    return path


def test_a_written_block_leaves_a_checkpointed_file_that_another_process_can_write(work: Path) -> None:
    assert not work.with_name(work.name + ".wal").exists()  # detaching checkpointed it
    assert _write_elsewhere(work).stdout.strip() == "wrote"  # and released the lock
    with db.opened(work, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t").fetchall() == [(2,)]
        assert con.execute("SELECT count(*) FROM other").fetchall() == [(0,)]
    assert _write_elsewhere(work).returncode == 0  # a reader's block releases its lock too


def test_the_instance_is_kept_and_lent_again(work: Path) -> None:
    with db.opened(work, read_only=True):
        pass
    kept = hosts.idle()
    assert kept >= 1
    with db.opened(work, read_only=True) as con:
        assert hosts.idle() == kept - 1  # the same one, taken out while in use
        assert con.execute("SELECT sum(a) FROM t").fetchall() == [(3,)]
    assert hosts.idle() == kept


def test_nothing_of_a_block_session_reaches_the_next(work: Path) -> None:
    with db.opened(work, read_only=True) as con:
        con.execute("SET TimeZone = 'Asia/Tokyo'")
        con.execute("CREATE TEMP TABLE scratch AS SELECT 1 AS x")
        con.execute("ATTACH ':memory:' AS extra")
    with db.opened(work, read_only=True) as con:
        assert con.execute("SELECT current_setting('TimeZone')").fetchall() == [("UTC",)]
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'scratch'").fetchall() == [(0,)]
        names = {r[0] for r in con.execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal").fetchall()}
    # the block's own attachment made the instance unaccountable: it was closed, not lent again
    assert names == {"memory", db.CATALOG}


def test_a_block_that_raised_still_detaches(work: Path) -> None:
    with pytest.raises(duckdb.Error), db.opened(work) as con:
        con.execute("BEGIN")
        con.execute("INSERT INTO t VALUES (10)")
        con.execute("SELECT * FROM no_such_table")
    assert _write_elsewhere(work).returncode == 0
    with db.opened(work, read_only=True) as con:
        assert con.execute("SELECT sum(a) FROM t").fetchall() == [(3,)]  # the open transaction was rolled back


def test_blocks_open_at_once_use_instances_of_their_own(work: Path) -> None:
    with db.opened(work, read_only=True) as a, db.opened(work, read_only=True) as b:
        assert a.execute("SELECT count(*) FROM t").fetchall() == b.execute("SELECT count(*) FROM t").fetchall()


def test_a_busy_warehouse_is_named_and_the_instance_stays_usable(work: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import sys, duckdb, time; c = duckdb.connect(sys.argv[1]); "
                               "print('open', flush=True); time.sleep(60)", str(work)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(WarehouseBusyError, match=str(work)), db.opened(work, read_only=True):
            pass
    finally:
        holder.kill()
        holder.wait()
    with db.opened(work, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t").fetchall() == [(2,)]


def test_a_forked_child_keeps_none_of_its_parents_instances(work: Path) -> None:
    with db.opened(work, read_only=True):
        pass
    assert hosts.idle() >= 1
    pid = os.fork()
    if pid == 0:  # the child: a host of its own, its parent's are left alone
        code = 1
        try:
            if hosts.idle() == 0:
                with db.opened(work, read_only=True) as con:
                    code = 0 if con.execute("SELECT count(*) FROM t").fetchall() == [(2,)] else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:  # hung, as a child using its parent's DuckDB threads would
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child did not finish in 60 s")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert hosts.idle() >= 1


def test_a_block_that_made_tables_of_the_instance_own_hands_them_to_no_one(tmp_path: Path) -> None:
    with hosts.borrowed() as con:
        con.execute("CREATE TABLE memory.main.left_behind AS SELECT 1 AS x")
        con.execute("CREATE VIEW memory.main.seen_by_all AS SELECT 2 AS y")
    for _ in range(hosts.KEEP + 1):  # every kept host, and a new one
        with hosts.borrowed() as con:
            made = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'memory'").fetchall()
            assert made == [(0,)]
            assert con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'seen_by_all'").fetchall() == [(0,)]


def test_duckdb_is_capped_in_every_reading_process_and_the_cap_can_be_raised(
        samples_warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.warehouse import db

    with db.reading(samples_warehouse) as con:
        assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] in ("1.0 GiB", "953.6 MiB")  # type: ignore[index]
    monkeypatch.setenv("PIPELINE_MEMORY_LIMIT", "3GB")
    with db.reading(samples_warehouse) as con:
        assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] in ("3.0 GiB", "2.7 GiB")  # type: ignore[index]


def test_out_of_memory_names_the_cap_and_how_to_raise_it(
        samples_warehouse: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.cli import main
    from pipeline.usage import session_table

    monkeypatch.setenv("PIPELINE_MEMORY_LIMIT", "8MB")
    # an analyst's query: a usage error (exit 2) that says how to give DuckDB more
    code = main(["sql", "SELECT l.text, r.text FROM lines l, lines r ORDER BY l.text || r.text", "--db", str(samples_warehouse)])
    err = capsys.readouterr().err
    assert code == 2 and "Out of Memory" in err and "PIPELINE_MEMORY_LIMIT=4GB" in err and "8MB" in err

    def out_of_memory(*_a: object, **_k: object) -> None:
        raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 16.0 MiB")

    # any other command: exit 1, the same advice, never a traceback
    monkeypatch.setattr(session_table, "session_table", out_of_memory)
    code = main(["sessions", "--db", str(samples_warehouse)])
    err = capsys.readouterr().err
    assert code == 1 and "PIPELINE_MEMORY_LIMIT=4GB" in err and "8MB" in err and "Traceback" not in err


def test_another_thread_reads_the_published_file_while_this_one_writes(tmp_path: Path) -> None:
    # The night's secret scans read on a thread while the main thread lands batches in the working file:
    # DuckDB refuses one file attached read-only and read-write by two instances of one process.
    import threading

    wh = tmp_path / "w.duckdb"
    with db.writing(wh) as con:
        con.execute("CREATE TABLE marks (v VARCHAR)")
        con.execute("INSERT INTO marks VALUES ('published')")
    seen: list[object] = []

    def scan() -> None:
        try:
            with db.reading(wh) as other:
                seen.append(sorted(r[0] for r in other.execute("SELECT v FROM marks").fetchall()))
        except Exception as exc:  # kept: the assertion below shows it
            seen.append(exc)

    with db.write_session(wh):
        with db.writing(wh) as con:
            con.execute("INSERT INTO marks VALUES ('being written')")
            thread = threading.Thread(target=scan)
            thread.start()
            thread.join()
        with db.reading(wh) as own:  # the writing thread still reads what it wrote
            assert sorted(r[0] for r in own.execute("SELECT v FROM marks").fetchall()) == ["being written", "published"]
    assert seen == [["published"]]
