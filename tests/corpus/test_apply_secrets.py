"""apply's last gate: the batch's sessions are scanned again, and a candidate or commitment whose text
still holds a secret, verbatim or rewritten, is refused with a reason and never lands."""

from __future__ import annotations

import html
import json
import random
import re
import string
from pathlib import Path

import pytest

from pipeline.consolidator import pending
from pipeline.corpus import apply
from pipeline.corpus.git_corpus import Corpus
from pipeline.errors import ReportError
from pipeline.nightly import report
from pipeline.secrets.gate import SecretSet
from pipeline.warehouse import db, ingest
from tests.helpers import write_artifact, write_jsonl

RNG = random.Random(5)


def rand(n: int) -> str:
    chars = string.ascii_letters + string.digits
    while True:
        out = "".join(RNG.choice(chars) for _ in range(n))
        if any(c.isdigit() for c in out) and any(c.islower() for c in out) and any(c.isupper() for c in out):
            return out


KEY = f"sk-proj-{rand(44)}"
ERROR = f"openai.AuthenticationError: Error code: 401 - Incorrect API key provided: {KEY}"
MASKED = "openai.AuthenticationError: Error code: 401 - Incorrect API key provided: [REDACTED:openai-key]"
PROMISE = f"I'll revoke {KEY} tomorrow after the release."


@pytest.fixture
def env(tmp_path: Path) -> tuple[Path, Path, Path, list[str]]:
    write_jsonl(tmp_path / "src" / "s1.jsonl", [{"role": "tool", "content": ERROR}, {"role": "assistant", "content": PROMISE}])
    write_jsonl(tmp_path / "src" / "s2.jsonl", [{"role": "tool", "content": ERROR}])
    wh = tmp_path / "w.duckdb"
    with db.writing(wh) as con:
        assert not ingest.ingest(con, [tmp_path / "src"]).errors
        ids = [r[0] for r in con.execute("SELECT session_id FROM sessions ORDER BY session_id").fetchall()]
    return tmp_path, wh, tmp_path / "corpus", ids


def candidate(claim: str, quote: str = MASKED, ids: list[str] | None = None) -> dict:
    return {"kind": "error_pattern", "claim": claim, "gist": "", "entities": [{"type": "error", "name": "AuthenticationError"}],
            "evidence": [{"sessionId": s, "quote": quote} for s in ids or []]}


def everything(corpus: Path, wh: Path) -> str:
    files = "\n".join(p.read_text() for p in corpus.rglob("*") if p.is_file() and ".git" not in p.parts)
    with db.reading(wh) as con:
        tables = "\n".join(str(con.execute(f"SELECT * FROM {t}").fetchall())
                           for t in ("memories", "tasks", "batches", "applied_artifacts", "agent_tool_calls"))
    return files + Corpus(corpus).git("log", "--format=%B") + tables


def test_rewritten_secrets_are_refused_and_masked_quotes_land(env) -> None:
    tmp, wh, corpus, ids = env
    digits_masked = re.sub(r"\d+", "<n>", KEY)
    with db.reading(wh) as con:
        art = write_artifact(tmp / "a1", con, ids, candidates=[
            candidate("The OpenAI key is refused with HTTP 401 in both sessions.", ids=ids),
            candidate(f"OpenAI refuses the key {digits_masked} with HTTP 401.", ids=ids),
            candidate(f"The refused key was {KEY.upper().replace('-', ' ')}.", ids=ids),
        ], commitments=[{
            "statement": f"The agent will revoke {re.sub(r'[0-9]', '', KEY)} tomorrow.", "actor": "agent",
            "evidence": [{"sessionId": ids[0], "quote": "I'll revoke [REDACTED:openai-key] tomorrow after the release."}],
            "confidence": 0.9, "resolved": False,
        }])
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.status == "applied", r.reason
    assert len(r.memories_written) == 1
    refused = r.candidates_refused
    assert sorted(e.get("candidate", -1) for e in refused) == [-1, 1, 2]
    assert any(e.get("commitment") == 0 for e in refused)
    assert all("openai-key" in " ".join(e["problems"]) for e in refused)
    out = everything(corpus, wh) + json.dumps(r.to_json())
    tail = KEY[8:]
    for form in (tail, re.sub(r"\d", "", tail), tail.lower(), re.sub(r"\d+", "<n>", tail)):
        assert form[:14] not in out and form[-14:] not in out
    assert not SecretSet.from_lines([ERROR]).leaks(out)
    assert MASKED in Corpus(corpus).git("log", "--format=%B")


def test_a_refused_candidate_is_listed_and_its_sessions_are_not_offered_again(env) -> None:
    """No livelock: the same transcript read again gives the same candidate and the same refusal, so a
    refusal watermarks what the batch read and says why, instead of keeping the sessions pending."""
    tmp, wh, corpus, ids = env
    with db.reading(wh) as con:
        art = write_artifact(tmp / "a1", con, ids, candidates=[
            candidate(f"The refused key was {KEY.upper().replace('-', ' ')}.", ids=ids)])
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.status == "applied" and r.memories_written == []
    [refused] = r.candidates_refused
    assert refused["candidate"] == 0 and refused["sessions"] == sorted(ids)
    assert "openai-key" in " ".join(refused["problems"]) and KEY[8:22] not in json.dumps(refused)
    assert sorted(r.watermarked) == sorted(ids) and "keptPending" not in r.to_json()
    with db.reading(wh) as con:
        assert not set(pending.pending_ids(con)) & set(ids)


def test_a_raw_secret_in_a_claim_is_masked_before_it_lands(env) -> None:
    tmp, wh, corpus, ids = env
    with db.reading(wh) as con:
        art = write_artifact(tmp / "a1", con, ids, candidates=[candidate(f"OpenAI refuses {KEY} with HTTP 401.", ids=ids)])
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.status == "applied" and len(r.memories_written) == 1
    assert KEY not in everything(corpus, wh)
    assert "[REDACTED:openai-key]" in Corpus(corpus).git("log", "-1", "--format=%s")


def test_the_report_gate_never_edits_markup_and_refuses_a_page_that_shows_a_secret(tmp_path: Path) -> None:
    known = SecretSet.from_lines([ERROR])
    page = tmp_path / "report.html"
    fine = "<td><code class=\"id\">-Users-jdoe-uw-proj</code> · line 69</td><td>[REDACTED:openai-key]</td>"
    page.write_text(fine, encoding="utf-8")
    report.gate_file(page, known)
    assert page.read_text(encoding="utf-8") == fine  # untouched, byte for byte
    page.write_text(f"<td>{html.escape(KEY)}</td><td>fine</td>", encoding="utf-8")
    with pytest.raises(ReportError, match="openai-key") as err:
        report.gate_file(page, known)
    assert not page.exists() and KEY not in str(err.value)


def test_a_scan_of_other_sessions_is_not_trusted_and_the_apply_keeps_its_own(env) -> None:
    # The night hands apply a scan made while the batches ran; one that is not of the batch's sessions
    # (here: of the other session only, which holds the key too but not the promise) is scanned again.
    from pipeline.consolidator.batch_secrets import scan_warehouse

    tmp, wh, corpus, ids = env
    with db.reading(wh) as con:
        art = write_artifact(tmp / "a1", con, ids, candidates=[candidate(f"OpenAI refuses {KEY} with HTTP 401.", ids=ids)])
    other = scan_warehouse(wh, ids[1:])
    r = apply.apply(art, db=wh, corpus=corpus, scan=other)
    assert r.status == "applied" and len(r.memories_written) == 1
    assert KEY not in everything(corpus, wh)
    with db.reading(wh) as con:
        kept = dict(con.execute("SELECT session_id, line_no FROM secret_scans").fetchall())
    assert kept == {ids[0]: 2, ids[1]: 1}  # the apply's own scan of both sessions, kept for the next reader
