"""The consolidator's loop against what a small model on a local server does (llama.cpp + Qwen, seen on
`make bench-model`), replayed by the fake server: calls written in the reply's text, HTTP 500 for a
reply the server could not parse, usage reported only in llama.cpp's `timings`, the same search again
and again, a context window that fills, a reply slower than the timeout. Each must end in a stated
outcome (accepted, refused or budget), never in an error the loop could have avoided.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.main import main
from pipeline.consolidator.agent import MAX_REPEATS, SERVER_NUDGE
from pipeline.consolidator.artifact import Budgets
from pipeline.consolidator.batch import BatchResult, run_batch
from pipeline.consolidator.content_calls import parse_content_calls
from pipeline.consolidator.prompts import TOOL_NAMES
from pipeline.nightly.driver import BatchOutcome, NightlyOptions, batch_parameters
from tests.consolidator.test_agent import A1, A2, BATCH, good_answer, jsonl, reading_turns, submit
from tests.fakes.openai_server import (
    LLAMA_CPP_PARSE_ERROR,
    FakeOpenAI,
    HttpError,
    Raw,
    Turn,
    call,
    delayed,
    llama_cpp_parse_error,
    text_turn,
    tool_results,
    tool_turn,
)
from tests.helpers import copy_samples


@pytest.fixture(scope="module")
def wh(samples_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_samples(samples_warehouse, tmp_path_factory.mktemp("local"))


def run(fake: FakeOpenAI, wh: Path, tmp_path: Path, *, budgets: Budgets | None = None, max_retries: int = 0,
        timeout: float = 10.0, **options: Any) -> BatchResult:
    return run_batch(
        BATCH, db=wh, engine="openai", model="qwen-local", base_url=fake.base_url, api_key="test",
        out_dir=tmp_path / "out", budgets=budgets, max_retries=max_retries, timeout=timeout,
        run_id="run-local", batch_id="b01", **options,
    )


def run_json(result: BatchResult) -> dict[str, Any]:
    return json.loads((result.out_dir / "run.json").read_text())


# --- the request: what a local server is sent -----------------------------------------------------


def test_tool_choice_parallel_calls_and_reply_bound_are_sent_only_when_set(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    fake.add(submit(good_answer()))
    assert run(fake, wh, tmp_path / "plain").outcome == "accepted"
    assert not {"tool_choice", "parallel_tool_calls", "max_tokens"} & set(fake.requests[0])
    fake.add(submit(good_answer()))
    result = run(fake, wh, tmp_path / "local", tool_choice="required", parallel_tool_calls=False, context_tokens=32768)
    assert result.outcome == "accepted"
    body = fake.requests[1]
    assert (body["tool_choice"], body["parallel_tool_calls"], body["max_tokens"]) == ("required", False, 4096)
    fake.add(submit(good_answer()))
    run(fake, wh, tmp_path / "short", max_reply_tokens=700)
    assert fake.requests[2]["max_tokens"] == 700


def test_a_bad_option_is_a_usage_error_before_anything_is_written(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="tool-choice") as info:
        run(fake, wh, tmp_path, tool_choice="sometimes")
    assert type(info.value).__name__ == "UsageError" and not (tmp_path / "out").exists()


# --- calls written in the reply's text ------------------------------------------------------------


def test_calls_written_as_json_in_the_text_are_run(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    search = {"name": "search_transcript", "arguments": {"sessionId": A1, "phrase": "ModuleNotFoundError"}}
    fake.add(
        text_turn('{"name": "list_sessions", "arguments": {}}'),
        text_turn("Searching the first session.\n```json\n" + json.dumps(search, indent=2) + "\n```"),
        text_turn("<tool_call>\n" + json.dumps({"name": "search_transcript", "arguments": {"sessionId": A2, "phrase": "ModuleNotFoundError"}})
                  + "\n</tool_call>"),
        text_turn("```json\n" + json.dumps(good_answer()) + "\n```"),  # the answer alone: submit_answer
    )
    result = run(fake, wh, tmp_path, tool_choice="required")
    assert (result.outcome, result.reason) == ("accepted", "answer accepted on attempt 1")
    log = jsonl(result.out_dir / "tool_calls.jsonl")
    assert [(t["name"], t["session_id"], t["ok"]) for t in log] == [
        ("list_sessions", None, True), ("search_transcript", A1, True), ("search_transcript", A2, True),
        ("submit_answer", None, True)]
    assert run_json(result)["used"]["contentToolCalls"] == 4 and run_json(result)["used"]["nudges"] == 0
    assert result.run.touched_session_ids == [A1, A2]
    # The history shows each reply as the call it was, answered by a tool message with the same id.
    messages = fake.requests[-1]["messages"]
    replies = [m for m in messages if m["role"] == "assistant"]
    assert all(m["content"] is None and len(m["tool_calls"]) == 1 for m in replies)
    ids = [m["tool_calls"][0]["id"] for m in replies]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ids
    assert replies[1]["tool_calls"][0]["function"] == {"name": "search_transcript",
                                                       "arguments": json.dumps(search["arguments"])}


def test_prose_and_broken_json_are_nudged_with_the_fault_named(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    cut = '```json\n{"candidates": [{"kind": "error_pattern", "claim": "Tests fail'
    fake.add(Turn(content=cut, finish_reason="length"), text_turn('{"answer": "the sessions look fine"}'),
             *reading_turns(), submit(good_answer()))
    result = run(fake, wh, tmp_path)
    assert result.outcome == "accepted" and result.run.used.nudges == 2
    first_nudge = fake.requests[1]["messages"][-1]["content"]
    assert first_nudge.startswith("Your reply called no tool") and "line 1" in first_nudge
    second_nudge = fake.requests[2]["messages"][-1]["content"]
    assert "names no tool" in second_nudge and "list_sessions" in second_nudge


def test_a_model_that_never_calls_a_tool_is_refused(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    fake.add(*[text_turn("I have reviewed the sessions; they look fine.")] * 3)
    result = run(fake, wh, tmp_path)
    assert result.outcome == "refused" and "no usable tool call in 3 replies in a row" in (result.reason or "")
    assert fake.remaining == 0 and "answer.json" not in {p.name for p in result.out_dir.iterdir()}


@pytest.mark.parametrize(
    ("content", "names"),
    [
        ('{"name": "read_lines", "arguments": "{\\"sessionId\\": \\"x\\", \\"start\\": 1, \\"end\\": 2}"}', ["read_lines"]),
        ('{"name": "read_lines", "parameters": {"sessionId": "x", "start": 1, "end": 2}}', ["read_lines"]),
        ('{"tool_call": {"name": "list_sessions", "arguments": {}}}', ["list_sessions"]),
        ('{"tool_calls": [{"name": "list_sessions"}, {"function": {"name": "list_sessions", "arguments": {}}}]}',
         ["list_sessions", "list_sessions"]),
        ('<tool_call>{"name": "list_sessions"}</tool_call>\n<tool_call>{"name": "submit_answer", "arguments": {}}</tool_call>',
         ["list_sessions", "submit_answer"]),
        ('Here it is: {"readSessionIds": []} as asked.', ["submit_answer"]),
        ('{"name": "run_shell", "arguments": {"cmd": "ls"}}', []),
        ('{"candidates": [], "summary": "x"}', []),
        ("Let me look at the sessions first.", []),
        ("", []),
    ],
)
def test_which_texts_are_read_as_calls(content: str, names: list[str]) -> None:
    assert [c.name for c in parse_content_calls(content, TOOL_NAMES).calls] == names


# --- what the server does -----------------------------------------------------------------------


def test_http_500_for_a_reply_the_server_could_not_parse_is_asked_again(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    fake.add(tool_turn(call("list_sessions")), llama_cpp_parse_error(), *reading_turns()[1:], submit(good_answer()))
    result = run(fake, wh, tmp_path, max_retries=2, tool_choice="required")
    assert result.outcome == "accepted" and result.run.used.nudges == 1
    assert len(fake.requests) == 4  # x-should-retry: false, so the client did not retry it itself
    after = fake.requests[2]["messages"]
    assert after[-1] == {"role": "user", "content": SERVER_NUDGE} and after[-2]["role"] == "tool"
    assert fake.requests[2]["tool_choice"] == "required"


def test_http_500_every_time_ends_refused_with_the_servers_words(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    fake.add(*[llama_cpp_parse_error()] * 3)
    result = run(fake, wh, tmp_path)
    assert result.outcome == "refused"
    assert "HTTP 500" in (result.reason or "") and LLAMA_CPP_PARSE_ERROR in (result.reason or "")


def test_the_servers_own_too_long_refusal_ends_the_batch_with_budget(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    fake.add(tool_turn(call("list_sessions")),
             HttpError(400, "the request exceeds the available context size, try increasing it",
                       error_type="exceed_context_size_error"))
    result = run(fake, wh, tmp_path)
    assert result.outcome == "budget"
    assert "context budget spent" in (result.reason or "") and "--context-tokens" in (result.reason or "")


def test_a_reply_slower_than_the_timeout_ends_the_batch_with_budget(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    fake.add(delayed(2.0, tool_turn(call("list_sessions"))))
    result = run(fake, wh, tmp_path, timeout=0.3)
    assert result.outcome == "budget" and "did not answer within 0.3s" in (result.reason or "")


def test_an_unreachable_endpoint_is_still_an_error(wh: Path, tmp_path: Path) -> None:
    with FakeOpenAI() as gone:
        url = gone.base_url
    result = run_batch(BATCH, db=wh, engine="openai", model="m", base_url=url, api_key="t", out_dir=tmp_path / "o",
                       max_retries=0, timeout=2.0)
    assert result.outcome == "error" and "could not reach" in (result.reason or "")


# --- usage as llama.cpp reports it ---------------------------------------------------------------


def test_usage_without_cache_details_is_null_and_timings_fill_it(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    fake.add(Turn(tool_calls=(call("list_sessions"),), prompt_tokens=500, cached_tokens=0, cache_details=False),
             Turn(tool_calls=(call("search_transcript", {"sessionId": A1, "phrase": "uv"}),), prompt_tokens=900,
                  cached_tokens=480, cache_details=False, timings=True),
             Turn(tool_calls=(call("submit_answer", good_answer()),), prompt_tokens=1300, cached_tokens=880,
                  usage=False, timings=True))
    result = run(fake, wh, tmp_path)
    assert result.outcome == "accepted"
    calls = jsonl(result.out_dir / "llm_calls.jsonl")
    assert [(c["prompt_tokens"], c["cached_tokens"]) for c in calls] == [(500, None), (900, 480), (1300, 880)]
    assert "prompt_ms" not in calls[0] and [c["prompt_ms"] for c in calls[1:]] == [420.0, 420.0]
    assert calls[2]["completion_tokens"] is None
    assert run_json(result)["tokens"]["cached"] == 1360


# --- a model going round in circles, and a context window that fills -----------------------------


def test_the_same_search_again_and_again_ends_with_budget(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    same = call("search_transcript", {"sessionId": A1, "phrase": "pytest"})
    fake.add(*[tool_turn(same)] * (MAX_REPEATS + 1), submit(good_answer()))
    result = run(fake, wh, tmp_path)
    assert result.outcome == "budget" and "repeat budget spent" in (result.reason or "")
    log = jsonl(result.out_dir / "tool_calls.jsonl")
    assert [t["ok"] for t in log] == [True] + [False] * MAX_REPEATS
    assert "already called with exactly these arguments (tool call 1)" in tool_results(fake.requests[2])[-1]
    assert result.run.used.repeated_calls == MAX_REPEATS and fake.remaining == 1


def test_the_same_refused_answer_many_times_in_one_reply_costs_one_attempt(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    """Seen on the bench: the 0.5B model wrote one placeholder answer nine times in a reply."""
    placeholder = {"candidates": ["<candidates here>"], "commitments": [], "readSessionIds": []}
    fake.add(text_turn("\n".join(f"<tool_call>{json.dumps({'name': 'submit_answer', 'arguments': placeholder})}</tool_call>"
                                 for _ in range(9))))
    result = run(fake, wh, tmp_path)
    assert result.outcome == "budget" and "repeat budget spent" in (result.reason or "")
    assert result.run.attempts == 1 and result.run.used.repeated_calls == MAX_REPEATS
    assert len(json.loads((result.out_dir / "problems.json").read_text())) == 1
    log = jsonl(result.out_dir / "tool_calls.jsonl")
    assert [t["name"] for t in log] == ["submit_answer"] * (1 + MAX_REPEATS) and not any(t["ok"] for t in log)


def test_a_refused_answer_sent_again_after_reading_is_not_checked_again(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    bad = {"candidates": [], "commitments": [], "readSessionIds": ["nope"]}
    fake.add(submit(bad), *reading_turns(), submit(bad), submit(good_answer()))
    result = run(fake, wh, tmp_path, budgets=Budgets(max_submits=2))
    assert result.outcome == "accepted" and result.run.attempts == 2
    again = json.loads(tool_results(fake.requests[4])[-1])["error"]
    assert "already submitted exactly like this and refused" in again and "(tool call 1)" in again


def test_a_result_too_big_for_the_window_is_refused_and_the_batch_goes_on(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    whole = call("read_lines", {"sessionId": A1, "start": 1, "end": 45, "width": 4000})
    fake.add(tool_turn(whole, prompt_tokens=3000, completion_tokens=20),
             tool_turn(call("read_lines", {"sessionId": A1, "start": 39, "end": 39}), prompt_tokens=3100),
             submit(good_answer()))
    result = run(fake, wh, tmp_path, context_tokens=16384, max_reply_tokens=1024)
    assert result.outcome == "accepted"
    refused = json.loads(tool_results(fake.requests[1])[0])["error"]
    assert refused.startswith("read_lines: this result is about") and "left in the context window" in refused
    log = jsonl(result.out_dir / "tool_calls.jsonl")
    assert [t["ok"] for t in log] == [False, True, True]
    assert result.run.touched_session_ids == [A1]


def test_a_request_that_would_not_fit_ends_the_batch_before_it_is_sent(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    fake.add(tool_turn(call("list_sessions"), prompt_tokens=14400, completion_tokens=30), submit(good_answer()))
    result = run(fake, wh, tmp_path, context_tokens=16384, max_reply_tokens=2048)
    assert result.outcome == "budget" and "context budget spent" in (result.reason or "")
    assert "context window of 16384 tokens" in (result.reason or "")
    assert len(fake.requests) == 1 and fake.remaining == 1


def test_a_prompt_bigger_than_the_window_is_never_sent(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    result = run(fake, wh, tmp_path, context_tokens=2048)
    assert result.outcome == "budget" and fake.requests == []


# --- the command line ----------------------------------------------------------------------------


def test_the_consolidate_flags_reach_the_request(fake: FakeOpenAI, wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake.add(text_turn('{"name": "list_sessions", "arguments": {}}'), submit(good_answer()))
    code = main(["consolidate", "--engine", "openai", "--base-url", fake.base_url, "--model", "qwen-local",
                 "--sessions", ",".join(BATCH), "--out", str(tmp_path / "cli"), "--max-retries", "0", "--timeout", "30",
                 "--tool-choice", "required", "--no-parallel-tool-calls", "--context-tokens", "32768",
                 "--max-reply-tokens", "1500", "--json", "--db", str(wh)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["outcome"] == "accepted"
    body = fake.requests[0]
    assert (body["tool_choice"], body["parallel_tool_calls"], body["max_tokens"]) == ("required", False, 1500)


def test_a_window_too_small_is_refused_on_the_command_line(wh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["consolidate", "--engine", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
              "--sessions", A1, "--context-tokens", "512", "--db", str(wh)])
    assert info.value.code == 2 and "too small a context window" in capsys.readouterr().err


def test_the_nightly_hands_the_options_to_each_batch_notebook(tmp_path: Path) -> None:
    opts = NightlyOptions(engine="openai", model="qwen-local", base_url="http://127.0.0.1:8080/v1",
                          engine_options={"timeout": 600.0, "tool_choice": "required", "parallel_tool_calls": False,
                                          "context_tokens": 16384, "max_reply_tokens": 1024})
    params = batch_parameters(BatchOutcome("b1", [A1], tmp_path / "b1"), "openai", tmp_path / "w.duckdb", opts)
    assert {k: params[k] for k in ("timeout", "tool_choice", "parallel_tool_calls", "context_tokens", "max_reply_tokens")} == {
        "timeout": 600.0, "tool_choice": "required", "parallel_tool_calls": False, "context_tokens": 16384,
        "max_reply_tokens": 1024}
    bare = batch_parameters(BatchOutcome("b1", [A1], tmp_path / "b1"), "rules", tmp_path / "w.duckdb", NightlyOptions())
    assert "tool_choice" not in bare and "timeout" not in bare


def test_the_notebook_declares_every_parameter_the_nightly_sends() -> None:
    from pipeline.config import NOTEBOOKS
    from pipeline.nightly.driver import ENGINE_OPTION_PARAMETERS

    nb = json.loads((NOTEBOOKS / "consolidate.ipynb").read_text(encoding="utf-8"))
    source = "".join(next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))["source"])
    assert all(f"\n{name} = None" in source for name in ENGINE_OPTION_PARAMETERS)


def test_a_raw_llama_cpp_reply_with_timings_only(fake: FakeOpenAI, wh: Path, tmp_path: Path) -> None:
    """A reply exactly as llama.cpp's server shapes it: the call in the text, usage without details."""
    body = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "qwen.gguf",
            "system_fingerprint": "b0-unknown",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "```json\n" + json.dumps(
                             {"name": "submit_answer", "arguments": good_answer()}) + "\n```"}}],
            "usage": {"completion_tokens": 300, "prompt_tokens": 6238, "total_tokens": 6538},
            "timings": {"cache_n": 6237, "prompt_n": 1, "prompt_ms": 258.795}}
    fake.add(Raw(body))
    result = run(fake, wh, tmp_path)
    assert result.outcome == "accepted"
    [row] = jsonl(result.out_dir / "llm_calls.jsonl")
    assert (row["prompt_tokens"], row["cached_tokens"], row["prompt_ms"], row["model"]) == (6238, 6237, 258.795, "qwen.gguf")
