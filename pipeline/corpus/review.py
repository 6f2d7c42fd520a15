"""What a person does with proposed tasks: list them, confirm, reject, or mark done."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pipeline import config
from pipeline.corpus import apply, tasks
from pipeline.corpus.git_corpus import Corpus
from pipeline.errors import UsageError
from pipeline.warehouse import db as warehouse


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
            "SELECT task_id, status, statement, actor, due_hint, session_id, confidence, created_at, closed_at, path "
            "FROM tasks WHERE ? OR status IN ('proposed', 'confirmed') ORDER BY status, created_at, task_id",
            [include_closed],
        )
    return [
        {"id": r["task_id"], "status": r["status"], "statement": r["statement"], "actor": r["actor"],
         "dueHint": r["due_hint"], "overdue": tasks.is_overdue(r["due_hint"], r["status"], today),
         "session": r["session_id"], "confidence": r["confidence"],
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
