"""`pipeline mcp`: the transcripts and the memory corpus served to agents over MCP (stdio), read-only.

Built on the official SDK's `MCPServer`. Each call opens its own read-only connection to the
published warehouse and reads the corpus's last commit, so a night that is writing never waits for
the server and the server never sees half of a night's work. Every result is one JSON text, bounded
(the bounds are in the tool's description, which every agent pays for in context, so they stay
short), with values masked by the same function as every other output. A refused argument or an
unknown id is a tool error (`isError`) the agent reads; the server goes on serving.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError as McpToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from pipeline import config
from pipeline.consolidator import tools as transcript_tools
from pipeline.consolidator.limits import DEFAULT_WIDTH, MAX_HITS, MAX_READ_LINES, MAX_WIDTH
from pipeline.corpus.git_corpus import Corpus
from pipeline.delivery import memory_reads
from pipeline.errors import PipelineError
from pipeline.warehouse import db as warehouse

MAX_SESSIONS = 100
INSTRUCTIONS = (
    "Past coding-agent sessions of this machine and the memories reviewed from them. Start with "
    "search_memories; every memory cites transcript lines (get_memory). Memories with status new are "
    "not reviewed yet."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
F = TypeVar("F", bound=Callable[..., str])


def _day(value: str | None, name: str) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise McpToolError(f"{name} must be a day as YYYY-MM-DD; got {value!r}") from None


def _as_tool_error(fn: F) -> F:
    """Our refusals (unknown session, bad range, no warehouse…) reach the agent as its tool error, in
    our words; anything else is the SDK's generic error, and the server keeps serving either way."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        try:
            return fn(*args, **kwargs)
        except PipelineError as exc:
            raise McpToolError(str(exc)) from None
        except Exception:
            # The SDK answers the agent "Error executing tool" and keeps the exception to itself: the
            # host's server log (stderr) is where the cause can be read.
            traceback.print_exc(file=sys.stderr)
            raise

    return call  # type: ignore[return-value]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def build(db: str | Path | None = None, corpus: str | Path | None = None) -> MCPServer:
    db_path = config.db_path(db)
    repo = Corpus(config.corpus_path(corpus))
    from importlib.metadata import version

    # WARNING: the SDK logs every refused call at INFO on stderr, which an agent's host shows as noise.
    server: MCPServer = MCPServer("trace-pipeline", instructions=INSTRUCTIONS, version=version("trace-pipeline"),
                                  log_level="WARNING")

    def reading() -> Any:
        if not db_path.exists():
            raise McpToolError(f"no warehouse at {db_path}: run `pipeline ingest PATH` first")
        return warehouse.reading(db_path)

    @server.tool(annotations=READ_ONLY, structured_output=False,
                 description=f"Sessions newest first: project, span, prompts, turns, tool calls, models. At most {MAX_SESSIONS}.")
    @_as_tool_error
    def list_sessions(
        project: Annotated[str | None, Field(description="slug or cwd")] = None,
        since: Annotated[str | None, Field(description="YYYY-MM-DD")] = None,
        until: Annotated[str | None, Field(description="YYYY-MM-DD")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_SESSIONS)] = 20,
    ) -> str:
        from pipeline.usage.session_table import SessionFilter, session_table

        flt = SessionFilter(project=project, since=_day(since, "since"), until=_day(until, "until"))
        with reading() as con:
            entries = session_table(con, transcript_tools.list_sessions(con, redact=True), flt, sort="lastAt",
                                    descending=True, limit=limit)
        keep = ("sessionId", "slug", "cwd", "format", "firstAt", "lastAt", "prompts", "turns", "toolCalls", "models",
                "lineCount", "parentSessionId")
        return _json([{**{k: e.get(k) for k in keep}, "memories": len(e.get("linkedMemories") or [])} for e in entries])

    @server.tool(annotations=READ_ONLY, structured_output=False,
                 description=f"Literal phrase in every session (or one): up to {MAX_HITS} hits with 80 characters each "
                 "side, line and column; total is exact.")
    @_as_tool_error
    def search(
        phrase: Annotated[str, Field(min_length=1)],
        session_id: str | None = None,
        project: Annotated[str | None, Field(description="slug or cwd")] = None,
        ignore_case: bool = False,
        limit: Annotated[int, Field(ge=1, le=MAX_HITS)] = 20,
    ) -> str:
        from pipeline.warehouse.search_all import SearchFilter, search_all

        flt = SearchFilter(sessions=(session_id,) if session_id else (), project=project)
        with reading() as con:
            return _json(search_all(con, phrase, flt, ignore_case=ignore_case, limit=limit, redact=True))

    @server.tool(annotations=READ_ONLY, structured_output=False,
                 description=f"Lines start..end of a session, each cut at width characters (default {DEFAULT_WIDTH}); "
                 f"at most {MAX_READ_LINES} lines and 60,000 characters.")
    @_as_tool_error
    def read_lines(
        session_id: str,
        start: Annotated[int, Field(ge=1)],
        end: Annotated[int, Field(ge=1)],
        width: Annotated[int | None, Field(ge=1, le=MAX_WIDTH)] = None,
    ) -> str:
        with reading() as con:
            return _json(transcript_tools.read_lines(con, session_id, start, end, width, redact=True))

    @server.tool(annotations=READ_ONLY, structured_output=False,
                 description=f"Memories matching the query's words, kept before new (unreviewed); never dropped ones. "
                 f"At most {memory_reads.MAX_MEMORIES}.")
    @_as_tool_error
    def search_memories(
        query: Annotated[str, Field(description="words; empty lists all")] = "",
        project: Annotated[str | None, Field(description="slug or cwd")] = None,
        kind: Literal["episodic", "semantic", "procedural", "agent_insight", "error_pattern", "precedent"] | None = None,
        status: Literal["new", "kept"] | None = None,
        limit: Annotated[int, Field(ge=1, le=memory_reads.MAX_MEMORIES)] = 20,
    ) -> str:
        with reading() as con:
            return _json(memory_reads.search_memories(con, repo, query, project=project, kind=kind, status=status,
                                                      limit=limit))

    @server.tool(annotations=READ_ONLY, structured_output=False,
                 description=f"One memory: claim, gist, status, commit, and up to {memory_reads.MAX_EVIDENCE} evidence "
                 "quotes with the session and line each stands on.")
    @_as_tool_error
    def get_memory(memory_id: str) -> str:
        with reading() as con:
            return _json(memory_reads.get_memory(con, repo, memory_id))

    for tool in server._tool_manager.list_tools():
        tool.parameters = compact_schema(tool.parameters)
    return server


def compact_schema(schema: Any) -> Any:
    """The advertised input schema without what costs tokens and says nothing: titles, and the
    `anyOf [X, null]` of an optional argument (leaving it out of `required` says it). Arguments are
    still validated by the tool's own signature, as the SDK built it."""
    if isinstance(schema, list):
        return [compact_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: compact_schema(v) for k, v in schema.items() if k != "title"}
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        out.pop("anyOf")
        out = {**next(o for o in options if o != {"type": "null"}), **out}
        if out.get("default", 0) is None:
            out.pop("default")
    return out


def tool_list(db: str | Path | None = None, corpus: str | Path | None = None) -> list[dict[str, Any]]:
    """The tools as `tools/list` sends them, each with the context it costs an agent (JSON characters / 4)."""
    out = []
    for tool in build(db, corpus)._tool_manager.list_tools():
        entry = {"name": tool.name, "description": tool.description, "inputSchema": tool.parameters,
                 "annotations": tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None}
        out.append({**entry, "estimatedTokens": -(-len(_json(entry)) // 4)})
    return out


def serve(db: str | Path | None = None, corpus: str | Path | None = None) -> None:
    build(db, corpus).run("stdio")
