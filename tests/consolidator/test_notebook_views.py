"""The consolidate notebook's tables: what list_sessions and the answer say, shown without polars."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pipeline.consolidator import notebook_views as nv
from pipeline.consolidator import tools
from pipeline.consolidator.batch import run_batch
from pipeline.consolidator.batch_input import INPUT_DIR, BatchInput, snapshot
from tests.helpers import REPO

A1 = "7a6738d0-a8f0-4bb2-bf15-e9ff77de2e75"
A2 = "94d17458-e734-483d-b466-8395216e13a2"


@pytest.fixture(scope="module")
def source(samples_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> BatchInput:
    return snapshot(samples_warehouse, [A1, A2], tmp_path_factory.mktemp("views") / INPUT_DIR)


def test_the_manifest_table_is_what_list_sessions_says(source: BatchInput) -> None:
    table = nv.manifest_table([A1, A2], source)
    with source.reading() as con:
        entries = tools.list_sessions(con, [A1, A2])
    assert len(table) == 2 and table.columns[0] == "sessionId"
    frame = table.to_polars()
    assert frame["sessionId"].to_list() == [e["sessionId"] for e in entries]
    assert frame["lineCount"].to_list() == [e["lineCount"] for e in entries]
    assert frame["linkedMemories"].to_list() == [len(e["linkedMemories"]) for e in entries]
    assert frame.schema["prompts"] == pl.Int64 and frame.schema["firstAt"] == pl.String
    html = table._repr_html_()
    assert html.count("<tr>") == 3 and A1 in html and A1 in str(table)


def test_the_answer_tables_from_a_rules_batch(source: BatchInput, tmp_path: Path) -> None:
    result = run_batch([A1, A2], batch_input=source, engine="rules", out_dir=tmp_path / "b")
    assert result.answer is not None
    candidates = nv.candidates_table(result).to_polars()
    assert candidates["claim"].to_list() == [c.claim for c in result.answer.candidates]
    assert candidates["quotes"].to_list() == [len(c.evidence) for c in result.answer.candidates]
    commitments = nv.commitments_table(result).to_polars()
    assert commitments.height == len(result.answer.commitments)
    assert commitments.schema["confidence"] == pl.Float64 and commitments.schema["resolved"] == pl.Boolean
    tokens = nv.tokens_table(result).to_polars()
    assert tokens["outcome"].to_list() == [result.outcome] and tokens["submits"].to_list() == [result.run.used.submits]


def test_an_empty_table_keeps_its_columns_and_types() -> None:
    class NoAnswer:
        answer = None

    for table in (nv.candidates_table(NoAnswer()), nv.commitments_table(NoAnswer())):
        assert len(table) == 0 and table.columns
        assert table.to_polars().columns == table.columns and table.to_polars().height == 0
        assert "0 rows" in table._repr_html_() and table.columns[0] in str(table)


def test_cells_are_escaped_cut_and_typed() -> None:
    table = nv.Table.of({"text": str, "n": int, "share": float}, [
        {"text": "<script>alert('x')</script>", "n": 1, "share": None},
        {"text": "word " * 40, "n": None, "share": 0.5},
    ])
    html = table._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html and "null" in html
    cells = [len(c) for row in table._cells() for c in row]
    assert max(cells) == nv.TEXT_WIDTH and "…" in str(table)
    assert table.to_polars().schema == pl.Schema({"text": pl.String, "n": pl.Int64, "share": pl.Float64})
    with pytest.raises(TypeError, match="column 'n' holds str"):
        nv.Table.of({"n": int}, [{"n": "3"}])


def test_a_rules_batch_and_its_tables_never_import_polars(source: BatchInput, tmp_path: Path) -> None:
    # What the notebook's cells run, in a fresh interpreter: polars stays out of a batch's kernel.
    code = (
        "import sys\n"
        "from pipeline.consolidator import batch as consolidate, notebook_views\n"
        f"ids = [{A1!r}, {A2!r}]\n"
        f"source = consolidate.prepare_input(ids, batch_input={str(source.folder)!r})\n"
        "notebook_views.manifest_table(ids, source)\n"
        f"result = consolidate.run_batch(ids, batch_input=source, engine='rules', out_dir={str(tmp_path / 'b')!r})\n"
        "for view in (notebook_views.candidates_table, notebook_views.commitments_table, notebook_views.tokens_table):\n"
        "    view(result)._repr_html_()\n"
        "assert result.outcome == 'accepted', result.outcome\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'polars'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
