"""The engine registry: built-in engines, an engine a test registers, and unknown names."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from pipeline.cli.main import build_parser, main
from pipeline.consolidator.artifact import load_artifact
from pipeline.consolidator.batch import run_batch
from pipeline.consolidator.context import BatchContext, EngineResult, Recorder
from pipeline.consolidator.contract import check_answer
from pipeline.consolidator.engine import EngineOptions, Prepared
from pipeline.consolidator.quotes import WarehouseQuotes
from pipeline.errors import UsageError
from tests.helpers import candidate, occurrences

PATTERN = "module-not-found"
CLAIM = "A missing module means the venv was not activated"


def scripted(ctx: BatchContext, recorder: Recorder) -> EngineResult:
    """An engine that reads each session once and submits one fixed candidate."""
    for sid in ctx.session_ids:
        recorder.tool("read_lines", {"sessionId": sid, "start": 1, "end": 3}, session_id=sid, ok=True, result_chars=3)
        ctx.emit("tool_call", f"read {sid}")
    answer = {"candidates": [candidate(PATTERN, CLAIM)], "commitments": [], "readSessionIds": list(ctx.session_ids)}
    with ctx.source.reading() as con:  # the batch's input, never the warehouse
        result = check_answer(answer, ctx.session_ids, WarehouseQuotes(con))
    if not result.accepted:
        recorder.refusal(1, result.problems)
        return EngineResult("refused", "scripted answer refused", submits=1)
    return EngineResult("accepted", "scripted answer", answer=result.answer, submits=1)


def pattern_sessions() -> list[str]:
    return list(dict.fromkeys(o["sessionId"] for o in occurrences(PATTERN)[:2]))


def test_the_built_in_engines_are_registered() -> None:
    from pipeline.consolidator import engine

    assert engine.engine_choices()[:3] == ("auto", "rules", "openai")
    assert engine.get_engine("rules") is engine.rules_engine
    assert engine.resolve_engine("auto", api_key=None)[0] == "rules"
    assert engine.resolve_engine("auto", api_key="k")[0] == "openai"


def test_an_unknown_engine_is_a_usage_error_naming_the_choices(wh: Path, tmp_path: Path, engines: ModuleType) -> None:
    engines.register("scripted", lambda options: Prepared(scripted))
    with pytest.raises(UsageError, match=r"unknown engine 'gpt'; choose one of auto, rules, openai, scripted"):
        engines.get_engine("gpt")
    with pytest.raises(UsageError, match="choose one of auto, rules, openai, scripted"):
        run_batch(pattern_sessions(), db=wh, engine="gpt", out_dir=tmp_path / "b")
    assert not (tmp_path / "b").exists()  # refused before anything was written


def test_a_name_that_cannot_be_an_engine_is_refused(engines: ModuleType) -> None:
    for name in ("auto", "", "two words"):
        with pytest.raises(ValueError, match="cannot name an engine"):
            engines.register(name, lambda options: Prepared(scripted))


def test_a_registered_engine_runs_a_batch(wh: Path, tmp_path: Path, engines: ModuleType) -> None:
    seen: list[EngineOptions] = []

    def make(options: EngineOptions) -> Prepared:
        seen.append(options)
        return Prepared(scripted, model="scripted-1")

    engines.register("scripted", make)
    ids = pattern_sessions()
    result = run_batch(ids, db=wh, engine="scripted", out_dir=tmp_path / "b", model="scripted-1", timeout=5)
    assert result.outcome == "accepted", result.reason
    assert seen[0].model == "scripted-1" and seen[0].timeout == 5
    art = load_artifact(tmp_path / "b")
    assert (art.manifest.engine, art.manifest.model) == ("scripted", "scripted-1")
    assert art.answer is not None and [c.claim for c in art.answer.candidates] == [CLAIM]
    assert art.touched_session_ids() == ids and [s.session_id for s in art.watermark_sessions()] == ids


def test_an_engine_refusing_its_options_stops_the_batch_before_it_writes(wh: Path, tmp_path: Path,
                                                                         engines: ModuleType) -> None:
    def picky(options: EngineOptions) -> Prepared:
        raise UsageError("the picky engine needs --model")

    engines.register("picky", picky)
    with pytest.raises(UsageError, match="picky engine needs"):
        run_batch(pattern_sessions(), db=wh, engine="picky", out_dir=tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_every_engine_option_takes_its_choices_from_the_registry(wh: Path, tmp_path: Path, engines: ModuleType,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    engines.register("scripted", lambda options: Prepared(scripted))
    parser = build_parser()
    verbs = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    with_engine = {name: next(a for a in p._actions if "--engine" in a.option_strings)
                   for name, p in verbs.items() if any("--engine" in a.option_strings for a in p._actions)}
    assert {"consolidate", "nightly", "eval"} <= set(with_engine)  # and any verb added later
    for action in with_engine.values():
        assert tuple(action.choices) == engines.engine_choices()
    # the verb runs a batch with it
    ids = ",".join(pattern_sessions())
    code = main(["consolidate", "--sessions", ids, "--engine", "scripted", "--db", str(wh),
                 "--out", str(tmp_path / "b"), "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["engine"] == "scripted"
    # and an unknown name is a usage error listing the choices
    with pytest.raises(SystemExit) as exit_info:
        main(["consolidate", "--sessions", ids, "--engine", "gpt", "--db", str(wh)])
    assert exit_info.value.code == 2
    assert "'auto', 'rules', 'openai', 'scripted'" in capsys.readouterr().err
