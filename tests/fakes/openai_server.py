"""A local stand-in for an OpenAI-compatible Chat Completions endpoint.

Tests drive the real `openai` client against it, so the whole HTTP path (request encoding, response
parsing, retries, timeouts) is exercised without any network. The server listens on 127.0.0.1 on a
free port, plays a script of steps one per `POST /v1/chat/completions` request, and records what it
received.

Steps:

* `Turn` — an assistant message: text, tool calls, or both. A tool call's arguments may be a dict
  (sent as JSON) or a raw string sent unchanged, so a test can hand the client malformed JSON.
* `HttpError` — an error status with an OpenAI-style error body; `retry_after` sets both
  `retry-after` and `retry-after-ms`. The openai client ignores a Retry-After of 0 (it falls back
  to its own back-off of about half a second), so use a small positive value such as 0.01 to retry
  at once.
* `Raw` — any status, headers and body, for hostile replies (a body that is not JSON, say).
* `Dynamic` — a callable that receives the request body (a dict) and returns one of the above, so a
  scripted model can react to the tool results it was sent.

Every step may carry `delay` seconds before the reply is written, which is how a test provokes a
client timeout (the delayed step is used up; the client's retry gets the next one).

Usage figures in each successful reply: `prompt_tokens` is the length of the request's prompt (its
`tools` and `messages` serialised as compact JSON) divided by 4, rounded up; `completion_tokens` is
likewise a quarter of the reply's text and arguments (at least 1); `cached_tokens` is, unless the
step fixes it, the number of leading characters that prompt shares with the prompt of the previous
request answered by a `Turn` (errors do not count), divided by 4 (rounded down) and never more than
`prompt_tokens`. The first answered request therefore reports 0 cached tokens, and a conversation
that only appends messages reports most of its prefix as cached, roughly as a provider's prefix cache
would. A step's `cache_write_tokens`, when set, is sent in `prompt_tokens_details` as well. Real
servers report less, or elsewhere: a `Turn` can leave out `prompt_tokens_details` or the whole
`usage`, and can add llama.cpp's `timings` (`cache_n`, `prompt_n`, `prompt_ms`) from the same figures.
`llama_cpp_parse_error()` is the HTTP 500 llama.cpp answers when it cannot parse the model's reply
as a tool call.

When the script runs out the server answers 500 with `x-should-retry: false` and a message saying
so, which the client raises at once as `openai.InternalServerError`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import pytest
from openai import OpenAI

__all__ = [
    "LLAMA_CPP_PARSE_ERROR",
    "Dynamic",
    "FakeOpenAI",
    "HttpError",
    "Raw",
    "Step",
    "ToolCall",
    "Turn",
    "call",
    "delayed",
    "fake_openai",
    "last_tool_result",
    "llama_cpp_parse_error",
    "text_turn",
    "tool_results",
    "tool_turn",
]

Json = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """One function call of an assistant turn."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False)


@dataclass(frozen=True)
class Turn:
    """An assistant reply (HTTP 200)."""

    content: str | None = None
    tool_calls: Sequence[ToolCall] = ()
    finish_reason: str | None = None  # default: "tool_calls" when there are calls, else "stop"
    prompt_tokens: int | None = None  # default: estimated from the request
    completion_tokens: int | None = None  # default: estimated from the reply
    cached_tokens: int | None = None  # default: the common prefix with the previous request
    cache_write_tokens: int | None = None  # sent only when set
    delay: float = 0.0
    # How the figures are reported, as servers differ: `cache_details=False` leaves
    # prompt_tokens_details out of usage, `usage=False` leaves usage out, and `timings=True` adds
    # llama.cpp's `timings` object (cache_n = cached tokens, prompt_n = the rest, prompt_ms).
    usage: bool = True
    cache_details: bool = True
    timings: bool = False


@dataclass(frozen=True)
class HttpError:
    """An error reply in the API's format: {"error": {"message", "type", "param", "code"}}."""

    status: int
    message: str = "scripted error"
    retry_after: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    error_type: str | None = None
    code: str | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class Raw:
    """Any reply at all; a dict or list body is sent as JSON, str/bytes as they are."""

    body: bytes | str | Mapping[str, Any] | list[Any]
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Dynamic:
    """A reply computed from the request body when it arrives."""

    respond: Callable[[Json], Turn | HttpError | Raw]
    delay: float = 0.0


Step = Turn | HttpError | Raw | Dynamic


def call(name: str, arguments: Mapping[str, Any] | str | None = None, *, id: str | None = None) -> ToolCall:
    """A tool call; `arguments` as a dict, or as a raw (possibly malformed) string."""
    return ToolCall(name=name, arguments={} if arguments is None else arguments, id=id)


def tool_turn(
    *calls: ToolCall,
    content: str | None = None,
    cached_tokens: int | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
) -> Turn:
    """An assistant turn that calls the given tools (usage figures optional, see the module doc)."""
    return Turn(
        content=content,
        tool_calls=tuple(calls),
        cached_tokens=cached_tokens,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


def text_turn(text: str, *, cached_tokens: int | None = None, prompt_tokens: int | None = None) -> Turn:
    """An assistant turn with plain text and no tool call."""
    return Turn(content=text, cached_tokens=cached_tokens, prompt_tokens=prompt_tokens)


# What llama.cpp's server answers when the model's reply cannot be parsed as the tool call the
# request asked for (seen with a reply that was JSON but not a call, under tool_choice "auto").
LLAMA_CPP_PARSE_ERROR = "Failed to parse input at pos 0: {\"candidates\": []}"


def llama_cpp_parse_error() -> HttpError:
    """The HTTP 500 llama.cpp's server sends for a reply it could not turn into a tool call."""
    return HttpError(500, LLAMA_CPP_PARSE_ERROR, error_type="server_error", headers={"x-should-retry": "false"})


def delayed(seconds: float, step: Step) -> Step:
    """The same step, answered only after `seconds`."""
    return dataclasses.replace(step, delay=seconds)


def tool_results(body: Mapping[str, Any]) -> list[str]:
    """The contents of the `tool` messages of a request, oldest first."""
    out: list[str] = []
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            out.append(str(content))
    return out


def last_tool_result(body: Mapping[str, Any]) -> str | None:
    """The content of the newest `tool` message of a request, if any."""
    results = tool_results(body)
    return results[-1] if results else None


def _prompt_text(body: Mapping[str, Any]) -> str:
    return json.dumps(
        {"tools": body.get("tools"), "messages": body.get("messages")},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on prefix equality: fast for long prompts
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class FakeOpenAI:
    """The fake server. Use as a context manager, or call start() and stop().

    Attributes for assertions: `requests` (chat request bodies as parsed JSON, in arrival order,
    failed ones included), `headers` (their HTTP headers, lower-cased names), `responses` (the bodies
    of the successful chat replies).
    """

    def __init__(self, script: Iterable[Step] = (), *, model: str = "fake-model") -> None:
        self.model = model
        self._script: list[Step] = list(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._previous_prompt: str | None = None
        self._counter = 0
        self.requests: list[Json] = []
        self.headers: list[dict[str, str]] = []
        self.responses: list[Json] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        handler = _handler_for(self)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- configuration -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fake OpenAI server is not running; call start() or use `with`")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The value to pass as the client's base_url (ends in /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def add(self, *steps: Step) -> FakeOpenAI:
        """Append steps to the script."""
        with self._lock:
            self._script.extend(steps)
        return self

    @property
    def remaining(self) -> int:
        """Steps not yet played."""
        with self._lock:
            return len(self._script)

    def client(self, *, max_retries: int = 0, timeout: float = 10.0) -> OpenAI:
        """A real openai client pointed at this server."""
        return OpenAI(base_url=self.base_url, api_key="test", max_retries=max_retries, timeout=timeout)

    # --- serving (called from handler threads) -----------------------------------------------

    def _next(self, body: Json, headers: dict[str, str]) -> tuple[Step | None, int]:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            number = len(self.requests)
            step = self._script.pop(0) if self._script else None
            return step, number

    def _usage(self, body: Json, turn: Turn, reply_text: str) -> Json:
        prompt = _prompt_text(body)
        with self._lock:
            previous, self._previous_prompt = self._previous_prompt, prompt
        prompt_tokens = turn.prompt_tokens if turn.prompt_tokens is not None else math.ceil(len(prompt) / 4)
        if turn.cached_tokens is not None:
            cached = turn.cached_tokens
        else:
            shared = _common_prefix(prompt, previous) if previous is not None else 0
            cached = min(shared // 4, prompt_tokens)
        completion = (
            turn.completion_tokens
            if turn.completion_tokens is not None
            else max(1, math.ceil(len(reply_text) / 4))
        )
        details: Json = {"cached_tokens": cached}
        if turn.cache_write_tokens is not None:
            details["cache_write_tokens"] = turn.cache_write_tokens
        usage: Json = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
        }
        if turn.cache_details:
            usage["prompt_tokens_details"] = details
        usage["_cached"] = cached  # for `timings`; never sent under this name
        return usage

    def _completion(self, body: Json, turn: Turn) -> Json:
        with self._lock:
            self._counter += 1
            number = self._counter
        calls = [
            {
                "id": tc.id or f"call_{number}_{i}",
                "type": "function",
                "function": {"name": tc.name, "arguments": tc.arguments_text()},
            }
            for i, tc in enumerate(turn.tool_calls)
        ]
        message: Json = {"role": "assistant", "content": turn.content, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        finish = turn.finish_reason or ("tool_calls" if calls else "stop")
        reply_text = (turn.content or "") + "".join(c["function"]["arguments"] for c in calls)
        usage = self._usage(body, turn, reply_text)
        response: Json = {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or self.model),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "system_fingerprint": "fake",
        }
        if turn.usage:
            response["usage"] = {k: v for k, v in usage.items() if k != "_cached"}
        if turn.timings:
            prompt_n = usage["prompt_tokens"] - usage["_cached"]
            response["timings"] = {"cache_n": usage["_cached"], "prompt_n": prompt_n, "prompt_ms": float(prompt_n),
                                   "predicted_n": usage["completion_tokens"], "predicted_ms": 1.0}
        with self._lock:
            self.responses.append(response)
        return response

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


def _error_body(message: str, error_type: str = "fake_error", code: str | None = None) -> Json:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return

        def _send(
            self, status: int, body: bytes | str | Any, headers: Mapping[str, str] | None = None
        ) -> None:
            if isinstance(body, bytes):
                data, ctype = body, "application/octet-stream"
            elif isinstance(body, str):
                data, ctype = body.encode("utf-8"), "text/plain; charset=utf-8"
            else:
                data, ctype = json.dumps(body, ensure_ascii=False).encode("utf-8"), "application/json"
            try:
                self.send_response(status)
                if not any(name.lower() == "content-type" for name in headers or {}):
                    self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                self.close_connection = True  # the client gave up (a timeout): nothing to do

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/")
            model = {"id": server.model, "object": "model", "created": 0, "owned_by": "fake"}
            if path == "/v1/models":
                self._send(200, {"object": "list", "data": [model]})
            elif path.startswith("/v1/models/"):
                self._send(200, {**model, "id": path.removeprefix("/v1/models/")})
            else:
                self._send(404, _error_body(f"the fake server has no GET {path}", "not_found"))

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/")
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if path != "/v1/chat/completions":
                self._send(404, _error_body(f"the fake server has no POST {path}", "not_found"))
                return
            try:
                body = json.loads(raw or b"null")
            except ValueError as exc:
                self._send(400, _error_body(f"request body is not JSON: {exc}", "invalid_request_error"))
                return
            if not isinstance(body, dict):
                self._send(400, _error_body("request body must be a JSON object", "invalid_request_error"))
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            step, number = server._next(body, headers)
            if step is None:
                self._send(
                    500,
                    _error_body(
                        f"fake OpenAI server: the script has no step left for request #{number}",
                        "script_exhausted",
                    ),
                    {"x-should-retry": "false"},
                )
                return
            server._wait(step.delay)
            if isinstance(step, Dynamic):
                step = step.respond(body)
                server._wait(step.delay)
            if body.get("stream") and isinstance(step, Turn):
                self._send(400, _error_body("the fake server does not stream", "invalid_request_error"))
                return
            self._play(step, body)

        def _play(self, step: Turn | HttpError | Raw, body: Json) -> None:
            if isinstance(step, Turn):
                self._send(200, server._completion(body, step))
            elif isinstance(step, HttpError):
                headers = dict(step.headers)
                if step.retry_after is not None:
                    headers.setdefault("retry-after", f"{step.retry_after:g}")
                    headers.setdefault("retry-after-ms", f"{step.retry_after * 1000:g}")
                error_type = step.error_type or ("rate_limit_error" if step.status == 429 else "server_error")
                self._send(step.status, _error_body(step.message, error_type, step.code), headers)
            else:
                payload = step.body if isinstance(step.body, bytes | str | list) else dict(step.body)
                self._send(step.status, payload, step.headers)

    return Handler


@pytest.fixture(name="fake")
def fake_openai() -> Iterator[FakeOpenAI]:
    """`fake`: a running fake server with an empty script; add steps with `fake.add(...)`."""
    with FakeOpenAI() as server:
        yield server
