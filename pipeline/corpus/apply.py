"""`apply`: the one writer that lands a batch's artifact in the corpus and the warehouse.

Order matters for crash safety. Corpus commits come first, each tagged with the artifact id and
the candidate's index, so a re-run skips what already landed; the warehouse changes (memory
mirror, tasks, watermarks, llm calls, the applied-artifact record) follow in ONE transaction. A
kill anywhere therefore leaves either nothing, or commits that the re-run recognises; never a
watermark for a session whose memories did not land, never a memory twice.

Secrets: the batch's sessions are scanned again here (an artifact is never trusted), every text is
redacted with what the scan found, and the last gate (`pipeline.secrets.gate`) refuses a candidate
or a commitment whose text still shares 12 or more characters with one of those secrets, in any
normalised form. Refusals are listed in `candidatesRefused` with the reason, never with the secret.

A refusal does not keep the sessions pending: the batch read them, and they are watermarked like the
others. Holding them back would not bring the finding back: the same transcript, read again by the
same rules, gives the same candidate and the same refusal, night after night (a livelock the real
sessions showed: "0 sessions watermarked … still pending: 1"). What a refusal loses is said instead,
in `candidatesRefused` and on the night report, for a reviewer to read.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from pipeline import config
from pipeline.consolidator import artifact
from pipeline.consolidator.batch_secrets import Scan, scan_warehouse
from pipeline.consolidator.batch_secrets import store as store_scan
from pipeline.consolidator.contract import Answer, Candidate, Commitment, check_answer, one_line, written_text
from pipeline.consolidator.quotes import WarehouseQuotes
from pipeline.corpus import about as about_mod
from pipeline.corpus import dedupe, memory_file, tasks
from pipeline.corpus.git_corpus import Corpus
from pipeline.errors import UsageError
from pipeline.faults import crash_point
from pipeline.secrets.gate import SecretSet
from pipeline.secrets.redact import redact
from pipeline.warehouse import db as warehouse


@dataclass
class LoadedArtifact:
    """A batch folder as `artifact.load_artifact` reads it, plus the id `apply` records it under."""

    path: Path
    artifact_id: str
    art: artifact.Artifact

    @property
    def manifest(self) -> artifact.Manifest:
        return self.art.manifest

    @property
    def session_ids(self) -> list[str]:
        return self.art.manifest.session_ids

    @property
    def created_day(self) -> str:
        return self.art.manifest.created_at.date().isoformat()


def load(path: str | Path) -> LoadedArtifact:
    art = artifact.load_artifact(path)
    folder = Path(path)
    answer_path = folder / artifact.ANSWER
    digest = hashlib.sha256((folder / artifact.MANIFEST).read_bytes() + b"\0"
                            + (answer_path.read_bytes() if answer_path.exists() else b""))
    return LoadedArtifact(folder, "art-" + digest.hexdigest()[:16], art)


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
    # Where each landed candidate went: {candidate (its index in the answer), memoryId, as: memory | link}
    candidates_landed: list[dict[str, Any]] = field(default_factory=list)
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
            "candidatesRefused": self.candidates_refused, "candidatesLanded": self.candidates_landed, "tasks": self.tasks, "watermarked": self.watermarked,
            "namedNotTouched": self.named_not_touched, "llmCalls": self.llm_calls,
        }


def apply(artifact_dir: str | Path, *, db: str | Path | None = None, corpus: str | Path | None = None,
          confidence_floor: float = tasks.CONFIDENCE_FLOOR, scan: Scan | None = None) -> ApplyResult:
    """Land one batch's artifact folder: its answer checked again against the warehouse `db`, its
    memories and tasks committed to the git `corpus`, its sessions watermarked. Commitments below
    `confidence_floor` (0–1) are dropped. `scan`: the secrets of the batch's sessions as the night
    read them from the warehouse after planning (never from the artifact); without it, or when it is
    of other sessions, apply scans them itself."""
    if not 0.0 <= confidence_floor <= 1.0:
        raise UsageError(f"--confidence-floor {confidence_floor} must be between 0 and 1 (confidence is 0–1)")
    art = load(artifact_dir)
    m = art.manifest
    result = ApplyResult(art.artifact_id, m.run_id, m.batch_id, "applied")
    repo = Corpus(config.corpus_path(corpus))
    # Scanned before the writer opens, so the warehouse is held for writing no longer than before.
    if scan is None or set(scan.sessions) != set(art.session_ids):
        scan = scan_warehouse(db, art.session_ids)
    known = scan.known
    with warehouse.writing(db) as con:
        store_scan(con, scan)  # the night's report and later nights read these lines' secrets from here
        if warehouse.one(con, "SELECT 1 FROM applied_artifacts WHERE artifact_id = ?", [art.artifact_id]):
            result.status = "already-applied"
            return result
        answer: Answer | None = None
        run = art.art.run
        if not art.art.accepted:
            result.status = "no-answer"
            result.reason = (f"the batch ended without an accepted answer "
                             f"({run.outcome if run else '?'}: {run.reason if run else 'no run record'})")
        else:
            # The answer as written, so that a broken one is refused field by field, like check-answer does.
            raw = art.art.answer_data
            if raw is None and art.art.answer is not None:
                raw = art.art.answer.model_dump(mode="json")
            check = check_answer(raw, art.session_ids, WarehouseQuotes(con, known))
            if not check.accepted:
                result.status = "refused"
                result.reason = known.scrub("the answer fails the contract against this warehouse: " + "; ".join(
                    f"{p.path}: {p.reason}" for p in check.problems[:5]))
            else:
                answer = check.answer
        crash_point("apply:checked")

        if answer is not None:
            repo.ensure()
            _land_candidates(repo, art, answer.candidates, result, known, _projects(con))
            _land_tasks(repo, art, answer, result, confidence_floor, _locator(con, known), known)
            touched = set(art.art.touched_session_ids())
            named = [s for s in dict.fromkeys(answer.readSessionIds) if s in art.session_ids]
            # Refused candidates hold nothing back (module docstring): every session read is watermarked.
            result.watermarked = [s for s in named if s in touched]
            result.named_not_touched = [s for s in named if s not in touched]
        crash_point("apply:before-warehouse")
        _record(con, repo if answer is not None else None, art, result, known)
    return result


# -- corpus ------------------------------------------------------------------------------------------
def existing_memories(corpus: Corpus) -> dict[Path, memory_file.MemoryDoc]:
    out = {}
    for kind_dir in sorted(p for p in corpus.root.iterdir() if p.is_dir() and p.name in memory_file.KINDS):
        for p in sorted(kind_dir.glob("*.md")):
            with p.open(encoding="utf-8", newline="") as fh:  # keep line ends exactly as written
                out[p] = memory_file.parse(fh.read())
    return out


def _evidence_body(candidate: Candidate, known: SecretSet) -> str:
    parts = ["Evidence, verbatim from the transcripts:"]
    for n, ev in enumerate(candidate.evidence, start=1):
        quote = redact(ev.quote, known)
        note = f" (redacted: {', '.join(quote.kinds)}; no longer verbatim)" if quote.changed else ""
        parts.append(f"[{n}] session {ev.sessionId}{note}\n{quote.text}")
    return "\n\n".join(parts)


def secret_problems(texts: list[str], known: SecretSet) -> list[str]:
    """The last gate: why any of these texts, as they would land, may not leave (empty: they may)."""
    return list(dict.fromkeys(p for t in texts for p in known.check(t)))


def _refuse(result: ApplyResult, i: int, claim: str, sessions: list[str], problems: list[str]) -> None:
    """List a candidate that does not land, with why and the sessions it quotes (they are watermarked all
    the same: a refusal is reported, not retried)."""
    result.candidates_refused.append({"candidate": i, "claim": claim, "problems": problems, "sessions": sessions})


Projects = Callable[[Iterable[str]], frozenset[str]]


def _projects(con: duckdb.DuckDBPyConnection) -> Projects:
    """The projects (slugs) of some sessions, looked up once each."""
    seen: dict[str, str | None] = {}

    def of(sessions: Iterable[str]) -> frozenset[str]:
        wanted = [s for s in dict.fromkeys(sessions) if s not in seen]
        if wanted:
            found = dict(con.execute("SELECT session_id, slug FROM sessions WHERE session_id IN (SELECT unnest(?::VARCHAR[]))",
                                     [wanted]).fetchall())
            seen.update({s: found.get(s) for s in wanted})
        return frozenset(p for s in sessions if (p := seen.get(s)))

    return of


def _no_projects(sessions: Iterable[str]) -> frozenset[str]:
    return frozenset()


def _about_doc(doc: memory_file.MemoryDoc, projects: Projects) -> about_mod.About:
    return about_mod.about(doc.kind, doc.claim, doc.entities, projects(doc.sessions))


def _land_candidates(corpus: Corpus, art: LoadedArtifact, candidates: list[Candidate], result: ApplyResult,
                     known: SecretSet, projects: Projects | None = None) -> None:
    commits = corpus.commits()
    # What an interrupted apply of this artifact already committed: reported again, not committed twice.
    done = {c.trailers.get("Candidate"): c for c in commits if c.trailers.get("Artifact") == art.artifact_id}
    dropped = dedupe.dropped_memories(corpus)
    existing = existing_memories(corpus)
    touched = set(art.art.touched_session_ids())
    created = art.created_day
    # what each memory is about, worked out once per apply and kept current as candidates land
    of_sessions = projects or _no_projects
    abouts = {p: _about_doc(d, of_sessions) for p, d in existing.items()}
    for i, cand in enumerate(candidates):
        claim, gist, entities = written_text(cand.claim, cand.gist, [(e.type, e.name) for e in cand.entities], known)
        sessions = sorted({e.sessionId for e in cand.evidence})
        if str(i) in done:
            landed = done[str(i)]
            linked = landed.subject.startswith("link: ")
            (result.memories_linked if linked else result.memories_written).append(landed.trailers.get("Memory-Id", ""))
            result.candidates_landed.append({"candidate": i, "memoryId": landed.trailers.get("Memory-Id", ""),
                                             "as": "link" if linked else "memory"})
            continue
        body = _evidence_body(cand, known)
        leaking = secret_problems([claim, gist, *entities, body], known)
        if leaking:
            _refuse(result, i, known.scrub(claim), sessions, leaking)  # the reason names kinds, never the secret
            continue
        unread = [s for s in sessions if s not in touched]
        if unread:
            # The quotes are real, but the batch never looked at that transcript, so nothing it read
            # there backs the claim: neither a new memory nor a link.
            _refuse(result, i, claim, sessions, [
                f"quotes session(s) the batch never searched or read: {', '.join(unread)}"])
            continue
        mid = memory_file.memory_id(cand.kind, claim)
        was_dropped = dedupe.dropped_match(mid, claim, dropped)
        if was_dropped is not None:
            # A reviewer's decision, not a fault: the sessions are read, and the claim stays out.
            _refuse(result, i, claim, sessions, [
                f"a reviewer took this memory back ({was_dropped.memory_id}, commit {was_dropped.commit[:12]}): "
                f"{was_dropped.why}"])
            continue
        trailers = {"Artifact": art.artifact_id, "Candidate": str(i)}
        # The same memory is the same thing (corpus.about): a claim that reads alike but names another
        # program, error, setting or repository is a memory of its own, never a link.
        this = about_mod.about(cand.kind, claim, entities, of_sessions(sessions))
        fits = {p: d for p, d in existing.items() if about_mod.compatible(this, abouts[p])}
        same = next((p for p, d in existing.items() if d.id == mid), None)
        if same is None:
            match = dedupe.best_match(claim, [(str(p), d.claim) for p, d in fits.items()])
            same = Path(match[0]) if match else None
        if same is None:
            same = next((p for p in fits if about_mod.same_thing(this, abouts[p])), None)
        if same is not None:
            doc = existing[same]
            doc = doc.model_copy(update={"sessions": sorted(set(doc.sessions) | set(sessions))})
            same.write_text(memory_file.render(doc), encoding="utf-8")
            corpus.add(same)
            crash_point("apply:link-file-written")
            corpus.commit(f"link: {doc.claim}", body, {**trailers, "Memory-Id": doc.id},
                          allow_empty=True)
            existing[same] = doc
            abouts[same] = _about_doc(doc, of_sessions)
            result.memories_linked.append(doc.id)
            result.candidates_landed.append({"candidate": i, "memoryId": doc.id, "as": "link"})
            crash_point("apply:link-committed")
            continue
        doc = memory_file.MemoryDoc(
            id=mid, kind=cand.kind, claim=claim, entities=entities, sessions=sessions, created=created,
            run=art.manifest.run_id, batch=art.manifest.batch_id, gist=gist,
        )
        problems = memory_file.gate(doc, [e.quote for e in cand.evidence])
        if problems:
            _refuse(result, i, claim, sessions, problems)
            continue
        taken = {p: d.id for p, d in existing.items()}
        path = memory_file.path_for(corpus.root, cand.kind, claim, taken, mid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(memory_file.render(doc), encoding="utf-8")
        corpus.add(path)
        crash_point("apply:memory-file-written")
        corpus.commit(f"memory: {claim}", body, {**trailers, "Memory-Id": mid})
        existing[path] = doc
        abouts[path] = _about_doc(doc, of_sessions)
        result.memories_written.append(mid)
        result.candidates_landed.append({"candidate": i, "memoryId": mid, "as": "memory"})
        crash_point("apply:memory-committed")


CONTEXT_CHARS = 240  # of what was said before a promise, kept with its task


def _locator(con: duckdb.DuckDBPyConnection, known: SecretSet | None = None) -> tasks.Locate:
    quotes = WarehouseQuotes(con, known)

    def locate(session_id: str, quote: str) -> tasks.Where:
        slug = con.execute("SELECT slug FROM sessions WHERE session_id = ?", [session_id]).fetchall()
        project = slug[0][0] if slug else None
        found = quotes.lines_with(session_id, quote, 1)
        if not found:
            return tasks.Where(project=project)
        row = con.execute(
            "SELECT coalesce(json_extract_string(text, '$.timestamp'), json_extract_string(text, '$.created_at')) "
            "FROM lines WHERE session_id = ? AND line_no = ? AND json_valid(text)",
            [session_id, found[0]],
        ).fetchall()
        return tasks.Where(found[0], row[0][0] if row else None, project, _context(con, session_id, found[0], quote))

    return locate


def _context(con: duckdb.DuckDBPyConnection, session_id: str, line_no: int, quote: str) -> str | None:
    """What was said just before a promise: the words before it in its own message, else the last words
    of the message before (a user's request, or the agent's report the promise follows)."""
    said = con.execute(
        "SELECT line_no, text FROM messages WHERE session_id = ? AND line_no <= ? AND role IN ('user', 'assistant') "
        "AND text IS NOT NULL ORDER BY line_no DESC LIMIT 2",
        [session_id, line_no],
    ).fetchall()
    own = next((t for n, t in said if n == line_no), None)
    before = own[: own.find(quote)] if own and quote in own else ""
    if not one_line(before) or len(one_line(before)) < 12:
        before = next((t for n, t in said if n < line_no), "") or ""
    text = one_line(before)
    if not text:
        return None
    return text if len(text) <= CONTEXT_CHARS else "…" + text[-(CONTEXT_CHARS - 1):]


def _safe_commitments(commitments: list[Commitment], result: ApplyResult, known: SecretSet) -> list[Commitment]:
    """The commitments whose statement and quote, redacted, hold nothing of a batch secret."""
    kept = []
    for i, c in enumerate(commitments):
        statement = redact(c.statement, known).text
        leaking = secret_problems([statement, *(redact(e.quote, known).text for e in c.evidence)], known)
        if leaking:
            result.candidates_refused.append({"commitment": i, "statement": known.scrub(statement), "problems": leaking})
        else:
            kept.append(c)
    return kept


def _land_tasks(corpus: Corpus, art: LoadedArtifact, answer: Answer, result: ApplyResult, floor: float,
                locate: tasks.Locate | None = None, known: SecretSet | None = None) -> None:
    known = known if known is not None else SecretSet()
    existing = tasks.load_all(corpus.root)
    commitments = _safe_commitments(answer.commitments, result, known)
    plan = tasks.plan(commitments, existing, art.created_day, floor, locate, known)
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
        closed = doc.model_copy(update={"status": "done", "closed": art.created_day})
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
    """Make `memories`, `memory_links`, `dropped_memories` and `tasks` equal to what the corpus holds (inside the
    caller's transaction)."""
    commit_of: dict[str, str] = {}
    for c in corpus.commits():
        if c.subject.startswith("memory: ") and "Memory-Id" in c.trailers:
            commit_of.setdefault(c.trailers["Memory-Id"], c.sha)
    mems = existing_memories(corpus)
    con.execute("DELETE FROM memory_links")
    con.execute("DELETE FROM memories")
    rows = [
        {"memory_id": d.id, "path": str(p.relative_to(corpus.root)), "kind": d.kind, "claim": d.claim,
         "created_at": d.created, "run_id": d.run, "batch_id": d.batch, "commit": commit_of.get(d.id),
         "status": d.status, "kept_at": d.kept}
        for p, d in mems.items()
    ]
    links = [{"memory_id": d.id, "session_id": s} for d in mems.values() for s in d.sessions]
    _insert(con, "memories", rows, ["memory_id", "path", "kind", "claim", "created_at", "run_id", "batch_id", "commit",
                                    "status", "kept_at"])
    _insert(con, "memory_links", links, ["memory_id", "session_id"])
    con.execute("DELETE FROM dropped_memories")
    _insert(con, "dropped_memories", [
        {"memory_id": d.memory_id, "kind": d.kind, "claim": d.claim, "why": d.why, "path": d.path, "commit": d.commit}
        for d in dedupe.dropped_memories(corpus)
    ], ["memory_id", "kind", "claim", "why", "path", "commit"])
    con.execute("DELETE FROM tasks")
    _insert(con, "tasks", [tasks.as_row(p, d, corpus.root) for p, d in tasks.load_all(corpus.root)],
            ["task_id", "path", "status", "statement", "actor", "due_hint", "session_id", "confidence",
             "created_at", "closed_at", "project"])


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]], cols: list[str],
            *, or_ignore: bool = False) -> None:
    if not rows:
        return
    data = pa.Table.from_pylist([{c: r.get(c) for c in cols} for r in rows])
    con.register("_apply_rows", data)
    try:
        quoted = ", ".join(f'"{c}"' for c in cols)  # table and column names are constants of this module
        verb = "INSERT OR IGNORE" if or_ignore else "INSERT"
        con.execute(f"INSERT INTO {table} ({quoted}) SELECT {quoted} FROM _apply_rows".replace("INSERT", verb, 1))
    finally:
        con.unregister("_apply_rows")


def _scrubbed_tool_row(row: artifact.ToolCallRow, known: SecretSet) -> dict[str, Any]:
    out = row.db_row()
    if known:
        out["arguments"] = json.dumps(known.scrub_json(row.arguments), ensure_ascii=False)
    return out


LLM_CALL_COLUMNS = ["call_id", "source", "session_id", "at", "model", "prompt_tokens", "cached_tokens",
                    "cache_write_tokens", "completion_tokens", "latency_ms", "run_id", "batch_id", "system_fp",
                    "tools_fp", "prefix_fp"]
TOOL_CALL_COLUMNS = ["run_id", "batch_id", "seq", "name", "arguments", "session_id", "ok", "result_chars", "at"]


def _record(con: duckdb.DuckDBPyConnection, corpus: Corpus | None, art: LoadedArtifact, result: ApplyResult,
            known: SecretSet) -> None:
    m = art.manifest
    now = dt.datetime.now(dt.UTC)
    sizes = {s.session_id: s for s in m.sessions}
    run = art.art.run
    with warehouse.atomic(con):
        if corpus is not None:
            mirror_corpus(con, corpus)
        for sid in result.watermarked:
            con.execute(
                'INSERT INTO watermarks (session_id, line_count, size_bytes, run_id, batch_id, "at") VALUES (?, ?, ?, ?, ?, ?)',
                [sid, sizes[sid].line_count, sizes[sid].size_bytes, m.run_id, m.batch_id, now],
            )
        calls = [{c: getattr(row, c) for c in LLM_CALL_COLUMNS} for row in art.art.llm_calls]
        if calls:
            # Every row keeps its own id, so loading the same calls twice adds nothing.
            _insert(con, "llm_calls", calls, LLM_CALL_COLUMNS, or_ignore=True)
        result.llm_calls = len(calls)
        con.execute("DELETE FROM agent_tool_calls WHERE run_id = ? AND batch_id = ?", [m.run_id, m.batch_id])
        # The artifact's tool log is not trusted to be redacted: the model's arguments are scrubbed again.
        _insert(con, "agent_tool_calls", [_scrubbed_tool_row(t, known) for t in art.art.tool_calls], TOOL_CALL_COLUMNS)
        con.execute("DELETE FROM batches WHERE run_id = ? AND batch_id = ?", [m.run_id, m.batch_id])
        con.execute(
            "INSERT INTO batches (run_id, batch_id, status, reason, sessions, started_at, finished_at, artifact_dir, details) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [m.run_id, m.batch_id, result.status, result.reason, art.session_ids, run.started_at if run else None,
             run.finished_at if run else None, str(art.path.absolute()), json.dumps(result.to_json())],
        )
        crash_point("apply:in-transaction")
        if result.status == "applied":
            # A refused or answerless artifact is not marked: applying it again says why again.
            con.execute(
                "INSERT INTO applied_artifacts VALUES (?, ?, ?, ?, ?, ?, ?)",
                [art.artifact_id, m.run_id, m.batch_id, str(art.path.absolute()), result.status, now,
                 json.dumps(result.to_json())],
            )
    crash_point("apply:committed")
