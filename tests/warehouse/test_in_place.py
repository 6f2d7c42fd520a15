"""A small ingest writes the published warehouse itself: no copy, readers that start meanwhile wait,
a reader already holding the file is never made to wait, and a kill mid-write loses nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.faults import CRASH_EXIT_CODE
from pipeline.warehouse import db, ingest, publish
from tests.warehouse.test_publish import count, held_open, pipeline, session


def _home(folder: Path, n: int = 8) -> Path:
    for i in range(n):
        session(folder, f"S{i}", lines=6)
    return folder


def ingest_here(home: Path, wh: Path, *more: str) -> None:
    """`pipeline ingest` in this process: quicker than a new interpreter where no crash is wanted."""
    from pipeline.cli.main import main

    assert main(["ingest", str(home), "--db", str(wh), *more]) == 0


def _published(wh: Path) -> tuple[int, int]:
    return count(wh, "SELECT count(*) FROM sessions"), count(wh, "SELECT count(*) FROM lines")


def test_a_small_ingest_writes_the_published_file_and_makes_no_copy(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    home = _home(tmp_path / "home")
    ingest_here(home, wh)
    files = publish.Files(wh)
    inode = wh.stat().st_ino
    session(home, "S-new", lines=6)  # one eighth more
    preview = ingest.preview(wh, [home])
    assert preview.report is None and preview.small and 0 < preview.new_bytes < preview.stored_bytes / 4
    ingest_here(home, wh)
    assert wh.stat().st_ino == inode  # written where it is, not renamed onto
    assert not files.work.exists() and not files.db_wal.exists() and not files.work_copy.exists()
    assert json.loads(files.state.read_text()) == {"db": publish.identity(wh), "work": None}
    assert _published(wh) == (9, 54)
    # the next writer, a night say, copies again as before: the state says the file is published
    with db.write_session(wh) as night:
        assert not night.in_place and night.copy_method


def test_a_large_ingest_still_works_on_a_copy(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    home = _home(tmp_path / "home", n=2)
    ingest_here(home, wh)
    inode = wh.stat().st_ino
    _home(tmp_path / "home", n=4)  # twice as much
    assert not ingest.preview(wh, [home]).small
    ingest_here(home, wh)
    assert wh.stat().st_ino != inode and _published(wh) == (4, 24)


def test_a_reader_holding_the_file_is_left_its_view_and_the_writer_copies(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    home = _home(tmp_path / "home")
    ingest_here(home, wh)
    with held_open(wh) as ask:
        assert ask("SELECT count(*) FROM sessions") == "8"
        session(home, "S-new")
        ingest_here(home, wh, "--wait", "0")
        assert ask("SELECT count(*) FROM sessions") == "8"  # its old view, never locked out
        assert count(wh, "SELECT count(*) FROM sessions") == 9


def test_a_reader_that_comes_between_the_look_and_the_open_keeps_the_file(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    wh = tmp_path / "w.duckdb"
    ingest_here(_home(tmp_path / "home"), wh)
    with held_open(wh) as ask:
        assert ask("SELECT count(*) FROM sessions") == "8"
        # the reader opened after `prepare` looked: the writer's own open is the first to find it
        monkeypatch.setattr(publish, "held_by_another_process", lambda _db: False)
        with db.write_session(wh, in_place=True) as session_, db.writing(wh) as con:
            assert not session_.in_place and session_.copy_method
            con.execute("INSERT INTO runs (run_id, status) VALUES ('r', 'done')")
        assert ask("SELECT count(*) FROM runs") == "0"
        assert count(wh, "SELECT count(*) FROM runs") == 1


@pytest.mark.parametrize("through_a_link", [False, True])
def test_a_reader_that_starts_during_a_write_in_place_waits_for_it(tmp_path: Path, through_a_link: bool) -> None:
    wh = tmp_path / "w.duckdb"
    ingest_here(_home(tmp_path / "home"), wh)
    named = wh
    if through_a_link:  # the reader names the warehouse by a link: it still finds the writer's lock
        named = tmp_path / "link.duckdb"
        named.symlink_to(wh)
    with db.write_session(wh, in_place=True) as writer, db.writing(wh) as con:
        assert writer.in_place
        con.execute("INSERT INTO runs (run_id, status) VALUES ('r', 'done')")
        reader = subprocess.Popen([sys.executable, "-m", "pipeline", "sql", "SELECT count(*) AS n FROM runs",
                                   "--db", str(named), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        assert reader.poll() is None  # waiting, not failed
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert "being updated in place" in err and json.loads(out)[0]["n"] == 1


@pytest.mark.parametrize("step", ["inplace:writing", "ingest:group-committed"])
def test_killed_while_writing_in_place_then_run_again(tmp_path: Path, step: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    wh = tmp_path / "w.duckdb"
    home = _home(tmp_path / "home")
    ingest_here(home, wh)
    session(home, "S-new", lines=6)
    crashed = pipeline("ingest", str(home), "--db", str(wh), crash_at=step)
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    # Readers meanwhile see what DuckDB committed: nothing of the ingest, or its whole group.
    assert _published(wh) == ((8, 48) if step == "inplace:writing" else (9, 54))
    capsys.readouterr()
    ingest_here(home, wh)
    assert "starting again" not in capsys.readouterr().err  # the killed write in place is taken as published, silently
    assert _published(wh) == (9, 54)
    assert count(wh, "SELECT count(*) FROM lines WHERE session_id = 'S-new'") == 6
    # and a writer after it starts from the file as it is, the file left by the kill included
    with db.writing(wh) as con:
        con.execute("INSERT INTO runs (run_id, status) VALUES ('after', 'done')")
    files = publish.Files(wh)
    assert not files.db_wal.exists() and not files.work.exists()
    assert _published(wh) == (9, 54) and count(wh, "SELECT count(*) FROM runs") == 1


def test_a_reviewers_decision_asks_for_a_write_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tasks confirm|reject|done` and `memories keep|drop` write one row: they ask for the write in place."""
    from pipeline.cli.main import main
    from pipeline.errors import PipelineError

    asked: list[bool] = []
    real = db.write_session

    def recording(*args: object, **kwargs: object) -> object:
        asked.append(kwargs.get("in_place", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(db, "write_session", recording)
    wh = tmp_path / "w.duckdb"
    ingest_here(_home(tmp_path / "home", n=1), wh)
    for argv in (["tasks", "confirm", "task-0000000000"], ["memories", "keep", "mem-0000000000"]):
        try:
            main([*argv, "--db", str(wh), "--corpus", str(tmp_path / "corpus")])
        except PipelineError:
            pass  # no such task or memory: what matters is how the session was asked for
    assert asked[-2:] == [True, True]
