"""The helper that writes an ingest's pages back while it runs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pipeline.warehouse import db, ingest, writeback
from tests.helpers import write_jsonl


def test_the_file_is_synced_while_the_block_runs_and_the_helper_ends_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "w.bin"
    path.write_bytes(b"x" * 4096)
    synced: list[int] = []
    monkeypatch.setattr(writeback, "INTERVAL_SECONDS", 0.01)
    monkeypatch.setattr(writeback, "_sync", lambda fd: synced.append(fd))
    before = threading.active_count()
    with writeback.background_writeback(path):
        deadline = time.monotonic() + 5
        while len(synced) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert threading.active_count() == before + 1
    assert len(synced) >= 3
    assert threading.active_count() == before  # joined, and its descriptor closed
    count = len(synced)
    time.sleep(0.05)
    assert len(synced) == count


def test_nothing_runs_for_a_database_in_memory_or_a_missing_file(tmp_path: Path) -> None:
    before = threading.active_count()
    for path in (None, tmp_path / "missing.duckdb"):
        with writeback.background_writeback(path):
            assert threading.active_count() == before


def test_an_ingest_writes_back_the_file_it_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files: list[Path | None] = []
    real = writeback.background_writeback

    def recording(path: Path | None):  # type: ignore[no-untyped-def]
        files.append(path)
        return real(path)

    monkeypatch.setattr(ingest, "background_writeback", recording)
    src = write_jsonl(tmp_path / "src" / "S1.jsonl", [{"type": "user", "sessionId": "S1", "message": {"content": "hi"}}])
    with db.writing(tmp_path / "w.duckdb") as con:
        ingest.ingest(con, [src])
        assert con.execute("SELECT count(*) FROM lines").fetchall() == [(1,)]
    assert files == [tmp_path / "w.duckdb.work"]
