"""What a person does with the night's results: tasks (list, confirm, reject, mark done) and memories
(list them by review state, keep one, take one back).

Taking a memory back (`drop_memory`) removes its file in one `drop:` commit that names the memory and the
reason; the evidence stays in the history (its `memory:` commit), its sessions stay watermarked, and later
nights do not write the same claim again (`dedupe.dropped_memories`). Like every corpus change, the commit
comes first and the warehouse mirrors it afterwards, so a kill at any point is repaired by running the same
command again: the corpus recovers to its last commit, and a drop already committed is only mirrored.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pipeline import config
from pipeline.consolidator.contract import one_line
from pipeline.corpus import apply, dedupe, memory_file, tasks
from pipeline.corpus.git_corpus import Corpus
from pipeline.errors import UsageError
from pipeline.faults import crash_point
from pipeline.secrets.redact import redact
from pipeline.warehouse import db as warehouse

WHY_MAX_CHARS = 500
KEEP_PREFIX = "keep: "


def _entry(path: Path, doc: tasks.TaskDoc, root: Path) -> dict[str, Any]:
    return {**doc.model_dump(), "path": str(path.relative_to(root))}


def list_tasks(*, db: str | Path | None = None, include_closed: bool = False,
               today: dt.date | None = None) -> list[dict[str, Any]]:
    """Open tasks (every task with `include_closed`), each with `overdue`: still open and due
    before `today` (default: today's local date)."""
    today = today or dt.date.today()
    with warehouse.reading(db) as con:
        rows = warehouse.frame(
            con,
            "SELECT task_id, status, statement, actor, due_hint, session_id, confidence, created_at, closed_at, path, "
            "project "
            "FROM tasks WHERE ? OR status IN ('proposed', 'confirmed') ORDER BY status, created_at, task_id",
            [include_closed],
        )
    return [
        {"id": r["task_id"], "status": r["status"], "statement": r["statement"], "actor": r["actor"],
         "dueHint": r["due_hint"], "overdue": tasks.is_overdue(r["due_hint"], r["status"], today),
         "session": r["session_id"], "project": r["project"], "confidence": r["confidence"],
         "created": r["created_at"].date().isoformat() if r["created_at"] else None, "path": r["path"]}
        for r in rows.iter_rows(named=True)
    ]


def set_status(task_id: str, status: str, *, db: str | Path | None = None,
               corpus: str | Path | None = None) -> dict[str, Any]:
    repo = Corpus(config.corpus_path(corpus))
    if not (repo.git_dir / "HEAD").exists():
        raise UsageError(f"no corpus at {repo.root}: nothing has been applied yet")
    with warehouse.writing(db) as con:
        repo.ensure()
        found = [(p, d) for p, d in tasks.load_all(repo.root) if d.id == task_id]
        if not found:
            raise UsageError(f"no task {task_id!r}; `pipeline tasks --all` lists them")
        path, doc = found[0]
        if doc.status == status:
            return {**_entry(path, doc, repo.root), "unchanged": True}
        if status not in tasks.MOVES[doc.status]:
            verbs = {"confirmed": "confirm", "rejected": "reject", "done": "done"}
            allowed = ", ".join(f"`pipeline tasks {verbs[s]} {task_id}`" for s in tasks.MOVES[doc.status])
            raise UsageError(f"task {task_id} is {doc.status}, so it cannot become {status}; possible: {allowed}")
        today = dt.date.today().isoformat()
        new = doc.model_copy(update={"status": status, "closed": today if status in ("rejected", "done") else None})
        taken = {p: d.id for p, d in tasks.load_all(repo.root)}
        new_path = tasks.path_for(repo.root, new, taken)
        new_path.parent.mkdir(parents=True, exist_ok=True)
        repo.remove(path)
        new_path.write_text(tasks.render(new), encoding="utf-8")
        repo.add(new_path)
        verb = {"confirmed": "confirm", "rejected": "reject", "done": "close"}.get(status, status)
        repo.commit(f"tasks: {verb} {new.statement}", f"{doc.status} -> {status}", {"Task-Id": task_id})
        with warehouse.atomic(con):
            apply.mirror_corpus(con, repo)
        return _entry(new_path, new, repo.root)


def list_memories(*, db: str | Path | None = None, include_dropped: bool = False,
                  status: str | None = None) -> list[dict[str, Any]]:
    """The memories the warehouse mirrors, `new` ones first then `kept`; with `include_dropped` (or
    `status="dropped"`), also those taken back, with the reason. `status` keeps only that state."""
    with warehouse.reading(db) as con:
        rows = warehouse.frame(con, 'SELECT m.memory_id, m.kind, m.claim, m.path, m."commit", m.status, m.kept_at, '
                                    "list(l.session_id ORDER BY l.session_id) AS sessions "
                                    "FROM memories m LEFT JOIN memory_links l USING (memory_id) "
                                    'GROUP BY m.memory_id, m.kind, m.claim, m.path, m."commit", m.status, m.kept_at '
                                    "ORDER BY m.status = 'kept', m.path")
        gone = warehouse.frame(con, 'SELECT memory_id, kind, claim, path, "commit", why FROM dropped_memories '
                                    "ORDER BY path, memory_id") if include_dropped or status == "dropped" else None
    entries: list[dict[str, Any]] = [
        {"id": r["memory_id"], "kind": r["kind"], "claim": r["claim"], "path": r["path"], "commit": r["commit"],
         "sessions": [s for s in r["sessions"] if s], "status": r["status"] or "new",
         "keptAt": r["kept_at"].isoformat() if r["kept_at"] else None}
        for r in rows.iter_rows(named=True)
    ]
    if gone is not None:
        entries += [
            {"id": r["memory_id"], "kind": r["kind"], "claim": r["claim"], "path": r["path"], "commit": r["commit"],
             "sessions": [], "status": "dropped", "why": r["why"]}
            for r in gone.iter_rows(named=True)
        ]
    return [e for e in entries if status is None or e["status"] == status]


def _reason(why: str, flag: str) -> str:
    text = one_line(redact(why).text)
    if len(text) > WHY_MAX_CHARS:
        raise UsageError(f"{flag} is {len(text)} characters; keep the reason under {WHY_MAX_CHARS}")
    return text


def keep_memory(memory_id: str, why: str | None = None, *, db: str | Path | None = None,
                corpus: str | Path | None = None, now: dt.datetime | None = None) -> dict[str, Any]:
    """A reviewer vouches for a memory: its front matter says `status: kept` and when, in one `keep:`
    commit (with the reason, when given); then the warehouse mirrors the corpus.

    Keeping a memory already kept commits nothing and only mirrors (the repair after a crash, too)."""
    why_text = _reason(why, "--why") if why is not None else ""
    repo = Corpus(config.corpus_path(corpus))
    if not (repo.git_dir / "HEAD").exists():
        raise UsageError(f"no corpus at {repo.root}: nothing has been applied yet")
    with warehouse.writing(db) as con:
        repo.ensure()
        found = [(p, d) for p, d in apply.existing_memories(repo).items() if d.id == memory_id]
        if not found:
            earlier = next((d for d in dedupe.dropped_memories(repo) if d.memory_id == memory_id), None)
            if earlier is not None:
                raise UsageError(f"memory {memory_id} was taken back (commit {earlier.commit[:12]}: {earlier.why}); "
                                 "a dropped memory cannot be kept")
            raise UsageError(f"no memory {memory_id!r} in the corpus; `pipeline memories` lists them")
        path, doc = found[0]
        rel = str(path.relative_to(repo.root))
        if doc.status == "kept":
            with warehouse.atomic(con):
                apply.mirror_corpus(con, repo)
            return {"id": doc.id, "kind": doc.kind, "claim": doc.claim, "path": rel, "status": "kept",
                    "keptAt": doc.kept, "unchanged": True}
        at = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        kept = doc.model_copy(update={"status": "kept", "kept": at})
        path.write_text(memory_file.render(kept), encoding="utf-8")
        repo.add(path)
        crash_point("keep:file-written")
        body = (f"Why: {why_text}\n\n" if why_text else "") + (
            f"A reviewer kept {doc.kind} memory {doc.id} ({rel}), written by run {doc.run}, batch {doc.batch}: "
            "exports list it (pipeline memories export) and agents see it as reviewed.")
        sha = repo.commit(f"{KEEP_PREFIX}{doc.claim}", body, {"Memory-Id": doc.id, "Kind": doc.kind, "Path": rel})
        crash_point("keep:committed")
        with warehouse.atomic(con):
            apply.mirror_corpus(con, repo)
        return {"id": doc.id, "kind": doc.kind, "claim": doc.claim, "path": rel, "status": "kept", "keptAt": at,
                "why": why_text, "commit": sha}


def drop_memory(memory_id: str, why: str, *, db: str | Path | None = None,
                corpus: str | Path | None = None) -> dict[str, Any]:
    """Take a memory back: remove its file in a `drop:` commit, then mirror the corpus into the warehouse.

    Running it again for a memory already dropped (after a crash, say) commits nothing and only mirrors.
    """
    why_text = _reason(why, "--why")
    if not why_text:
        raise UsageError("--why is empty: say why the memory is taken back (the reason goes in the drop: commit)")
    repo = Corpus(config.corpus_path(corpus))
    if not (repo.git_dir / "HEAD").exists():
        raise UsageError(f"no corpus at {repo.root}: nothing has been applied yet")
    with warehouse.writing(db) as con:
        repo.ensure()  # a drop killed before its commit left the work tree dirty: back to HEAD
        found = [(p, d) for p, d in apply.existing_memories(repo).items() if d.id == memory_id]
        if not found:
            earlier = next((d for d in dedupe.dropped_memories(repo) if d.memory_id == memory_id), None)
            if earlier is None:
                raise UsageError(f"no memory {memory_id!r} in the corpus; `pipeline memories --all` lists them")
            with warehouse.atomic(con):
                apply.mirror_corpus(con, repo)
            return {"id": earlier.memory_id, "kind": earlier.kind, "claim": earlier.claim, "path": earlier.path,
                    "why": earlier.why, "commit": earlier.commit, "unchanged": True}
        path, doc = found[0]
        rel = str(path.relative_to(repo.root))
        written_by = next((c.sha for c in repo.commits()
                           if c.subject.startswith("memory: ") and c.trailers.get("Memory-Id") == memory_id), None)
        repo.remove(path)
        crash_point("drop:file-removed")
        body = (f"Why: {why_text}\n\nTook back {doc.kind} memory {doc.id} ({rel}), written by run {doc.run}, batch "
                f"{doc.batch}. Its sessions stay read (watermarked); later nights do not write this claim again."
                + (f" Its evidence stays in the history: git log --format=%B -1 {written_by}" if written_by else ""))
        sha = repo.commit(f"{dedupe.DROP_PREFIX}{doc.claim}", body, {"Memory-Id": doc.id, "Kind": doc.kind, "Path": rel})
        crash_point("drop:committed")
        with warehouse.atomic(con):
            apply.mirror_corpus(con, repo)
        return {"id": doc.id, "kind": doc.kind, "claim": doc.claim, "path": rel, "why": why_text, "commit": sha,
                "sessions": doc.sessions}
