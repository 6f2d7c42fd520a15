"""Commitments become proposed tasks; other/low-confidence ones are dropped; resolved ones close tasks later."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.corpus import apply, review, tasks
from pipeline.corpus.git_corpus import Corpus
from pipeline.errors import UsageError
from pipeline.warehouse import db
from tests import helpers as A

ROTATE = A.commitment("user-rotate-staging-credentials")
SHIM = A.commitment("agent-remove-compat-shim")
DOCS = A.commitment("agent-document-locale-fallback")


@pytest.fixture
def env(tmp_path: Path, samples_copy: Path):
    return tmp_path, samples_copy, tmp_path / "corpus"


def art(env, name: str, sessions: list[str], commitments: list[dict], run: str) -> Path:
    tmp, wh, _ = env
    with db.reading(wh) as con:
        return A.write_artifact(tmp / name, con, sessions, commitments=commitments, run_id=run)


def open_tasks(corpus: Path) -> list[str]:
    return sorted(p.name for p in (corpus / "tasks" / "proposed").glob("*.md"))


def test_proposed_and_dropped(env) -> None:
    _, wh, corpus = env
    other = A.commitment_entry("user-rotate-staging-credentials", statement="Maria will migrate the billing tables.", actor="other")
    low = A.commitment_entry("agent-remove-compat-shim", confidence=0.3)
    r = apply.apply(art(env, "n1", [ROTATE["sessionId"]], [A.commitment_entry("user-rotate-staging-credentials"), other, low], "r1"),
                    db=wh, corpus=corpus)
    assert r.tasks == {"proposed": 1, "doneAtOnce": 0, "closed": 0, "droppedOther": 1, "droppedLowConfidence": 1, "alreadyKnown": 0}
    (name,) = open_tasks(corpus)
    text = (corpus / "tasks" / "proposed" / name).read_text()
    assert "dueHint: '2026-11-20'" in text and ROTATE["quote"] in text and "actor: user" in text
    # Where and when it was said, so that "tomorrow" or a due date can be read against it.
    doc = tasks.parse(text)
    assert doc.line == ROTATE["line"] and doc.said is not None and doc.said.startswith("2026-")
    # Its project, and what was said just before it: a reviewer knows what the promise is about.
    with db.reading(wh) as con:
        slug, before = con.execute(
            "SELECT s.slug, m.text FROM sessions s JOIN messages m USING (session_id) WHERE s.session_id = ? "
            "AND m.line_no <= ? AND m.role IN ('user', 'assistant') AND m.text IS NOT NULL ORDER BY m.line_no DESC LIMIT 1",
            [ROTATE["sessionId"], ROTATE["line"]]).fetchone()
    assert doc.project == slug and slug
    assert doc.context and doc.context.lstrip("…") in " ".join(before.split())
    listed = review.list_tasks(db=wh)
    assert [(t["status"], t["actor"], t["dueHint"], t["project"]) for t in listed] == [("proposed", "user", "2026-11-20", slug)]


def test_floor_is_configurable(env) -> None:
    _, wh, corpus = env
    low = A.commitment_entry("agent-remove-compat-shim", confidence=0.3)
    r = apply.apply(art(env, "n1", [SHIM["sessionId"]], [low], "r1"), db=wh, corpus=corpus, confidence_floor=0.2)
    assert r.tasks["proposed"] == 1


def test_resolved_commitment_closes_the_task_of_an_earlier_night(env) -> None:
    _, wh, corpus = env
    first = A.commitment_entry("agent-document-locale-fallback", resolved=False)
    apply.apply(art(env, "n1", [DOCS["sessionId"]], [first], "night-1"), db=wh, corpus=corpus)
    assert len(open_tasks(corpus)) == 1
    # a later night sees the work done, worded a little differently
    later = {**first, "statement": DOCS["quote"].replace("I'll document", "I will document"), "resolved": True}
    r = apply.apply(art(env, "n2", [DOCS["sessionId"]], [later], "night-2"), db=wh, corpus=corpus)
    assert r.tasks["closed"] == 1 and open_tasks(corpus) == []
    done = list((corpus / "tasks" / "done").glob("*.md"))
    assert len(done) == 1 and "status: done" in done[0].read_text()
    assert [t["status"] for t in review.list_tasks(db=wh, include_closed=True)] == ["done"]


def test_resolved_with_no_open_task_is_done_at_once(env) -> None:
    _, wh, corpus = env
    c = A.commitment_entry("agent-regression-test-dates")
    r = apply.apply(art(env, "n1", [c["evidence"][0]["sessionId"]], [c], "r1"), db=wh, corpus=corpus)
    assert r.tasks["doneAtOnce"] == 1 and open_tasks(corpus) == []


def test_same_commitment_next_night_is_not_proposed_twice(env) -> None:
    _, wh, corpus = env
    c = A.commitment_entry("user-rotate-staging-credentials")
    apply.apply(art(env, "n1", [ROTATE["sessionId"]], [c], "r1"), db=wh, corpus=corpus)
    r = apply.apply(art(env, "n2", [ROTATE["sessionId"]], [c], "r2"), db=wh, corpus=corpus)
    assert r.tasks["alreadyKnown"] == 1 and len(open_tasks(corpus)) == 1


def test_confirm_and_reject(env) -> None:
    _, wh, corpus = env
    apply.apply(art(env, "n1", [ROTATE["sessionId"], SHIM["sessionId"]],
                    [A.commitment_entry("user-rotate-staging-credentials"), A.commitment_entry("agent-remove-compat-shim")], "r1"),
                db=wh, corpus=corpus)
    a, b = review.list_tasks(db=wh)
    assert review.set_status(a["id"], "confirmed", db=wh, corpus=corpus)["status"] == "confirmed"
    assert review.set_status(b["id"], "rejected", db=wh, corpus=corpus)["status"] == "rejected"
    assert sorted(t["status"] for t in review.list_tasks(db=wh, include_closed=True)) == ["confirmed", "rejected"]
    assert (corpus / "tasks" / "confirmed").is_dir() and (corpus / "tasks" / "rejected").is_dir()
    subjects = Corpus(corpus).git("log", "--format=%s").splitlines()
    assert sum(s.startswith("tasks: confirm ") for s in subjects) == 1 and sum(s.startswith("tasks: reject ") for s in subjects) == 1
    with pytest.raises(UsageError, match="no task"):
        review.set_status("task-nope", "confirmed", db=wh, corpus=corpus)


def test_a_closed_task_is_reopened_by_confirming_not_flipped(env) -> None:
    _, wh, corpus = env
    apply.apply(art(env, "c1", [ROTATE["sessionId"]], [A.commitment_entry("user-rotate-staging-credentials")], "r1"),
                db=wh, corpus=corpus)
    task = review.list_tasks(db=wh)[0]
    review.set_status(task["id"], "done", db=wh, corpus=corpus)
    with pytest.raises(UsageError, match="is done, so it cannot become rejected; possible: `pipeline tasks confirm"):
        review.set_status(task["id"], "rejected", db=wh, corpus=corpus)
    assert review.set_status(task["id"], "confirmed", db=wh, corpus=corpus)["status"] == "confirmed"
    assert review.set_status(task["id"], "rejected", db=wh, corpus=corpus)["status"] == "rejected"


def test_overdue_is_the_librarys_rule_and_the_json_shows_it(env, capsys: pytest.CaptureFixture[str]) -> None:
    _, wh, corpus = env
    apply.apply(art(env, "n1", [ROTATE["sessionId"]], [A.commitment_entry("user-rotate-staging-credentials")], "r1"),
                db=wh, corpus=corpus)  # due 2026-11-20
    assert [t["overdue"] for t in review.list_tasks(db=wh, today=dt.date(2026, 11, 20))] == [False]
    assert [t["overdue"] for t in review.list_tasks(db=wh, today=dt.date(2026, 11, 21))] == [True]
    task = review.list_tasks(db=wh)[0]
    review.set_status(task["id"], "done", db=wh, corpus=corpus)
    # a closed task is never overdue
    assert [t["overdue"] for t in review.list_tasks(db=wh, include_closed=True, today=dt.date(2027, 1, 1))] == [False]
    assert tasks.is_overdue("2026-11-20", "confirmed", dt.date(2026, 12, 1))
    assert not tasks.is_overdue(None, "proposed", dt.date(2026, 12, 1))
    assert main(["tasks", "--all", "--json", "--db", str(wh)]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["overdue"] is False and entry["status"] == "done"


@pytest.mark.parametrize("floor", [-0.1, 1.5])
def test_apply_itself_refuses_a_confidence_floor_outside_0_to_1(env, floor: float) -> None:
    _, wh, corpus = env
    folder = art(env, "n1", [SHIM["sessionId"]], [A.commitment_entry("agent-remove-compat-shim")], "r1")
    with pytest.raises(UsageError, match="must be between 0 and 1"):
        apply.apply(folder, db=wh, corpus=corpus, confidence_floor=floor)
    assert not corpus.exists()


@pytest.mark.parametrize(("evidence", "project", "stem"), [
    ("After it's done, come back here and I'll help you format the data partition.", "-home-v-Claude",
     "after-its-done-come-back-here-and-ill-help-you-format-the"),  # cut at a word, 60 characters at most
    # a promise with no ASCII words is named by its project and id, never by the shared template
    ("接続方法が分かれば、その場で最後まで通します。", "-home-unitree", "home-unitree-task-1"),
    ("好，告诉我 OK", None, "task-task-1"),
])
def test_a_task_file_is_named_by_the_promise_s_own_words(evidence: str, project: str | None, stem: str) -> None:
    doc = tasks.TaskDoc(id="task-1", status="proposed", statement="The agent said they would do this once the other "
                        "party does their part: " + evidence, actor="agent", session="s", evidence=evidence,
                        confidence=0.7, created="2026-12-07", project=project)
    assert tasks.file_stem(doc) == stem
    assert "the-agent-said" not in tasks.file_stem(doc)
