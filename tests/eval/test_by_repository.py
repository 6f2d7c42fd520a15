"""`pipeline eval` scores each repository on its own sessions (the held-out figures, with the changes
written against a repository taken back, are tests/eval/test_held_out.py's)."""

from __future__ import annotations

from pipeline.eval.evaluate import GoldSet, Proposal, parse_gold, repository_of, score_by_repository


def test_the_repository_is_the_first_folder_under_the_shared_root() -> None:
    paths = {"a": "/r/owner__one/claude/projects/x/a.jsonl", "b": "/r/owner__one/codex/b.jsonl",
             "c": "/r/other__two/c.jsonl"}
    assert repository_of(paths) == {"a": "owner__one", "b": "owner__one", "c": "other__two"}
    assert repository_of({"a": "/home/u/.claude/projects/p/a.jsonl"}) == {"a": "p"}
    assert repository_of({}) == {}


def test_each_repository_is_scored_on_its_own_sessions_only() -> None:
    gold = parse_gold([
        '{"type": "reviewed", "sessionId": "a"}',
        '{"type": "reviewed", "sessionId": "c"}',
        '{"type": "memory", "kind": "procedural", "claim": "x", "certainty": "clear", "rulesDetectable": true, '
        '"evidence": [{"sessionId": "a", "line": 1, "quote": "run make check"}]}',
        '{"type": "memory", "kind": "procedural", "claim": "y", "certainty": "clear", "rulesDetectable": true, '
        '"evidence": [{"sessionId": "c", "line": 1, "quote": "use pnpm not npm"}]}',
    ])
    props = [Proposal("memory", "found a", (("a", "run make check"),)),
             Proposal("memory", "wrong in c", (("c", "something else entirely"),))]
    by = score_by_repository(gold, props, lambda s, n: None, engine="rules", repository={"a": "one", "c": "two"})
    assert (by["one"].memories.precision, by["one"].memories.recall) == (1.0, 1.0)
    assert (by["two"].memories.precision, by["two"].memories.recall) == (0.0, 0.0)
    assert isinstance(gold, GoldSet)
