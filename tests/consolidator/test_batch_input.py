"""A batch's input folder: the same answers as the warehouse, and a batch that needs no warehouse at all."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.cli.main import main
from pipeline.consolidator import tools
from pipeline.consolidator.batch import run_batch
from pipeline.consolidator.batch_input import INPUT_DIR, BatchInput, snapshot, write_input, write_inputs
from pipeline.consolidator.quotes import WarehouseQuotes
from pipeline.errors import UsageError
from pipeline.warehouse import db
from tests.helpers import REPO, execute_notebook

A1 = "7a6738d0-a8f0-4bb2-bf15-e9ff77de2e75"
A2 = "94d17458-e734-483d-b466-8395216e13a2"


@pytest.fixture(scope="module")
def linked(samples_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples with a watermark and a linked memory on A1, as a night that landed would leave them."""
    wh = tmp_path_factory.mktemp("linked") / "w.duckdb"
    shutil.copyfile(samples_warehouse, wh)
    with db.writing(wh) as con:
        con.execute("INSERT INTO memories (memory_id, path, kind, claim) VALUES ('m1', 'semantic/x.md', 'semantic', 'A claim')")
        con.execute("INSERT INTO memories (memory_id, path, kind, claim) VALUES ('m2', 'semantic/y.md', 'semantic', 'Other')")
        con.execute("INSERT INTO memory_links VALUES ('m1', ?), ('m2', 'some-other-session')", [A1])
        con.execute('INSERT INTO watermarks (session_id, line_count, size_bytes, "at") VALUES (?, 10, 100, now())', [A1])
    return wh


@pytest.fixture(scope="module")
def source(linked: Path, tmp_path_factory: pytest.TempPathFactory) -> BatchInput:
    return snapshot(linked, [A1, A2], tmp_path_factory.mktemp("batch") / INPUT_DIR)


def test_list_sessions_from_the_input_is_what_the_warehouse_says(linked: Path, source: BatchInput) -> None:
    with db.reading(linked) as con:
        expected = tools.list_sessions(con, [A1, A2])
    with source.reading() as con:
        got = tools.list_sessions(con, [A1, A2])
        assert got == expected
        assert got[[e["sessionId"] for e in got].index(A1)]["newFromLine"] == 11
        assert got[[e["sessionId"] for e in got].index(A1)]["linkedMemories"] == [
            {"id": "m1", "kind": "semantic", "claim": "A claim"}]
        # only the batch: other sessions and unlinked memories are not in it
        assert con.execute("SELECT count(DISTINCT session_id) FROM lines").fetchall() == [(2,)]
        assert con.execute("SELECT memory_id FROM memories").fetchall() == [("m1",)]
        with pytest.raises(tools.ToolError):
            tools.list_sessions(con, ["7a6738d0-not-in-the-batch"])
    marker = json.loads((source.folder / "batch.json").read_text())
    assert marker["sessionIds"] == [A1, A2] and marker["rows"]["sessions"] == 2


def test_lines_start_at_line_1_even_for_a_session_read_before(linked: Path, source: BatchInput) -> None:
    with db.reading(linked) as con, source.reading() as icon:
        assert tools.read_lines(icon, A1, 1, 200) == tools.read_lines(con, A1, 1, 200)
        assert icon.execute("SELECT min(line_no) FROM lines WHERE session_id = ?", [A1]).fetchall() == [(1,)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sid=st.sampled_from([A1, A2]), start=st.integers(1, 80), length=st.integers(0, 50),
       width=st.integers(1, 500), cut=st.integers(0, 30))
def test_the_tools_answer_the_same_from_the_input(linked: Path, source: BatchInput, sid: str, start: int, length: int,
                                                   width: int, cut: int) -> None:
    with db.reading(linked) as con, source.reading() as icon:
        text = con.execute("SELECT text FROM lines WHERE session_id = ? ORDER BY line_no LIMIT 1 OFFSET ?",
                           [sid, start % 20]).fetchall()[0][0]
        phrase = text[cut : cut + 12] or "x"
        assert tools.search_transcript(icon, sid, phrase) == tools.search_transcript(con, sid, phrase)
        try:
            expected = tools.read_lines(con, sid, start, start + length, width)
        except tools.ToolError as exc:
            with pytest.raises(tools.ToolError, match=str(exc)[:20]):
                tools.read_lines(icon, sid, start, start + length, width)
        else:
            assert tools.read_lines(icon, sid, start, start + length, width) == expected
        quote = text[cut : cut + 40]
        assert WarehouseQuotes(icon).contains(sid, quote) == WarehouseQuotes(con).contains(sid, quote)


def test_a_night_s_batches_are_written_in_one_pass_each_with_exactly_its_sessions(linked: Path, tmp_path: Path) -> None:
    empty = "0c15144a-37fe-44f8-823f-b934d68893e0"  # a transcript file with no complete line yet
    plan = [([A1], tmp_path / "b1" / INPUT_DIR), ([A2, empty], tmp_path / "b2" / INPUT_DIR), ([empty], tmp_path / "b3" / INPUT_DIR)]
    with pytest.raises(ValueError, match="one batch only"), db.reading(linked) as con:
        write_inputs(con, plan)
    plan.pop()
    with db.reading(linked) as con:
        inputs = write_inputs(con, plan)
        for source, (ids, _) in zip(inputs, plan, strict=True):
            assert BatchInput.load(source.folder).session_ids == tuple(ids)
            with source.reading() as icon:
                assert tools.list_sessions(icon) == tools.list_sessions(con, ids)
                held = icon.execute("SELECT session_id, count(*) FROM lines GROUP BY ALL ORDER BY 1").fetchall()
            assert held == con.execute("SELECT session_id, count(*) FROM lines WHERE session_id IN (SELECT unnest(?)) "
                                       "GROUP BY ALL ORDER BY 1", [ids]).fetchall()
    assert not (tmp_path / ".input-staging").exists() and not list(tmp_path.glob("*/*.partial"))
    with db.reading(linked) as con:
        only_empty = write_input(con, [empty], tmp_path / "b4" / INPUT_DIR)
    with only_empty.reading() as icon:  # no line at all: the file is there, with its columns
        assert icon.execute("SELECT count(*) FROM lines").fetchall() == [(0,)]
        assert tools.list_sessions(icon)[0]["lineCount"] == 0


def test_a_batch_runs_from_its_input_with_no_warehouse_anywhere(linked: Path, source: BatchInput, tmp_path: Path) -> None:
    from_db = run_batch([A1, A2], db=linked, engine="rules", out_dir=tmp_path / "from-db", run_id="r", batch_id="b")
    gone = tmp_path / "nowhere.duckdb"  # the batch is never given a warehouse that exists
    alone = tmp_path / "alone"
    shutil.copytree(source.folder, alone / "input")
    from_input = run_batch([A1, A2], db=gone, batch_input=alone / "input", engine="rules", out_dir=alone,
                           run_id="r", batch_id="b")
    assert from_input.accepted and from_input.answer == from_db.answer
    assert from_input.manifest.sessions == from_db.manifest.sessions
    assert not gone.exists()


def test_a_loaded_input_runs_the_batch_on_the_views_it_already_built(source: BatchInput, tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    shutil.copytree(source.folder, alone / "input")
    by_folder = run_batch([A1, A2], batch_input=alone / "input", engine="rules", out_dir=tmp_path / "a",
                          run_id="r", batch_id="b")
    loaded = BatchInput.load(alone / "input")
    with loaded.reading() as con:  # as the notebook's manifest cell reads it first
        views = con.execute("SELECT count(*) FROM lines").fetchall()
    built = loaded.__dict__["_views"]
    by_object = run_batch([A1, A2], batch_input=loaded, engine="rules", out_dir=tmp_path / "b",
                          run_id="r", batch_id="b")
    assert by_object.accepted and by_object.answer == by_folder.answer
    assert by_object.manifest.sessions == by_folder.manifest.sessions
    assert loaded.__dict__["_views"] is built and views[0][0] > 0  # one views database for both
    with pytest.raises(UsageError, match="not in the batch input"):
        run_batch([A1, "nope"], batch_input=loaded, engine="rules", out_dir=tmp_path / "c")


def test_the_consolidate_verb_reads_an_input_folder(source: BatchInput, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["consolidate", "--input", str(source.folder), "--engine", "rules", "--out", str(tmp_path / "b"),
                 "--db", str(tmp_path / "nowhere.duckdb"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["outcome"] == "accepted" and doc["sessionIds"] == [A1, A2]


def test_unknown_sessions_are_refused_before_anything_is_written(linked: Path, tmp_path: Path,
                                                                 source: BatchInput) -> None:
    with pytest.raises(UsageError, match="nope"):
        snapshot(linked, [A1, "nope"], tmp_path / "b" / INPUT_DIR)
    assert not (tmp_path / "b").exists()
    with pytest.raises(UsageError, match="not in the batch input"):
        run_batch([A1, "nope"], batch_input=source.folder, engine="rules", out_dir=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_an_interrupted_input_is_never_taken_for_a_whole_one(linked: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "b" / INPUT_DIR
    snapshot(linked, [A1], folder)
    import pipeline.consolidator.batch_input as bi

    def killed(*_: object, **__: object) -> None:
        raise KeyboardInterrupt  # as a kill half-way through the files would stop it

    with db.reading(linked) as con:
        monkeypatch.setattr(bi.json, "dumps", killed)
        with pytest.raises(KeyboardInterrupt):
            write_input(con, [A1, A2], folder)
    assert BatchInput.load(folder).session_ids == (A1,)  # the earlier, complete input is still there
    shutil.rmtree(folder)
    with pytest.raises(UsageError, match=r"batch\.json is missing"):
        BatchInput.load(folder)


@pytest.mark.slow
def test_the_notebook_by_hand_with_db_and_with_an_input_folder(linked: Path, source: BatchInput, tmp_path: Path) -> None:
    notebook = REPO / "notebooks" / "consolidate.ipynb"
    by_hand = tmp_path / "by-hand"
    execute_notebook(str(notebook), str(tmp_path / "a.ipynb"), cwd=str(REPO), kernel_name="python3", progress_bar=False,
                     parameters={"db": str(linked), "session_ids": f"{A1},{A2}", "engine": "rules", "out_dir": str(by_hand)})
    assert json.loads((by_hand / "run.json").read_text())["outcome"] == "accepted"
    assert BatchInput.load(by_hand / INPUT_DIR).session_ids == (A1, A2)  # it took its own copy first
    planned = tmp_path / "planned"
    execute_notebook(str(notebook), str(tmp_path / "b.ipynb"), cwd=str(REPO), kernel_name="python3", progress_bar=False,
                     parameters={"db": str(tmp_path / "nowhere.duckdb"), "batch_input": str(source.folder),
                                 "session_ids": [A1, A2], "engine": "rules", "out_dir": str(planned)})
    assert json.loads((planned / "answer.json").read_text()) == json.loads((by_hand / "answer.json").read_text())
    assert not (tmp_path / "nowhere.duckdb").exists()
