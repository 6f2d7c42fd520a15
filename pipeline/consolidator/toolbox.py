"""The consolidator's four tools, bound to one batch, as the model calls them.

A model call arrives as a tool name and a string that should hold JSON arguments. `BatchTools`
turns it into a JSON result string and never raises for anything the model got wrong: malformed
JSON, a missing or unknown argument, an unknown tool, a session outside the batch, a bad range. All
of those come back as `{"error": ...}` results the model can read and act on (DESIGN.md, "The three
tools"). Results are data: the tool's JSON and nothing spliced around it.

The tools read the batch's input folder (`pipeline.consolidator.batch_input`), never the warehouse:
each call opens its own in-memory connection over those files, so nothing is held while the model
thinks.
Each call opens its own short read-only connection, so no connection is held while the model thinks
and the nightly writer is blocked as little as possible.

Whatever the engine, these tools always redact: every secret detected on a line, and every secret
known to the batch (`known`), is masked in what the model reads, and a quote holding such a mask
is checked by the mask rule of `pipeline.consolidator.quotes`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from pipeline.consolidator import tools
from pipeline.consolidator.batch_input import BatchInput
from pipeline.consolidator.contract import CheckResult, check_answer
from pipeline.consolidator.line_blocks import LineBlocks
from pipeline.consolidator.prompts import TOOL_NAMES
from pipeline.consolidator.quotes import WarehouseQuotes
from pipeline.errors import PipelineError
from pipeline.secrets.gate import SecretSet

__all__ = ["BatchTools", "ToolOutcome", "error_result", "parse_arguments"]


@dataclass(frozen=True)
class ToolOutcome:
    """A tool call's result text (JSON), and what the tool log records about it."""

    text: str
    ok: bool
    session_id: str | None
    arguments: JsonValue


def error_result(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _NoArgs(_Args):
    pass


class _SearchArgs(_Args):
    sessionId: str
    phrase: str


class _ReadArgs(_Args):
    sessionId: str
    start: int
    end: int
    width: int | None = None


_ARG_MODELS: dict[str, type[_Args]] = {
    "list_sessions": _NoArgs,
    "search_transcript": _SearchArgs,
    "read_lines": _ReadArgs,
}


def parse_arguments(raw: str | None) -> tuple[JsonValue, str | None]:
    """(arguments as logged, problem or None). Empty text means no arguments, as some servers send."""
    text = raw if isinstance(raw, str) else ""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        # Logged as the raw text (a JSON string), so the tool log still shows what was sent.
        return text, f"the arguments are not valid JSON ({exc.msg} at column {exc.colno}); send one JSON object"
    if not isinstance(value, dict):
        return value, "the arguments must be one JSON object"
    return value, None


def _validation_message(name: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "missing":
            parts.append(f"{field!r} is required")
        elif err["type"] == "extra_forbidden":
            parts.append(f"{field!r} is not an argument of {name}")
        else:
            parts.append(f"{field!r}: {err['msg']}")
    return f"bad arguments for {name}: " + "; ".join(parts)


class BatchTools:
    """list_sessions, search_transcript, read_lines and submit_answer for the sessions of one batch."""

    def __init__(self, source: BatchInput, session_ids: Sequence[str], known: SecretSet | None = None) -> None:
        self.source = source
        self.session_ids = tuple(session_ids)
        self._allowed = frozenset(self.session_ids)
        self.known = known if known is not None else SecretSet()
        # A batch's input never changes once written, so the lines a model pages through are
        # fetched a block at a time and kept for its later reads.
        self._blocks = LineBlocks()

    def call(self, name: str, raw_arguments: str | None) -> ToolOutcome:
        """Run a reading tool (not submit_answer) and return its result; never raises for bad input."""
        arguments, problem = parse_arguments(raw_arguments)
        session_id = arguments.get("sessionId") if isinstance(arguments, dict) else None
        session_id = session_id if isinstance(session_id, str) else None
        if name not in _ARG_MODELS:
            known = ", ".join(TOOL_NAMES)
            return ToolOutcome(error_result(f"there is no tool named {name!r}; the tools are {known}"), False, session_id, arguments)
        if problem is not None:
            return ToolOutcome(error_result(f"{name}: {problem}"), False, session_id, arguments)
        try:
            parsed = _ARG_MODELS[name].model_validate(arguments)
        except ValidationError as exc:
            return ToolOutcome(error_result(_validation_message(name, exc)), False, session_id, arguments)
        try:
            result = self._read(lambda con: self._run(con, name, parsed))
        except PipelineError as exc:  # ToolError (bad session, bad range, empty phrase) or an unreadable input
            return ToolOutcome(error_result(str(exc)), False, session_id, arguments)
        return ToolOutcome(json.dumps(result, ensure_ascii=False), True, session_id, arguments)

    def submit(self, raw_arguments: str | None) -> tuple[CheckResult, JsonValue]:
        """Check a submitted answer against the contract (the batch = this batch's sessions)."""
        arguments, _ = parse_arguments(raw_arguments)
        # The contract reports malformed JSON itself, as a problem at "$", with the other problems.
        data: Any = raw_arguments if isinstance(arguments, str) else arguments
        result = self._read(lambda con: check_answer(data, self.session_ids, WarehouseQuotes(con, self.known)))
        return result, arguments

    def _read(self, work: Callable[[duckdb.DuckDBPyConnection], Any]) -> Any:
        try:
            with self.source.reading() as con:
                return work(con)
        except duckdb.Error as exc:
            raise PipelineError(f"the batch's input could not be read ({exc}); try the call again") from exc

    def _run(self, con: duckdb.DuckDBPyConnection, name: str, args: _Args) -> Any:
        if isinstance(args, _SearchArgs):
            return tools.search_transcript(
                con, args.sessionId, args.phrase, allowed=self._allowed, redact=True, known=self.known
            )
        if isinstance(args, _ReadArgs):
            return tools.read_lines(
                con, args.sessionId, args.start, args.end, args.width, allowed=self._allowed, redact=True, known=self.known,
                blocks=self._blocks,
            )
        return tools.list_sessions(con, list(self.session_ids), redact=True, known=self.known)
