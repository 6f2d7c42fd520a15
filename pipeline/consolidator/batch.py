"""One consolidation batch: choose the engine, run it, write the artifact folder.

`run_batch` is what the CLI verb `pipeline consolidate` and the consolidate notebook both call. It
reads the batch's input folder (`pipeline.consolidator.batch_input`: the nightly planner writes it;
given a warehouse instead, run_batch first copies the batch's sessions out of it, read-only and
briefly, into `<out_dir>/input/`), writes nothing but the batch's artifact folder
(`pipeline.consolidator.artifact`), and returns a `BatchResult`. Once the input is written the
warehouse is never opened again. Applying the folder to the corpus and the warehouse is `apply`'s
job, later and elsewhere.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pipeline import config
from pipeline.consolidator import tools
from pipeline.consolidator.artifact import (
    LLM_CALLS,
    MANIFEST,
    PROBLEMS,
    RUN,
    TOOL_CALLS,
    Budgets,
    Manifest,
    ManifestSession,
    RunRecord,
    Used,
    clear_artifact,
    write_answer,
    write_json,
    write_jsonl,
)
from pipeline.consolidator.batch_input import INPUT_DIR, BatchInput, snapshot
from pipeline.consolidator.batch_secrets import scan_sessions
from pipeline.consolidator.context import BatchContext, EngineResult, EventSink, Recorder, utc_now
from pipeline.consolidator.contract import MAX_CLAIM_CHARS, MAX_GIST_CHARS, Answer
from pipeline.consolidator.engine import EngineOptions, Prepared, get_engine, resolve_engine
from pipeline.errors import PipelineError, ToolError, UsageError
from pipeline.faults import crash_point
from pipeline.secrets.gate import SecretSet

if TYPE_CHECKING:  # the openai client is imported only when the LLM engine runs: it is slow to load
    from openai import OpenAI

__all__ = [
    "BatchResult",
    "batch_id_for",
    "default_out_dir",
    "new_run_id",
    "parse_session_ids",
    "prepare_input",
    "run_batch",
]

log = logging.getLogger(__name__)

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class BatchResult:
    """How one batch ended and where its artifact folder is."""

    outcome: str
    reason: str | None
    out_dir: Path
    manifest: Manifest
    run: RunRecord
    answer: Answer | None

    @property
    def accepted(self) -> bool:
        return self.outcome == "accepted"

    @property
    def exit_code(self) -> int:
        """0 when an answer was accepted, 1 otherwise (the artifact says why)."""
        return 0 if self.accepted else 1

    def to_json(self) -> dict[str, Any]:
        """A summary for `--json` and notebooks (the folder has the full record)."""
        answer = self.answer
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "outDir": str(self.out_dir),
            "runId": self.manifest.run_id,
            "batchId": self.manifest.batch_id,
            "engine": self.manifest.engine,
            "model": self.manifest.model,
            "candidates": len(answer.candidates) if answer else 0,
            "commitments": len(answer.commitments) if answer else 0,
            "sessionIds": self.manifest.session_ids,
            "touchedSessionIds": self.run.touched_session_ids,
            "untouchedReadSessionIds": self.run.untouched_read_session_ids,
            "watermarkSessionIds": self.run.watermark_session_ids,
            "tokens": self.run.tokens.model_dump(mode="json"),
            "cachedShare": self.run.cached_share,
        }


def parse_session_ids(value: str | Sequence[str]) -> list[str]:
    """Session ids from a list, or from comma-separated strings (as flags and papermill pass them);
    duplicates dropped, order kept."""
    items = [value] if isinstance(value, str) else list(value)
    ids = [part.strip() for item in items for part in str(item).split(",")]
    return list(dict.fromkeys(i for i in ids if i))


def new_run_id(now: Any | None = None) -> str:
    """A fresh run id: UTC time to the second plus a random suffix (two runs may start together)."""
    now = now or utc_now()
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def batch_id_for(session_ids: Sequence[str]) -> str:
    """A batch id derived from the batch's sessions, so the same batch gets the same id."""
    digest = hashlib.sha256("\n".join(sorted(session_ids)).encode("utf-8")).hexdigest()
    return f"b-{digest[:12]}"


def default_out_dir(run_id: str, batch_id: str, day: str, runs: str | os.PathLike[str] | None = None) -> Path:
    """`data/runs/<YYYY-MM-DD>/<run-id>/<batch-id>/` under the runs folder (`--runs`, PIPELINE_RUNS)."""
    return config.runs_path(runs) / day / run_id / batch_id


def _ids_from_layout(out_dir: Path) -> tuple[str | None, str | None]:
    # A folder laid out as <runs>/<day>/<run-id>/<batch-id> (how the nightly names notebook out_dirs)
    # carries its own ids, so a notebook given only out_dir still records the night's run id.
    if _DAY.fullmatch(out_dir.parent.parent.name):
        return out_dir.parent.name, out_dir.name
    return None, None


def _manifest_sessions(source: BatchInput, session_ids: Sequence[str]) -> list[ManifestSession]:
    with source.reading() as con:
        try:
            entries = tools.list_sessions(con, list(session_ids))
        except ToolError as exc:
            raise UsageError(f"{exc}; `pipeline sessions` lists the sessions in the warehouse") from None
    by_id = {e["sessionId"]: e for e in entries}
    # In the order asked for: the batch is what the caller offered.
    return [
        ManifestSession(
            session_id=sid,
            line_count=by_id[sid]["lineCount"],
            size_bytes=by_id[sid]["sizeBytes"],
            new_from_line=by_id[sid]["newFromLine"],
        )
        for sid in session_ids
    ]


def _budgets(budgets: Budgets | Mapping[str, Any] | None) -> Budgets:
    if budgets is None:
        return Budgets()
    if isinstance(budgets, Budgets):
        return budgets
    try:
        # Notebook parameters and unset flags may be None for "use the default".
        return Budgets.model_validate({k: v for k, v in budgets.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}" for e in exc.errors()[:5])
        raise UsageError(f"bad budget: {problems}") from None


def run_batch(
    session_ids: str | Sequence[str],
    *,
    db: str | Path | None = None,
    batch_input: str | os.PathLike[str] | BatchInput | None = None,
    engine: str = "auto",
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    runs: str | os.PathLike[str] | None = None,
    budgets: Budgets | Mapping[str, Any] | None = None,
    run_id: str | None = None,
    batch_id: str | None = None,
    max_retries: int = 2,
    timeout: float = 120.0,
    on_event: EventSink | None = None,
    client: OpenAI | None = None,
    tool_choice: str | None = None,
    parallel_tool_calls: bool | None = None,
    context_tokens: int | None = None,
    max_reply_tokens: int | None = None,
) -> BatchResult:
    """Consolidate one batch and write its artifact folder; returns how it ended.

    `engine` is auto or a name of `pipeline.consolidator.engine.ENGINES` (built in: rules, openai;
    auto: openai when OPENAI_API_KEY is set, else rules).
    `model`, `base_url` and the key fall back to PIPELINE_MODEL, OPENAI_BASE_URL and
    OPENAI_API_KEY. `batch_input` is the folder the nightly planner wrote the batch's input to (or that
    folder as `prepare_input` loaded it, whose views are then built once for both); without
    it the sessions are copied from the warehouse `db` into `<out_dir>/input/` first, and only then is
    the batch run (from that copy). `out_dir` is the batch folder itself; by default it is
    `<runs>/<YYYY-MM-DD>/<run-id>/<batch-id>/`. `budgets` is a Budgets or a mapping of its fields
    (None keeps a default); `max_retries` (0 or more) and `timeout` (seconds, above 0) apply to each
    model request. `tool_choice` (auto | required), `parallel_tool_calls`, `context_tokens` (the
    server's context window) and `max_reply_tokens` tune the openai engine for a local server; unset,
    nothing is sent for them and no window is checked. `on_event` receives progress events (tool
    calls, model calls, submissions) as they happen. Wrong invocations (no sessions, a budget or retry setting out of range, unknown
    session, no model for the openai engine) raise UsageError before anything is written.
    """
    ids = parse_session_ids(session_ids)
    if not ids:
        raise UsageError("no sessions given: pass --sessions ID[,ID…] or --pending")
    limits = _budgets(budgets)
    if max_retries < 0 or timeout <= 0:
        raise UsageError("--max-retries must be 0 or more and --timeout above 0")
    key = api_key or os.environ.get("OPENAI_API_KEY") or None
    chosen, why = resolve_engine(engine, api_key=key)
    model = config.model_name(model)
    base_url = config.base_url(base_url)
    prepared = get_engine(chosen)(EngineOptions(
        model=model, base_url=base_url, api_key=key, max_retries=max_retries, timeout=timeout, client=client,
        tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls, context_tokens=context_tokens,
        max_reply_tokens=max_reply_tokens))
    started_at = utc_now()
    source = prepare_input(ids, batch_input=batch_input) if batch_input is not None else None

    folder = Path(out_dir) if out_dir is not None else None
    layout_run, layout_batch = _ids_from_layout(folder) if folder is not None else (None, None)
    run_id = run_id or layout_run or new_run_id(started_at)
    batch_id = batch_id or layout_batch or batch_id_for(ids)
    folder = folder or default_out_dir(run_id, batch_id, f"{started_at:%Y-%m-%d}", runs)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder} is a file; name a folder for the batch's artifact")
    if source is None:
        source = prepare_input(ids, db=db, out_dir=folder)
    sessions = _manifest_sessions(source, ids)
    folder.mkdir(parents=True, exist_ok=True)
    removed = clear_artifact(folder)

    manifest = Manifest(
        run_id=run_id, batch_id=batch_id, engine=chosen,
        model=prepared.model, created_at=started_at, sessions=sessions,
    )
    write_json(folder / MANIFEST, manifest)
    # A batch killed from here on leaves a folder without run.json: incomplete, never applied.
    crash_point(f"consolidate:{batch_id}")

    # Secrets are detected on the batch's own input, like everything else the batch reads.
    with source.reading() as scan_con:
        batch_secrets = scan_sessions(scan_con, ids)
    ctx = BatchContext(
        run_id=run_id, batch_id=batch_id, source=source, session_ids=tuple(ids), budgets=limits,
        new_from_line={s.session_id: s.new_from_line for s in sessions}, on_event=on_event,
        secrets=batch_secrets,
    )
    if removed:
        ctx.emit("engine", f"replacing the earlier artifact in {folder} ({', '.join(removed)})")
    ctx.emit("engine", why)
    if batch_secrets:
        counts = ", ".join(f"{n} {kind}" for kind, n in batch_secrets.counts().items())
        ctx.emit("engine", f"secrets found in the batch's transcripts and masked everywhere: {counts}")
    recorder = Recorder(run_id=run_id, batch_id=batch_id)
    result = _run_engine(prepared, ctx, recorder)
    return _finish(folder, manifest, ctx, recorder, result, started_at)


def prepare_input(
    session_ids: str | Sequence[str],
    *,
    db: str | Path | None = None,
    batch_input: str | os.PathLike[str] | BatchInput | None = None,
    out_dir: str | os.PathLike[str] | None = None,
) -> BatchInput:
    """The batch's input: the folder `batch_input` (as the nightly planner wrote it, or already loaded
    as a BatchInput), or else a copy of the sessions taken from the warehouse `db` into
    `<out_dir>/input/` now.

    Sessions the input or the warehouse does not hold are refused (UsageError) before anything is written.
    """
    ids = parse_session_ids(session_ids)
    if batch_input is not None:
        source = batch_input if isinstance(batch_input, BatchInput) else BatchInput.load(batch_input)
        source.check(ids)
        return source
    if out_dir is None:
        raise UsageError("give the batch an out_dir to copy its input into, or an existing batch_input folder")
    try:
        return snapshot(db, ids, Path(out_dir) / INPUT_DIR)
    except ToolError as exc:
        raise UsageError(f"{exc}; `pipeline sessions` lists the sessions in the warehouse") from None


def _run_engine(prepared: Prepared, ctx: BatchContext, recorder: Recorder) -> EngineResult:
    try:
        return prepared.run(ctx, recorder)
    except PipelineError as exc:
        return EngineResult("error", str(exc))
    except Exception as exc:
        # A bug must not leave a folder that looks unfinished for ever: record it and say so.
        log.exception("consolidation batch %s failed", ctx.batch_id)
        return EngineResult("error", f"internal error: {type(exc).__name__}: {exc}")


def _finish(
    folder: Path,
    manifest: Manifest,
    ctx: BatchContext,
    recorder: Recorder,
    result: EngineResult,
    started_at: Any,
) -> BatchResult:
    answer = result.answer if result.outcome == "accepted" else None
    known = ctx.secrets
    if answer is not None:
        answer = redact_answer(answer, known)
    if known and result.reason:
        result.reason = known.scrub(result.reason)
    touched = recorder.touched()
    read = list(answer.readSessionIds) if answer else []
    touched_set = set(touched)
    batch_order = list(ctx.session_ids)
    run = RunRecord(
        outcome=result.outcome,
        reason=result.reason,
        budgets=ctx.budgets,
        used=Used(
            tool_calls=sum(1 for r in recorder.tool_calls if r.name not in ("submit_answer", "scan")),
            submits=result.submits,
            tokens=recorder.tokens_used(),
            seconds=round(ctx.elapsed(), 3),
            content_tool_calls=recorder.content_calls,
            nudges=recorder.nudges,
            repeated_calls=recorder.repeats,
        ),
        tokens=recorder.tokens(),
        cached_share=recorder.cached_share(),
        started_at=started_at,
        finished_at=utc_now(),
        run_id=manifest.run_id,
        batch_id=manifest.batch_id,
        engine=manifest.engine,
        model=manifest.model,
        attempts=result.submits,
        session_ids=batch_order,
        touched_session_ids=[s for s in batch_order if s in touched_set],
        read_session_ids=read,
        untouched_read_session_ids=[s for s in read if s not in touched_set],
        watermark_session_ids=[s for s in batch_order if s in set(read) & touched_set],
    )
    if answer is not None:
        write_answer(folder, answer)
    # Every file of the artifact is built from redacted text: the model's arguments and the refusal
    # reasons are scrubbed against the batch's secrets like everything else.
    write_json(folder / PROBLEMS, [known.scrub_json(r.model_dump(mode="json")) for r in recorder.refused])
    write_jsonl(folder / LLM_CALLS, [r.model_dump(mode="json") for r in recorder.llm_calls])
    write_jsonl(folder / TOOL_CALLS, [_scrub_tool_call(r.model_dump(mode="json"), known) for r in recorder.tool_calls])
    write_json(folder / RUN, run)  # last: its presence marks the folder complete
    untouched = f"; named but never read: {', '.join(run.untouched_read_session_ids)}" if run.untouched_read_session_ids else ""
    ctx.emit("outcome", f"{result.outcome}: {result.reason}{untouched}", outcome=result.outcome, outDir=str(folder))
    return BatchResult(
        outcome=result.outcome, reason=result.reason, out_dir=folder, manifest=manifest, run=run, answer=answer
    )


def _scrub_tool_call(row: dict[str, Any], known: SecretSet) -> dict[str, Any]:
    if known:
        row["arguments"] = known.scrub_json(row.get("arguments"))
    return row


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact_answer(answer: Answer, secrets: SecretSet) -> Answer:
    """The answer as it may be written to answer.json: claims, gists, entities and statements
    scrubbed (masked, and any rewritten secret cut out); quotes masked by known value only, so that
    the mask rule still finds them in the stored lines."""
    if not secrets:
        return answer
    data = answer.model_dump(mode="json")
    for cand in data["candidates"]:
        cand["claim"] = _clip(secrets.scrub(cand["claim"]), MAX_CLAIM_CHARS)
        cand["gist"] = _clip(secrets.scrub(cand["gist"]), MAX_GIST_CHARS)
        for entity in cand["entities"]:
            entity["name"] = secrets.scrub(entity["name"])
        for ev in cand["evidence"]:
            ev["quote"] = secrets.mask_known(ev["quote"])
    for com in data["commitments"]:
        com["statement"] = secrets.scrub(com["statement"])
        for ev in com["evidence"]:
            ev["quote"] = secrets.mask_known(ev["quote"])
    try:
        return Answer.model_validate(data)
    except ValidationError:
        # Masking made a field invalid (a quote past its length limit): written as is, so that
        # apply refuses it with the reason rather than the secret being written unmasked.
        return Answer.model_construct(**data)
