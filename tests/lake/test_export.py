"""pipeline export: the lake reads back the same from DuckDB, polars and pyarrow, and a second
export writes only what changed, whatever a crash left behind."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import shutil
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.cli.main import main
from pipeline.consolidator import tools
from pipeline.lake import export as lake
from pipeline.lake import manifest as mf
from pipeline.lake import store as lake_store
from pipeline.warehouse import db, hosts, ingest
from tests.helpers import SAMPLES, write_jsonl

PHRASES = ["ModuleNotFoundError", "connection refused", "pytest", "No module named 'respx'", "Traceback"]
HIVE = pa.schema([("source", pa.string()), ("day", pa.date32())])


def _export(db_file: Path, to: str, **kw: Any) -> lake.ExportReport:
    return lake.export_lake(db_file, to, **kw)


def _glob(root: Path, table: str) -> str:
    depth = 2 if table in ("sessions", "llm_calls", *lake.SESSION_TABLES) else 0
    return str(root / table / ("*/" * depth) / "*.parquet").replace("//", "/")


def _lake_rows(root: Path, table: str) -> list[tuple]:
    with hosts.borrowed() as con:
        con.execute("SET TimeZone = 'UTC'")
        select = ", ".join(f'"{c}"' for c in _COLUMNS[table])
        return sorted(con.execute(
            f"SELECT {select} FROM read_parquet(?, hive_partitioning = true)", [_glob(root, table)]
        ).fetchall(), key=repr)


_COLUMNS: dict[str, list[str]] = {}


def _warehouse_rows(db_file: Path, table: str) -> list[tuple]:
    with db.reading(db_file) as con:
        described = con.execute(f"DESCRIBE SELECT * FROM {table}").fetchall()
        _COLUMNS[table] = [r[0] for r in described]
        select = ", ".join(f'CAST("{n}" AS VARCHAR)' if t == "JSON" else f'"{n}"' for n, t, *_ in described)
        return sorted(con.execute(f"SELECT {select} FROM {table}").fetchall(), key=repr)


def assert_lake_matches(db_file: Path, root: Path) -> None:
    """Every exported table holds exactly the warehouse's rows, and the folders hold exactly the
    files the manifest lists."""
    for table in lake.TABLES:
        want = _warehouse_rows(db_file, table)
        if not want and not (root / table).exists():
            continue
        assert _lake_rows(root, table) == want, table
    manifest = mf.parse((root / mf.NAME).read_text(), "manifest")
    for table in lake.TABLES:
        on_disk = sorted(p.relative_to(root).as_posix() for p in (root / table).rglob("*.parquet")) if (root / table).exists() else []
        assert on_disk == sorted(mf.files_of(manifest, table)), table
    assert not (root / "_staging").exists() and not (root / "_trash").exists()


@pytest.fixture
def lake_db(samples_copy: Path) -> Path:
    return samples_copy


@pytest.fixture(scope="module")
def exported(samples_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lake") / "lake"
    report = _export(samples_warehouse, str(root))
    assert report.files_written > 0
    return root


# -- the same answers from any engine ------------------------------------------------------------

def _line_counts_warehouse(db_file: Path) -> dict[str, int]:
    with db.reading(db_file) as con:
        return dict(con.execute("SELECT session_id, count(*) FROM lines GROUP BY 1").fetchall())


def test_line_counts_agree_in_duckdb_polars_and_pyarrow(samples_warehouse: Path, exported: Path) -> None:
    want = _line_counts_warehouse(samples_warehouse)
    assert want and sum(want.values()) > 100

    con = duckdb.connect()
    got_duck = dict(con.execute(
        "SELECT session_id, count(*) FROM read_parquet(?, hive_partitioning = true) GROUP BY 1",
        [str(exported / "lines" / "**" / "*.parquet")],
    ).fetchall())
    got_polars = dict(
        pl.scan_parquet(str(exported / "lines" / "**" / "*.parquet"), hive_partitioning=True)
        .group_by("session_id").len().collect().iter_rows()
    )
    table = ds.dataset(exported / "lines", format="parquet", partitioning=ds.partitioning(HIVE, flavor="hive")).to_table(
        columns=["session_id"])
    got_arrow = {r["session_id"]: r["count_all"] for r in table.group_by("session_id").aggregate([([], "count_all")]).to_pylist()}
    assert got_duck == want
    assert got_polars == want
    assert got_arrow == want


def _hits(rows: list[tuple[str, int, str]], phrase: str) -> list[tuple[str, int, int]]:
    """Occurrences as `pipeline search` counts them: non-overlapping, left to right, 1-based columns."""
    out = []
    for sid, line_no, text in rows:
        start = text.find(phrase)
        while start >= 0:
            out.append((sid, line_no, start + 1))
            start = text.find(phrase, start + len(phrase))
    return sorted(out)


def test_search_hits_agree_with_pipeline_search(samples_warehouse: Path, exported: Path) -> None:
    with db.reading(samples_warehouse) as con:
        ids = [e["sessionId"] for e in tools.list_sessions(con)]
        want = {
            phrase: sorted((sid, h["line"], h["column"]) for sid in ids
                           for h in tools.search_transcript(con, sid, phrase, max_hits=10_000)["hits"])
            for phrase in PHRASES
        }
    assert sum(len(v) for v in want.values()) > 10
    pattern = str(exported / "lines" / "**" / "*.parquet")
    con = duckdb.connect()
    dataset = ds.dataset(exported / "lines", format="parquet", partitioning=ds.partitioning(HIVE, flavor="hive"))
    for phrase in PHRASES:
        duck = con.execute(
            "SELECT session_id, line_no, text FROM read_parquet(?, hive_partitioning = true) WHERE contains(text, ?)",
            [pattern, phrase]).fetchall()
        polars_rows = (pl.scan_parquet(pattern, hive_partitioning=True)
                       .filter(pl.col("text").str.contains(phrase, literal=True))
                       .select("session_id", "line_no", "text").collect().rows())
        arrow_rows = [tuple(r.values()) for r in dataset.to_table(
            columns=["session_id", "line_no", "text"], filter=pc.match_substring(ds.field("text"), phrase)).to_pylist()]
        assert _hits(duck, phrase) == want[phrase], phrase
        assert _hits(polars_rows, phrase) == want[phrase], phrase
        assert _hits(arrow_rows, phrase) == want[phrase], phrase


def test_cached_share_per_day_agrees(samples_warehouse: Path, exported: Path) -> None:
    with db.reading(samples_warehouse) as con:
        want = {d: round(s, 9) for d, s in con.execute(
            """SELECT CAST(timezone('UTC', "at") AS DATE), sum(cached_tokens) / sum(prompt_tokens)
               FROM usage WHERE "at" IS NOT NULL GROUP BY 1""").fetchall()}
    assert len(want) > 5
    pattern = str(exported / "llm_calls" / "**" / "*.parquet")
    duck = {d: round(s, 9) for d, s in duckdb.connect().execute(
        """SELECT day, sum(cached_tokens) / sum(prompt_tokens) FROM read_parquet(?, hive_partitioning = true)
           WHERE source IN ('claude-code', 'codex') AND day IS NOT NULL GROUP BY day""", [pattern]).fetchall()}
    polars = {d: round(s, 9) for d, s in (
        pl.scan_parquet(pattern, hive_partitioning=True)
        .filter(pl.col("source").is_in(["claude-code", "codex"]) & pl.col("day").is_not_null())
        .group_by("day").agg(pl.col("cached_tokens").sum() / pl.col("prompt_tokens").sum())
        .collect().iter_rows())}
    table = ds.dataset(exported / "llm_calls", format="parquet", partitioning=ds.partitioning(HIVE, flavor="hive")).to_table(
        filter=pc.is_in(ds.field("source"), pa.array(["claude-code", "codex"])) & ~pc.is_null(ds.field("day")))
    sums = table.group_by("day").aggregate([("cached_tokens", "sum"), ("prompt_tokens", "sum")]).to_pylist()
    arrow = {r["day"]: round(r["cached_tokens_sum"] / r["prompt_tokens_sum"], 9) for r in sums}
    assert duck == want
    assert polars == want
    assert arrow == want


def test_every_table_keeps_the_warehouse_columns_and_types(samples_warehouse: Path, exported: Path) -> None:
    assert_lake_matches(samples_warehouse, exported)
    con = duckdb.connect()
    with db.reading(samples_warehouse) as wcon:
        for table in ("sessions", "lines", "llm_calls", "messages", "tool_results"):
            want = {n: "VARCHAR" if t == "JSON" else t for n, t, *_ in wcon.execute(f"DESCRIBE SELECT * FROM {table}").fetchall()}
            got = {n: t for n, t, *_ in con.execute("DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = true)",
                                                    [_glob(exported, table)]).fetchall()}
            assert got.pop("day") == "DATE"
            if "source" not in want:  # the partition column; llm_calls has its own `source`, kept in the path
                assert got.pop("source") == "VARCHAR"
            assert got == want, table


def test_a_session_lives_in_the_partition_of_its_format_and_first_day(samples_warehouse: Path, exported: Path) -> None:
    with db.reading(samples_warehouse) as con:
        want = {sid: (fmt, day) for sid, fmt, day in con.execute(
            "SELECT session_id, format, CAST(timezone('UTC', first_at) AS DATE) FROM sessions").fetchall()}
    got = dict(duckdb.connect().execute(
        "SELECT DISTINCT session_id, (source, day) FROM read_parquet(?, hive_partitioning = true)",
        [_glob(exported, "sessions")]).fetchall())
    assert got == want
    assert any(day is None for _, day in want.values())  # a plain JSONL session without timestamps
    assert (exported / "lines" / "source=claude-code" / f"day={lake.HIVE_NULL}").is_dir()


# -- incremental ---------------------------------------------------------------------------------

def _append(path: Path, n: int, day: str = "2026-11-20") -> None:
    sid = path.stem
    with path.open("a", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"type": "user", "sessionId": sid, "timestamp": f"{day}T10:00:{i % 60:02d}.000Z",
                                 "message": {"role": "user", "content": f"appended line {i} of {sid}"}}) + "\n")


@pytest.fixture
def own_samples(tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the sample transcripts and a warehouse of them, to grow and rewrite."""
    src = tmp_path / "samples"
    shutil.copytree(SAMPLES, src, ignore=shutil.ignore_patterns("*.py", "*.json", "*.md"))
    db_file = tmp_path / "w.duckdb"
    _ingest(db_file, src)
    return src, db_file


def _ingest(db_file: Path, src: Path) -> None:
    with db.writing(db_file) as con:
        assert not ingest.ingest(con, [src]).errors


def test_a_second_export_with_nothing_new_writes_nothing(own_samples: tuple[Path, Path], tmp_path: Path) -> None:
    _, db_file = own_samples
    root = tmp_path / "lake"
    _export(db_file, str(root))
    before = (root / mf.NAME).read_text()
    again = _export(db_file, str(root))
    assert again.to_json()["unchanged"] and again.files_written == 0
    assert (root / mf.NAME).read_text() == before


def test_grown_sessions_add_only_their_new_lines(own_samples: tuple[Path, Path], tmp_path: Path) -> None:
    src, db_file = own_samples
    root = tmp_path / "lake"
    _export(db_file, str(root))
    files = sorted(src.rglob("*.jsonl"))
    _append(files[0], 7)
    _append(files[1], 3)
    _ingest(db_file, src)
    report = _export(db_file, str(root))
    lines = report.tables["lines"]
    assert lines.rows_written == 10
    assert lines.partitions_rewritten == 0 and lines.partitions_appended >= 1
    assert report.tables["messages"].rows_written == 10
    assert report.tables["llm_calls"].files_written == 0
    assert_lake_matches(db_file, root)


def test_a_rewritten_session_rewrites_its_partitions_and_moves_with_its_first_day(
    own_samples: tuple[Path, Path], tmp_path: Path
) -> None:
    src, db_file = own_samples
    root = tmp_path / "lake"
    _export(db_file, str(root))
    target = next(p for p in sorted(src.rglob("*.jsonl")) if "claude" in str(p) and p.stat().st_size > 2000)
    target.write_text("")  # rewritten: new content whose first day is another
    _append(target, 5, day="2026-09-01")
    _ingest(db_file, src)
    report = _export(db_file, str(root))
    assert report.tables["lines"].partitions_rewritten >= 1
    assert (root / "lines" / "source=claude-code" / "day=2026-09-01").is_dir()
    assert_lake_matches(db_file, root)


def test_a_partition_with_many_files_is_compacted(own_samples: tuple[Path, Path], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    src, db_file = own_samples
    monkeypatch.setattr(lake, "MAX_FILES", 3)
    root = tmp_path / "lake"
    _export(db_file, str(root))
    target = sorted(src.rglob("*.jsonl"))[0]
    for _ in range(4):
        _append(target, 2)
        _ingest(db_file, src)
        _export(db_file, str(root))
    manifest = mf.parse((root / mf.NAME).read_text(), "m")
    assert max(len(p.files) for p in manifest.tables["lines"].values()) <= 3
    assert_lake_matches(db_file, root)


def test_since_leaves_older_partitions_alone(own_samples: tuple[Path, Path], tmp_path: Path) -> None:
    _, db_file = own_samples
    root = tmp_path / "lake"
    report = _export(db_file, str(root), since="2026-11-01")
    days = {p.name for p in (root / "lines" / "source=claude-code").iterdir()}
    assert days and all(d == f"day={lake.HIVE_NULL}" or d >= "day=2026-11-01" for d in days)
    assert report.since == "2026-11-01"
    _export(db_file, str(root))  # the rest, later
    assert_lake_matches(db_file, root)


# -- crash safety --------------------------------------------------------------------------------

def test_an_export_stopped_half_way_is_completed_by_the_next(own_samples: tuple[Path, Path], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    src, db_file = own_samples
    root = tmp_path / "lake"
    _export(db_file, str(root))
    for path in sorted(src.rglob("*.jsonl"))[:3]:
        _append(path, 4)
    _ingest(db_file, src)

    def boom(self: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(lake._Export, "export_llm_calls", boom)
    with pytest.raises(KeyboardInterrupt):
        _export(db_file, str(root))
    # What the stopped export published is whole: every file in the lake reads.
    for path in root.rglob("*.parquet"):
        pq.read_metadata(path)
    monkeypatch.undo()
    # A partition that lost a file the manifest lists (as after a kill during a swap) is rewritten.
    victim = next((root / "sessions").rglob("*.parquet"))
    victim.unlink()
    (root / "_staging" / "x").mkdir(parents=True)
    report = _export(db_file, str(root))
    assert report.leftovers_removed >= 1
    assert_lake_matches(db_file, root)


def test_without_an_atomic_swap_partitions_are_still_replaced(own_samples: tuple[Path, Path], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    src, db_file = own_samples
    root = tmp_path / "lake"
    _export(db_file, str(root))
    monkeypatch.setattr(lake_store, "_exchange", lambda a, b: False)
    target = sorted(src.rglob("*.jsonl"))[0]
    target.write_text("")
    _append(target, 3)
    _ingest(db_file, src)
    assert _export(db_file, str(root)).tables["lines"].partitions_rewritten >= 1
    assert_lake_matches(db_file, root)


def test_exchange_swaps_two_folders(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "new").write_text("1")
    (b / "old").write_text("2")
    if not lake_store._exchange(a, b):
        pytest.skip("this file system cannot swap folders atomically")
    assert [p.name for p in b.iterdir()] == ["new"] and [p.name for p in a.iterdir()] == ["old"]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["grow", "rewrite", "new"]), st.integers(0, 20), st.integers(1, 5)),
                      min_size=1, max_size=4))
def test_any_sequence_of_changes_leaves_the_lake_equal_to_the_warehouse(tmp_path_factory: pytest.TempPathFactory,
                                                                       steps: list[tuple[str, int, int]]) -> None:
    base = tmp_path_factory.mktemp("prop")
    src = base / "t"
    for i in range(3):
        write_jsonl(src / f"s{i}.jsonl", [{"type": "user", "sessionId": f"s{i}", "timestamp": f"2026-10-0{i + 1}T09:00:00Z",
                                           "message": {"role": "user", "content": f"hello {i}"}}])
    db_file = base / "w.duckdb"
    root = base / "lake"
    _ingest(db_file, src)
    _export(db_file, str(root))
    for op, which, n in steps:
        files = sorted(src.glob("*.jsonl"))
        path = files[which % len(files)]
        if op == "grow":
            _append(path, n)
        elif op == "rewrite":
            path.write_text("")
            _append(path, n, day=f"2026-09-{which % 28 + 1:02d}")
        else:
            _append(src / f"n{which}-{n}.jsonl", n)
        _ingest(db_file, src)
        _export(db_file, str(root))
        assert_lake_matches(db_file, root)


# -- row groups ----------------------------------------------------------------------------------

def test_one_sessions_lines_sit_in_few_row_groups(tmp_path: Path) -> None:
    src = tmp_path / "t"
    sizes = {"a": 5000, "b": 300, "c": 4500}
    for sid, n in sizes.items():
        write_jsonl(src / f"{sid}.jsonl", [{"type": "user", "sessionId": sid, "timestamp": "2026-10-01T09:00:00Z",
                                            "message": {"role": "user", "content": f"line {i} " + "x" * 50}} for i in range(n)])
    db_file = tmp_path / "w.duckdb"
    _ingest(db_file, src)
    root = tmp_path / "lake"
    _export(db_file, str(root))
    (path,) = (root / "lines").rglob("*.parquet")
    meta = pq.read_metadata(path)
    col = meta.schema.names.index("session_id")
    groups = [meta.row_group(i).column(col).statistics for i in range(meta.num_row_groups)]
    for earlier, later in itertools.pairwise(groups):
        assert earlier.max <= later.min  # sorted: min/max statistics skip every other session
    for sid, n in sizes.items():
        touched = sum(1 for s in groups if s.min <= sid <= s.max)
        assert touched <= math.ceil(n / lake.ROW_GROUP_ROWS) + 1, sid


# -- other file systems --------------------------------------------------------------------------

def test_a_file_url_works_like_a_path(samples_warehouse: Path, tmp_path: Path) -> None:
    root = tmp_path / "lake"
    _export(samples_warehouse, f"file://{root}")
    assert_lake_matches(samples_warehouse, root)


def test_an_fsspec_memory_lake_is_written_and_updated(own_samples: tuple[Path, Path]) -> None:
    import fsspec

    src, db_file = own_samples
    fs = fsspec.filesystem("memory")
    url = f"memory://lake-{dt.datetime.now().timestamp()}"
    try:
        _export(db_file, url)
        grown, *others = sorted(src.rglob("*.jsonl"))
        _append(grown, 6)
        target = next(p for p in others if p.stat().st_size > 2000)
        target.write_text("")
        _append(target, 2, day="2026-09-03")
        _ingest(db_file, src)
        report = _export(db_file, url)
        assert report.tables["lines"].rows_written >= 8
        lines = report.tables["lines"]
        assert lines.partitions_rewritten + lines.partitions_removed >= 1 and report.files_deleted >= 1
        root = fs._strip_protocol(url)
        manifest = mf.parse(fs.cat_file(f"{root}/{mf.NAME}").decode(), "m")
        for table in lake.TABLES:
            listed = sorted(mf.files_of(manifest, table))
            on_store = sorted(p[len(root) + 1:] for p in fs.find(f"{root}/{table}") if p.endswith(".parquet"))
            assert on_store == listed, table
        dataset = ds.dataset(f"{root}/lines", filesystem=fs, format="parquet",
                             partitioning=ds.partitioning(HIVE, flavor="hive"))
        counts = {r["session_id"]: r["count_all"] for r in dataset.to_table(columns=["session_id"])
                  .group_by("session_id").aggregate([([], "count_all")]).to_pylist()}
        assert counts == _line_counts_warehouse(db_file)
    finally:
        fs.rm(fs._strip_protocol(url), recursive=True)


# -- the command ---------------------------------------------------------------------------------

def test_cli_prints_one_json_document(samples_warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "lake"
    assert main(["export", "--db", str(samples_warehouse), "--to", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["filesWritten"] > 0 and doc["tables"]["lines"]["rowsWritten"] > 100
    assert main(["export", "--db", str(samples_warehouse), "--to", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unchanged"] is True


def test_cli_refuses_a_bad_date_and_a_file_as_the_lake(samples_warehouse: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--db", str(samples_warehouse), "--to", str(tmp_path / "l"), "--since", "yesterday", "--json"]) == 2
    assert "YYYY-MM-DD" in json.loads(capsys.readouterr().out)["error"]
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    assert main(["export", "--db", str(samples_warehouse), "--to", str(a_file)]) == 2
    assert "that is a file" in capsys.readouterr().err


def test_a_lake_with_a_foreign_manifest_is_refused(samples_warehouse: Path, tmp_path: Path) -> None:
    root = tmp_path / "lake"
    root.mkdir()
    (root / mf.NAME).write_text('{"format": 99}')
    with pytest.raises(Exception, match="format 99"):
        _export(samples_warehouse, str(root))
