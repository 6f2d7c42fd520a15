"""Held-out figures for hand-written rules: each repository scored with the changes written against it
taken back, item by item, from the state the rules were in when its batch was first seen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import UsageError
from pipeline.eval.evaluate import Proposal, parse_gold
from pipeline.eval.held_out import (
    FIRST_SEEN,
    READING,
    ItemState,
    Provenance,
    Written,
    flips,
    held_out,
    item_state,
    load_provenance,
    score_history,
    unexplained,
)

GOLD = parse_gold([
    '{"type": "reviewed", "sessionId": "a"}',
    '{"type": "reviewed", "sessionId": "b"}',
    '{"type": "memory", "kind": "procedural", "claim": "x", "certainty": "clear", "rulesDetectable": true, '
    '"evidence": [{"sessionId": "a", "line": 1, "quote": "run make check before pushing"}]}',
    '{"type": "memory", "kind": "semantic", "claim": "y", "certainty": "clear", "rulesDetectable": false, '
    '"evidence": [{"sessionId": "b", "line": 4, "quote": "the staging host is behind a VPN"}]}',
    '{"type": "memory", "kind": "semantic", "claim": "z", "certainty": "borderline", "rulesDetectable": true, '
    '"evidence": [{"sessionId": "b", "line": 9, "quote": "pnpm is pinned to 9.1"}]}',
    '{"type": "commitment", "actor": "agent", "resolved": false, "certainty": "clear", '
    '"evidence": [{"sessionId": "b", "line": 12, "quote": "I will send the migration plan tomorrow"}]}',
])
REPO = {"a": "one", "b": "two"}


def provenance(**commits: list[str]) -> Provenance:
    return Provenance(firstSeen={}, reading=Written(repositories=[], why="none"),
                      commits={c: Written(repositories=r, why="test") for c, r in commits.items()})


def state(*proposals: Proposal, chance: tuple[str, ...] = ()) -> ItemState:
    return item_state(GOLD, list(proposals), lambda s, n: None, REPO, chance)


FOUND_A = Proposal("memory", "make check", (("a", "run make check before pushing"),))
NOISE_B = Proposal("memory", "noise", (("b", "an unrelated error text"),))
PROMISE_B = Proposal("commitment", "plan", (("b", "I will send the migration plan tomorrow"),), actor="agent")


def test_items_and_proposals_are_keyed_by_what_they_matched() -> None:
    s = state(FOUND_A, NOISE_B, Proposal("memory", "vpn", (("b", "the staging host is behind a VPN"),)),
              Proposal("memory", "pnpm", (("b", "pnpm is pinned to 9.1"),)), PROMISE_B,
              Proposal("commitment", "relayed", (("b", "I will send the migration plan tomorrow"),), actor="other"))
    # the clear memory no rule could find is out of recall's scope, yet a proposal on it is right
    assert s.items == {"m3": ("memory", "one"), "c6": ("commitment", "two")}
    kinds = sorted((k[0], k[1], k[2]) for k in s.proposals)
    assert kinds == [("commitment", "matched", ("c6",)), ("memory", "borderline", ()), ("memory", "matched", ("m3",)),
                     ("memory", "matched", ("m4",)), ("memory", "unmatched", ())]
    assert s.proposals[("memory", "unmatched", (), ("b", "an unrelated error text"))] == "two"


def test_two_proposals_on_one_item_both_count_and_a_chance_match_finds_nothing() -> None:
    twice = state(FOUND_A, Proposal("memory", "again", (("a", "run make check before pushing, then push"),)))
    rows = score_history([(FIRST_SEEN, twice)], provenance(), ["one"])
    assert (rows["one"].now.memoriesMatched, rows["one"].now.memoriesFound) == (2, 1)
    by_chance = state(FOUND_A, chance=("m3",))
    rows = score_history([(FIRST_SEEN, by_chance)], provenance(), ["one"])
    assert (rows["one"].now.memoriesUnmatched, rows["one"].now.memoriesFound, rows["one"].now.memoriesClear) == (1, 0, 1)


def test_a_change_written_against_a_repository_is_taken_back_there_only() -> None:
    steps = [(FIRST_SEEN, state(NOISE_B)), (READING, state(NOISE_B)),
             ("c1", state(FOUND_A, NOISE_B, PROMISE_B)),  # written against two: finds a's item and b's promise
             ("c2", state(FOUND_A, PROMISE_B))]  # written against two: drops b's noise
    prov = provenance(c1=["two"], c2=["two"])
    assert held_out(steps, prov, "one") == {("memory", "matched", ("m3",), ("a", "run make check before pushing"))}
    # in two, both changes are taken back: the noise stays and the promise is not found
    assert held_out(steps, prov, "two") == {("memory", "unmatched", (), ("b", "an unrelated error text"))}
    rows = score_history(steps, prov, ["one", "two"])
    assert (rows["one"].firstSeen.memoriesFound, rows["one"].heldOut.memoriesFound, rows["one"].now.memoriesFound) == (0, 1, 1)
    assert rows["two"].heldOut.precision("memories") == 0.0 and rows["two"].now.precision("memories") is None
    assert (rows["two"].heldOut.recall("commitments"), rows["two"].now.recall("commitments")) == (0.0, 1.0)


def test_a_commit_that_moved_a_figure_without_provenance_is_named() -> None:
    steps = [(FIRST_SEEN, state()), (READING, state()), ("c1", state(FOUND_A)), ("c2", state(FOUND_A))]
    assert unexplained(steps, provenance()) == {"c1": {"one"}}
    assert unexplained(steps, provenance(c1=[])) == {}
    assert [(f.step, f.present) for f in flips(steps)] == [("c1", True)]


def test_the_provenance_file_names_its_field_when_it_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "provenance.json"
    path.write_text(json.dumps({"firstSeen": {}, "reading": {"repositories": [], "why": "x"},
                                "commits": {"abc1234": {"repositories": ["one"]}}}), encoding="utf-8")
    with pytest.raises(UsageError, match=r"provenance.json: commits.abc1234.why: Field required"):
        load_provenance(path)
    with pytest.raises(UsageError, match="cannot read the provenance file"):
        load_provenance(tmp_path / "missing.json")


def test_the_project_s_own_provenance_file_is_valid() -> None:
    prov = load_provenance(Path(__file__).resolve().parents[2] / "bench" / "eval" / "provenance.json")
    assert {"real-dev.gold.jsonl", "real-dev-2.gold.jsonl", "real-dev-3.gold.jsonl"} <= set(prov.firstSeen)
    assert all(w.why.strip() for w in prov.commits.values())


CHOICES = [FOUND_A, NOISE_B, PROMISE_B, Proposal("memory", "vpn", (("b", "the staging host is behind a VPN"),))]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(range(len(CHOICES))), max_size=4), min_size=2, max_size=6))
def test_no_provenance_gives_now_and_full_provenance_gives_first_seen(picks: list[list[int]]) -> None:
    steps = [(FIRST_SEEN if i == 0 else READING if i == 1 else f"c{i}", state(*(CHOICES[j] for j in pick)))
             for i, pick in enumerate(picks)]
    names = [name for name, _ in steps[1:]]
    for repo in ("one", "two"):
        now = {k for k, r in steps[-1][1].present().items() if r == repo}
        first = {k for k, r in steps[0][1].present().items() if r == repo}
        nobody = Provenance(firstSeen={}, reading=Written(repositories=[], why="x"),
                            commits={n: Written(repositories=[], why="x") for n in names})
        everyone = Provenance(firstSeen={}, reading=Written(repositories=["one", "two"], why="x"),
                              commits={n: Written(repositories=["one", "two"], why="x") for n in names})
        assert held_out(steps, nobody, repo) == now
        assert held_out(steps, everyone, repo) == first
