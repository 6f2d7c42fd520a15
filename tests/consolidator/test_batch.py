"""One batch end to end: engine choice, the artifact folder, its reader, and the `consolidate` verb."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pipeline.cli.main import main
from pipeline.consolidator import artifact, tools
from pipeline.consolidator.artifact import (
    ARTIFACT_FILES,
    ArtifactError,
    Budgets,
    IncompleteArtifactError,
    load_artifact,
)
from pipeline.consolidator.batch import batch_id_for, parse_session_ids, run_batch
from pipeline.consolidator.batch_input import INPUT_DIR
from pipeline.consolidator.context import Event
from pipeline.errors import UsageError
from pipeline.warehouse import db
from tests.fakes.openai_server import FakeOpenAI, call, text_turn, tool_turn

A1 = "7a6738d0-a8f0-4bb2-bf15-e9ff77de2e75"
A2 = "94d17458-e734-483d-b466-8395216e13a2"
X3 = "01a1a5e5-a07f-7a91-8385-d581c2b911c3"
B1 = "0d28e511-935f-4ed1-a0bd-fb881d624c7a"


def read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_rules_engine_writes_the_whole_folder(wh: Path, all_ids: list[str], tmp_path: Path) -> None:
    out = tmp_path / "batch"
    result = run_batch(all_ids, db=wh, engine="rules", out_dir=out)
    assert (result.outcome, result.exit_code, result.out_dir) == ("accepted", 0, out)
    assert sorted(p.name for p in out.iterdir()) == sorted([*ARTIFACT_FILES, INPUT_DIR])  # the input it read, too
    manifest = read(out / "manifest.json")
    assert (manifest["engine"], manifest["model"]) == ("rules", None)
    with db.reading(wh) as con:
        listed = tools.list_sessions(con, all_ids)
    assert manifest["sessions"] == [
        {k: e[k] for k in ("sessionId", "lineCount", "sizeBytes", "newFromLine")} for e in listed
    ]
    run = read(out / "run.json")
    assert run["outcome"] == "accepted" and run["engine"] == "rules"
    assert run["tokens"] == {"prompt": 0, "cached": None, "completion": 0} and run["cachedShare"] is None
    assert run["touchedSessionIds"] == all_ids == run["watermarkSessionIds"] == run["readSessionIds"]
    assert (out / "llm_calls.jsonl").read_text() == ""
    log = [json.loads(x) for x in (out / "tool_calls.jsonl").read_text().splitlines()]
    assert [t["session_id"] for t in log if t["name"] == "scan"] == all_ids
    assert read(out / "answer.json")["readSessionIds"] == all_ids
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left behind


def test_load_artifact_reads_the_folder_back(wh: Path, tmp_path: Path) -> None:
    result = run_batch([A1, A2], db=wh, engine="rules", out_dir=tmp_path / "b", run_id="r1", batch_id="b1")
    art = load_artifact(tmp_path / "b")
    assert art.complete and art.accepted
    assert art.manifest.run_id == "r1" and art.manifest.session_ids == [A1, A2]
    assert art.run is not None and art.run == result.run
    assert art.answer == result.answer
    assert art.touched_session_ids() == [A1, A2]
    assert [s.session_id for s in art.watermark_sessions()] == [A1, A2]
    row = art.tool_calls[0].db_row()
    assert row["arguments"] == json.dumps({"sessionId": A1}) and row["name"] == "scan"


def test_an_unfinished_folder_is_refused_by_the_reader(wh: Path, tmp_path: Path, engines: ModuleType) -> None:
    def crash(*_: Any) -> Any:
        raise KeyboardInterrupt

    engines.register("crashing", lambda options: engines.Prepared(crash))
    with pytest.raises(KeyboardInterrupt):
        run_batch([A1], db=wh, engine="crashing", out_dir=tmp_path / "b")
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [INPUT_DIR, "manifest.json"]
    with pytest.raises(IncompleteArtifactError, match="did not finish"):
        load_artifact(tmp_path / "b")
    assert load_artifact(tmp_path / "b", require_complete=False).run is None
    with pytest.raises(ArtifactError, match="no manifest"):
        load_artifact(tmp_path)


def test_run_json_is_written_last(wh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    real = artifact._write_atomic

    def spy(path: Path, text: str) -> None:
        order.append(path.name)
        real(path, text)

    monkeypatch.setattr(artifact, "_write_atomic", spy)
    run_batch([A1, A2], db=wh, engine="rules", out_dir=tmp_path / "b")
    assert order[0] == "manifest.json" and order[-1] == "run.json" and order.count("run.json") == 1


def test_an_engine_bug_still_ends_the_folder(wh: Path, tmp_path: Path, engines: ModuleType) -> None:
    def broken(*_: Any) -> Any:
        raise RuntimeError("boom")

    engines.register("broken", lambda options: engines.Prepared(broken))
    result = run_batch([A1], db=wh, engine="broken", out_dir=tmp_path / "b")
    assert result.outcome == "error" and "RuntimeError: boom" in (result.reason or "")
    assert read(tmp_path / "b" / "run.json")["outcome"] == "error"


def test_a_second_run_replaces_the_first(wh: Path, tmp_path: Path, fake: FakeOpenAI) -> None:
    out = tmp_path / "b"
    assert run_batch([A1, A2], db=wh, engine="rules", out_dir=out).accepted
    (out / "notebook.ipynb").write_text("{}")
    fake.add(text_turn("no"), text_turn("still no"), text_turn("no again"))
    result = run_batch([A1, A2], db=wh, engine="openai", model="m", base_url=fake.base_url, out_dir=out, max_retries=0)
    assert result.outcome == "refused"
    assert not (out / "answer.json").exists() and (out / "notebook.ipynb").exists()
    assert read(out / "manifest.json")["engine"] == "openai"


def test_default_folder_and_ids(wh: Path, tmp_path: Path) -> None:
    result = run_batch(f"{A1}, {A2},{A1}", db=wh, engine="rules", runs=tmp_path / "runs")
    day, run_id, batch_id = result.out_dir.relative_to(tmp_path / "runs").parts
    assert day == result.run.started_at.strftime("%Y-%m-%d")
    assert (run_id, batch_id) == (result.manifest.run_id, result.manifest.batch_id)
    assert batch_id == batch_id_for([A2, A1]) and result.manifest.session_ids == [A1, A2]
    # A folder laid out like the nightly's carries its own ids (the notebook only gets out_dir).
    nightly = tmp_path / "runs" / "2026-11-30" / "night-7" / "b03"
    again = run_batch([A1], db=wh, engine="rules", out_dir=nightly)
    assert (again.manifest.run_id, again.manifest.batch_id) == ("night-7", "b03")


def test_engine_choice(wh: Path, tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[Event] = []
    result = run_batch([A1], db=wh, out_dir=tmp_path / "auto-rules", on_event=events.append)
    assert result.manifest.engine == "rules"
    assert any("OPENAI_API_KEY is not set" in e.text for e in events)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("PIPELINE_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    fake.add(tool_turn(call("submit_answer", {"candidates": [], "commitments": [], "readSessionIds": []})))
    events.clear()
    result = run_batch([A1], db=wh, out_dir=tmp_path / "auto-openai", on_event=events.append, max_retries=0)
    assert (result.outcome, result.manifest.engine, result.manifest.model) == ("accepted", "openai", "env-model")
    assert fake.requests[0]["model"] == "env-model"
    assert fake.headers[0]["authorization"] == "Bearer sk-test-not-real"
    assert any("engine auto → openai" in e.text for e in events)
    for name in ("manifest.json", "run.json", "llm_calls.jsonl", "tool_calls.jsonl"):
        assert "sk-test-not-real" not in (tmp_path / "auto-openai" / name).read_text()


def test_wrong_invocations_write_nothing(wh: Path, tmp_path: Path) -> None:
    out = tmp_path / "b"
    with pytest.raises(UsageError, match="needs a model"):
        run_batch([A1], db=wh, engine="openai", out_dir=out, api_key="k")
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        run_batch([A1], db=wh, engine="openai", model="m", out_dir=out)
    with pytest.raises(UsageError, match="unknown session"):
        run_batch([A1, "nope"], db=wh, engine="rules", out_dir=out)
    with pytest.raises(UsageError, match="no sessions"):
        run_batch(" , ", db=wh, engine="rules", out_dir=out)
    with pytest.raises(UsageError, match="unknown engine"):
        run_batch([A1], db=wh, engine="magic", out_dir=out)
    with pytest.raises(UsageError, match="no warehouse"):
        run_batch([A1], db=tmp_path / "missing.duckdb", engine="rules", out_dir=out)
    assert not out.exists()


def test_budgets_from_notebook_parameters(wh: Path, tmp_path: Path) -> None:
    result = run_batch([A1], db=wh, engine="rules", out_dir=tmp_path / "b",
                       budgets={"max_tool_calls": 7, "max_submits": None, "max_tokens": 99, "max_seconds": None})
    assert result.run.budgets == Budgets(max_tool_calls=7, max_tokens=99)
    assert read(tmp_path / "b" / "run.json")["budgets"] == {
        "maxToolCalls": 7, "maxSubmits": 3, "maxTokens": 99, "maxSeconds": 1800.0}


def test_parse_session_ids() -> None:
    assert parse_session_ids("a, b,,a") == ["a", "b"]
    assert parse_session_ids(["a,b", "c", "b"]) == ["a", "b", "c"]
    assert parse_session_ids([]) == []


# --- the verb ----------------------------------------------------------------------------------


def test_the_verb_prints_where_it_wrote(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    code = main(["consolidate", "--sessions", f"{X3},{B1}", "--engine", "rules", "--out", str(out), "--db", str(wh)])
    captured = capsys.readouterr()
    assert code == 0 and captured.out.strip() == str(out)
    assert "engine rules" in captured.err and "accepted" in captured.err


def test_the_verb_json_and_pending(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPELINE_RUNS", str(tmp_path / "runs"))
    code = main(["consolidate", "--db", str(wh), "--json", "--pending", "--engine", "auto"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 0 and doc["outcome"] == "accepted" and doc["engine"] == "rules"
    with db.reading(wh) as con:
        pending = [e["sessionId"] for e in tools.list_sessions(con) if e["lineCount"] >= e["newFromLine"]]
    assert doc["sessionIds"] == pending and doc["candidates"] == 5 and doc["commitments"] == 9
    assert Path(doc["outDir"]).is_relative_to(tmp_path / "runs")
    assert "OPENAI_API_KEY is not set" in captured.err


def test_the_verb_exit_1_when_nothing_is_accepted(wh: Path, tmp_path: Path, fake: FakeOpenAI,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fake.add(text_turn("no"), text_turn("no"), text_turn("no"))
    code = main(["consolidate", "--sessions", A1, "--engine", "openai", "--model", "m", "--base-url", fake.base_url,
                 "--max-retries", "0", "--out", str(tmp_path / "b"), "--db", str(wh), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["outcome"] == "refused" and "tool" in doc["reason"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["consolidate", "--engine", "rules"], "one of the arguments --sessions --pending --input is required"),
        (["consolidate", "--sessions", A1, "--pending"], "not allowed with"),
        (["consolidate", "--sessions", A1, "--engine", "openai"], "needs a model"),
        (["consolidate", "--sessions", A1, "--engine", "rules", "--max-submits", "0"], "bad budget"),
        (["consolidate", "--sessions", "nope", "--engine", "rules"], "unknown session"),
        (["consolidate", "--sessions", A1, "--engine", "bogus"], "invalid choice"),
    ],
)
def test_the_verb_usage_errors_exit_2(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      argv: list[str], needle: str) -> None:
    try:
        code = main([*argv, "--out", str(tmp_path / "b"), "--db", str(wh)])
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"budgets": {"max_submits": 0}}, "bad budget: max-submits"),
        ({"budgets": {"max_seconds": -1.0, "max_tool_calls": None}}, "bad budget: max-seconds"),
        ({"max_retries": -1}, "--max-retries must be 0 or more"),
        ({"timeout": 0}, "--timeout above 0"),
    ],
)
def test_run_batch_itself_refuses_settings_out_of_range(wh: Path, tmp_path: Path, kwargs: dict[str, Any],
                                                        needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        run_batch([A1], db=wh, engine="rules", out_dir=tmp_path / "b", **kwargs)
    assert not (tmp_path / "b").exists()
