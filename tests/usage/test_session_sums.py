"""Each session's priced usage kept by every ingest (`pipeline.calls.session_sums`), and read by
`pipeline sessions` only while it still stands for the calls."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from pipeline.calls import rates, session_sums
from pipeline.usage import priced
from pipeline.usage.report import USAGE_SOURCES
from pipeline.warehouse import db
from pipeline.warehouse.ingest import ingest
from tests.helpers import SAMPLES


def _live(con) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted(priced.Selection(con, USAGE_SOURCES)._run(priced._PER_SESSION))


def _same(kept: list[tuple], live: list[tuple]) -> bool:
    """Equal, the cost to rounding (a sum's last bits depend on the order its rows came in)."""
    return len(kept) == len(live) and all(
        a[:11] == b[:11] and math.isclose(a[11], b[11], rel_tol=1e-12, abs_tol=1e-12) and a[12:] == b[12:]
        for a, b in zip(kept, live, strict=True))


@pytest.fixture
def warehouse(samples_warehouse: Path, tmp_path: Path) -> Path:
    path = tmp_path / "w.duckdb"
    shutil.copyfile(samples_warehouse, path)
    return path


def test_an_ingest_keeps_every_session_s_sums_and_sessions_reads_them(warehouse: Path) -> None:
    with db.reading(warehouse) as con:
        selection = priced.Selection(con, USAGE_SOURCES)
        assert session_sums.current(con, selection.prices, selection.sources)
        kept = sorted(selection.per_session())
        assert _same(kept, _live(con))
        assert con.execute("SELECT count(*) FROM session_usage").fetchone()[0] > 0


def test_calls_changed_behind_the_writer_s_back_are_summed_again(warehouse: Path) -> None:
    with db.writing(warehouse) as con:
        con.execute("UPDATE llm_calls SET completion_tokens = completion_tokens + 7 WHERE call_id = "
                    "(SELECT min(call_id) FROM llm_calls WHERE source = 'claude-code')")
    with db.reading(warehouse) as con:
        selection = priced.Selection(con, USAGE_SOURCES)
        assert not session_sums.current(con, selection.prices, selection.sources)
        assert sorted(selection.per_session()) == _live(con)  # the calls as they are, not the kept sums


def test_another_price_release_or_an_older_warehouse_sums_the_calls(warehouse: Path) -> None:
    with db.reading(warehouse) as con:
        selection = priced.Selection(con, USAGE_SOURCES)
        assert not session_sums.current(con, "genai_prices-0.0.1", selection.sources)
        assert not session_sums.current(con, selection.prices, ["claude-code"])  # other sources: not what is kept
    with db.writing(warehouse) as con:
        con.execute("DROP TABLE session_usage_state")
    with db.reading(warehouse) as con:
        selection = priced.Selection(con, USAGE_SOURCES)
        assert not session_sums.current(con, selection.prices, selection.sources)
        assert sorted(selection.per_session()) == _live(con)


def test_a_grown_session_is_summed_again_by_the_next_ingest(tmp_path: Path) -> None:
    source = tmp_path / "samples"
    shutil.copytree(SAMPLES, source)
    path = tmp_path / "w.duckdb"
    with db.writing(path) as con:
        ingest(con, [source])
        rates.store(con)
        before = con.execute("SELECT count(*) FROM llm_calls").fetchone()[0]
    grown = next(p for p in sorted(source.rglob("*.jsonl")) if '"usage"' in p.read_text())
    last_usage = next(line for line in reversed(grown.read_text().splitlines()) if '"usage"' in line)
    with grown.open("a") as f:
        f.write(last_usage.replace('"id":"msg_', '"id":"msg_grown') + "\n")
    with db.writing(path) as con:
        ingest(con, [source])
        rates.store(con)
        assert con.execute("SELECT count(*) FROM llm_calls").fetchone()[0] == before + 1  # the grown response
    with db.reading(path) as con:
        selection = priced.Selection(con, USAGE_SOURCES)
        assert session_sums.current(con, selection.prices, selection.sources)
        assert _same(sorted(selection.per_session()), _live(con))
