"""`apply`: the one writer that lands a batch's artifact in the corpus and the warehouse.

Order matters for crash safety. Corpus commits come first, each tagged with the artifact id and
the candidate's index, so a re-run skips what already landed; the warehouse changes (memory
mirror, tasks, watermarks, llm calls, the applied-artifact record) follow in ONE transaction. A
kill anywhere therefore leaves either nothing, or commits that the re-run recognises; never a
watermark for a session whose memories did not land, never a memory twice.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from pipeline import config, db, dedupe, memory_file, tasks
from pipeline.contract import Answer, Candidate, check_answer
from pipeline.corpus import Corpus
from pipeline.errors import UsageError
from pipeline.faults import crash_point
from pipeline.quotes import WarehouseQuotes
from pipeline.redact import redact

TOUCHING_TOOLS = ("search_transcript", "read_lines", "scan")


class ManifestSession(BaseModel):
    model_config = ConfigDict(extra="allow")
    sessionId: str
    lineCount: int
    sizeBytes: int
    newFromLine: int = 1


class Manifest(BaseModel):
    model_config = ConfigDict(extra="allow")
    runId: str
    batchId: str
    engine: str
    model: str | None = None
    createdAt: str
    sessions: list[ManifestSession]


@dataclass
class LoadedArtifact:
    path: Path
    artifact_id: str
    manifest: Manifest
    run: dict[str, Any]
    answer: dict[str, Any] | None
    llm_calls: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]

    @property
    def session_ids(self) -> list[str]:
        return [s.sessionId for s in self.manifest.sessions]

    def touched(self) -> set[str]:
        return {
            t["session_id"] for t in self.tool_calls
            if t.get("ok") and t.get("name") in TOUCHING_TOOLS and t.get("session_id")
        }


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from exc


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise UsageError(f"{path}:{n}: not valid JSON ({exc})") from exc
    return rows


def load(path: str | Path) -> LoadedArtifact:
    folder = Path(path)
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such artifact folder")
    if not (folder / "manifest.json").exists():
        raise UsageError(f"{folder}: not an artifact folder (no manifest.json)")
    if not (folder / "run.json").exists():
        raise UsageError(f"{folder}: the batch did not finish (no run.json); run it again rather than applying it")
    manifest_bytes = (folder / "manifest.json").read_bytes()
    answer_path = folder / "answer.json"
    answer_bytes = answer_path.read_bytes() if answer_path.exists() else b""
    artifact_id = "art-" + hashlib.sha256(manifest_bytes + b"\0" + answer_bytes).hexdigest()[:16]
    try:
        manifest = Manifest.model_validate_json(manifest_bytes)
    except ValueError as exc:
        raise UsageError(f"{folder / 'manifest.json'}: {exc}") from exc
    return LoadedArtifact(
        path=folder, artifact_id=artifact_id, manifest=manifest, run=_read_json(folder / "run.json"),
        answer=_read_json(answer_path) if answer_bytes else None,
        llm_calls=_read_jsonl(folder / "llm_calls.jsonl"), tool_calls=_read_jsonl(folder / "tool_calls.jsonl"),
    )


@dataclass
class ApplyResult:
    artifact_id: str
    run_id: str
    batch_id: str
    status: str  # applied | already-applied | refused | no-answer
    reason: str | None = None
    memories_written: list[str] = field(default_factory=list)
    memories_linked: list[str] = field(default_factory=list)
    candidates_refused: list[dict[str, Any]] = field(default_factory=list)
    tasks: dict[str, int] = field(default_factory=dict)
    watermarked: list[str] = field(default_factory=list)
    named_not_touched: list[str] = field(default_factory=list)
    llm_calls: int = 0

    @property
    def exit_code(self) -> int:
        return 0 if self.status in ("applied", "already-applied") else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "artifactId": self.artifact_id, "runId": self.run_id, "batchId": self.batch_id, "status": self.status,
            "reason": self.reason, "memoriesWritten": self.memories_written, "memoriesLinked": self.memories_linked,
            "candidatesRefused": self.candidates_refused, "tasks": self.tasks, "watermarked": self.watermarked,
            "namedNotTouched": self.named_not_touched, "llmCalls": self.llm_calls,
        }


def apply(artifact_dir: str | Path, *, db_file: str | Path | None = None, corpus_dir: str | Path | None = None,
          confidence_floor: float = tasks.CONFIDENCE_FLOOR) -> ApplyResult:
    art = load(artifact_dir)
    m = art.manifest
    result = ApplyResult(art.artifact_id, m.runId, m.batchId, "applied")
    corpus = Corpus(config.corpus_path(corpus_dir))
    with db.writing(db_file) as con:
        if db.one(con, "SELECT 1 FROM applied_artifacts WHERE artifact_id = ?", [art.artifact_id]):
            result.status = "already-applied"
            return result
        answer: Answer | None = None
        if art.answer is None:
            result.status, result.reason = "no-answer", f"the batch ended without an accepted answer ({art.run.get('outcome')}: {art.run.get('reason')})"
        else:
            check = check_answer(art.answer, art.session_ids, WarehouseQuotes(con))
            if not check.accepted:
                result.status = "refused"
                result.reason = "the answer fails the contract against this warehouse: " + "; ".join(
                    f"{p.path}: {p.reason}" for p in check.problems[:5])
            else:
                answer = check.answer
        crash_point("apply:checked")

        if answer is not None:
            corpus.ensure()
            _land_candidates(corpus, art, answer.candidates, result)
            _land_tasks(corpus, art, answer, result, confidence_floor)
            touched = art.touched()
            named = [s for s in dict.fromkeys(answer.readSessionIds) if s in art.session_ids]
            result.watermarked = [s for s in named if s in touched]
            result.named_not_touched = [s for s in named if s not in touched]
        crash_point("apply:before-warehouse")
        _record(con, corpus if answer is not None else None, art, result)
    return result


# -- corpus ------------------------------------------------------------------------------------------
def _existing_memories(corpus: Corpus) -> dict[Path, memory_file.MemoryDoc]:
    out = {}
    for kind_dir in sorted(p for p in corpus.root.iterdir() if p.is_dir() and p.name in memory_file.KINDS):
        for p in sorted(kind_dir.glob("*.md")):
            with p.open(encoding="utf-8", newline="") as fh:  # keep line ends exactly as written
                out[p] = memory_file.parse(fh.read())
    return out


def _evidence_body(candidate: Candidate) -> str:
    parts = ["Evidence, verbatim from the transcripts:"]
    for n, ev in enumerate(candidate.evidence, start=1):
        quote = redact(ev.quote)
        note = f" (redacted: {', '.join(quote.kinds)}; no longer verbatim)" if quote.changed else ""
        parts.append(f"[{n}] session {ev.sessionId}{note}\n{quote.text}")
    return "\n\n".join(parts)


def _land_candidates(corpus: Corpus, art: LoadedArtifact, candidates: list[Candidate], result: ApplyResult) -> None:
    done = {
        c.trailers.get("Candidate") for c in corpus.commits() if c.trailers.get("Artifact") == art.artifact_id
    }
    existing = _existing_memories(corpus)
    created = art.manifest.createdAt[:10]
    for i, cand in enumerate(candidates):
        if str(i) in done:
            continue
        claim = memory_file.one_line(redact(cand.claim).text)
        gist = memory_file.clean_block(redact(cand.gist).text)
        entities = [memory_file.one_line(redact(f"{e.type}:{e.name}").text) for e in cand.entities]
        sessions = sorted({e.sessionId for e in cand.evidence})
        mid = memory_file.memory_id(cand.kind, claim)
        trailers = {"Artifact": art.artifact_id, "Candidate": str(i)}
        same = next((p for p, d in existing.items() if d.id == mid), None)
        if same is None:
            match = dedupe.best_match(claim, [(str(p), d.claim) for p, d in existing.items()])
            same = Path(match[0]) if match else None
        if same is not None:
            doc = existing[same]
            doc = doc.model_copy(update={"sessions": sorted(set(doc.sessions) | set(sessions))})
            same.write_text(memory_file.render(doc), encoding="utf-8")
            corpus.add(same)
            crash_point("apply:link-file-written")
            corpus.commit(f"link: {doc.claim}", _evidence_body(cand), {**trailers, "Memory-Id": doc.id},
                          allow_empty=True)
            existing[same] = doc
            result.memories_linked.append(doc.id)
            crash_point("apply:link-committed")
            continue
        doc = memory_file.MemoryDoc(
            id=mid, kind=cand.kind, claim=claim, entities=entities, sessions=sessions, created=created,
            run=art.manifest.runId, batch=art.manifest.batchId, gist=gist,
        )
        problems = memory_file.gate(doc, [e.quote for e in cand.evidence])
        if problems:
            result.candidates_refused.append({"candidate": i, "claim": claim, "problems": problems})
            continue
        taken = {p: d.id for p, d in existing.items()}
        path = memory_file.path_for(corpus.root, cand.kind, claim, taken, mid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(memory_file.render(doc), encoding="utf-8")
        corpus.add(path)
        crash_point("apply:memory-file-written")
        corpus.commit(f"memory: {claim}", _evidence_body(cand), {**trailers, "Memory-Id": mid})
        existing[path] = doc
        result.memories_written.append(mid)
        crash_point("apply:memory-committed")


def _land_tasks(corpus: Corpus, art: LoadedArtifact, answer: Answer, result: ApplyResult, floor: float) -> None:
    existing = tasks.load_all(corpus.root)
    plan = tasks.plan(answer.commitments, existing, art.manifest.createdAt[:10], floor)
    result.tasks = plan.counts()
    if any(c.trailers.get("Artifact") == art.artifact_id and c.trailers.get("Tasks") for c in corpus.commits()):
        return
    if not plan.create and not plan.close:
        return
    taken = {p: d.id for p, d in existing}
    for doc in plan.create:
        path = tasks.path_for(corpus.root, doc, taken)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tasks.render(doc), encoding="utf-8")
        taken[path] = doc.id
        corpus.add(path)
    for old_path, doc in plan.close:
        closed = doc.model_copy(update={"status": "done", "closed": art.manifest.createdAt[:10]})
        new_path = tasks.path_for(corpus.root, closed, taken)
        new_path.parent.mkdir(parents=True, exist_ok=True)
        corpus.remove(old_path)
        new_path.write_text(tasks.render(closed), encoding="utf-8")
        corpus.add(new_path)
    crash_point("apply:task-files-written")
    counts = plan.counts()
    subject = f"tasks: {counts['proposed']} proposed, {counts['closed'] + counts['doneAtOnce']} done"
    lines = [f"- proposed: {d.statement}" for d in plan.create if d.status == "proposed"]
    lines += [f"- done: {d.statement}" for d in plan.create if d.status == "done"]
    lines += [f"- closed: {d.statement}" for _, d in plan.close]
    corpus.commit(subject, "\n".join(lines), {"Artifact": art.artifact_id, "Tasks": "yes"})
    crash_point("apply:tasks-committed")


# -- warehouse ---------------------------------------------------------------------------------------
def mirror_corpus(con: duckdb.DuckDBPyConnection, corpus: Corpus) -> None:
    """Make `memories`, `memory_links` and `tasks` equal to what the corpus holds (inside the caller's transaction)."""
    commit_of = {}
    for c in corpus.commits():
        if c.subject.startswith("memory: ") and "Memory-Id" in c.trailers:
            commit_of.setdefault(c.trailers["Memory-Id"], c.sha)
    mems = _existing_memories(corpus)
    con.execute("DELETE FROM memory_links")
    con.execute("DELETE FROM memories")
    rows = [
        {"memory_id": d.id, "path": str(p.relative_to(corpus.root)), "kind": d.kind, "claim": d.claim,
         "created_at": d.created, "run_id": d.run, "batch_id": d.batch, "commit": commit_of.get(d.id)}
        for p, d in mems.items()
    ]
    links = [{"memory_id": d.id, "session_id": s} for d in mems.values() for s in d.sessions]
    _insert(con, "memories", rows, ["memory_id", "path", "kind", "claim", "created_at", "run_id", "batch_id", "commit"])
    _insert(con, "memory_links", links, ["memory_id", "session_id"])
    con.execute("DELETE FROM tasks")
    _insert(con, "tasks", [tasks.as_row(p, d, corpus.root) for p, d in tasks.load_all(corpus.root)],
            ["task_id", "path", "status", "statement", "actor", "due_hint", "session_id", "confidence",
             "created_at", "closed_at"])


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]], cols: list[str]) -> None:
    if not rows:
        return
    data = pa.Table.from_pylist([{c: r.get(c) for c in cols} for r in rows])
    con.register("_apply_rows", data)
    try:
        quoted = ", ".join(f'"{c}"' for c in cols)  # column names are constants of this module
        con.execute(f"INSERT INTO {table} ({quoted}) SELECT {quoted} FROM _apply_rows")
    finally:
        con.unregister("_apply_rows")


LLM_CALL_COLUMNS = ["call_id", "source", "session_id", "at", "model", "prompt_tokens", "cached_tokens",
                    "cache_write_tokens", "completion_tokens", "latency_ms", "run_id", "batch_id", "system_fp",
                    "tools_fp", "prefix_fp"]


def _record(con: duckdb.DuckDBPyConnection, corpus: Corpus | None, art: LoadedArtifact, result: ApplyResult) -> None:
    m = art.manifest
    now = dt.datetime.now(dt.UTC)
    sizes = {s.sessionId: s for s in m.sessions}
    con.execute("BEGIN TRANSACTION")
    try:
        if corpus is not None:
            mirror_corpus(con, corpus)
        for sid in result.watermarked:
            con.execute(
                'INSERT INTO watermarks (session_id, line_count, size_bytes, run_id, batch_id, "at") VALUES (?, ?, ?, ?, ?, ?)',
                [sid, sizes[sid].lineCount, sizes[sid].sizeBytes, m.runId, m.batchId, now],
            )
        calls = []
        for row in art.llm_calls:
            r = {c: row.get(c) for c in LLM_CALL_COLUMNS}
            r["source"] = r["source"] or "consolidator"
            calls.append(r)
        if calls:
            con.register("_apply_calls", pa.Table.from_pylist(calls))
            try:
                con.execute(
                    "INSERT OR IGNORE INTO llm_calls (call_id, source, session_id, \"at\", model, prompt_tokens, "
                    "cached_tokens, cache_write_tokens, completion_tokens, latency_ms, run_id, batch_id, system_fp, "
                    "tools_fp, prefix_fp) SELECT call_id, source, session_id, TRY_CAST(\"at\" AS TIMESTAMPTZ), model, "
                    "prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens, latency_ms, run_id, batch_id, "
                    "system_fp, tools_fp, prefix_fp FROM _apply_calls"
                )
            finally:
                con.unregister("_apply_calls")
        result.llm_calls = len(calls)
        con.execute("DELETE FROM agent_tool_calls WHERE run_id = ? AND batch_id = ?", [m.runId, m.batchId])
        for t in art.tool_calls:
            args = t.get("arguments")
            con.execute(
                'INSERT INTO agent_tool_calls (run_id, batch_id, seq, name, arguments, session_id, ok, result_chars, "at") '
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, TRY_CAST(? AS TIMESTAMPTZ))",
                [m.runId, m.batchId, t.get("seq"), t.get("name"),
                 args if isinstance(args, str) or args is None else json.dumps(args), t.get("session_id"),
                 t.get("ok"), t.get("result_chars"), t.get("at")],
            )
        con.execute("DELETE FROM batches WHERE run_id = ? AND batch_id = ?", [m.runId, m.batchId])
        con.execute(
            "INSERT INTO batches (run_id, batch_id, status, reason, sessions, started_at, finished_at, artifact_dir, details) "
            "VALUES (?, ?, ?, ?, ?, TRY_CAST(? AS TIMESTAMPTZ), TRY_CAST(? AS TIMESTAMPTZ), ?, ?)",
            [m.runId, m.batchId, result.status, result.reason, art.session_ids, art.run.get("startedAt"),
             art.run.get("finishedAt"), str(art.path.absolute()), json.dumps(result.to_json())],
        )
        crash_point("apply:in-transaction")
        if result.status == "applied":
            # A refused or answerless artifact is not marked: applying it again says why again.
            con.execute(
                "INSERT INTO applied_artifacts VALUES (?, ?, ?, ?, ?, ?, ?)",
                [art.artifact_id, m.runId, m.batchId, str(art.path.absolute()), result.status, now,
                 json.dumps(result.to_json())],
            )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    crash_point("apply:committed")
