"""The fake OpenAI-compatible server, driven by the real openai client (no network involved)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from pipeline.consolidator.contract import check_answer
from pipeline.consolidator.prompts import system_prompt, tool_schemas
from pipeline.consolidator.quotes import MemoryQuotes
from tests.fakes.openai_server import (
    Dynamic,
    FakeOpenAI,
    HttpError,
    Raw,
    Turn,
    call,
    delayed,
    last_tool_result,
    text_turn,
    tool_results,
    tool_turn,
)

USER = [{"role": "user", "content": "Consolidate the batch."}]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def ask(client: openai.OpenAI, messages: list[dict[str, Any]] | None = None, **extra: Any) -> Any:
    return client.chat.completions.create(model="test-model", messages=messages or USER, **extra)  # type: ignore[arg-type]


def test_tool_calls_reach_the_client_as_sent(server: FakeOpenAI) -> None:
    server.add(
        tool_turn(call("search_transcript", {"sessionId": "s1", "phrase": "pnpm"}), call("list_sessions"))
    )
    response = ask(server.client(), tools=tool_schemas())
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    first, second = choice.message.tool_calls
    assert first.type == "function" and first.function.name == "search_transcript"
    assert json.loads(first.function.arguments) == {"sessionId": "s1", "phrase": "pnpm"}
    assert second.function.name == "list_sessions" and json.loads(second.function.arguments) == {}
    assert first.id != second.id
    assert response.model == "test-model"

    body = server.requests[0]
    assert body["model"] == "test-model"
    assert body["messages"] == USER
    assert [t["function"]["name"] for t in body["tools"]] == [t["function"]["name"] for t in tool_schemas()]


def test_malformed_arguments_pass_through_untouched(server: FakeOpenAI) -> None:
    broken = '{"sessionId": "s1", "start": 1,, "end": '
    server.add(tool_turn(call("read_lines", broken, id="call_x")))
    tool_call = ask(server.client()).choices[0].message.tool_calls[0]
    assert tool_call.id == "call_x"
    assert tool_call.function.arguments == broken
    with pytest.raises(json.JSONDecodeError):
        json.loads(tool_call.function.arguments)


def test_plain_text_without_a_tool_call(server: FakeOpenAI) -> None:
    server.add(text_turn("I think I am done."))
    choice = ask(server.client()).choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.content == "I think I am done."
    assert choice.message.tool_calls is None


def test_rate_limit_then_success_retries_quickly(server: FakeOpenAI) -> None:
    server.add(HttpError(429, "slow down", retry_after=0.01), text_turn("after the wait"))
    started = time.perf_counter()
    response = ask(server.client(max_retries=2))
    elapsed = time.perf_counter() - started
    assert response.choices[0].message.content == "after the wait"
    assert len(server.requests) == 2
    assert server.headers[1].get("x-stainless-retry-count") == "1"
    assert elapsed < 0.4, f"the retry should follow Retry-After, took {elapsed:.2f}s"


def test_rate_limit_without_retries_raises(server: FakeOpenAI) -> None:
    server.add(HttpError(429, "slow down", retry_after=30))
    with pytest.raises(openai.RateLimitError) as caught:
        ask(server.client(max_retries=0))
    assert caught.value.response.headers["retry-after"] == "30"
    assert "slow down" in str(caught.value)


def test_server_error_then_success(server: FakeOpenAI) -> None:
    server.add(HttpError(500, "boom", retry_after=0.01), text_turn("recovered"))
    assert ask(server.client(max_retries=1)).choices[0].message.content == "recovered"
    server.add(HttpError(503, "down"))
    with pytest.raises(openai.InternalServerError):
        ask(server.client(max_retries=0))


def test_a_delay_triggers_the_client_timeout(server: FakeOpenAI) -> None:
    server.add(delayed(2.0, text_turn("too late")), text_turn("on time"))
    client = server.client(max_retries=0, timeout=0.2)
    started = time.perf_counter()
    with pytest.raises(openai.APITimeoutError):
        ask(client)
    assert time.perf_counter() - started < 1.5
    assert ask(client).choices[0].message.content == "on time"  # the delayed step was used up


def test_dynamic_steps_see_the_request(server: FakeOpenAI) -> None:
    lines = {
        "s1": [json.dumps({"type": "tool_result", "content": "fatal: refusing to merge unrelated histories"})]
    }

    def submit_from_last_result(body: dict[str, Any]) -> Turn:
        result = json.loads(last_tool_result(body) or "{}")
        quote = result["hits"][0]["match"] + result["hits"][0]["after"]
        answer = {"candidates": [], "commitments": [], "readSessionIds": [result["sessionId"]]}
        answer["commitments"].append(
            {
                "statement": "Merge later.",
                "actor": "user",
                "evidence": [{"sessionId": result["sessionId"], "quote": quote}],
                "confidence": 0.2,
                "resolved": False,
            }
        )
        return tool_turn(call("submit_answer", answer))

    server.add(
        tool_turn(call("search_transcript", {"sessionId": "s1", "phrase": "fatal:"})),
        Dynamic(submit_from_last_result),
    )
    client = server.client()
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt()}, *USER]
    first = ask(client, messages, tools=tool_schemas()).choices[0].message
    search = first.tool_calls[0]
    tool_result = {
        "sessionId": "s1",
        "phrase": "fatal:",
        "total": 1,
        "truncated": False,
        "hits": [{"line": 1, "column": 37, "before": "", "match": "fatal:", "after": " refusing to merge"}],
    }
    messages += [
        first.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": search.id, "content": json.dumps(tool_result)},
    ]
    second = ask(client, messages, tools=tool_schemas()).choices[0].message
    submitted = second.tool_calls[0]
    assert submitted.function.name == "submit_answer"
    verdict = check_answer(submitted.function.arguments, ["s1"], MemoryQuotes(lines))
    assert verdict.accepted, verdict.problems
    assert tool_results(server.requests[1]) == [json.dumps(tool_result)]


def test_usage_and_cached_tokens(server: FakeOpenAI) -> None:
    server.add(
        text_turn("one"),
        text_turn("two"),
        Turn(content="three", cached_tokens=7, prompt_tokens=100, completion_tokens=3, cache_write_tokens=11),
    )
    client = server.client()
    long_history = [{"role": "user", "content": "context " * 200}]
    first = ask(client, long_history).usage
    second = ask(client, [*long_history, {"role": "assistant", "content": "one"}]).usage
    third = ask(client).usage

    assert first.prompt_tokens > 0 and first.completion_tokens >= 1
    assert first.total_tokens == first.prompt_tokens + first.completion_tokens
    assert first.prompt_tokens_details.cached_tokens == 0  # nothing came before
    assert second.prompt_tokens > first.prompt_tokens
    assert 0.9 * first.prompt_tokens < second.prompt_tokens_details.cached_tokens <= first.prompt_tokens
    assert third.prompt_tokens == 100 and third.completion_tokens == 3 and third.total_tokens == 103
    assert third.prompt_tokens_details.cached_tokens == 7
    assert third.prompt_tokens_details.cache_write_tokens == 11
    assert server.responses[2]["usage"]["prompt_tokens_details"] == {
        "cached_tokens": 7,
        "cache_write_tokens": 11,
    }


def test_an_exhausted_script_fails_clearly_and_at_once(server: FakeOpenAI) -> None:
    with pytest.raises(openai.InternalServerError, match="no step left for request #1"):
        ask(server.client(max_retries=3))
    assert len(server.requests) == 1  # x-should-retry: false stops the client's retries


def test_models_listing(server: FakeOpenAI) -> None:
    models = server.client().models.list()
    assert [m.id for m in models.data] == ["fake-model"]
    assert server.requests == []  # only chat requests are recorded


def test_hostile_raw_replies(server: FakeOpenAI) -> None:
    server.add(
        Raw("plain words, not JSON"),
        Raw({"choices": "nope"}),
        Raw(b"<html>bad gateway</html>", status=502, headers={"x-should-retry": "false"}),
    )
    client = server.client()
    # The client does not validate shapes: callers must check what they got.
    assert ask(client) == "plain words, not JSON"
    assert ask(client).choices == "nope"
    with pytest.raises(openai.InternalServerError):
        ask(client)


def test_plain_http_and_unknown_paths(server: FakeOpenAI) -> None:
    reply = httpx.post(f"{server.base_url}/chat/completions", content=b"{not json", timeout=5)
    assert reply.status_code == 400 and "not JSON" in reply.json()["error"]["message"]
    assert httpx.get(f"{server.base_url}/nothing", timeout=5).status_code == 404
    assert httpx.post(f"{server.base_url}/embeddings", json={}, timeout=5).status_code == 404


def test_lifecycle_without_a_with_block() -> None:
    fake = FakeOpenAI([text_turn("hi")]).start()
    try:
        assert fake.base_url.startswith("http://127.0.0.1:")
        assert fake.remaining == 1
        assert ask(fake.client()).choices[0].message.content == "hi"
        assert fake.remaining == 0
    finally:
        fake.stop()
    with pytest.raises(RuntimeError):
        _ = fake.port
