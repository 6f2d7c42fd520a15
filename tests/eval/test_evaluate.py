"""`pipeline.eval.evaluate`: the gold format, the matching rule and the scoring arithmetic.

No quality figure is asserted here: every expected number is computed by hand from a gold set and
proposals built for the test (end-to-end runs over the samples are in tests/cli/test_eval.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.consolidator.contract import Answer
from pipeline.errors import UsageError
from pipeline.eval.evaluate import (
    OVERLAP_CHARS,
    GoldSet,
    Proposal,
    _overlap,
    parse_gold,
    proposals_from,
    score,
)

S1, S2, OUT = "s-one", "s-two", "s-not-reviewed"

# Two small sessions: line n holds the text below (1-based), raw JSON as the warehouse stores it.
# Meaningful lines are two apart, so that "a line next to it" never reaches the next one.
def _tick(n: int) -> str:
    return json.dumps({"type": "progress", "data": f"tick {n}"})


LINES: dict[str, list[str]] = {
    S1: [
        json.dumps({"type": "user", "message": {"content": "please run the tests"}}),
        _tick(2),
        json.dumps({"type": "tool_result", "content": "ModuleNotFoundError: No module named 'respx'"}),
        _tick(4),
        json.dumps({"type": "assistant", "message": {"content": "Installing respx with pip and retrying the suite."}}),
        _tick(6),
        json.dumps({"type": "assistant", "message": {"content": "I'll add a regression test for the date parser later."}}),
        _tick(8),
        json.dumps({"type": "assistant", "message": {"content": "Let me update the script now."}}),
        _tick(10),
        json.dumps({"type": "user", "message": {"content": "tell me when staging is up, then I'll deploy"}}),
    ],
    S2: [
        json.dumps({"type": "tool_result", "content": "ModuleNotFoundError: No module named 'freezegun'"}),
        _tick(2),
        json.dumps({"type": "assistant", "message": {"content": "The stack is Python 3.11 with FastAPI."}}),
        _tick(4),
        json.dumps({"type": "assistant", "message": {"content": "Once the migration lands I will rotate the keys."}}),
    ],
}


def line_text(session_id: str, line_no: int) -> str | None:
    lines = LINES.get(session_id, [])
    return lines[line_no - 1] if 1 <= line_no <= len(lines) else None


def ev(sid: str, line: int, quote: str) -> dict[str, Any]:
    return {"sessionId": sid, "line": line, "quote": quote}


def gold(*records: dict[str, Any], reviewed: Sequence[str] = (S1, S2)) -> GoldSet:
    rows = [{"type": "reviewed", "sessionId": s} for s in reviewed] + list(records)
    return parse_gold([json.dumps(r) for r in rows], "g.jsonl")


def memory(*evidence: dict[str, Any], certainty: str = "clear", rd: bool = True, kind: str = "error_pattern") -> dict[str, Any]:
    return {"type": "memory", "kind": kind, "claim": "c", "certainty": certainty, "rulesDetectable": rd,
            "evidence": list(evidence)}


def commitment(*evidence: dict[str, Any], certainty: str = "clear", actor: str = "agent", resolved: bool = False) -> dict[str, Any]:
    return {"type": "commitment", "actor": actor, "resolved": resolved, "certainty": certainty, "evidence": list(evidence)}


def negative(*evidence: dict[str, Any]) -> dict[str, Any]:
    return {"type": "not_commitment", "evidence": list(evidence)}


def mem_p(*evidence: tuple[str, str]) -> Proposal:
    return Proposal("memory", "proposed claim", tuple(evidence))


def com_p(*evidence: tuple[str, str], actor: str = "agent", resolved: bool | None = None) -> Proposal:
    return Proposal("commitment", "proposed statement", tuple(evidence), actor=actor, resolved=resolved)


# --- the gold file ----------------------------------------------------------------------------------------


def test_a_well_formed_gold_file() -> None:
    g = gold(memory(ev(S1, 3, "respx")), commitment(ev(S1, 7, "I'll add")), negative(ev(S1, 9, "Let me")),
             reviewed=(S1, S2, S1))
    assert g.reviewed == [S1, S2]  # a repeated reviewed line counts once
    assert (len(g.memories), len(g.commitments), len(g.not_commitments)) == (1, 1, 1)
    assert [n for n, _ in g.memories] == [4]  # items keep their gold-file line


def test_every_malformed_line_is_named_with_its_field() -> None:
    rows = [
        '{"type": "reviewed", "sessionId": "s"}',
        "not json at all",
        '{"type": "memo", "evidence": []}',
        '{"sessionId": "s"}',
        json.dumps(memory(ev(S1, 0, "q"), certainty="sure")),
        json.dumps({**memory(ev(S1, 2, "")), "rulesDetectable": "yes"}),
        json.dumps({**commitment(ev(S1, 1, "q")), "actor": "robot", "note": "x"}),
        json.dumps(negative()),
        "[1, 2]",
        "",
    ]
    with pytest.raises(UsageError) as err:
        parse_gold(rows, "bad.jsonl")
    message = str(err.value)
    for expected in (
        "bad.jsonl:2:-: not JSON",
        "bad.jsonl:3:type: must be one of reviewed, memory, commitment, not_commitment",
        "bad.jsonl:4:type:",
        "bad.jsonl:5:certainty:",
        "bad.jsonl:5:evidence[0].line:",
        "bad.jsonl:6:rulesDetectable:",
        "bad.jsonl:6:evidence[0].quote:",
        "bad.jsonl:7:actor:",
        "bad.jsonl:7:note: Extra inputs are not permitted",
        "bad.jsonl:8:evidence:",
        "bad.jsonl:9:-: a gold record is a JSON object",
    ):
        assert expected in message, expected
    assert "bad.jsonl:1:" not in message and "bad.jsonl:10:" not in message


def test_a_memory_kind_outside_the_contract_is_refused() -> None:
    with pytest.raises(UsageError, match=r"g.jsonl:2:kind:"):
        gold(memory(ev(S1, 3, "respx"), kind="trivia"), reviewed=(S1,))


def test_an_empty_reviewed_set_is_an_error_not_a_division_by_zero() -> None:
    with pytest.raises(UsageError, match="no reviewed session"):
        parse_gold([json.dumps(memory(ev(S1, 2, "respx")))], "g.jsonl")
    with pytest.raises(UsageError, match="no reviewed session"):
        parse_gold([], "empty.jsonl")


# --- matching ---------------------------------------------------------------------------------------------


def test_a_quote_on_the_gold_line_or_next_to_it_matches() -> None:
    g = gold(memory(ev(S1, 3, "a quote the proposal does not share")))
    on_line = mem_p((S1, "No module named 'respx'"))
    next_line = mem_p((S1, "tick 4"))
    line_before = mem_p((S1, "tick 2"))
    two_away = mem_p((S1, "Installing respx with pip"))
    other_session = mem_p((S2, "No module named 'freezegun'"))
    figures = [score(g, [p], line_text, engine="openai").memories for p in (on_line, next_line, line_before, two_away, other_session)]
    assert [f.matched for f in figures] == [1, 1, 1, 0, 0]


def test_overlapping_quotes_match_anywhere_in_the_session() -> None:
    shared = "x" * OVERLAP_CHARS
    g = gold(memory(ev(S2, 3, "ModuleNotFoundError: No module named 'respx' again")))
    contained = mem_p((S2, "No module named 'respx'"))  # one contains the other
    twenty = mem_p((S2, "A" + shared + "B"))
    nineteen = mem_p((S2, "A" + shared[:-1] + "B"))
    g20 = gold(memory(ev(S2, 3, "other " + shared + " text")))
    assert score(g, [contained], line_text, engine="openai").memories.matched == 1
    assert score(g20, [twenty], line_text, engine="openai").memories.matched == 1
    assert score(g20, [nineteen], line_text, engine="openai").memories.matched == 0


def test_the_line_rule_reads_decoded_strings() -> None:
    # In the raw line the double quotes are escaped (\\"); the decoded string holds them as typed.
    LINES["s-three"] = [json.dumps({"content": 'He said "ship it" and left.'})]
    try:
        g = gold(memory(ev("s-three", 1, "unrelated")), reviewed=("s-three",))
        assert score(g, [mem_p(("s-three", 'said "ship it"'))], line_text, engine="openai").memories.matched == 1
    finally:
        del LINES["s-three"]


# --- the arithmetic, by hand ------------------------------------------------------------------------------


def test_memory_figures_by_hand() -> None:
    g = gold(
        memory(ev(S1, 3, "No module named 'respx'"), ev(S2, 1, "No module named 'freezegun'")),  # clear, rules
        memory(ev(S1, 5, "Installing respx with pip"), rd=False),                                 # clear, not rules
        memory(ev(S2, 3, "The stack is Python 3.11"), certainty="borderline"),
        memory(ev(OUT, 1, "never scored")),                                                       # outside review
    )
    props = [
        mem_p((S2, "No module named 'freezegun'")),          # matches the clear rules item
        mem_p((S1, "Installing respx with pip and retrying")),  # matches the clear non-rules item
        mem_p((S2, "Python 3.11 with FastAPI")),              # matches only the borderline item
        mem_p((S1, "tell me when staging is up")),            # matches nothing
        mem_p((OUT, "anything")),                              # evidence outside the reviewed sessions
    ]
    rules = score(g, props, line_text, engine="rules").memories
    assert (rules.proposed, rules.matched, rules.borderline_only, rules.unmatched) == (4, 2, 1, 1)
    assert rules.precision == round(2 / (4 - 1), 4)
    assert (rules.found, rules.clear, rules.recall) == (1, 1, 1.0)  # only rules-detectable clear items count
    model = score(g, props, line_text, engine="openai").memories
    assert (model.found, model.clear, model.recall) == (2, 2, 1.0)
    only_first = score(g, props[:1], line_text, engine="openai").memories
    assert (only_first.found, only_first.clear, only_first.recall) == (1, 2, 0.5)


def test_commitment_figures_by_hand() -> None:
    g = gold(
        commitment(ev(S1, 7, "I'll add a regression test for the date parser later.")),  # clear, agent
        commitment(ev(S1, 11, "then I'll deploy"), actor="user"),                         # clear, user, never proposed
        commitment(ev(S2, 5, "I will rotate the keys"), certainty="borderline"),
        commitment(ev(S2, 3, "The stack is Python 3.11"), actor="other"),                # not scored
        negative(ev(S1, 9, "Let me update the script now.")),
        negative(ev(S2, 1, "an unproposed negative")),
    )
    props = [
        com_p((S1, "I'll add a regression test")),                     # clear match
        com_p((S2, "Once the migration lands I will rotate the keys.")),  # borderline only
        com_p((S2, "The stack is Python 3.11 with FastAPI.")),         # only the actor-other item: not penalised
        com_p((S1, "Let me update the script now.")),                 # a labelled not_commitment
        com_p((S1, "tell me when staging is up"), actor="other"),     # proposed for `other`: not scored
    ]
    s = score(g, props, line_text, engine="rules")
    c = s.commitments
    assert (c.proposed, c.matched, c.borderline_only, c.unmatched) == (4, 1, 2, 1)
    assert c.precision == round(1 / (4 - 2), 4)
    assert (c.found, c.clear, c.recall) == (1, 2, 0.5)
    assert (s.falseCommitments, s.notCommitments) == (1, 2)
    [example] = s.unmatchedExamples["commitments"]
    assert example == {"statement": "proposed statement", "sessionId": S1, "quote": "Let me update the script now.",
                       "actor": "agent", "notCommitment": True}


def test_resolved_agreement_by_hand() -> None:
    g = gold(
        commitment(ev(S1, 7, "I'll add a regression test for the date parser later."), resolved=True),
        commitment(ev(S2, 5, "I will rotate the keys"), certainty="borderline", resolved=False),  # borderline counts
        commitment(ev(S1, 11, "then I'll deploy"), actor="user", resolved=True),
        commitment(ev(S1, 11, "tell me when staging is up"), actor="user", resolved=False),  # disagrees with the one above
    )
    props = [
        com_p((S1, "I'll add a regression test"), resolved=True),                   # agrees
        com_p((S2, "Once the migration lands I will rotate the keys."), resolved=True),  # disagrees
        com_p((S1, "tell me when staging is up, then I'll deploy"), resolved=True),   # gold items disagree: left out
        com_p((S1, "Installing respx with pip"), resolved=False),                  # matches no gold item: left out
        com_p((S1, "I'll add a regression test")),                                 # no `resolved`: left out
    ]
    c = score(g, props, line_text, engine="rules").commitments
    assert (c.resolvedAgreed, c.resolvedScored) == (1, 2)
    dumped = c.model_dump()
    assert {"proposed", "matched", "borderline_only", "unmatched", "precision", "recall", "clear", "found"} <= set(dumped)
    assert (dumped["resolvedAgreed"], dumped["resolvedScored"]) == (1, 2)
    memories = score(g, props, line_text, engine="rules").memories.model_dump()
    assert "resolvedScored" not in memories


def test_proposals_carry_the_engine_s_resolved() -> None:
    answer = Answer.model_validate({
        "candidates": [], "readSessionIds": [S1],
        "commitments": [{"statement": "The agent will add a regression test.", "actor": "agent", "confidence": 0.8,
                         "resolved": True, "evidence": [{"sessionId": S1, "quote": "I'll add a regression test"}]}],
    })
    [p] = proposals_from(answer)
    assert p.resolved is True


def test_nothing_to_divide_by_gives_none() -> None:
    s = score(gold(), [], line_text, engine="rules")
    for f in (s.memories, s.commitments):
        assert (f.proposed, f.precision, f.recall) == (0, None, None)
    only_borderline = gold(memory(ev(S1, 3, "respx"), certainty="borderline"))
    f = score(only_borderline, [mem_p((S1, "No module named 'respx'"))], line_text, engine="rules").memories
    assert (f.proposed, f.borderline_only, f.precision, f.recall) == (1, 1, None, None)


def test_unmatched_examples_carry_the_claim_and_the_first_quote() -> None:
    p = Proposal("memory", "a claim", ((S1, "first quote"), (S2, "second quote")), batch_id="b-1")
    s = score(gold(), [p], line_text, engine="rules")
    assert s.unmatchedExamples == {"memories": [{"claim": "a claim", "sessionId": S1, "quote": "first quote", "batchId": "b-1"}],
                                   "commitments": []}


# --- general properties -----------------------------------------------------------------------------------

quotes = st.sampled_from([
    "No module named 'respx'", "No module named 'freezegun'", "Installing respx", "I'll add a regression test",
    "Let me update", "then I'll deploy", "Python 3.11", "rotate the keys", "nothing like any line at all",
])
evidence_st = st.tuples(st.sampled_from([S1, S2, OUT]), st.integers(1, 12), quotes)


@settings(max_examples=150, deadline=None)
@given(
    gold_items=st.lists(st.tuples(st.sampled_from(["memory", "commitment", "not_commitment"]),
                                  st.sampled_from(["clear", "borderline"]), st.booleans(),
                                  st.sampled_from(["user", "agent", "other"]), evidence_st), max_size=6),
    props=st.lists(st.tuples(st.sampled_from(["memory", "commitment"]), st.sampled_from(["user", "agent", "other"]),
                             st.lists(st.tuples(st.sampled_from([S1, S2, OUT]), quotes), min_size=1, max_size=3)),
                   max_size=8),
    engine=st.sampled_from(["rules", "openai"]),
)
def test_the_counts_always_add_up(gold_items: list, props: list, engine: str) -> None:
    records = []
    for kind, certainty, rd, actor, (sid, line, quote) in gold_items:
        e = ev(sid, line, quote)
        records.append(memory(e, certainty=certainty, rd=rd) if kind == "memory"
                       else commitment(e, certainty=certainty, actor=actor) if kind == "commitment" else negative(e))
    proposals = [Proposal(t, "x", tuple(evs), actor=actor if t == "commitment" else None) for t, actor, evs in props]
    s = score(gold(*records), proposals, line_text, engine=engine)
    for f in (s.memories, s.commitments):
        assert f.matched + f.borderline_only + f.unmatched == f.proposed
        assert 0 <= f.found <= f.clear
        assert f.precision is None or 0.0 <= f.precision <= 1.0
        assert f.recall is None or 0.0 <= f.recall <= 1.0
        assert (f.precision is None) == (f.proposed - f.borderline_only == 0)
    assert 0 <= s.falseCommitments <= s.notCommitments
    assert len(s.unmatchedExamples["memories"]) == s.memories.unmatched


@given(st.text(max_size=60), st.text(max_size=60))
def test_overlap_is_symmetric_and_containment_implies_it(a: str, b: str) -> None:
    assert _overlap(a, b) == _overlap(b, a)
    assert _overlap(a, a + b) and _overlap(b, a + b)
