"""Dedupe and links follow what a finding is about (program, error class, setting, project), not its wording."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pipeline.corpus import about as ab
from pipeline.corpus import apply
from pipeline.corpus.git_corpus import Corpus
from pipeline.warehouse import db
from tests import helpers as A
from tests.corpus.conftest import PG, SESSIONS

programs = st.sampled_from(["python", "pnpm", "npm", "git", "go", "node", "rg", "cargo"])
errors = st.sampled_from(["command not found", "SyntaxError", "EADDRINUSE", "not a git repository"])
projects = st.sampled_from(["-home-a-api", "-home-a-web", "-home-b-cli"])


def finding(kind: str, program: str, error: str, project: str, *, routine: bool = False) -> ab.About:
    claim = (f"In {project}, `{program}` run with GOCACHE=/tmp/x set." if routine
             else f"{error} recurs in failed `{program}` across sessions.")
    entities = ["setting:GOCACHE"] if routine else [f"error:{error}"]
    return ab.about(kind, claim, entities, [project])


@given(programs, programs, errors, errors, projects, projects, st.booleans())
def test_never_one_memory_across_programs_errors_or_a_repository(p1: str, p2: str, e1: str, e2: str, j1: str, j2: str,
                                                               routine: bool) -> None:
    a, b = finding("error_pattern", p1, e1, j1, routine=routine), finding("error_pattern", p2, e2, j2, routine=routine)
    assert ab.compatible(a, b) == ab.compatible(b, a)
    if p1 != p2 or (not routine and e1 != e2) or (routine and j1 != j2):
        assert not ab.compatible(a, b) and not ab.same_thing(a, b)
    if p1 == p2 and ((routine and j1 == j2) or (not routine and e1 == e2)):
        assert ab.same_thing(a, b)  # however the claim is worded
    assert not ab.compatible(a, finding("procedural", p1, e1, j1, routine=routine))


def test_the_program_of_a_code_span() -> None:
    assert ab.about("error_pattern", "X in `./node_modules/.bin/jest --ci` and `PGPORT=5433`", [], []).programs == {"jest"}
    assert ab.about("error_pattern", "fatal recurs in failed tool calls", ["error:fatal"], ["p"]).in_project


def test_a_claim_that_reads_alike_about_another_program_is_its_own_memory(tmp_path: Path, samples_copy: Path) -> None:
    corpus = tmp_path / "corpus"
    with db.reading(samples_copy) as con:
        first = A.write_artifact(tmp_path / "a1", con, SESSIONS, candidates=[
            {**A.candidate("pg-connection-refused", "command not found recurs in failed `python` across sessions."),
             "entities": [{"type": "error", "name": "command not found"}]}])
    assert apply.apply(first, db=samples_copy, corpus=corpus).memories_written
    with db.reading(samples_copy) as con:
        other = A.write_artifact(tmp_path / "a2", con, SESSIONS, run_id="r2", batch_id="b02", candidates=[
            {**A.candidate("pg-connection-refused", "command not found recurs in failed `pnpm` across sessions."),
             "entities": [{"type": "error", "name": "command not found"}]},
            {**A.candidate("pg-connection-refused",
                           "command not found recurs in failed `python` across sessions, as zsh: command not found: python."),
             "entities": [{"type": "error", "name": "command not found"}]},
        ])
    r = apply.apply(other, db=samples_copy, corpus=corpus)
    # pnpm is a memory of its own; the python claim with the error text appended is the same memory: a link
    assert len(r.memories_written) == 1 and len(r.memories_linked) == 1
    claims = sorted(d.claim for d in apply.existing_memories(Corpus(corpus)).values())
    assert claims == ["command not found recurs in failed `pnpm` across sessions.",
                      "command not found recurs in failed `python` across sessions."]
    assert PG  # the quotes come from the Postgres failures: what decides is what the claims are about
