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
  exception that ends the batch. A reply without a tool call is nudged once.
* HTTP trouble (429, 5xx, timeouts) is left to the openai client's own retries with back-off;
  `max_retries` is configurable so tests stay fast. When the client gives up, the batch ends with
  outcome `error` and the reason.
* Budgets (tool calls, submit attempts, tokens, wall time) are checked before spending more, and
  running out of any of them ends the batch with outcome `budget` and no answer.
"""

from __future__ import annotations

import time
from typing import Any, Final

import openai
from openai import OpenAI
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from pipeline.anchoring.fingerprint import request_fingerprints
from pipeline.consolidator.artifact import LlmCallRow
from pipeline.consolidator.context import BatchContext, EngineResult, Recorder, utc_now
from pipeline.consolidator.prompts import system_prompt, tool_schemas
from pipeline.consolidator.toolbox import BatchTools, error_result
from pipeline.errors import PipelineError

__all__ = ["FIRST_MESSAGE", "NUDGE", "AgentConfig", "first_message", "make_client", "run_agent"]

# The turn's message. Budgets are the only variable part and are fixed for a whole run, so every
# batch of a night shares this prefix too.
FIRST_MESSAGE: Final = (
    "Consolidate the sessions of this batch. Start with list_sessions, look at every session with "
    "search_transcript and read_lines, and end by calling submit_answer with the complete answer. "
    "This run allows at most {max_tool_calls} calls of the three reading tools and at most "
    "{max_submits} submit_answer attempts."
)
# Sent once, after the first reply that called no tool.
NUDGE: Final = (
    "Your reply called no tool, and only an answer handed in through submit_answer is kept. Continue "
    "with the tools and finish by calling submit_answer with candidates, commitments and readSessionIds."
)


class AgentConfig(BaseModel):
    """How to reach the model. The key is never written to any artifact."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key: SecretStr | None = None
    max_retries: int = Field(default=2, ge=0)
    timeout: float = Field(default=120.0, gt=0)


def make_client(config: AgentConfig) -> OpenAI:
    # A local server (vLLM, Ollama, llama.cpp) needs no key, but the client insists on one.
    key = config.api_key.get_secret_value() if config.api_key is not None else "unused"
    return OpenAI(api_key=key, base_url=config.base_url, max_retries=config.max_retries, timeout=config.timeout)


def first_message(ctx: BatchContext) -> str:
    return FIRST_MESSAGE.format(
        max_tool_calls=ctx.budgets.max_tool_calls, max_submits=ctx.budgets.max_submits
    )


def _api_failure(exc: openai.APIError, config: AgentConfig) -> str:
    where = config.base_url or "the default OpenAI endpoint"
    retries = f"after {config.max_retries} retr{'y' if config.max_retries == 1 else 'ies'}"
    if isinstance(exc, openai.APITimeoutError):
        return f"the model endpoint ({where}) did not answer within {config.timeout:g}s, {retries}"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not reach the model endpoint ({where}), {retries}: {exc}"
    if isinstance(exc, openai.APIStatusError):
        return f"the model endpoint ({where}) answered HTTP {exc.status_code}, {retries}: {exc.message}"
    return f"the model endpoint ({where}) sent a reply that could not be used: {exc}"


def _assistant_message(message: Any) -> dict[str, Any]:
    """The reply as it goes back into the history: content and tool calls exactly as received."""
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    calls = message.tool_calls or []
    if calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": getattr(getattr(call, "function", None), "name", None) or str(call.type),
                    "arguments": getattr(getattr(call, "function", None), "arguments", None) or "",
                },
            }
            for call in calls
        ]
    return out


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
        self.nudged = False

    def run(self) -> EngineResult:
        while True:
            stop = self._budget_left_for_model()
            if stop:
                return EngineResult("budget", stop, submits=self.submits)
            reply = self._ask()
            if isinstance(reply, EngineResult):
                return reply
            calls = reply.tool_calls or []
            self.messages.append(_assistant_message(reply))
            if not calls:
                if self.nudged:
                    return EngineResult(
                        "error", "the model replied twice without calling a tool (it was nudged once)",
                        submits=self.submits,
                    )
                self.nudged = True
                self.messages.append({"role": "user", "content": NUDGE})
                self.ctx.emit("nudge", "reply without a tool call: nudged once")
                continue
            for call in calls:
                ended = self._answer(call)
                if ended is not None:
                    return ended

    # --- budgets --------------------------------------------------------------------------

    def _budget_left_for_model(self) -> str | None:
        b = self.ctx.budgets
        used = self.rec.tokens_used()
        if used >= b.max_tokens:
            return f"token budget spent: {used} of {b.max_tokens} tokens used before an answer was accepted"
        if self.ctx.seconds_left() <= 0:
            return f"time budget spent: {b.max_seconds:g}s passed before an answer was accepted"
        return None

    # --- one model call -------------------------------------------------------------------

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
            )
        except openai.APIError as exc:
            if isinstance(exc, openai.APITimeoutError) and self.ctx.seconds_left() <= 0:
                return EngineResult(
                    "budget", f"time budget spent: {self.ctx.budgets.max_seconds:g}s passed while waiting for the model",
                    submits=self.submits,
                )
            return EngineResult("error", _api_failure(exc, self.config), submits=self.submits)
        except ValueError as exc:  # a body that is not JSON, or not a chat completion
            where = self.config.base_url or "the default OpenAI endpoint"
            return EngineResult(
                "error", f"the model endpoint ({where}) sent a reply that is not a chat completion: {exc}",
                submits=self.submits,
            )
        latency_ms = (time.perf_counter() - began) * 1000.0
        self._record(response, at, latency_ms, fps)
        if self.ctx.seconds_left() <= 0:
            # The client's retries may outlast the per-request timeout; the budget is for the batch.
            return EngineResult(
                "budget", f"time budget spent: {self.ctx.budgets.max_seconds:g}s passed while waiting for the model",
                submits=self.submits,
            )
        choices = getattr(response, "choices", None) or []
        if not choices or choices[0].message is None:
            return EngineResult("error", "the model endpoint sent a reply with no message", submits=self.submits)
        return choices[0].message

    def _record(self, response: Any, at: Any, latency_ms: float, fps: dict[str, str]) -> None:
        usage = getattr(response, "usage", None)
        details = getattr(usage, "prompt_tokens_details", None) if usage is not None else None
        row = LlmCallRow(
            call_id=f"{self.rec.run_id}:{self.rec.batch_id}:{len(self.rec.llm_calls) + 1}",
            source="consolidator",
            at=at,
            model=getattr(response, "model", None) or self.config.model,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            # Absent means unknown: recorded as null, never as 0.
            cached_tokens=getattr(details, "cached_tokens", None),
            cache_write_tokens=getattr(details, "cache_write_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            latency_ms=round(latency_ms, 3),
            run_id=self.rec.run_id,
            batch_id=self.rec.batch_id,
            **fps,
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

    # --- one tool call --------------------------------------------------------------------

    def _answer(self, call: Any) -> EngineResult | None:
        function = getattr(call, "function", None)
        name = str(getattr(function, "name", None) or getattr(call, "type", "") or "")
        raw = getattr(function, "arguments", None)
        if name == "submit_answer":
            return self._submit(call.id, raw)
        b = self.ctx.budgets
        if self.reading_calls >= b.max_tool_calls:
            return EngineResult(
                "budget", f"tool-call budget spent: {b.max_tool_calls} tool calls made before an answer was accepted",
                submits=self.submits,
            )
        if self.ctx.seconds_left() <= 0:
            return EngineResult(
                "budget", f"time budget spent: {b.max_seconds:g}s passed before an answer was accepted",
                submits=self.submits,
            )
        self.reading_calls += 1
        at = utc_now()
        outcome = self.tools.call(name, raw)
        self.rec.tool(
            name, outcome.arguments, session_id=outcome.session_id, ok=outcome.ok,
            result_chars=len(outcome.text), at=at,
        )
        self._reply(call.id, outcome.text)
        status = "ok" if outcome.ok else "error"
        self.ctx.emit(
            "tool_call", f"{name} {_brief(outcome.arguments)} → {status}, {len(outcome.text)} chars",
            name=name, arguments=outcome.arguments, ok=outcome.ok, sessionId=outcome.session_id,
        )
        return None

    def _submit(self, call_id: str, raw: str | None) -> EngineResult | None:
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
        self.rec.tool("submit_answer", arguments, session_id=None, ok=result.accepted, result_chars=len(text), at=at)
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
            return EngineResult(
                "budget", f"submit budget spent: all {b.max_submits} submissions were refused (see problems.json)",
                submits=self.submits,
            )
        return None

    def _reply(self, call_id: str, text: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})


def _brief(arguments: Any, limit: int = 80) -> str:
    text = str(arguments)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_agent(
    ctx: BatchContext, recorder: Recorder, config: AgentConfig, *, client: OpenAI | None = None
) -> EngineResult:
    """Run the tool loop over the batch of `ctx`, logging into `recorder`."""
    ctx.emit("engine", f"engine openai: model {config.model} at {config.base_url or 'the default endpoint'}")
    return _Loop(ctx, recorder, config, client or make_client(config)).run()
