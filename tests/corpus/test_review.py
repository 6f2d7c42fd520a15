"""Taking a memory back: `pipeline memories drop ID --why TEXT`, crash-safe, and never proposed again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.consolidator import pending, tools
from pipeline.corpus import apply, dedupe, review
from pipeline.corpus.git_corpus import Corpus
from pipeline.errors import UsageError
from pipeline.faults import CRASH_EXIT_CODE
from pipeline.warehouse import db
from tests import helpers as A
from tests.corpus.conftest import PG, PG_CLAIM, SESSIONS
from tests.helpers import REPO, SAMPLES


def subjects(corpus: Path) -> list[str]:
    return Corpus(corpus).git("log", "--format=%s").splitlines()


def drop_cli(wh: Path, corpus: Path, mid: str, why: str, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PIPELINE_CRASH_AT"}
    if crash_at:
        env["PIPELINE_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, "-m", "pipeline", "memories", "drop", mid, "--why", why, "--json",
                           "--db", str(wh), "--corpus", str(corpus)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def test_drop_removes_the_file_in_one_commit_and_the_warehouse_follows(landed, capsys) -> None:
    wh, corpus, mid = landed
    with db.reading(wh) as con:
        before = {e["sessionId"]: e for e in tools.list_sessions(con)}
        watermarks = con.execute("SELECT * FROM watermarks ORDER BY session_id").fetchall()
    path = next(p for p, d in apply.existing_memories(Corpus(corpus)).items() if d.id == mid)
    written_by = next(c for c in Corpus(corpus).commits() if c.subject == f"memory: {PG_CLAIM}")
    assert main(["memories", "drop", mid, "--why", "The container was never the cause", "--json",
                 "--db", str(wh), "--corpus", str(corpus)]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["id"] == mid and entry["why"] == "The container was never the cause"
    assert not path.exists()
    drop = Corpus(corpus).commits()[0]
    assert drop.subject == f"drop: {PG_CLAIM}" and drop.trailers["Memory-Id"] == mid
    assert drop.body.startswith("Why: The container was never the cause\n")
    assert written_by.sha in drop.body  # where the evidence still is
    assert PG[0]["quote"] in Corpus(corpus).git("log", "--format=%B", "-1", written_by.sha)
    with db.reading(wh) as con:
        assert con.execute("SELECT count(*) FROM memories WHERE memory_id = ?", [mid]).fetchall() == [(0,)]
        assert con.execute("SELECT why FROM dropped_memories WHERE memory_id = ?", [mid]).fetchall() == [
            ("The container was never the cause",)]
        after = {e["sessionId"]: e for e in tools.list_sessions(con)}
        # its sessions stay read, and their linkedMemories no longer show it
        assert con.execute("SELECT * FROM watermarks ORDER BY session_id").fetchall() == watermarks
        assert not set(SESSIONS) & set(pending.pending_ids(con))
    assert any(m["id"] == mid for s in SESSIONS for m in before[s]["linkedMemories"])
    assert not any(m["id"] == mid for s in SESSIONS for m in after[s]["linkedMemories"])
    # listed with its reason under --all only
    assert main(["memories", "--json", "--db", str(wh)]) == 0
    assert mid not in {m["id"] for m in json.loads(capsys.readouterr().out)}
    assert main(["memories", "--all", "--json", "--db", str(wh)]) == 0
    gone = next(m for m in json.loads(capsys.readouterr().out) if m["id"] == mid)
    assert gone["status"] == "dropped" and gone["why"] == "The container was never the cause"
    assert main(["memories", "--all", "--db", str(wh)]) == 0
    assert "(dropped: The container was never the cause)" in capsys.readouterr().out


def test_dropping_again_changes_nothing_and_mistakes_are_usage_errors(landed, capsys) -> None:
    wh, corpus, mid = landed
    review.drop_memory(mid, "wrong", db=wh, corpus=corpus)
    head = Corpus(corpus).head()
    again = review.drop_memory(mid, "wrong again", db=wh, corpus=corpus)
    assert again["unchanged"] and again["why"] == "wrong" and Corpus(corpus).head() == head
    with pytest.raises(UsageError, match="no memory"):
        review.drop_memory("semantic-000000000000", "x", db=wh, corpus=corpus)
    with pytest.raises(UsageError, match="--why is empty"):
        review.drop_memory(mid, "  ", db=wh, corpus=corpus)
    assert main(["memories", "drop", mid, "--db", str(wh), "--corpus", str(corpus)]) == 2
    assert "--why" in capsys.readouterr().err
    assert main(["memories", "drop", "--why", "x", "--db", str(wh), "--corpus", str(corpus)]) == 2


def test_the_reason_is_redacted(landed) -> None:
    wh, corpus, mid = landed
    review.drop_memory(mid, "leaked with key sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34", db=wh, corpus=corpus)
    assert "sk-proj-Ab12" not in Corpus(corpus).git("log", "-1", "--format=%B")


@pytest.mark.parametrize("step", ["drop:file-removed", "drop:committed"])
def test_a_kill_during_drop_then_drop_again_leaves_one_drop_commit(landed, step: str) -> None:
    wh, corpus, mid = landed
    crashed = drop_cli(wh, corpus, mid, "not a pattern", crash_at=step)
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    again = drop_cli(wh, corpus, mid, "not a pattern")
    assert again.returncode == 0, again.stderr
    assert sum(s.startswith("drop: ") for s in subjects(corpus)) == 1
    assert Corpus(corpus).git("status", "--porcelain") == ""
    with db.reading(wh) as con:
        assert con.execute("SELECT count(*) FROM memories WHERE memory_id = ?", [mid]).fetchall() == [(0,)]
        assert con.execute("SELECT count(*) FROM dropped_memories").fetchall() == [(1,)]
        assert con.execute("SELECT count(*) FROM memories").fetchall() == [(1,)]


def test_apply_refuses_a_dropped_claim_and_says_why(landed, tmp_path: Path) -> None:
    wh, corpus, mid = landed
    review.drop_memory(mid, "not a pattern", db=wh, corpus=corpus)
    with db.reading(wh) as con:
        reworded = A.candidate("pg-connection-refused", "On the dev box Postgres refuses connections until the container is restarted.")
        art = A.write_artifact(tmp_path / "a2", con, SESSIONS, candidates=[reworded], run_id="run-2", batch_id="b02")
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.status == "applied" and r.memories_written == [] and r.memories_linked == []
    [refused] = r.candidates_refused
    assert "a reviewer took this memory back" in refused["problems"][0] and "not a pattern" in refused["problems"][0]
    # a reviewer's decision, not a fault: the sessions are read all the same
    assert set(r.watermarked) == set(SESSIONS)
    assert not any(s.startswith(("memory: ", "link: ")) for s in subjects(corpus)[:1])
    assert dedupe.dropped_memories(Corpus(corpus))[0].memory_id == mid


# -- end to end: a night, a drop, another night over the same sessions plus one that repeats the pattern --
WEB = "-home-ana-src-web-dashboard"
COPIED = "0d28e511-935f-4ed1-a0bd-fb881d624c7a"  # an EADDRINUSE session, copied under a new id
GROWN = "997da364-3503-4ab2-98b3-2f486ce7f209"  # another EADDRINUSE session, which grows
NEW_ID = "5e55a0b1-0000-4000-8000-00000000beef"


def nightly(tmp: Path, sources: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PIPELINE_CRASH_AT", "OPENAI_API_KEY")}
    out = subprocess.run([sys.executable, "-m", "pipeline", "nightly", "--source", str(sources), "--engine", "rules",
                          "--no-report", "--json", "--db", str(tmp / "w.duckdb"), "--corpus", str(tmp / "corpus"),
                          "--runs", str(tmp / "runs")], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.mark.slow
def test_a_dropped_claim_is_not_proposed_by_a_later_night(tmp_path: Path, capsys) -> None:
    sources = tmp_path / "samples"
    shutil.copytree(SAMPLES, sources)
    nightly(tmp_path, sources)
    corpus, wh = tmp_path / "corpus", tmp_path / "w.duckdb"
    mems = {d.claim: d.id for d in apply.existing_memories(Corpus(corpus)).values()}
    claim = next(c for c in mems if c.startswith("EADDRINUSE"))
    assert main(["memories", "drop", mems[claim], "--why", "dev servers left running; not worth a memory",
                 "--db", str(wh), "--corpus", str(corpus)]) == 0
    # the same sessions plus a new session of the project that fails the same way
    folder = sources / "claude" / "projects" / WEB
    (folder / f"{NEW_ID}.jsonl").write_text((folder / f"{COPIED}.jsonl").read_text().replace(COPIED, NEW_ID))
    grown = folder / f"{GROWN}.jsonl"
    last = json.loads(grown.read_text().splitlines()[-1])
    more = {**last, "type": "user", "uuid": "u-later", "parentUuid": last.get("uuid"),
            "message": {"role": "user", "content": "Thanks, that is all for today."}}
    with grown.open("a") as fh:
        fh.write(json.dumps(more) + "\n")
    second = nightly(tmp_path, sources)
    [batch] = [b for b in second["batches"] if b["status"] == "applied"]
    folder = Path(second["runDir"]) / batch["batch"]
    assert set(json.loads((folder / "manifest.json").read_text())["sessions"][i]["sessionId"]
               for i in range(2)) == {NEW_ID, GROWN}
    # the engine saw the pattern again, and left the dropped claim out of its answer
    assert "left out 1 candidate(s) whose claim a reviewer dropped earlier" in (folder / "notebook.ipynb").read_text()
    answer = json.loads((folder / "answer.json").read_text())
    assert all(not c["claim"].startswith("EADDRINUSE") for c in answer["candidates"])
    log = subjects(corpus)
    assert sum(s == f"drop: {claim}" for s in log) == 1
    assert sum(s in (f"memory: {claim}", f"link: {claim}") for s in log) == 1  # only the first night's commit
    with db.reading(wh) as con:
        assert pending.pending_ids(con) == []
        assert con.execute("SELECT count(*) FROM memories WHERE claim = ?", [claim]).fetchall() == [(0,)]
        linked = {e["sessionId"]: e["linkedMemories"] for e in tools.list_sessions(con)}
    assert not any(m["claim"] == claim for ms in linked.values() for m in ms)
