"""One suffix → reader table for call-log files: `import-calls` and `cache-report --calls` read
every suffix of it, and decide a file's kind the same way."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.calls import files
from pipeline.cli.main import main
from pipeline.errors import UsageError
from pipeline.warehouse import db

# Two sessions of llm_calls rows: a cold start, then a hit, on either side of the cutover.
ROWS = [
    {"call_id": f"c{i}", "session_id": f"s{i // 2}", "at": f"2026-10-1{i // 2}T10:00:{30 * (i % 2):02d}Z",
     "model": "claude-sonnet-4", "prompt_tokens": 3000 + 100 * i, "cached_tokens": 0 if i % 2 == 0 else 2900,
     "completion_tokens": 40, "changed_sections": json.dumps(["date"]) if i == 2 else None}
    for i in range(4)
]


def write(path: Path) -> Path:
    kind = files.SUFFIXES[path.suffix]
    frame = pl.DataFrame(ROWS)
    if kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    elif kind == "parquet":
        frame.with_columns(pl.col("changed_sections").str.json_decode(pl.List(pl.String))).write_parquet(path)
    else:
        frame.write_csv(path, separator="\t" if kind == "tsv" else ",")
    return path


def test_every_kind_has_a_reader_for_both_verbs() -> None:
    assert set(files.READERS) == {"jsonl", "csv", "tsv", "parquet"}
    assert {".jsonl", ".json", ".csv", ".tsv", ".parquet", ".pq", ".parq"} <= set(files.SUFFIXES)
    for suffix, kind in files.SUFFIXES.items():
        assert suffix in files.READERS[kind].suffixes


@pytest.mark.parametrize("suffix", sorted(files.SUFFIXES))
def test_import_calls_and_cache_report_read_every_suffix(suffix: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / f"calls{suffix}")
    wh = tmp_path / "w.duckdb"
    assert main(["import-calls", str(path), "--format", "columns", "--name", "h", "--db", str(wh), "--json"]) == 0
    imported = json.loads(capsys.readouterr().out)
    assert (imported["new"], imported["badRows"], imported["readAs"]) == (4, 0, files.SUFFIXES[suffix])
    with db.reading(wh) as con:
        assert con.execute("SELECT count(*), sum(cached_tokens) FROM llm_calls").fetchall() == [(4, 5800)]
        assert con.execute("SELECT changed_sections FROM llm_calls WHERE call_id LIKE '%c2'").fetchall() == [(["date"],)]

    assert main(["cache-report", "--calls", str(path), "--cutover", "2026-10-11", "--bootstrap", "20", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["calls"], report["sessions"]) == (4, 2)
    assert report["causes"]["hit"]["calls"] == 2 and report["causes"]["cold_start"]["calls"] == 2


def test_both_verbs_tell_a_parquet_file_by_its_content(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "calls.parquet").rename(tmp_path / "calls.export")
    assert files.kind_of(path) == "parquet"
    assert main(["import-calls", str(path), "--format", "columns", "--db", str(tmp_path / "w.duckdb"), "--json"]) == 0
    assert main(["cache-report", "--calls", str(path), "--cutover", "2026-10-11", "--bootstrap", "20", "--json"]) == 0
    capsys.readouterr()


def test_a_file_neither_verb_can_read_is_refused_the_same_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    array = tmp_path / "calls.json"
    array.write_text(json.dumps(ROWS))
    for argv in (["import-calls", str(array), "--format", "columns", "--db", str(tmp_path / "w.duckdb")],
                 ["cache-report", "--calls", str(array), "--cutover", "2026-10-11"]):
        assert main(argv) == 2
        assert "holds one JSON array" in capsys.readouterr().err
    (tmp_path / "broken.parq").write_bytes(b"PAR1 not really")
    with pytest.raises(UsageError, match=r"cannot read .*broken\.parq as PARQUET"):
        files.scan(tmp_path / "broken.parq")
