"""Commitments become task files in the corpus, for a person to confirm or reject.

`tasks/<status>/<slug>.md` with YAML front matter; the status is the folder, so a reviewer sees the
queue with `ls tasks/proposed`. Paths and ids derive from the statement only. The warehouse's
`tasks` table mirrors these files.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from pipeline.consolidator.contract import Commitment
from pipeline.consolidator.rules.statements import tidy_statement
from pipeline.corpus import dedupe, front_matter
from pipeline.corpus.memory_file import slugify
from pipeline.secrets.gate import SecretSet
from pipeline.secrets.redact import redact

STATUSES = ("proposed", "confirmed", "rejected", "done")
OPEN = ("proposed", "confirmed")
# Where a reviewer may move a task from each status. A closed task is reopened by confirming it;
# it does not jump from done to rejected or back.
MOVES: dict[str, tuple[str, ...]] = {
    "proposed": ("confirmed", "rejected", "done"),
    "confirmed": ("rejected", "done"),
    "rejected": ("confirmed",),
    "done": ("confirmed",),
}
CONFIDENCE_FLOOR = 0.6


class TaskDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    status: str
    statement: str
    actor: str
    dueHint: str | None = None
    session: str
    evidence: str
    evidenceRedacted: bool = False
    confidence: float
    created: str
    closed: str | None = None
    line: int | None = None  # where the evidence is in its session
    said: str | None = None  # when that line was written (ISO 8601), to read "tomorrow" against
    project: str | None = None  # the project (slug) of the session the promise was made in
    context: str | None = None  # what was said just before the promise: what it is about


def is_overdue(due_hint: str | None, status: str, today: dt.date) -> bool:
    """An open task (proposed or confirmed) whose due day is before `today`."""
    return bool(due_hint) and status in OPEN and str(due_hint) < today.isoformat()


def task_id(statement: str) -> str:
    return "task-" + hashlib.sha256(dedupe.normalise(statement).encode()).hexdigest()[:10]


def render(doc: TaskDoc) -> str:
    fm = yaml.safe_dump(doc.model_dump(), sort_keys=False, allow_unicode=True, width=100_000)
    return f"---\n{fm}---\n\n# {doc.statement}\n"


def parse(text: str) -> TaskDoc:
    fm_text = text[4:].partition("\n---\n")[0]
    return TaskDoc(**front_matter.load(fm_text))


def load_all(root: Path) -> list[tuple[Path, TaskDoc]]:
    out = []
    for status in STATUSES:
        for p in sorted((root / "tasks" / status).glob("*.md")):
            out.append((p, parse(p.read_text(encoding="utf-8"))))
    return out


# A file name of fewer words than this says too little to tell one task from another.
NAME_WORDS = 3


def file_stem(doc: TaskDoc) -> str:
    """A task's file name: the promise's own words (`after-its-done-come-back-here-and-ill-help-you`),
    not the statement, whose opening is the same template for every hand-off ("the agent said they
    would do this once …"); a promise in a script without ASCII words is named by its project and id."""
    stem = slugify(doc.evidence)
    if len(stem.split("-")) >= NAME_WORDS:
        return stem
    return f"{slugify(doc.project or 'task', 30)}-{doc.id}"


def path_for(root: Path, doc: TaskDoc, taken: dict[Path, str]) -> Path:
    base = file_stem(doc)
    n = 1
    while True:
        path = root / "tasks" / doc.status / (f"{base}.md" if n == 1 else f"{base}-{n}.md")
        if taken.get(path) in (None, doc.id):
            return path
        n += 1


@dataclass
class TaskPlan:
    """What one answer's commitments do to the task files."""

    create: list[TaskDoc] = field(default_factory=list)  # new proposed tasks (or done at once)
    close: list[tuple[Path, TaskDoc]] = field(default_factory=list)  # open tasks a resolved commitment closes
    dropped_other: int = 0
    dropped_low_confidence: int = 0
    already_known: int = 0

    def counts(self) -> dict[str, int]:
        return {
            "proposed": sum(1 for t in self.create if t.status == "proposed"),
            "doneAtOnce": sum(1 for t in self.create if t.status == "done"),
            "closed": len(self.close),
            "droppedOther": self.dropped_other,
            "droppedLowConfidence": self.dropped_low_confidence,
            "alreadyKnown": self.already_known,
        }


def _matches(c: Commitment, doc: TaskDoc) -> bool:
    ev = c.evidence[0]
    return (doc.session == ev.sessionId and doc.evidence == ev.quote) or dedupe.is_duplicate(c.statement, doc.statement)


@dataclass(frozen=True)
class Where:
    """Where a quote sits in its session; each field None when unknown."""

    line: int | None = None
    said: str | None = None  # ISO time of that line
    project: str | None = None  # the session's project slug
    context: str | None = None  # what was said just before the quote (its message, else the one before)


Locate = Callable[[str, str], Where]


def plan(commitments: list[Commitment], existing: list[tuple[Path, TaskDoc]], created: str,
         floor: float = CONFIDENCE_FLOOR, locate: Locate | None = None, known: SecretSet | None = None) -> TaskPlan:
    out = TaskPlan()
    seen: list[TaskDoc] = [d for _, d in existing]
    for c in commitments:
        if c.actor == "other":
            out.dropped_other += 1
            continue
        if c.confidence < floor:
            out.dropped_low_confidence += 1
            continue
        if c.resolved:
            open_match = next(((p, d) for p, d in existing if d.status in OPEN and _matches(c, d)), None)
            if open_match and all(open_match[1].id != d.id for _, d in out.close):
                out.close.append(open_match)
                continue
        if any(_matches(c, d) for d in seen):
            out.already_known += 1
            continue
        doc = _new_doc(c, created, "done" if c.resolved else "proposed", locate, known)
        out.create.append(doc)
        seen.append(doc)
    return out


def _new_doc(c: Commitment, created: str, status: str, locate: Locate | None = None,
             known: SecretSet | None = None) -> TaskDoc:
    ev = c.evidence[0]
    quote = redact(ev.quote, known)
    where = locate(ev.sessionId, ev.quote) if locate else Where()
    # Whichever engine wrote it, a statement lands without the leftovers of the sentence it was cut from.
    statement = tidy_statement(c.statement) or c.statement
    return TaskDoc(
        id=task_id(statement), status=status, statement=redact(statement, known).text, actor=c.actor,
        dueHint=c.dueHint, session=ev.sessionId, evidence=quote.text, evidenceRedacted=quote.changed,
        confidence=c.confidence, created=created, closed=created if status == "done" else None,
        line=where.line, said=where.said, project=where.project,
        context=redact(where.context, known).text if where.context else None,
    )


def as_row(path: Path, doc: TaskDoc, root: Path) -> dict[str, Any]:
    return {
        "task_id": doc.id, "path": str(path.relative_to(root)), "status": doc.status, "statement": doc.statement,
        "actor": doc.actor, "due_hint": doc.dueHint, "session_id": doc.session, "confidence": doc.confidence,
        "created_at": doc.created, "closed_at": doc.closed, "project": doc.project,
    }
