"""One contract: an answer check-answer accepts is applied whole. Every candidate lands (written or linked) or
is listed in candidatesRefused with a reason; every commitment is counted; nothing disappears."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipeline.consolidator.contract import KINDS, MAX_QUOTE_CHARS, MIN_QUOTE_CHARS, check_answer
from pipeline.consolidator.quotes import WarehouseQuotes, searchable_strings
from pipeline.corpus import apply
from pipeline.corpus.git_corpus import Corpus
from pipeline.warehouse import db
from tests import helpers as A
from tests.helpers import copy_samples

BATCH = sorted({o["sessionId"] for p in ("pg-connection-refused", "module-not-found") for o in A.occurrences(p)})
SECRETS = ["ana.lopez@example.com", "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34", "ghp_" + "a1B2" * 9,
           "postgres://app:hunter2@db.internal/app"]
WORDS = ["Postgres", "refuses", "connections", "the", "dev", "box", "imports", "fail", "in", "tests", "é", "—", ":",
         "#", "'", '"', "---", "\n", "\u2028", "  ", "\t", "`code`", "[x]", "{a: b}", "100%", "C:\\Users"]


def quote_pool(wh: Path) -> list[tuple[str, str]]:
    """(session, quote) pairs a model could cite: pieces of raw lines and of their decoded strings."""
    rng = random.Random(7)
    pool: list[tuple[str, str]] = []
    with db.reading(wh) as con:
        rows = con.execute("SELECT session_id, text FROM lines WHERE session_id IN (SELECT unnest(?::VARCHAR[])) "
                           "ORDER BY session_id, line_no", [BATCH]).fetchall()
    for sid, text in rows:
        _, strings = searchable_strings(text)
        for piece in [text, *strings]:
            if len(piece.strip()) < MIN_QUOTE_CHARS:
                continue
            for _ in range(2):
                n = rng.randint(MIN_QUOTE_CHARS, min(len(piece), 160))
                start = rng.randint(0, len(piece) - n)
                quote = piece[start:start + n]
                if len(quote.strip()) >= MIN_QUOTE_CHARS:
                    pool.append((sid, quote[:MAX_QUOTE_CHARS]))
    return pool


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, samples_warehouse: Path) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("fuzz")
    wh = copy_samples(samples_warehouse, d)
    return {"dir": d, "wh": wh, "pool": quote_pool(wh), "n": 0}


@st.composite
def answers(draw: st.DrawFn, pool: list[tuple[str, str]]) -> tuple[dict[str, Any], list[str]]:
    evidence = st.sampled_from(pool).map(lambda p: {"sessionId": p[0], "quote": p[1]})

    def prose(quotes: list[dict[str, str]], most: int) -> str:
        parts = draw(st.lists(st.one_of(st.sampled_from(WORDS), st.sampled_from(SECRETS),
                                        st.sampled_from([q["quote"] for q in quotes]) if quotes else st.just("x"),
                                        st.text(max_size=12)), min_size=1, max_size=12))
        return " ".join(parts)[:most]

    candidates = []
    for _ in range(draw(st.integers(0, 3))):
        ev = draw(st.lists(evidence, min_size=2, max_size=3))
        candidates.append({
            "kind": draw(st.sampled_from(KINDS)),
            "claim": prose(ev, 300).strip() or "A claim",
            "gist": prose(ev, 1500),
            "entities": [{"type": draw(st.sampled_from(["file", "error", "unknown"])), "name": prose([], 40).strip() or "n"}
                         for _ in range(draw(st.integers(0, 2)))],
            "evidence": ev,
        })
    commitments = []
    for _ in range(draw(st.integers(0, 2))):
        commitments.append({
            "statement": prose([], 200).strip() or "The user will do it.",
            "actor": draw(st.sampled_from(["user", "agent", "other"])),
            "evidence": [draw(evidence)],
            "confidence": draw(st.floats(0, 1)),
            "resolved": draw(st.booleans()),
        })
    read = draw(st.lists(st.sampled_from(BATCH), unique=True))
    touched = draw(st.lists(st.sampled_from(BATCH), unique=True))
    return {"candidates": candidates, "commitments": commitments, "readSessionIds": read}, touched


@pytest.mark.slow
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_an_accepted_answer_is_applied_and_no_candidate_disappears(world: dict[str, Any], data: st.DataObject) -> None:
    answer, touched = data.draw(answers(world["pool"]))
    wh, corpus = world["wh"], world["dir"] / "corpus"
    with db.reading(wh) as con:
        check = check_answer(answer, BATCH, WarehouseQuotes(con))
    assume(check.accepted)
    world["n"] += 1
    with db.reading(wh) as con:
        art = A.write_artifact(world["dir"] / f"art{world['n']}", con, BATCH, candidates=answer["candidates"],
                               commitments=answer["commitments"], read=answer["readSessionIds"], touched=touched,
                               run_id=f"run-{world['n']}", batch_id=f"b{world['n']}")
    r = apply.apply(art, db=wh, corpus=corpus)
    assert r.status == "applied", r.reason
    # every candidate is accounted for exactly once
    refused = [x["candidate"] for x in r.candidates_refused]
    landed = [x["candidate"] for x in r.candidates_landed]
    assert sorted(refused + landed) == list(range(len(answer["candidates"])))
    assert len(r.memories_written) + len(r.memories_linked) == len(landed)
    for x in r.candidates_refused:
        assert x["problems"] and all(isinstance(p, str) and p for p in x["problems"])
        # a refusal is listed with what it quotes, and holds back no session the batch read
        assert x["sessions"] and set(x["sessions"]) <= set(BATCH)
    assert set(r.watermarked) == {s for s in answer["readSessionIds"] if s in touched}
    # every commitment is counted in one of the task outcomes
    assert sum(r.tasks.values()) == len(answer["commitments"])
    # the only refusals left to apply are those the answer alone cannot show: an unread session
    for x in r.candidates_refused:
        assert all(p.startswith("quotes session(s) the batch never searched or read") for p in x["problems"]), x
    # and no quote found its way into a memory file
    files = [p.read_text(encoding="utf-8") for p in corpus.rglob("*.md")
             if ".git" not in p.parts and "tasks" not in p.parts and p.name != "README.md"]
    for cand, i in zip(answer["candidates"], range(len(answer["candidates"])), strict=True):
        if i in refused:
            continue
        for ev in cand["evidence"]:
            if len(ev["quote"].strip()) >= 16:
                assert not any(ev["quote"] in text.split("\n---\n", 1)[-1] for text in files)
    assert Corpus(corpus).git("status", "--porcelain") == ""
    json.dumps(r.to_json())  # the apply report stays one JSON document
