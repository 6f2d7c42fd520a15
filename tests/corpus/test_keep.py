"""Vouching for a memory: `pipeline memories keep ID [--why TEXT]`, its review state in the file and the
warehouse, crash-safe, and kept through later links."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.corpus import apply, memory_file, review
from pipeline.corpus.git_corpus import Corpus
from pipeline.errors import UsageError
from pipeline.faults import CRASH_EXIT_CODE
from pipeline.warehouse import db
from tests import helpers as A
from tests.corpus.conftest import PG_CLAIM, SESSIONS
from tests.corpus.test_review import subjects
from tests.helpers import REPO


def doc_of(corpus: Path, mid: str) -> memory_file.MemoryDoc:
    return next(d for d in apply.existing_memories(Corpus(corpus)).values() if d.id == mid)


def test_a_landed_memory_is_new_in_its_file_and_the_warehouse(landed) -> None:
    wh, corpus, mid = landed
    assert doc_of(corpus, mid).status == "new" and doc_of(corpus, mid).kept is None
    assert "status: new" in next(p for p, d in apply.existing_memories(Corpus(corpus)).items() if d.id == mid).read_text()
    with db.reading(wh) as con:
        assert con.execute("SELECT DISTINCT status FROM memories").fetchall() == [("new",)]


def test_keep_commits_once_and_the_file_and_warehouse_say_kept(landed, capsys) -> None:
    wh, corpus, mid = landed
    head = Corpus(corpus).head()
    assert main(["memories", "keep", mid, "--why", "true on every run I looked at", "--db", str(wh),
                 "--corpus", str(corpus)]) == 0
    assert f"kept {mid}" in capsys.readouterr().err
    c = Corpus(corpus).commits()[0]
    assert c.subject == f"keep: {PG_CLAIM}" and c.trailers["Memory-Id"] == mid
    assert c.body.startswith("Why: true on every run I looked at\n")
    assert Corpus(corpus).git("rev-parse", "HEAD~1").strip() == head  # one commit
    doc = doc_of(corpus, mid)
    assert doc.status == "kept" and doc.kept and doc.kept.endswith("Z")
    with db.reading(wh) as con:
        assert con.execute("SELECT status, kept_at IS NOT NULL FROM memories WHERE memory_id = ?", [mid]).fetchall() \
            == [("kept", True)]
    # listed by state: new first, then kept
    assert main(["memories", "--status", "kept", "--json", "--db", str(wh)]) == 0
    import json

    kept = json.loads(capsys.readouterr().out)
    assert [e["id"] for e in kept] == [mid] and kept[0]["keptAt"]
    assert main(["memories", "--json", "--db", str(wh)]) == 0
    assert [e["status"] for e in json.loads(capsys.readouterr().out)] == ["new", "kept"]


def test_keep_twice_changes_nothing_and_a_dropped_or_unknown_id_is_refused(landed, capsys) -> None:
    wh, corpus, mid = landed
    review.keep_memory(mid, db=wh, corpus=corpus)
    head = Corpus(corpus).head()
    again = review.keep_memory(mid, "again", db=wh, corpus=corpus)
    assert again["unchanged"] and Corpus(corpus).head() == head
    assert main(["memories", "keep", "--db", str(wh), "--corpus", str(corpus)]) == 2
    assert "needs a memory ID" in capsys.readouterr().err
    with pytest.raises(UsageError, match="no memory"):
        review.keep_memory("semantic-000000000000", db=wh, corpus=corpus)
    other = next(d.id for d in apply.existing_memories(Corpus(corpus)).values() if d.id != mid)
    review.drop_memory(other, "not a pattern", db=wh, corpus=corpus)
    with pytest.raises(UsageError, match="was taken back"):
        review.keep_memory(other, db=wh, corpus=corpus)
    # a kept memory can still be taken back
    review.drop_memory(mid, "changed my mind", db=wh, corpus=corpus)
    assert main(["memories", "--all", "--json", "--db", str(wh)]) == 0


def test_a_kept_memory_stays_kept_when_a_later_batch_links_evidence(landed, tmp_path: Path) -> None:
    wh, corpus, mid = landed
    review.keep_memory(mid, db=wh, corpus=corpus)
    with db.reading(wh) as con:
        art = A.write_artifact(tmp_path / "a2", con, SESSIONS, candidates=[A.candidate("pg-connection-refused", PG_CLAIM)],
                               run_id="run-2", batch_id="b02")
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.memories_linked == [mid]
    assert doc_of(corpus, mid).status == "kept"


def keep_cli(wh: Path, corpus: Path, mid: str, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PIPELINE_CRASH_AT"}
    if crash_at:
        env["PIPELINE_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, "-m", "pipeline", "memories", "keep", mid, "--json", "--db", str(wh),
                           "--corpus", str(corpus)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("step", ["keep:file-written", "keep:committed"])
def test_a_kill_during_keep_then_keep_again_leaves_one_keep_commit(landed, step: str) -> None:
    wh, corpus, mid = landed
    crashed = keep_cli(wh, corpus, mid, crash_at=step)
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    again = keep_cli(wh, corpus, mid)
    assert again.returncode == 0, again.stderr
    assert sum(s.startswith("keep: ") for s in subjects(corpus)) == 1
    assert Corpus(corpus).git("status", "--porcelain") == ""
    with db.reading(wh) as con:
        assert con.execute("SELECT status FROM memories WHERE memory_id = ?", [mid]).fetchall() == [("kept",)]


def test_export_flags_belong_to_export(landed, capsys) -> None:
    wh, _, _ = landed
    assert main(["memories", "--format", "agents-md", "--db", str(wh)]) == 2
    assert "belong to `pipeline memories export`" in capsys.readouterr().err
