"""The artifact folder of one consolidation batch: its files' models, writer and reader.

A batch hands everything it learned to the one writer (`apply`) as files in a folder, so batches can
run in parallel against a read-only warehouse (INTERFACES.md, "The artifact folder"):

    manifest.json     the batch as offered, with each session's size at that moment
    answer.json       the accepted answer (absent when none was accepted)
    problems.json     every refused submission: [{attempt, problems: [{path, reason}]}]
    llm_calls.jsonl   one `llm_calls` row per model call
    tool_calls.jsonl  one `agent_tool_calls` row per tool call
    run.json          outcome, reason, budgets, tokens, times, touched sessions

Every file is written atomically (temporary name in the same folder, fsync, rename) and run.json
comes last, so a folder that holds run.json is complete and one without it is a batch that did not
finish. `load_artifact(dir)` reads a folder back into an `Artifact`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from pydantic.alias_generators import to_camel

from pipeline.consolidator.contract import Answer, Problem
from pipeline.durable import fsync_dir
from pipeline.errors import ArtifactError, IncompleteArtifactError

__all__ = [
    "ANSWER",
    "ARTIFACT_FILES",
    "LLM_CALLS",
    "MANIFEST",
    "PROBLEMS",
    "RUN",
    "TOOL_CALLS",
    "TOUCHING_TOOLS",
    "Artifact",
    "ArtifactError",
    "Budgets",
    "IncompleteArtifactError",
    "LlmCallRow",
    "Manifest",
    "ManifestSession",
    "Outcome",
    "RefusedAttempt",
    "RunRecord",
    "Tokens",
    "ToolCallRow",
    "Used",
    "clear_artifact",
    "load_artifact",
    "touched_sessions",
    "write_json",
    "write_jsonl",
]

MANIFEST: Final = "manifest.json"
ANSWER: Final = "answer.json"
PROBLEMS: Final = "problems.json"
LLM_CALLS: Final = "llm_calls.jsonl"
TOOL_CALLS: Final = "tool_calls.jsonl"
RUN: Final = "run.json"
# In the order they are written; run.json last marks the folder complete.
ARTIFACT_FILES: Final = (MANIFEST, ANSWER, PROBLEMS, LLM_CALLS, TOOL_CALLS, RUN)

# Tool-log names whose successful calls count as having looked at a session (INTERFACES.md, "touched").
TOUCHING_TOOLS: Final = frozenset({"search_transcript", "read_lines", "scan"})

Outcome = Literal["accepted", "refused", "budget", "error"]
M = TypeVar("M", bound=BaseModel)


class _Doc(BaseModel):
    """A JSON document of the artifact: camelCase on disk, snake_case or camelCase in Python.

    Unknown fields are kept rather than refused: INTERFACES.md lets later versions add fields, and
    an older reader must still open a newer folder.
    """

    model_config = ConfigDict(
        extra="allow",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class Budgets(_Doc):
    """Limits of one batch; running out of any of them fails the batch (outcome `budget`).

    The names match the notebook parameters max_tool_calls, max_submits, max_tokens, max_seconds.
    """

    max_tool_calls: Annotated[int, Field(ge=1)] = 200
    max_submits: Annotated[int, Field(ge=1)] = 3
    max_tokens: Annotated[int, Field(ge=1)] = 2_000_000
    max_seconds: Annotated[float, Field(gt=0)] = 1800.0


class Used(_Doc):
    """How much of each budget the batch spent."""

    tool_calls: int = 0
    submits: int = 0
    tokens: int = 0
    seconds: float = 0.0
    # How often the loop worked around the model (pipeline.consolidator.agent): tool calls read from
    # the text of a reply, replies that carried no usable call, reading calls repeated (not run).
    content_tool_calls: int = 0
    nudges: int = 0
    repeated_calls: int = 0


class Tokens(_Doc):
    """Token totals over the batch's model calls; a figure no call reported is None (unknown)."""

    prompt: int | None = 0
    cached: int | None = None
    completion: int | None = 0


class ManifestSession(_Doc):
    session_id: str
    line_count: int
    size_bytes: int
    new_from_line: int


class Manifest(_Doc):
    """manifest.json: the batch as offered. Watermarks record these sizes, not later ones."""

    run_id: str
    batch_id: str
    engine: str
    model: str | None
    created_at: dt.datetime
    sessions: list[ManifestSession]

    @property
    def session_ids(self) -> list[str]:
        return [s.session_id for s in self.sessions]


class RefusedAttempt(_Doc):
    """One entry of problems.json: a refused submission and every problem it had."""

    attempt: int
    problems: list[Problem]


class RunRecord(_Doc):
    """run.json: how the batch ended. Written last; its presence marks the folder complete."""

    outcome: Outcome
    reason: str | None
    budgets: Budgets
    tokens: Tokens
    cached_share: float | None
    started_at: dt.datetime
    finished_at: dt.datetime
    run_id: str | None = None
    batch_id: str | None = None
    engine: str | None = None
    model: str | None = None
    used: Used = Field(default_factory=Used)
    attempts: int = 0
    session_ids: list[str] = Field(default_factory=list)
    touched_session_ids: list[str] = Field(default_factory=list)
    read_session_ids: list[str] = Field(default_factory=list)
    # Named in readSessionIds but never searched or read: reported, and never watermarked.
    untouched_read_session_ids: list[str] = Field(default_factory=list)
    # readSessionIds ∩ touched, for an accepted answer only: what `apply` may watermark.
    watermark_session_ids: list[str] = Field(default_factory=list)


class _Row(BaseModel):
    """A table row: the warehouse's own column names, unknown keys kept."""

    model_config = ConfigDict(extra="allow")


class LlmCallRow(_Row):
    """One line of llm_calls.jsonl: a row of the `llm_calls` table (unknown values null, never 0)."""

    call_id: str
    source: str = "consolidator"
    session_id: str | None = None
    at: dt.datetime
    model: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    run_id: str | None = None
    batch_id: str | None = None
    system_fp: str | None = None
    tools_fp: str | None = None
    prefix_fp: str | None = None
    changed_sections: list[str] | None = None
    true_cause: str | None = None


class ToolCallRow(_Row):
    """One line of tool_calls.jsonl: a row of the `agent_tool_calls` table.

    `arguments` is the parsed JSON the model sent, or the raw text when it was not valid JSON (a
    JSON string then), so the value always fits the table's JSON column.
    """

    run_id: str
    batch_id: str
    seq: int
    name: str
    arguments: JsonValue = None
    session_id: str | None = None
    ok: bool
    result_chars: int
    at: dt.datetime

    def db_row(self) -> dict[str, Any]:
        """The row with `arguments` as JSON text, ready for an INSERT into agent_tool_calls."""
        row = self.model_dump()
        row["arguments"] = json.dumps(self.arguments, ensure_ascii=False)
        return row


def touched_sessions(rows: Iterable[ToolCallRow]) -> list[str]:
    """Sessions a search, read or scan returned for without error, in first-touch order."""
    seen: dict[str, None] = {}
    for row in rows:
        if row.ok and row.name in TOUCHING_TOOLS and row.session_id:
            seen.setdefault(row.session_id, None)
    return list(seen)


# --- writing ---------------------------------------------------------------------------------


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    fsync_dir(path.parent)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def write_json(path: Path, data: Any) -> None:
    """Write one JSON document atomically (pydantic models are dumped with their aliases)."""
    _write_atomic(path, json.dumps(_plain(data), ensure_ascii=False, indent=2) + "\n")


def write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    """Write one compact JSON document per line, atomically; no rows gives an empty file."""
    lines = [json.dumps(_plain(r), ensure_ascii=False, separators=(",", ":")) for r in rows]
    _write_atomic(path, "".join(line + "\n" for line in lines))


def clear_artifact(folder: Path) -> list[str]:
    """Remove the artifact files of an earlier run from `folder` (run.json first, so the folder
    turns incomplete before anything else goes). Other files, a notebook say, are left alone."""
    removed: list[str] = []
    for name in (RUN, *ARTIFACT_FILES[:-1]):
        path = folder / name
        if path.exists():
            path.unlink()
            removed.append(name)
        # A temporary file a killed writer left behind is ours too.
        for stale in folder.glob(f".{name}.*.tmp"):
            stale.unlink(missing_ok=True)
    return removed


def write_answer(folder: Path, answer: Answer) -> None:
    # dueHint is optional: an absent date is left out rather than written as null.
    write_json(folder / ANSWER, answer.model_dump(mode="json", exclude_none=True))


# --- reading ---------------------------------------------------------------------------------


class Artifact(BaseModel):
    """Everything one batch folder holds, validated."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    dir: Path
    manifest: Manifest
    run: RunRecord | None
    answer: Answer | None  # None when answer.json is absent or does not fit the contract's schema
    answer_data: Any = None  # answer.json as read, for the contract check to judge field by field
    problems: list[RefusedAttempt]
    llm_calls: list[LlmCallRow]
    tool_calls: list[ToolCallRow]

    @property
    def complete(self) -> bool:
        return self.run is not None

    @property
    def accepted(self) -> bool:
        has_answer = self.answer is not None or self.answer_data is not None
        return self.run is not None and self.run.outcome == "accepted" and has_answer

    def touched_session_ids(self) -> list[str]:
        """Recomputed from the tool log (the record of what was really looked at)."""
        return touched_sessions(self.tool_calls)

    def watermark_sessions(self) -> list[ManifestSession]:
        """The manifest entries `apply` may watermark: readSessionIds ∩ touched, accepted answers only."""
        if not self.accepted or self.answer is None:
            return []
        keep = set(self.answer.readSessionIds) & set(self.touched_session_ids())
        return [s for s in self.manifest.sessions if s.session_id in keep]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(f"{path} is missing; the artifact folder is not complete") from None
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None


def _read_jsonl(path: Path) -> list[Any]:
    if not path.exists():
        return []
    out: list[Any] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ArtifactError(f"{path} line {number} is not valid JSON: {exc.msg}") from None
    return out


def _validated(model: type[M], data: Any, where: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        place = ".".join(str(p) for p in first["loc"]) or "$"
        raise ArtifactError(f"{where}: {place}: {first['msg']} ({exc.error_count()} problem(s) in all)") from None


def _rows(model: type[M], items: Sequence[Any], path: Path) -> list[M]:
    return [_validated(model, item, f"{path} line {n}") for n, item in enumerate(items, start=1)]


def load_artifact(folder: str | os.PathLike[str], *, require_complete: bool = True) -> Artifact:
    """Read a batch folder. Without run.json it is incomplete: refused unless `require_complete`
    is False (then `run` is None), since a batch that did not finish must not be applied."""
    path = Path(folder)
    if not path.is_dir():
        raise ArtifactError(f"no artifact folder at {path}")
    if not (path / MANIFEST).exists():
        raise ArtifactError(f"{path} holds no {MANIFEST}; is it a batch folder written by `pipeline consolidate`?")
    run: RunRecord | None = None
    if (path / RUN).exists():
        run = _validated(RunRecord, _read_json(path / RUN), str(path / RUN))
    elif require_complete:
        raise IncompleteArtifactError(
            f"{path} has no {RUN}: that batch did not finish, so nothing in it may be applied; run it again"
        )
    answer, answer_data = None, None
    if (path / ANSWER).exists():
        answer_data = _read_json(path / ANSWER)
        try:
            answer = Answer.model_validate(answer_data)
        except ValidationError:
            pass  # `apply` runs the contract on answer_data, which names every broken field
    problems_data = _read_json(path / PROBLEMS) if (path / PROBLEMS).exists() else []
    return Artifact(
        dir=path,
        manifest=_validated(Manifest, _read_json(path / MANIFEST), str(path / MANIFEST)),
        run=run,
        answer=answer,
        answer_data=answer_data,
        problems=_rows(RefusedAttempt, problems_data, path / PROBLEMS),
        llm_calls=_rows(LlmCallRow, _read_jsonl(path / LLM_CALLS), path / LLM_CALLS),
        tool_calls=_rows(ToolCallRow, _read_jsonl(path / TOOL_CALLS), path / TOOL_CALLS),
    )
