"""The consolidator agent: a Chat Completions tool loop against any OpenAI-compatible endpoint.

The model reads the batch with list_sessions / search_transcript / read_lines and hands in its
answer with submit_answer, which runs the contract: a refused answer comes back as the tool result
and the loop goes on; an accepted one ends the batch.

Why the loop looks the way it does:

* The request prefix stays byte-stable so the provider's prompt cache can serve it: the system
  prompt and tools are fixed files, the first user message is a fixed text (budgets only, no dates,
  no batch contents), and the history is only ever appended to. Nothing in any request carries a
  timestamp.
* Whatever a real model gets wrong is an error result it can read (see `pipeline.consolidator.toolbox`), never an
  exception that ends the batch. Small local models get more wrong than hosted ones, and every one
  of those ends in a stated outcome (`accepted`, `refused` or `budget`, with the reason):
  - a call written as JSON in the reply's text is read as that call (`content_calls`), and counted;
  - a reply with no call at all is nudged; `MAX_UNUSABLE` such replies in a row end the batch
    `refused`. An HTTP 500 counts the same way: llama.cpp answers 500 when it cannot parse the
    model's reply as a tool call, so the loop asks again with a correction rather than give up;
  - the same reading call made again is not run again (its result is already in the history), nor
    is an answer identical to one already refused checked again (it would cost an attempt for the
    same verdict); the model is told so, and `MAX_REPEATS` of them end the batch with `budget`;
  - with a context window (`context_tokens`), a tool result that would not fit is replaced by an
    error asking for a narrower call, and a request that would not fit ends the batch with `budget`
    before the server refuses it (a server's own "too long" refusal ends it the same way);
  - a reply slower than the timeout, after the client's retries, ends the batch with `budget`.
* HTTP trouble (429, 5xx, timeouts) is first left to the openai client's own retries with back-off;
  `max_retries` is configurable so tests stay fast. What remains `error` is what the loop cannot
  work around: an endpoint it cannot reach, or a reply that is not a chat completion.
* Budgets (tool calls, submit attempts, tokens, wall time, context) are checked before spending
  more, and running out of any of them ends the batch with outcome `budget` and no answer.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Final, Literal

import openai
from openai import OpenAI
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from pipeline.anchoring.fingerprint import request_fingerprints
from pipeline.consolidator.artifact import LlmCallRow
from pipeline.consolidator.content_calls import parse_content_calls
from pipeline.consolidator.context import BatchContext, EngineResult, Recorder, utc_now
from pipeline.consolidator.prompts import TOOL_NAMES, system_prompt, tool_schemas
from pipeline.consolidator.toolbox import BatchTools, error_result, parse_arguments
from pipeline.errors import PipelineError

__all__ = [
    "FIRST_MESSAGE",
    "MAX_REPEATS",
    "MAX_UNUSABLE",
    "NUDGE",
    "SERVER_NUDGE",
    "AgentConfig",
    "estimate_tokens",
    "first_message",
    "make_client",
    "run_agent",
]

# The turn's message. Budgets are the only variable part and are fixed for a whole run, so every
# batch of a night shares this prefix too.
FIRST_MESSAGE: Final = (
    "Consolidate the sessions of this batch. Start with list_sessions, look at every session with "
    "search_transcript and read_lines, and end by calling submit_answer with the complete answer. "
    "This run allows at most {max_tool_calls} calls of the three reading tools and at most "
    "{max_submits} submit_answer attempts."
)
# Sent after a reply that called no tool.
NUDGE: Final = (
    "Your reply called no tool, and only an answer handed in through submit_answer is kept. Continue "
    "with the tools and finish by calling submit_answer with candidates, commitments and readSessionIds."
)
# Sent after the endpoint failed on the model's reply (llama.cpp: HTTP 500 when it cannot parse it).
SERVER_NUDGE: Final = (
    "The server could not turn your last reply into a tool call, so nothing was run. Reply with exactly "
    "one tool call: a JSON object with the tool's \"name\" and its \"arguments\", and no other text."
)
# Replies in a row that carried no usable call (no call at all, or an HTTP 500) before the batch ends.
MAX_UNUSABLE: Final = 3
# Calls made again with the same arguments (reading calls, refused answers) before the batch ends:
# the model is going round.
MAX_REPEATS: Final = 3
# A reply is given at most this share of the context window (and never more than the cap).
REPLY_SHARE: Final = 4
REPLY_CAP: Final = 4096
# Characters per token assumed when sizing what the model has not yet been sent: low on purpose
# (JSON and code tokenize densely), so the estimate errs towards stopping early.
CHARS_PER_TOKEN: Final = 3
MESSAGE_OVERHEAD: Final = 8

ToolChoice = Literal["auto", "required"]


class AgentConfig(BaseModel):
    """How to reach the model. The key is never written to any artifact.

    `tool_choice` and `parallel_tool_calls` are sent only when set (llama.cpp needs
    `tool_choice="required"` to keep a small model to tool calls); `context_tokens` is the server's
    context window, which the loop then keeps each request and its reply inside; `max_reply_tokens`
    bounds one reply (a small model can otherwise write until the window is full, slowly).
    """

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key: SecretStr | None = None
    max_retries: int = Field(default=2, ge=0)
    timeout: float = Field(default=120.0, gt=0)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    context_tokens: int | None = Field(default=None, ge=1024)
    max_reply_tokens: int | None = Field(default=None, ge=16)

    def reply_tokens(self) -> int | None:
        """The most one reply may hold (sent as max_tokens), and what the window keeps free for it:
        `max_reply_tokens`, else with a window a quarter of it (at most REPLY_CAP), else unbounded."""
        if self.max_reply_tokens is not None:
            return self.max_reply_tokens
        if self.context_tokens is None:
            return None
        return min(REPLY_CAP, self.context_tokens // REPLY_SHARE)


def make_client(config: AgentConfig) -> OpenAI:
    # A local server (vLLM, Ollama, llama.cpp) needs no key, but the client insists on one.
    key = config.api_key.get_secret_value() if config.api_key is not None else "unused"
    return OpenAI(api_key=key, base_url=config.base_url, max_retries=config.max_retries, timeout=config.timeout)


def first_message(ctx: BatchContext) -> str:
    return FIRST_MESSAGE.format(
        max_tool_calls=ctx.budgets.max_tool_calls, max_submits=ctx.budgets.max_submits
    )


def estimate_tokens(value: Any) -> int:
    """A deliberately high token estimate of a message or a text not yet sent."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return len(text) // CHARS_PER_TOKEN + MESSAGE_OVERHEAD


def _where(config: AgentConfig) -> str:
    return config.base_url or "the default OpenAI endpoint"


def _retries(config: AgentConfig) -> str:
    return f"after {config.max_retries} retr{'y' if config.max_retries == 1 else 'ies'}"


def _api_failure(exc: openai.APIError, config: AgentConfig) -> str:
    where, retries = _where(config), _retries(config)
    if isinstance(exc, openai.APITimeoutError):
        return f"the model endpoint ({where}) did not answer within {config.timeout:g}s, {retries}"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not reach the model endpoint ({where}), {retries}: {exc}"
    if isinstance(exc, openai.APIStatusError):
        return f"the model endpoint ({where}) answered HTTP {exc.status_code}, {retries}: {exc.message}"
    return f"the model endpoint ({where}) sent a reply that could not be used: {exc}"


# What servers say when a request is longer than their context window (llama.cpp, vLLM, OpenAI).
_TOO_LONG = ("context size", "context length", "context_length", "context window", "exceed_context", "too long",
             "maximum context", "n_ctx")


def _too_long(exc: openai.APIStatusError) -> bool:
    if exc.status_code not in (400, 413, 422, 500):
        return False
    text = f"{exc.message} {getattr(exc, 'code', '') or ''} {exc.body!r}".lower()
    return any(marker in text for marker in _TOO_LONG)


@dataclass(frozen=True)
class _Call:
    """One tool call, however it arrived (`tool_calls`, or written in the reply's text)."""

    id: str
    name: str
    arguments: str | None


@dataclass(frozen=True)
class _Reply:
    """The model's message, and why it stopped (a reply cut at the length limit rarely holds a call)."""

    message: Any
    finish_reason: str | None


@dataclass(frozen=True)
class _Unusable:
    """The endpoint failed on the model's reply (HTTP 500): the loop corrects and asks again."""

    reason: str


def _calls_of(message: Any) -> list[_Call]:
    out = []
    for call in message.tool_calls or []:
        function = getattr(call, "function", None)
        name = str(getattr(function, "name", None) or getattr(call, "type", "") or "")
        out.append(_Call(str(call.id), name, getattr(function, "arguments", None)))
    return out


def _history_message(content: str | None, calls: list[_Call]) -> dict[str, Any]:
    """The reply as it goes back into the history: its tool calls in the protocol's shape."""
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or ""}}
            for c in calls
        ]
    return out


def _call_key(name: str, raw: str | None) -> str | None:
    """What makes two reading calls the same call (None: arguments unreadable, never the same)."""
    arguments, problem = parse_arguments(raw)
    if problem is not None:
        return None
    return name + json.dumps(arguments, sort_keys=True, ensure_ascii=False)


class _Loop:
    """One batch's conversation; `run()` returns how it ended."""

    def __init__(self, ctx: BatchContext, recorder: Recorder, config: AgentConfig, client: OpenAI) -> None:
        self.ctx = ctx
        self.rec = recorder
        self.config = config
        self.client = client
        self.tools = BatchTools(ctx.source, ctx.session_ids, ctx.secrets)
        self.system = system_prompt()
        self.schemas = tool_schemas()
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": first_message(ctx)},
        ]
        self.reading_calls = 0
        self.submits = 0
        self.unusable = 0  # replies in a row without a usable call
        self.made: dict[str, int] = {}  # reading call → the tool-log seq that first ran it
        self.refused_answers: dict[str, int] = {}  # refused submission → its tool-log seq
        # What the last answered request measured, and how many messages it held: the base of the
        # next request's size estimate.
        self.sent_tokens: int | None = None
        self.sent_messages = 0

    def _end(self, outcome: Literal["refused", "budget", "error"], reason: str) -> EngineResult:
        return EngineResult(outcome, reason, submits=self.submits)

    def run(self) -> EngineResult:
        while True:
            stop = self._budget_left_for_model()
            if stop:
                return self._end("budget", stop)
            reply = self._ask()
            if isinstance(reply, EngineResult):
                return reply
            if isinstance(reply, _Unusable):
                ended = self._count_unusable(reply.reason)
                if ended is not None:
                    return ended
                self.messages.append({"role": "user", "content": SERVER_NUDGE})
                self.ctx.emit("nudge", f"{reply.reason}: asked again for one tool call")
                continue
            calls = _calls_of(reply.message)
            content = reply.message.content
            if not calls:
                found = parse_content_calls(content, TOOL_NAMES)
                if found.calls:
                    n = len(self.rec.llm_calls)
                    calls = [_Call(f"content-{n}-{i + 1}", c.name, c.arguments) for i, c in enumerate(found.calls)]
                    content = None  # the call is the reply: the history shows it as the call it was
                    self.rec.content_calls += len(calls)
                    self.ctx.emit("nudge", f"read {len(calls)} tool call(s) written in the reply's text: "
                                  + ", ".join(c.name for c in calls))
                else:
                    self.messages.append(_history_message(content, []))
                    why = self._why_no_call(reply, found.problem)
                    ended = self._count_unusable(why)
                    if ended is not None:
                        return ended
                    self.messages.append({"role": "user", "content": NUDGE + (f" ({found.problem})" if found.problem else "")})
                    self.ctx.emit("nudge", f"{why}: nudged ({self.unusable} of {MAX_UNUSABLE})")
                    continue
            self.unusable = 0
            self.messages.append(_history_message(content, calls))
            for call in calls:
                ended = self._answer(call)
                if ended is not None:
                    return ended

    def _why_no_call(self, reply: _Reply, problem: str | None) -> str:
        cut = " (cut at the reply's length limit)" if reply.finish_reason == "length" else ""
        if problem:
            return f"the reply held JSON that is not a tool call{cut}: {problem}"
        return f"the reply called no tool{cut}"

    def _count_unusable(self, why: str) -> EngineResult | None:
        self.unusable += 1
        self.rec.nudges += 1
        if self.unusable >= MAX_UNUSABLE:
            return self._end("refused", f"no usable tool call in {MAX_UNUSABLE} replies in a row; the last: {why}")
        return None

    # --- budgets --------------------------------------------------------------------------

    def _budget_left_for_model(self) -> str | None:
        b = self.ctx.budgets
        used = self.rec.tokens_used()
        if used >= b.max_tokens:
            return f"token budget spent: {used} of {b.max_tokens} tokens used before an answer was accepted"
        if self.ctx.seconds_left() <= 0:
            return f"time budget spent: {b.max_seconds:g}s passed before an answer was accepted"
        window, reply = self.config.context_tokens, self.config.reply_tokens()
        if window is not None and reply is not None:
            prompt = self._prompt_estimate()
            if prompt + reply > window:
                return (
                    f"context budget spent: the next request would hold about {prompt} tokens and its reply up to "
                    f"{reply}, more than the context window of {window} tokens (--context-tokens)"
                )
        return None

    def _prompt_estimate(self) -> int:
        """The next request's prompt in tokens: the last measured prompt, plus what was added since."""
        if self.sent_tokens is None:
            # Nothing measured yet: the first request is mostly English prose (the prompt, the tool
            # descriptions), so it is sized at four characters a token; a server that still finds it
            # too long says so, and that ends the batch the same way.
            return len(json.dumps({"tools": self.schemas, "messages": self.messages}, ensure_ascii=False)) // 4
        return self.sent_tokens + sum(estimate_tokens(m) for m in self.messages[self.sent_messages:])

    def _room_for(self, text: str) -> str | None:
        """Why a tool result cannot be sent (it would leave no room for the reply), or None."""
        window, reply = self.config.context_tokens, self.config.reply_tokens()
        if window is None or reply is None:
            return None
        needed = estimate_tokens(text)
        room = window - reply - self._prompt_estimate()
        if needed <= room:
            return None
        return (
            f"this result is about {needed} tokens but only about {max(room, 0)} are left in the context window; "
            "ask for less (fewer lines, a smaller width, a more specific phrase) or call submit_answer"
        )

    # --- one model call -------------------------------------------------------------------

    def _request_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.config.tool_choice is not None:
            options["tool_choice"] = self.config.tool_choice
        if self.config.parallel_tool_calls is not None:
            options["parallel_tool_calls"] = self.config.parallel_tool_calls
        reply = self.config.reply_tokens()
        if reply is not None:
            options["max_tokens"] = reply
        return options

    def _ask(self) -> Any:
        fps = request_fingerprints(self.system, self.schemas, self.messages)
        at = utc_now()
        began = time.perf_counter()
        timeout = max(0.001, min(self.config.timeout, self.ctx.seconds_left()))
        try:
            response = self.client.chat.completions.create(
                model=self.config.model,
                messages=self.messages,  # type: ignore[arg-type]
                tools=self.schemas,  # type: ignore[arg-type]
                timeout=timeout,
                **self._request_options(),
            )
        except openai.APITimeoutError as exc:
            if self.ctx.seconds_left() <= 0:
                return self._end(
                    "budget", f"time budget spent: {self.ctx.budgets.max_seconds:g}s passed while waiting for the model")
            return self._end("budget", f"time budget spent on one reply: {_api_failure(exc, self.config)} (--timeout)")
        except openai.APIStatusError as exc:
            if _too_long(exc):
                return self._end(
                    "budget", f"context budget spent: the endpoint refused the request as longer than its context "
                    f"window (HTTP {exc.status_code}: {exc.message}); set --context-tokens to the server's window "
                    "so the loop stops first")
            if exc.status_code >= 500:
                return _Unusable(f"the endpoint answered HTTP {exc.status_code} ({exc.message}) {_retries(self.config)}")
            return self._end("error", _api_failure(exc, self.config))
        except openai.APIError as exc:
            return self._end("error", _api_failure(exc, self.config))
        except ValueError as exc:  # a body that is not JSON, or not a chat completion
            return self._end(
                "error", f"the model endpoint ({_where(self.config)}) sent a reply that is not a chat completion: {exc}")
        latency_ms = (time.perf_counter() - began) * 1000.0
        row = self._record(response, at, latency_ms, fps)
        self.sent_tokens = (
            (row.prompt_tokens or 0) + (row.completion_tokens or 0) if row.prompt_tokens is not None else None
        )
        self.sent_messages = len(self.messages)
        if self.ctx.seconds_left() <= 0:
            # The client's retries may outlast the per-request timeout; the budget is for the batch.
            return self._end(
                "budget", f"time budget spent: {self.ctx.budgets.max_seconds:g}s passed while waiting for the model")
        choices = getattr(response, "choices", None) or []
        if not choices or choices[0].message is None:
            return self._end("error", "the model endpoint sent a reply with no message")
        return _Reply(choices[0].message, getattr(choices[0], "finish_reason", None))

    def _record(self, response: Any, at: Any, latency_ms: float, fps: dict[str, str]) -> LlmCallRow:
        usage = getattr(response, "usage", None)
        details = getattr(usage, "prompt_tokens_details", None) if usage is not None else None
        timings = _timings(response)
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        cached = getattr(details, "cached_tokens", None)
        if cached is None and timings.get("cache_n") is not None:
            # llama.cpp reports its prompt cache in `timings` (cache_n reused, prompt_n evaluated);
            # some builds send no prompt_tokens_details at all.
            cached = int(timings["cache_n"])
            if prompt_tokens is None and timings.get("prompt_n") is not None:
                prompt_tokens = cached + int(timings["prompt_n"])
        extra = {"prompt_ms": round(float(timings["prompt_ms"]), 3)} if timings.get("prompt_ms") is not None else {}
        row = LlmCallRow(
            call_id=f"{self.rec.run_id}:{self.rec.batch_id}:{len(self.rec.llm_calls) + 1}",
            source="consolidator",
            at=at,
            model=getattr(response, "model", None) or self.config.model,
            prompt_tokens=prompt_tokens,
            # Absent means unknown: recorded as null, never as 0.
            cached_tokens=cached,
            cache_write_tokens=getattr(details, "cache_write_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            latency_ms=round(latency_ms, 3),
            run_id=self.rec.run_id,
            batch_id=self.rec.batch_id,
            **fps,
            **extra,  # llama.cpp's prompt time: kept in llm_calls.jsonl, not a warehouse column
        )
        self.rec.llm_calls.append(row)
        share = (
            f", {row.cached_tokens / row.prompt_tokens:.0%} cached"
            if row.prompt_tokens and row.cached_tokens is not None
            else ""
        )
        self.ctx.emit(
            "model_call",
            f"model call {len(self.rec.llm_calls)}: {row.prompt_tokens} prompt tokens{share}, {latency_ms:.0f} ms",
            row=row.model_dump(mode="json"),
        )
        return row

    # --- one tool call --------------------------------------------------------------------

    def _answer(self, call: _Call) -> EngineResult | None:
        if call.name == "submit_answer":
            key = _call_key(call.name, call.arguments)
            if key is not None and key in self.refused_answers:
                # The same answer again (a small model may write one call many times in a reply):
                # checking it again would spend an attempt on the same verdict.
                return self._repeat(call, utc_now(), self.refused_answers[key],
                                    "was already submitted exactly like this and refused; the problems listed "
                                    "in that result still stand. Fix them, or read more first")
            return self._submit(call.id, call.arguments, key)
        b = self.ctx.budgets
        if self.reading_calls >= b.max_tool_calls:
            return self._end(
                "budget", f"tool-call budget spent: {b.max_tool_calls} tool calls made before an answer was accepted")
        if self.ctx.seconds_left() <= 0:
            return self._end("budget", f"time budget spent: {b.max_seconds:g}s passed before an answer was accepted")
        self.reading_calls += 1
        at = utc_now()
        key = _call_key(call.name, call.arguments)
        if key is not None and key in self.made:
            return self._repeat(call, at, self.made[key])
        outcome = self.tools.call(call.name, call.arguments)
        text = outcome.text
        too_big = self._room_for(text) if outcome.ok else None
        ok = outcome.ok and too_big is None
        if too_big is not None:
            text = error_result(f"{call.name}: {too_big}")
        row = self.rec.tool(
            call.name, outcome.arguments, session_id=outcome.session_id, ok=ok, result_chars=len(text), at=at,
        )
        if ok and key is not None:
            self.made[key] = row.seq
        self._reply(call.id, text)
        status = "ok" if ok else ("too big for the context window" if too_big else "error")
        self.ctx.emit(
            "tool_call", f"{call.name} {_brief(outcome.arguments)} → {status}, {len(text)} chars",
            name=call.name, arguments=outcome.arguments, ok=ok, sessionId=outcome.session_id,
        )
        return None

    def _repeat(self, call: _Call, at: Any, first_seq: int, what: str | None = None) -> EngineResult | None:
        """The same call again: not run (its result is in the history already)."""
        self.rec.repeats += 1
        arguments, _ = parse_arguments(call.arguments)
        text = error_result(
            f"{call.name} (tool call {first_seq}) {what}." if what else
            f"{call.name} was already called with exactly these arguments (tool call {first_seq}); its result "
            "has not changed and is above. Read another session or other lines, or call submit_answer."
        )
        self.rec.tool(call.name, arguments, session_id=None, ok=False, result_chars=len(text), at=at)
        self._reply(call.id, text)
        self.ctx.emit("tool_call", f"{call.name} {_brief(arguments)} → repeated, not run ({self.rec.repeats} of {MAX_REPEATS})",
                      name=call.name, arguments=arguments, ok=False, sessionId=None)
        if self.rec.repeats >= MAX_REPEATS:
            return self._end(
                "budget", f"repeat budget spent: the model made {MAX_REPEATS} calls it had already made "
                f"(the last: {call.name} {_brief(arguments)})")
        return None

    def _submit(self, call_id: str, raw: str | None, key: str | None) -> EngineResult | None:
        b = self.ctx.budgets
        at = utc_now()
        try:
            result, arguments = self.tools.submit(raw)
        except PipelineError as exc:
            # The check itself could not run (the warehouse was unreadable): not the model's fault,
            # so it costs no attempt.
            text = error_result(f"the answer could not be checked: {exc}")
            self.rec.tool("submit_answer", raw, session_id=None, ok=False, result_chars=len(text), at=at)
            self._reply(call_id, text)
            return None
        self.submits += 1
        text = result.tool_result()
        row = self.rec.tool("submit_answer", arguments, session_id=None, ok=result.accepted, result_chars=len(text), at=at)
        if key is not None and not result.accepted:
            self.refused_answers[key] = row.seq
        self._reply(call_id, text)
        if result.accepted:
            self.ctx.emit("submit", f"submission {self.submits}: accepted", attempt=self.submits, accepted=True)
            return EngineResult(
                "accepted", f"answer accepted on attempt {self.submits}", answer=result.answer, submits=self.submits
            )
        self.rec.refusal(self.submits, result.problems)
        self.ctx.emit(
            "submit",
            f"submission {self.submits}: refused, {len(result.problems)} problem(s)",
            attempt=self.submits, accepted=False, problems=[p.model_dump() for p in result.problems],
        )
        if self.submits >= b.max_submits:
            return self._end(
                "budget", f"submit budget spent: all {b.max_submits} submissions were refused (see problems.json)")
        return None

    def _reply(self, call_id: str, text: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})


def _timings(response: Any) -> dict[str, Any]:
    """llama.cpp's `timings` object of a reply (an extra field the openai client keeps), or {}."""
    extra = getattr(response, "model_extra", None) or {}
    timings = extra.get("timings") if isinstance(extra, dict) else None
    return timings if isinstance(timings, dict) else {}


def _brief(arguments: Any, limit: int = 80) -> str:
    text = str(arguments)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_agent(
    ctx: BatchContext, recorder: Recorder, config: AgentConfig, *, client: OpenAI | None = None
) -> EngineResult:
    """Run the tool loop over the batch of `ctx`, logging into `recorder`."""
    extras = [f"{k} {v}" for k, v in (("tool_choice", config.tool_choice), ("parallel_tool_calls", config.parallel_tool_calls),
                                        ("context window", config.context_tokens)) if v is not None]
    ctx.emit("engine", f"engine openai: model {config.model} at {config.base_url or 'the default endpoint'}"
             + (f" ({', '.join(extras)})" if extras else ""))
    return _Loop(ctx, recorder, config, client or make_client(config)).run()
