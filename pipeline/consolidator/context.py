"""What a consolidation engine is given and what it hands back.

Every engine (the OpenAI tool loop in `pipeline.consolidator.agent`, the offline rules in
`pipeline.consolidator.rules`, any other registered in `pipeline.consolidator.engine`) runs one
batch against the same `BatchContext`, logs every tool call and model call into the same
`Recorder`, and ends with an `EngineResult`; `pipeline.consolidator.batch` turns those into the
artifact folder. Progress goes out as `Event`s so a notebook or the CLI can show calls as they happen.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import JsonValue

from pipeline.consolidator.artifact import (
    Budgets,
    LlmCallRow,
    Outcome,
    RefusedAttempt,
    Tokens,
    ToolCallRow,
    touched_sessions,
)
from pipeline.consolidator.batch_input import BatchInput
from pipeline.consolidator.contract import Answer, Problem
from pipeline.secrets.gate import SecretSet

__all__ = ["BatchContext", "EngineResult", "Event", "EventKind", "EventSink", "Recorder", "utc_now"]

EventKind = Literal["engine", "model_call", "tool_call", "submit", "nudge", "outcome"]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class Event:
    """One step of a batch, for people watching: `text` is a one-line summary, `data` the details."""

    kind: EventKind
    text: str
    data: dict[str, Any] = field(default_factory=dict)


EventSink = Callable[[Event], None]


@dataclass
class BatchContext:
    """The batch an engine works on. `source` is the batch's input folder: engines read only that."""

    run_id: str
    batch_id: str
    source: BatchInput
    session_ids: tuple[str, ...]
    budgets: Budgets
    new_from_line: dict[str, int] = field(default_factory=dict)
    on_event: EventSink | None = None
    # Monotonic clock at the start of the batch: the wall-time budget counts from here.
    started: float = field(default_factory=time.monotonic)
    # The secrets detected on the batch's lines: masked in everything the engine reads or writes.
    secrets: SecretSet = field(default_factory=SecretSet)

    def emit(self, kind: EventKind, text: str, **data: Any) -> None:
        """Report progress; what a notebook prints must not hold a secret either."""
        if self.on_event is not None:
            if self.secrets:
                text, data = self.secrets.scrub(text), self.secrets.scrub_json(data)
            self.on_event(Event(kind, text, data))

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def seconds_left(self) -> float:
        return self.budgets.max_seconds - self.elapsed()


@dataclass
class Recorder:
    """The tool log, the model-call log and the refused submissions of one batch."""

    run_id: str
    batch_id: str
    tool_calls: list[ToolCallRow] = field(default_factory=list)
    llm_calls: list[LlmCallRow] = field(default_factory=list)
    refused: list[RefusedAttempt] = field(default_factory=list)
    # What the loop worked around: calls read from a reply's text, replies without a usable call,
    # reading calls made again (not run).
    content_calls: int = 0
    nudges: int = 0
    repeats: int = 0

    def tool(
        self,
        name: str,
        arguments: JsonValue,
        *,
        session_id: str | None,
        ok: bool,
        result_chars: int,
        at: dt.datetime | None = None,
    ) -> ToolCallRow:
        row = ToolCallRow(
            run_id=self.run_id,
            batch_id=self.batch_id,
            seq=len(self.tool_calls) + 1,
            name=name,
            arguments=arguments,
            session_id=session_id,
            ok=ok,
            result_chars=result_chars,
            at=at or utc_now(),
        )
        self.tool_calls.append(row)
        return row

    def refusal(self, attempt: int, problems: Sequence[Problem]) -> None:
        self.refused.append(RefusedAttempt(attempt=attempt, problems=list(problems)))

    def touched(self) -> list[str]:
        return touched_sessions(self.tool_calls)

    def tokens(self) -> Tokens:
        """Totals over the model calls. A figure no call reported stays None (unknown, not 0),
        except that a batch without model calls spent exactly nothing."""
        calls = self.llm_calls
        if not calls:
            return Tokens(prompt=0, cached=None, completion=0)

        def total(values: list[int | None]) -> int | None:
            known = [v for v in values if v is not None]
            return sum(known) if known else None

        return Tokens(
            prompt=total([c.prompt_tokens for c in calls]),
            cached=total([c.cached_tokens for c in calls]),
            completion=total([c.completion_tokens for c in calls]),
        )

    def cached_share(self) -> float | None:
        """Cached over prompt tokens, counted only over calls that reported both."""
        both = [c for c in self.llm_calls if c.prompt_tokens and c.cached_tokens is not None]
        prompt = sum(c.prompt_tokens or 0 for c in both)
        return sum(c.cached_tokens or 0 for c in both) / prompt if prompt else None

    def tokens_used(self) -> int:
        return sum((c.prompt_tokens or 0) + (c.completion_tokens or 0) for c in self.llm_calls)


@dataclass
class EngineResult:
    """How an engine ended: `answer` is set only for outcome `accepted`."""

    outcome: Outcome
    reason: str
    answer: Answer | None = None
    submits: int = 0
