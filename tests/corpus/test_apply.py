"""apply: one commit per memory, quotes only in commit messages, links, tasks, watermarks, idempotence."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipeline.consolidator import pending, tools
from pipeline.corpus import apply
from pipeline.corpus.git_corpus import Corpus
from pipeline.warehouse import db, ingest
from tests import helpers as A
from tests.helpers import SAMPLES, write_jsonl

PG = A.occurrences("pg-connection-refused")
MOD = A.occurrences("module-not-found")
PG_SESSIONS = sorted({o["sessionId"] for o in PG})


@pytest.fixture
def env(tmp_path: Path, samples_copy: Path):
    return tmp_path, samples_copy, tmp_path / "corpus"


def git_log(corpus: Path) -> list[tuple[str, str]]:
    out = Corpus(corpus).git("log", "--format=%s%x1f%B%x1e")
    return [tuple(r.strip("\n").split("\x1f", 1)) for r in out.split("\x1e") if r.strip()]


def memory_files(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.rglob("*.md") if p.name != "README.md" and "tasks" not in p.parts and ".git" not in p.parts)


def make(env, name: str = "a1", **kw) -> Path:
    tmp, wh, _ = env
    with db.reading(wh) as con:
        return A.write_artifact(tmp / name, con, kw.pop("sessions", PG_SESSIONS), **kw)


def test_memories_commits_quotes_and_links(env) -> None:
    _, wh, corpus = env
    sessions = sorted({o["sessionId"] for o in PG + MOD})
    art = make(env, sessions=sessions, candidates=[
        A.candidate("pg-connection-refused", "Postgres on the dev box refuses connections until the container is restarted."),
        A.candidate("module-not-found", "Test-only dependencies are missing from the lock file, so imports fail in tests."),
    ])
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.status == "applied" and len(r.memories_written) == 2
    files = memory_files(corpus)
    assert [p.relative_to(corpus).parts[0] for p in files] == ["error_pattern", "error_pattern"]
    log = git_log(corpus)
    memory_commits = [b for s, b in log if s.startswith("memory: ")]
    assert len(memory_commits) == len(files) == 2
    for cand in json.loads((art / "answer.json").read_text())["candidates"]:
        body = next(b for b in memory_commits if cand["claim"] in b.split("\n", 1)[0])
        for ev in cand["evidence"]:
            assert ev["quote"] in body  # verbatim, not indented or wrapped
            assert f"\n{ev['quote']}\n" in body
            for f in files:
                assert ev["quote"] not in f.read_text()
    with db.reading(wh) as con:
        linked = {e["sessionId"]: e["linkedMemories"] for e in tools.list_sessions(con)}
        cited = {o["sessionId"] for o in PG[:2] + MOD[:2]}
        assert all(linked[s] for s in cited) and not any(linked[s] for s in set(sessions) - cited)
        assert {m["kind"] for s in sessions for m in linked[s]} == {"error_pattern"}
        wm = dict(con.execute("SELECT session_id, line_count FROM watermarks").fetchall())
        assert set(wm) == set(sessions)
        assert not set(sessions) & set(pending.pending_ids(con))
        assert con.execute("SELECT count(*) FROM llm_calls WHERE source = 'consolidator'").fetchall() == [(1,)]


def test_reapply_changes_nothing(env) -> None:
    _, wh, corpus = env
    art = make(env, candidates=[A.candidate("pg-connection-refused", "Postgres refuses connections on the dev box.")])
    apply.apply(art, db=wh, corpus=corpus)
    head = Corpus(corpus).head()
    with db.reading(wh) as con:
        before = con.execute("SELECT count(*) FROM watermarks").fetchall()
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.status == "already-applied" and r.exit_code == 0
    assert Corpus(corpus).head() == head
    with db.reading(wh) as con:
        assert con.execute("SELECT count(*) FROM watermarks").fetchall() == before


def test_reworded_claim_is_linked_not_rewritten(env) -> None:
    _, wh, corpus = env
    first = make(env, "a1", candidates=[A.candidate("pg-connection-refused", "Postgres on the dev box refuses connections until the container restarts.")])
    apply.apply(first, db=wh, corpus=corpus)
    second = make(env, "a2", run_id="run-2", sessions=PG_SESSIONS, candidates=[
        {**A.candidate("pg-connection-refused", "The Postgres on the dev box refuses connections until its container restarts.", n=3)},
    ])
    r = apply.apply(second, db=wh, corpus=corpus)
    assert r.memories_written == [] and len(r.memories_linked) == 1
    assert len(memory_files(corpus)) == 1
    log = git_log(corpus)
    assert sum(s.startswith("memory: ") for s, _ in log) == 1
    links = [b for s, b in log if s.startswith("link: ")]
    assert len(links) == 1 and PG[2]["quote"] in links[0]
    doc = memory_files(corpus)[0].read_text()
    assert PG[2]["sessionId"] in doc  # the linked session now cites the memory


def test_duplicates_within_one_answer_are_linked(env) -> None:
    _, wh, corpus = env
    c = A.candidate("pg-connection-refused", "Postgres refuses connections on the dev box.")
    art = make(env, candidates=[c, {**c, "claim": "Postgres refuses connections on the dev box!"}])
    r = apply.apply(art, db=wh, corpus=corpus)
    assert len(r.memories_written) == 1 and len(r.memories_linked) == 1
    subjects = [s for s, _ in git_log(corpus)]
    assert sum(s.startswith("memory: ") for s in subjects) == 1 and sum(s.startswith("link: ") for s in subjects) == 1


def test_path_traversal_claim_stays_inside(env) -> None:
    tmp, wh, corpus = env
    art = make(env, candidates=[A.candidate("pg-connection-refused", "../../etc/passwd is where ../.. leads, per /etc")])
    apply.apply(art, db=wh, corpus=corpus)
    (f,) = memory_files(corpus)
    assert f.resolve().is_relative_to(corpus.resolve())
    assert f.relative_to(corpus).as_posix() == "error_pattern/etc-passwd-is-where-leads-per-etc.md"
    assert not (tmp / "etc").exists()


def test_secrets_are_redacted_everywhere(env) -> None:
    _, wh, corpus = env
    cand = A.candidate("pg-connection-refused", "Connecting with postgres://app:s3cretpass@db:5432 fails; key sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX0123")
    cand["gist"] = "Token ghp_abcdefghijklmnopqrstuvwxyz0123456789 was in the env."
    cand["entities"].append({"type": "service", "name": "AKIAIOSFODNN7EXAMPLE"})
    apply.apply(make(env, candidates=[cand]), db=wh, corpus=corpus)
    text = memory_files(corpus)[0].read_text()
    log = Corpus(corpus).git("log", "-p")
    for secret in ("s3cretpass", "sk-proj-ABCDEFGH", "ghp_abcdef", "AKIAIOSFODNN7EXAMPLE"):
        assert secret not in text and secret not in log
    assert "[REDACTED:url-password]" in text and "[REDACTED:openai-key]" in text


def test_no_git_identity_and_hostile_git_config(env, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp, wh, corpus = env
    home = tmp / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[commit]\n\tgpgsign = true\n[core]\n\thooksPath = /nonexistent\n[user]\n\tsigningkey = nope\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.delenv("GIT_AUTHOR_NAME", raising=False)
    monkeypatch.setenv("GIT_DIR", str(tmp / "elsewhere"))  # must not be followed
    r = apply.apply(make(env, candidates=[A.candidate("pg-connection-refused", "Postgres refuses connections.")]),
                    db=wh, corpus=corpus)
    assert r.status == "applied"
    author = Corpus(corpus).git("log", "-1", "--format=%an <%ae>").strip()
    assert author == "trace-pipeline <pipeline@localhost>"
    assert not (tmp / "elsewhere").exists()


def test_corpus_inside_another_repository_is_its_own(env) -> None:
    tmp, wh, _ = env
    outer = tmp / "outer"
    outer.mkdir()
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    corpus = outer / "data" / "corpus"  # missing folder, inside someone else's repo
    apply.apply(make(env, candidates=[A.candidate("pg-connection-refused", "Postgres refuses connections.")]),
                db=wh, corpus=corpus)
    assert (corpus / ".git").is_dir()
    outer_log = subprocess.run(["git", "-C", str(outer), "log", "--oneline"], capture_output=True, text=True)
    assert outer_log.stdout == ""  # the outer repository got no commit


def test_stale_index_lock_is_recovered(env) -> None:
    _, wh, corpus = env
    apply.apply(make(env, "a1", candidates=[A.candidate("pg-connection-refused", "Postgres refuses connections.")]),
                db=wh, corpus=corpus)
    (corpus / ".git" / "index.lock").write_text("")
    r = apply.apply(make(env, "a2", run_id="r2", sessions=sorted({o["sessionId"] for o in MOD}),
                         candidates=[A.candidate("module-not-found", "Imports of test-only packages fail.")]),
                    db=wh, corpus=corpus)
    assert r.status == "applied" and len(memory_files(corpus)) == 2


def test_watermarks_only_for_read_and_touched_sessions(env) -> None:
    _, wh, corpus = env
    a, b, c = PG_SESSIONS
    art = make(env, sessions=[a, b, c], read=[a, b], touched=[a, c])
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.watermarked == [a] and r.named_not_touched == [b]
    with db.reading(wh) as con:
        assert set(pending.pending_ids(con)) >= {b, c} and a not in pending.pending_ids(con)


def test_a_candidate_quoting_a_session_the_batch_never_looked_at_is_not_landed(env) -> None:
    _, wh, corpus = env
    a, b, c = PG_SESSIONS
    cand = A.candidate("pg-connection-refused", "Postgres on the dev box refuses connections until restarted.")
    quoted = sorted({e["sessionId"] for e in cand["evidence"]})
    unread = quoted[-1]
    art = make(env, sessions=[a, b, c], candidates=[cand], touched=[s for s in (a, b, c) if s != unread])
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.status == "applied" and r.memories_written == [] and r.memories_linked == []
    assert r.candidates_refused[0]["problems"] == [f"quotes session(s) the batch never searched or read: {unread}"]
    assert not memory_files(corpus)
    # the refusal is listed with the sessions it quotes; the sessions the batch read are watermarked all
    # the same (holding them would only offer the same refusal again), the one it never read is not
    assert r.candidates_refused[0]["sessions"] == quoted
    assert set(r.watermarked) == {a, b, c} - {unread}
    with db.reading(wh) as con:
        assert set(pending.pending_ids(con)) & {a, b, c} == {unread}


def test_watermark_records_manifest_sizes_and_growth_is_pending(env) -> None:
    tmp, wh, corpus = env
    sid = PG_SESSIONS[0]
    art = make(env, sessions=[sid])
    manifest = json.loads((art / "manifest.json").read_text())["sessions"][0]
    path = next(p for p in SAMPLES.rglob("*.jsonl") if sid in p.name)
    copy = tmp / "grown" / path.name
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    apply.apply(art, db=wh, corpus=corpus)
    with db.writing(wh) as con:
        assert con.execute("SELECT line_count, size_bytes FROM watermarks").fetchall() == [(manifest["lineCount"], manifest["sizeBytes"])]
        # same session id from a second file is a different session; grow the original in place instead
        con.execute("UPDATE sessions SET path = ? WHERE session_id = ?", [str(copy.absolute()), sid])
        write_jsonl(copy.parent / "extra.tmp", [])
        with copy.open("a") as fh:
            fh.write(json.dumps({"type": "user", "sessionId": sid, "message": {"role": "user", "content": "one more"}}) + "\n")
        ingest.ingest(con, [copy])
        entry = next(e for e in pending.pending_sessions(con) if e["sessionId"] == sid)
    assert entry["newFromLine"] == manifest["lineCount"] + 1 and entry["lineCount"] == manifest["lineCount"] + 1


def test_answer_failing_the_contract_at_apply_lands_nothing(env) -> None:
    _, wh, corpus = env
    cand = A.candidate("pg-connection-refused", "Postgres refuses connections.")
    cand["evidence"][0]["quote"] = "this text is in no transcript at all"
    r = apply.apply(make(env, candidates=[cand]), db=wh, corpus=corpus)
    assert r.status == "refused" and r.exit_code == 1
    assert "candidates[0].evidence[0].quote" in (r.reason or "")
    assert not corpus.exists() or not memory_files(corpus)
    with db.reading(wh) as con:
        assert con.execute("SELECT count(*) FROM watermarks").fetchall() == [(0,)]


def test_an_answer_breaking_the_schema_is_refused_like_check_answer_refuses_it(env) -> None:
    _, wh, corpus = env
    art = make(env, candidates=[A.candidate("pg-connection-refused", "Postgres refuses connections.")])
    answer = json.loads((art / "answer.json").read_text())
    del answer["candidates"][0]["evidence"][1:]
    (art / "answer.json").write_text(json.dumps(answer))
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.status == "refused" and r.exit_code == 1  # a refusal, not a wrong invocation
    assert "candidates[0].evidence: has 1 evidence quote(s); a candidate needs at least 2 quotes" in (r.reason or "")
    assert not corpus.exists() or not memory_files(corpus)


def test_artifact_without_answer_lands_nothing(env) -> None:
    _, wh, corpus = env
    r = apply.apply(make(env, answer=False), db=wh, corpus=corpus)
    assert r.status == "no-answer" and r.exit_code == 1
    with db.reading(wh) as con:
        assert con.execute("SELECT count(*) FROM watermarks").fetchall() == [(0,)]
        assert con.execute("SELECT status FROM batches").fetchall() == [("no-answer",)]


def test_incomplete_artifact_is_a_usage_error(env) -> None:
    from pipeline.errors import UsageError

    art = make(env)
    (art / "run.json").unlink()
    with pytest.raises(UsageError, match="did not finish"):
        apply.apply(art, db=env[1], corpus=env[2])


def test_malformed_tool_arguments_in_the_log_are_loaded(env) -> None:
    _, wh, corpus = env
    art = make(env, candidates=[A.candidate("pg-connection-refused", "Postgres refuses connections.")])
    rows = [json.loads(line) for line in (art / "tool_calls.jsonl").read_text().splitlines()]
    rows.append({**rows[0], "seq": 99, "name": "read_lines", "arguments": '{"sessionId": "x",', "session_id": None, "ok": False})
    (art / "tool_calls.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert apply.apply(art, db=wh, corpus=corpus).status == "applied"
    with db.reading(wh) as con:
        (args,) = con.execute("SELECT arguments FROM agent_tool_calls WHERE seq = 99").fetchall()[0]
    assert json.loads(args) == '{"sessionId": "x",'
