"""The offline rules engine (rules, error_shapes, commitments): measured against the planted content of
the sample corpus, and rule by rule."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pipeline.consolidator.artifact import Budgets
from pipeline.consolidator.batch_input import BatchInput, snapshot
from pipeline.consolidator.context import BatchContext, Recorder
from pipeline.consolidator.contract import check_answer
from pipeline.consolidator.quotes import WarehouseQuotes
from pipeline.consolidator.rules.commitments import Message, find_commitments, sentences
from pipeline.consolidator.rules.engine import build_answer, run_rules
from pipeline.consolidator.rules.error_shapes import (
    ToolResult,
    error_head,
    error_lines,
    error_shape,
    failure_lines,
    find_error_patterns,
    normalise,
    speaker,
)
from pipeline.consolidator.rules.statements import tidy_statement
from pipeline.warehouse import db
from tests.helpers import SAMPLES

EXPECTED = json.loads((SAMPLES / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def source(wh: Path, all_ids: list[str], tmp_path_factory: pytest.TempPathFactory) -> BatchInput:
    """The whole sample warehouse as one batch's input: what the rules read instead of the warehouse."""
    return snapshot(wh, all_ids, tmp_path_factory.mktemp("batch") / "input")


@pytest.fixture(scope="module")
def answer(source: BatchInput, all_ids: list[str]) -> dict[str, Any]:
    ctx = BatchContext(run_id="r", batch_id="b", source=source, session_ids=tuple(all_ids), budgets=Budgets())
    recorder = Recorder("r", "b")
    result = run_rules(ctx, recorder)
    assert result.outcome == "accepted", result.reason
    assert result.answer is not None
    return result.answer.model_dump(mode="json", exclude_none=True)


def _quoted(answer: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["sessionId"], e["quote"]) for c in answer["candidates"] for e in c["evidence"]}


# --- measured against expected.json --------------------------------------------------------------


def test_every_planted_pattern_is_found_with_its_sessions(answer: dict[str, Any]) -> None:
    quoted = _quoted(answer)
    found = 0
    for pattern in EXPECTED["patterns"]:
        hits = [o for o in pattern["occurrences"] if (o["sessionId"], o["quote"]) in quoted]
        # one candidate carries them all, and at least two different sessions stand behind it
        owners = {
            i for i, c in enumerate(answer["candidates"])
            for e in c["evidence"] if (e["sessionId"], e["quote"]) in {(o["sessionId"], o["quote"]) for o in hits}
        }
        assert len(owners) == 1, pattern["id"]
        assert len({o["sessionId"] for o in hits}) == min(len(pattern["sessions"]), 4), pattern["id"]
        found += 1
    assert found == len(EXPECTED["patterns"]) == 3


def test_no_decoy_and_no_one_off_is_reported(answer: dict[str, Any]) -> None:
    quoted = {q for _, q in _quoted(answer)}
    for decoy in EXPECTED["decoys"]:
        assert not any(o["quote"] in quoted for o in decoy["occurrences"]), decoy["id"]
    one_offs = [t["quote"] for t in EXPECTED["tool_errors"] if t["tag"] == "one-off"]
    assert not any(any(q in o or o in q for o in one_offs) for q in quoted)
    # nothing beyond the planted patterns and the planted workarounds
    assert len(answer["candidates"]) == len(EXPECTED["patterns"]) + len(EXPECTED["workarounds"])
    assert {c["kind"] for c in answer["candidates"]} == {"error_pattern", "procedural"}


def test_every_planted_workaround_is_found_as_a_procedure(answer: dict[str, Any]) -> None:
    procedures = [c for c in answer["candidates"] if c["kind"] == "procedural"]
    for planted in EXPECTED["workarounds"]:
        owners = [
            c for c in procedures
            if {o["sessionId"] for o in planted["occurrences"]} <= {e["sessionId"] for e in c["evidence"]}
            and all(any(o["quote"] in e["quote"] for e in c["evidence"]) for o in planted["occurrences"])
        ]
        assert len(owners) == 1, planted["id"]
    assert len(procedures) == len(EXPECTED["workarounds"]) == 2


def test_candidates_read_well(answer: dict[str, Any]) -> None:
    for candidate in answer["candidates"]:
        assert len({e["sessionId"] for e in candidate["evidence"]}) >= 2
        assert candidate["entities"]
        if candidate["kind"] == "error_pattern":
            # the error class first, then the failing program when there is one (what the memory is about)
            assert candidate["entities"][0]["type"] == "error"
            assert all(e["type"] == "tool" for e in candidate["entities"][1:]) and len(candidate["entities"]) <= 2
        for e in candidate["evidence"]:
            # memory text never repeats a quote (the corpus keeps quotes in commit messages only)
            assert e["quote"] not in candidate["claim"] and e["quote"] not in candidate["gist"]
    heads = {c["entities"][0]["name"] for c in answer["candidates"] if c["kind"] == "error_pattern"}
    assert heads == {"psycopg.OperationalError", "ModuleNotFoundError", "EADDRINUSE"}
    claims = " ".join(c["claim"] for c in answer["candidates"] if c["kind"] == "procedural")
    assert "PGPORT=5433" in claims and ".pytest_cache" in claims


def test_every_planted_commitment_is_found_as_planted(answer: dict[str, Any]) -> None:
    got = {(c["evidence"][0]["sessionId"], c["evidence"][0]["quote"]): c for c in answer["commitments"]}
    for planted in EXPECTED["commitments"]:
        entry = got.get((planted["sessionId"], planted["quote"]))
        assert entry is not None, planted["id"]
        assert entry["actor"] == planted["actor"], planted["id"]
        # Done in a later session of the same project, which the rules read in the same batch.
        assert entry["resolved"] == (planted["resolved"] or "resolvedLater" in planted), planted["id"]
        assert entry.get("dueHint") == planted["dueHint"], planted["id"]
        assert 0.5 <= entry["confidence"] <= 0.9
        assert entry["statement"] != planted["quote"]
    assert len(answer["commitments"]) == len(EXPECTED["commitments"]) == 9


def test_no_planted_non_commitment_is_reported(answer: dict[str, Any]) -> None:
    quotes = [c["evidence"][0]["quote"] for c in answer["commitments"]]
    for planted in EXPECTED["non_commitments"]:
        assert not any(planted["quote"] in q or q in planted["quote"] for q in quotes), planted["why"]


def test_the_measurement_in_numbers(answer: dict[str, Any]) -> None:
    """The figures of the closing note: found / planted."""
    quoted = _quoted(answer)
    patterns = sum(any((o["sessionId"], o["quote"]) in quoted for o in p["occurrences"]) for p in EXPECTED["patterns"])
    decoys = sum(any((o["sessionId"], o["quote"]) in quoted for o in d["occurrences"]) for d in EXPECTED["decoys"])
    said = {(c["evidence"][0]["sessionId"], c["evidence"][0]["quote"]) for c in answer["commitments"]}
    commitments = sum((c["sessionId"], c["quote"]) in said for c in EXPECTED["commitments"])
    non = sum(any(n["quote"] in q or q in n["quote"] for _, q in said) for n in EXPECTED["non_commitments"])
    assert (patterns, len(EXPECTED["patterns"])) == (3, 3)
    assert (decoys, len(EXPECTED["decoys"])) == (0, 3)
    assert (commitments, len(EXPECTED["commitments"])) == (9, 9)
    assert (non, len(EXPECTED["non_commitments"])) == (0, 12)
    procedures = " ".join(e["quote"] for c in answer["candidates"] if c["kind"] == "procedural" for e in c["evidence"])
    workarounds = sum(all(o["quote"] in procedures for o in w["occurrences"]) for w in EXPECTED["workarounds"])
    assert (workarounds, len(EXPECTED["workarounds"])) == (2, 2)
    assert len(answer["candidates"]) == 5 and len(answer["commitments"]) == 9


def test_every_scanned_session_is_named_and_logged(source: BatchInput, all_ids: list[str]) -> None:
    ctx = BatchContext(run_id="r", batch_id="b", source=source, session_ids=tuple(all_ids), budgets=Budgets())
    recorder = Recorder("r", "b")
    result = run_rules(ctx, recorder)
    assert result.answer is not None and result.answer.readSessionIds == all_ids
    scans = [t for t in recorder.tool_calls if t.name == "scan"]
    assert [t.session_id for t in scans] == all_ids and all(t.ok for t in scans)
    assert recorder.touched() == all_ids
    assert recorder.llm_calls == []


def test_the_answer_passes_the_contract_and_is_deterministic(
        wh: Path, source: BatchInput, all_ids: list[str], answer: dict[str, Any]) -> None:
    with db.reading(wh) as con:
        assert check_answer(answer, all_ids, WarehouseQuotes(con)).accepted
    ctx = BatchContext(run_id="r2", batch_id="b2", source=source, session_ids=tuple(all_ids), budgets=Budgets())
    again = run_rules(ctx, Recorder("r2", "b2"))
    assert again.answer is not None and again.answer.model_dump(mode="json", exclude_none=True) == answer


def test_a_batch_of_one_session_has_no_cross_session_pattern(wh: Path, tmp_path: Path) -> None:
    a2 = "94d17458-e734-483d-b466-8395216e13a2"
    ctx = BatchContext(run_id="r", batch_id="b", source=snapshot(wh, [a2], tmp_path / "input"), session_ids=(a2,), budgets=Budgets())
    result = run_rules(ctx, Recorder("r", "b"))
    assert result.outcome == "accepted" and result.answer is not None
    # ObjectInUse twice in one session is not a pattern; the PGPORT prefix on five commands is a routine
    assert [c.kind for c in result.answer.candidates] == ["procedural"]
    assert "PGPORT=5433" in result.answer.candidates[0].claim
    assert [c.evidence[0].quote for c in result.answer.commitments] == [
        "I'll restart the Postgres container myself and tell you when it's up."]


# --- error shapes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "shape"),
    [
        ('psycopg.OperationalError: connection failed: connection to server at "10.0.3.7", port 6432 failed: Connection refused',
         "psycopg.OperationalError: connection failed: connection to server at <value>, port <n> failed: Connection refused"),
        ("ModuleNotFoundError: No module named 'respx'", "ModuleNotFoundError: No module named <value>"),
        ("Error: listen EADDRINUSE: address already in use :::3000", "Error: listen EADDRINUSE: address already in use :::<n>"),
        ("Error: listen EADDRINUSE: address already in use 127.0.0.1:8080", "Error: listen EADDRINUSE: address already in use <host>:<n>"),
        ("FileNotFoundError: [Errno 2] No such file or directory: /home/ana/src/x/config.yaml",
         "FileNotFoundError: [Errno <n>] No such file or directory: <path>"),
        ("KeyError: 3f2a9c0d1e in C:\\Users\\ana\\cache", "KeyError: <id> in <path>"),
        ("RuntimeError: job 01a16429-82e6-7f9b-8a2a-d5fcc8ee2920 failed after 3 tries",
         "RuntimeError: job <id> failed after <n> tries"),
        ("fatal: could not read from https://github.com/x/y.git", "fatal: could not read from <url>"),
    ],
)
def test_error_shape_sets_aside_what_varies(line: str, shape: str) -> None:
    assert error_shape(line) == shape


def test_error_lines_are_verbatim_substrings() -> None:
    text = (
        "Exit code 2\n====\nImportError while importing test module '/x/tests/t.py'.\n"
        "E   ModuleNotFoundError: No module named 'respx'\n  3:22  error  'x' is defined but never used\n"
        "FAILED tests/t.py::test_a - Failed: Timeout (>5.0s) from pytest-timeout.\n"
    )
    lines = error_lines(text)
    assert lines == ["ModuleNotFoundError: No module named 'respx'", "Failed: Timeout (>5.0s) from pytest-timeout."]
    assert all(line in text for line in lines)
    assert error_lines("x" * 10 + "\nValueError: " + "y" * 2000)[0] == "ValueError: " + "y" * 588


@pytest.mark.parametrize(
    ("line", "head"),
    [
        ("psycopg.errors.ObjectInUse: database 'x' is in use", "psycopg.errors.ObjectInUse"),
        ("Error: listen EADDRINUSE: address already in use :::3000", "EADDRINUSE"),
        ("error[E0425]: cannot find value `x` in this scope", "cannot find value in this scope"),
        ("fatal: Invalid path '/!': No such file or directory", "Invalid path"),
        ("command timed out after 20021 milliseconds", "command timed out"),
        ("File content (40766 tokens) exceeds maximum allowed tokens (10000).", "exceeds maximum allowed tokens"),
        ("npm error code ENOTEMPTY", "ENOTEMPTY"),
        ("ModuleNotFoundError: No module named 'yaml'", "ModuleNotFoundError"),
        # a generic name whose first clause only names the function that complained
        ("awk: cmd. line:1: (FILENAME=- FNR=13) fatal: split: second argument is not an array",
         "split: second argument is not an array"),
    ],
)
def test_error_head(line: str, head: str) -> None:
    assert error_head(line) == head


def test_a_shape_needs_two_sessions_and_twins_are_merged() -> None:
    chained = "KeyError: 'a'\nDuring handling of the above exception, another exception occurred:\nRuntimeError: lookup of 'a' failed"
    results = [
        ToolResult("s1", 3, chained), ToolResult("s2", 9, chained.replace("'a'", "'b'")),
        ToolResult("s1", 5, "IndexError: list index out of range"),
        ToolResult("s1", 7, "IndexError: list index out of range"),
    ]
    found = find_error_patterns(results, ["s1", "s2"])
    # The KeyError and the RuntimeError always come together: one failure, kept as the one raised last.
    assert [f.shape for f in found] == ["RuntimeError: lookup of <value> failed"]
    assert list(found[0].occurrences) == ["s1", "s2"]


def test_a_grown_session_does_not_re_report_old_patterns() -> None:
    results = [ToolResult("s1", 3, "ValueError: bad 'x'"), ToolResult("s2", 4, "ValueError: bad 'y'")]
    assert find_error_patterns(results, ["s1", "s2"], {"s1": 10, "s2": 10}) == []
    assert len(find_error_patterns(results, ["s1", "s2"], {"s1": 10, "s2": 4})) == 1


def test_pattern_claims_never_repeat_a_quote() -> None:
    same = "IndexError: list index out of range"
    answer = build_answer([ToolResult("s1", 1, same), ToolResult("s2", 2, same)], [], ["s1", "s2"])
    [candidate] = answer["candidates"]
    assert same not in candidate["claim"] and same not in candidate["gist"]
    assert "IndexError" in candidate["claim"]


def test_a_claim_that_would_paste_its_quote_names_the_failing_commands() -> None:
    # The failure's only line is its head: "Verification timed out recurs in failed tool calls" would be
    # the quote pasted (the contract refuses it), and it was once cut to "Verificatio… recurs", with the
    # entity unknown:unknown. The claim names the commands that failed instead; a failure whose quote is
    # longer than its head keeps its head, and a short name stays whole.
    timed_out = "Verification timed out"
    runs = [ToolResult(s, n, timed_out, name="Bash", tool_input={"command": cmd})
            for s, n, cmd in (("s1", 1, "sudo ip link"), ("s2", 2, "sudo lsblk"), ("s2", 3, "sudo ip link"))]
    [candidate] = build_answer(runs, [], ["s1", "s2"])["candidates"]
    assert timed_out not in candidate["claim"] and "…" not in candidate["claim"]
    assert candidate["claim"].endswith("with the same error across sessions.")
    assert candidate["claim"] == "`sudo ip link` and `sudo lsblk` fail with the same error across sessions."
    assert {"type": "unknown", "name": "unknown"} not in candidate["entities"]
    npm = "npm ERR! code ENOTEMPTY"
    [candidate] = build_answer([ToolResult("s1", 1, npm), ToolResult("s2", 2, npm)], [], ["s1", "s2"])["candidates"]
    assert candidate["claim"].startswith("ENOTEMPTY recurs") and "…" not in candidate["claim"]
    assert {"type": "unknown", "name": "unknown"} not in candidate["entities"]


# --- commitments -----------------------------------------------------------------------------


def said(*lines: tuple[str, str], session: str = "s1") -> list[Message]:
    return [Message(session, n, role, text) for n, (role, text) in enumerate(lines, start=1)]


def quotes_of(messages: list[Message], new_from: dict[str, int] | None = None) -> list[str]:
    return [c.quote for c in find_commitments(messages, new_from)]


def test_sentences_keep_their_text() -> None:
    text = "Done. I'll remove it in src/a.py before we finish; first, logging.\nWhy? Because 3.x is old."
    assert sentences(text) == ["Done.", "I'll remove it in src/a.py before we finish", "first, logging.", "Why?", "Because 3.x is old."]


@pytest.mark.parametrize(
    ("role", "text"),
    [
        ("user", "Should we pin the port?"),
        ("user", "Will you add a test for the labels too?"),
        ("user", "I'll fix it later?"),
        ("assistant", "If the cache misses we would need to warm it."),
        ("user", "If it breaks again I'll rewrite the parser tomorrow."),
        ("user", "Maria will migrate the billing tables next sprint."),
        ("assistant", "I fixed the flaky teardown by pinning the port."),
        ("assistant", "I'll run the linter now."),
        ("assistant", "I'll check the compose file."),  # narrating the next step, no deferral
        ("assistant", "Let me look at the fixture first."),
        ("user", "I will not touch the billing code after the release."),
        ("user", "<user_instructions>I'll always use uv later</user_instructions>"),
        ("assistant", "We could add a retry after the release."),
    ],
)
def test_what_is_not_a_commitment(role: str, text: str) -> None:
    assert quotes_of(said((role, text))) == []


@pytest.mark.parametrize(
    ("role", "text", "quote", "actor", "due"),
    [
        ("user", "Also I'll bump the CI image tomorrow, so don't touch .nvmrc.",
         "I'll bump the CI image tomorrow, so don't touch .nvmrc.", "user", None),
        ("user", "And I will rotate the credentials on 2026-11-20.", "I will rotate the credentials on 2026-11-20.", "user", "2026-11-20"),
        ("assistant", "Tests pass. I'll open a follow-up PR to drop the shim once staging runs 4.2.",
         "I'll open a follow-up PR to drop the shim once staging runs 4.2.", "agent", None),
        ("assistant", "Let me write that down and update the docs later.", "Let me write that down and update the docs later.", "agent", None),
        ("user", "we'll ship the exporter next week", "we'll ship the exporter next week", "user", None),
        ("user", "I’ll clean the fixtures after lunch.", "I’ll clean the fixtures after lunch.", "user", None),
    ],
)
def test_what_is_a_commitment(role: str, text: str, quote: str, actor: str, due: str | None) -> None:
    [found] = find_commitments(said((role, text)))
    assert (found.quote, found.actor, found.due_hint) == (quote, actor, due)
    assert found.quote in text


def test_a_commitment_is_resolved_by_later_work_in_the_same_session() -> None:
    messages = said(
        ("assistant", "I'll add a regression test for the date parser after this lands."),
        ("user", "ok"),
        ("assistant", "Added the regression test in tests/test_dates.py; it passes."),
    )
    [found] = find_commitments(messages)
    assert found.resolved_at == 3
    # the same words without the past tense, or the past tense about something else, resolve nothing
    unrelated = [*messages[:2], Message("s1", 3, "assistant", "Added a note to the README.")]
    assert find_commitments(unrelated)[0].resolved_at is None
    not_done = [*messages[:2], Message("s1", 3, "assistant", "The regression test for the date parser is next.")]
    assert find_commitments(not_done)[0].resolved_at is None
    other_session = [*messages[:2], Message("s2", 3, "assistant", "Added the regression test in tests/test_dates.py.")]
    assert find_commitments(other_session)[0].resolved_at is None


def test_a_later_session_of_the_same_project_can_report_the_work_done() -> None:
    t = dt.datetime(2026, 10, 20, 9, 0, tzinfo=dt.UTC)
    promise = Message("a", 5, "assistant", "I'll document the fallback locale order in docs/i18n.md once the labels are merged.", t)
    done = Message("b", 9, "assistant", "Documented the fallback locale order in docs/i18n.md.", t + dt.timedelta(days=2))
    earlier = Message("b", 9, "assistant", done.text, t - dt.timedelta(days=2))
    same = {"a": "-home-ana-src-web", "b": "-home-ana-src-web"}
    [found] = find_commitments([promise, done], slugs=same)
    assert (found.resolved_at, found.resolved_in) == (9, "b")
    assert find_commitments([promise, earlier], slugs=same)[0].resolved_at is None  # said before the promise
    assert find_commitments([promise, done], slugs={"a": "-x", "b": "-y"})[0].resolved_at is None  # another project
    assert find_commitments([promise, done])[0].resolved_at is None  # without projects, sessions stay apart
    # Promised on an earlier night (before session a's new lines), done in a session read tonight: reported again.
    [again] = find_commitments([promise, done], {"a": 6}, same)
    assert again.resolved_in == "b"
    assert find_commitments([promise, done], {"a": 6, "b": 10}, same) == []  # both already reported


def test_a_grown_session_reports_old_commitments_only_when_newly_resolved() -> None:
    promise = ("user", "I'll restart the Postgres container myself after lunch.")
    done = ("user", "ok, Postgres is back up — I restarted the container.")
    assert quotes_of(said(promise, ("assistant", "fine")), {"s1": 3}) == []
    resolved = find_commitments(said(promise, ("assistant", "fine"), done), {"s1": 3})
    assert [(c.line_no, c.resolved_at) for c in resolved] == [(1, 3)]


def test_statements_are_retold_in_the_third_person() -> None:
    [found] = build_answer([], said(("user", "I'll restart the container myself and tell you when it's up later.")), ["s1"])["commitments"]
    assert found["statement"] == "The user will restart the container themselves and tell the agent when it's up later."


@pytest.mark.parametrize(("raw", "tidy"), [
    ("The agent will refactor `process_zip_contents()`:.", "The agent will refactor `process_zip_contents()`"),
    ("The user will bump the CI image tomorrow, remind me.", "The user will bump the CI image tomorrow."),
    ("The user will call the vendor (remind me later)", "The user will call the vendor."),
    ("The user will help troubleshoot\".", "The user will help troubleshoot."),
    ("The agent will mark the ambiguities for follow-up.\"}].", "The agent will mark the ambiguities for follow-up."),
    ("The user will ask Dana to remind me.", "The user will ask Dana to remind me."),  # the reminder is the work
    ("The agent will run `make test` before merging", "The agent will run `make test` before merging."),
])
def test_statements_lose_the_leftovers_of_their_sentence(raw: str, tidy: str) -> None:
    assert tidy_statement(raw) == tidy


@given(st.lists(st.sampled_from([*"ab (){}[]`\"',.;:!-", "\u2014", "remind me", " and ", "please"]), max_size=20))
def test_tidying_a_statement_twice_changes_nothing(parts: list[str]) -> None:
    once = tidy_statement("The user will " + "".join(parts))
    assert tidy_statement(once) == once
    assert not once.endswith((",", ";", ":", "-", ":.", ",."))


def test_a_rules_statement_ending_in_code_keeps_it_whole() -> None:
    [found] = build_answer([], said(("user", "I'll rename `process_zip_contents()` tomorrow:")), ["s1"])["commitments"]
    assert found["statement"] == "The user will rename `process_zip_contents()` tomorrow."


# --- failures of real tools: wording, thresholds, workarounds ------------------------------------


def failed(session: str, line: int, command: str, text: str, *, code: int = 1, call_id: str | None = None) -> ToolResult:
    return ToolResult(session, line, text, is_error=True, exit_code=code, name="Bash", tool_input={"command": command},
                      call_id=call_id, call_line=line - 1)


def worked(session: str, line: int, command: str, text: str = "ok") -> ToolResult:
    return ToolResult(session, line, text, is_error=False, exit_code=0, name="Bash", tool_input={"command": command},
                      call_line=line - 1)


def test_failure_lines_read_what_shell_tools_print() -> None:
    assert failure_lines("Exit code 127\n(eval):1: command not found: brew") == ["(eval):1: command not found: brew"]
    assert failure_lines("<tool_use_error>File does not exist.</tool_use_error>") == ["File does not exist."]
    powershell = ("Get-Content : Cannot find path 'C:\\x\\a.md' because it does not exist.\nAt line:2 char:1\n"
                  "+ Get-Content a.md\n+ ~~~~~\n    + CategoryInfo          : ObjectNotFound: (a.md:String) [Get-Content]")
    assert failure_lines(powershell) == ["Get-Content : Cannot find path 'C:\\x\\a.md' because it does not exist."]
    assert failure_lines("Exit code 1\nsome progress\nmore progress") == []  # nothing says what failed


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("# Un-recognized argument -rf at index 1", "# Un-recognized argument -r at index 1"),
        ("command timed out after 20021 milliseconds", "command timed out after 10180 milliseconds"),
        ("fatal: pathspec 'a.md' did not match any files", "fatal: pathspec 'C:/x/b.md' did not match any files"),
        ('error: Failed to find expected lines ["a", "b"]', 'error: Failed to find expected lines ["c", "d", "e'),
        ("Get-Content : Cannot find path 'C:\\Users\\x\\a.md' because", "Get-Content : Cannot find path '.\\b.md' because"),
    ],
)
def test_one_failure_under_different_surface_text_has_one_shape(a: str, b: str) -> None:
    assert normalise(a) == normalise(b)


def test_three_times_in_one_session_is_a_pattern_but_a_failing_check_is_not() -> None:
    forbidden = "ERROR: unable to download video data: HTTP Error 403: Forbidden"
    runs = [failed("s1", n, f"dl --try {n} https://example.test/v", f"Exit code 1\n{forbidden}") for n in (3, 6, 9)]
    [found] = find_error_patterns(runs, ["s1"])
    assert found.why == "repeats" and found.count == 3
    checks = [failed("s1", n, "pytest -q tests/test_a.py", "Exit code 1\nE   AssertionError: assert 1 == 2") for n in (3, 6, 9)]
    assert find_error_patterns(checks, ["s1"]) == []
    assert len(find_error_patterns([*checks, failed("s2", 4, "pytest -q", "Exit code 1\nE   AssertionError: assert 1 == 2")],
                                   ["s1", "s2"])) == 1  # across sessions a failing check is news


def test_twice_in_one_session_counts_when_something_else_worked() -> None:
    refused = "# Un-recognized argument -rf at index 1"
    twice = [failed("s1", 3, "rm -rf build/tmp", f"Exit code 1\n{refused}"),
             failed("s1", 5, "rm -r build/tmp", f"Exit code 1\n{refused.replace('-rf', '-r')}")]
    assert find_error_patterns(twice, ["s1"]) == []
    fix = worked("s1", 7, "node -e \"require('fs').rmSync('build/tmp', {recursive: true})\"", "")
    [found] = find_error_patterns([*twice, fix], ["s1"])
    assert found.why == "worked around" and found.workaround is not None and found.workaround.how == "same target"
    candidate = build_answer([*twice, fix], [], ["s1"])["candidates"][0]
    assert any("rmSync" in e["quote"] for e in candidate["evidence"])  # the workaround is evidence too
    assert "`node` on the same target" in candidate["gist"]
    # rm never worked on the folder again: node took its place, and the claim says so by what it called
    assert candidate["claim"] == ("When `rm` fails with Un-recognized argument (repeatedly within a session), "
                                  "`node -e` with `rmSync` worked next instead.")
    # an rm that worked on it later was not replaced: the claim says nothing of node
    again = worked("s1", 9, "rm -r -f build/tmp", "")
    assert "node" not in build_answer([*twice, fix, again], [], ["s1"])["candidates"][0]["claim"]


def test_a_subagent_is_not_a_second_session() -> None:
    text = "Exit code 128\nfatal: Invalid path '/!': No such file or directory"
    runs = [failed("p", 3, "git add '!/a.md'", text), failed("agent-x", 4, "git add '!/b.md'", text.replace("a.md", "b.md"))]
    assert len(find_error_patterns(runs, ["p", "agent-x"])) == 1
    assert find_error_patterns(runs, ["p", "agent-x"], roots={"agent-x": "p"}) == []


def test_a_pipe_that_hid_a_failure_still_counts() -> None:
    out = "npm warn config\nnpm error code ENOTEMPTY\nnpm error syscall rename\nnpm error path /x/node_modules/a"
    runs = [ToolResult("s1", n, out, is_error=False, exit_code=0, name="Bash",
                       tool_input={"command": "npm install 2>&1 | tail -20"}, call_line=n - 1) for n in (3, 5, 7)]
    [found] = find_error_patterns(runs, ["s1"])
    assert found.head == "ENOTEMPTY"


def test_a_missing_file_recurs_only_when_the_same_file_is_missing() -> None:
    def missing(session: str, line: int, path: str) -> ToolResult:
        return ToolResult(session, line, "File does not exist. Note: your current working directory is /w.",
                          is_error=True, name="Read", tool_input={"file_path": path}, call_line=line - 1)

    guesses = [missing("s1", 3, "/w/a.md"), missing("s2", 3, "/w/b.md"), missing("s2", 5, "/w/c.md")]
    assert find_error_patterns(guesses, ["s1", "s2"]) == []
    again = [missing("s1", 3, "/w/setup.cfg"), missing("s2", 3, "/w/setup.cfg")]
    assert len(find_error_patterns(again, ["s1", "s2"])) == 1
    cats = [failed(s, 3, f"cat {p}", f"Exit code 1\ncat: {p}: No such file or directory") for s, p in (("s1", "x/a"), ("s2", "x/b"))]
    assert find_error_patterns(cats, ["s1", "s2"]) == []


def test_a_file_missing_again_is_named_with_where_it_really_is() -> None:
    """Subagents reading the same old path add to their parent's repeats; the claim names the path, and
    the file of the same name that a later call read."""
    def read(session: str, line: int, path: str, ok: bool = False) -> ToolResult:
        text = "1\t#!/usr/bin/env bash" if ok else "File does not exist. Note: your current working directory is /w/sim."
        return ToolResult(session, line, text, is_error=not ok, name="Read", tool_input={"file_path": path},
                          call_id=f"{session}-{line}", call_line=line - 1)

    old, new = "/w/sim/tests/hybrid/e2e.sh", "/w/sim/tests/e2e.sh"
    runs = [read("agent-1", 8, old), read("agent-2", 8, old), read("agent-2", 34, old), read("agent-2", 40, new, ok=True)]
    order = ["p", "agent-1", "agent-2"]
    assert [f.why for f in find_error_patterns(runs[:2], order, roots={"agent-1": "p", "agent-2": "p"})] == []
    [found] = find_error_patterns(runs, order, roots={"agent-1": "p", "agent-2": "p"})
    assert found.missing == old and found.why == "repeats"
    answer = build_answer(runs, [], order, slugs=dict.fromkeys(order, "sim"), cwds=dict.fromkeys(order, "/w/sim"),
                          parents={"agent-1": "p", "agent-2": "p"})
    [candidate] = answer["candidates"]
    # said of the project (a later night links only evidence of the same project to it)
    assert candidate["claim"].startswith("In w/sim, `tests/hybrid/e2e.sh` does not exist in /w/sim: the file is `tests/e2e.sh`")
    # without a later find, the claim still names what is missing rather than the error's words
    answer = build_answer(runs[:3], [], order, slugs=dict.fromkeys(order, "sim"), cwds=dict.fromkeys(order, "/w/sim"),
                          parents={"agent-1": "p", "agent-2": "p"})
    assert answer["candidates"][0]["claim"].startswith("In w/sim, `tests/hybrid/e2e.sh` does not exist in /w/sim (`Read` failed")


@given(st.text(max_size=80), st.integers(min_value=0, max_value=10**9), st.integers(min_value=0, max_value=10**9))
# Texts where a placeholder made a later rule match on a second pass: a flag, and a file name each side.
@example("0-A", 0, 0)
@example("<0A.A", 0, 0)
@example("A.A0_", 0, 0)
def test_normalising_is_stable_and_sets_numbers_aside(text: str, a: int, b: int) -> None:
    once = normalise(text)
    assert normalise(once) == once
    assert normalise(f"{text} failed after {a} tries") == normalise(f"{text} failed after {b} tries")


# -- failure shapes that are not memories, and claims their own evidence would contradict --------------
def patch_run(session: str, line: int, body: str, output: str, *, ok: bool) -> ToolResult:
    return ToolResult(session, line, output, is_error=not ok, exit_code=0 if ok else 1, name="apply_patch",
                      tool_input={"input": f"*** Begin Patch\n{body}\n*** End Patch\n"}, call_line=line - 1)


def edit_run(session: str, line: int, output: str, *, ok: bool) -> ToolResult:
    return ToolResult(session, line, output, is_error=not ok, exit_code=None, name="Edit",
                      tool_input={"file_path": "/w/app/src/budget.ts", "old_string": "a", "new_string": "b"}, call_line=line - 1)


STALE = "apply_patch verification failed: Failed to find expected lines in /w/app/docs/PLAN.md:\n- step 3"
UPDATE = "*** Update File: docs/PLAN.md\n@@\n-step 3\n+step 4"


def test_a_stale_patch_recovered_by_re_reading_is_not_a_memory() -> None:
    runs = [patch_run(s, n, UPDATE, STALE, ok=False) for s, n in (("s1", 5), ("s1", 9), ("s2", 4))]
    runs += [worked("s1", 7, "sed -n '1,40p' docs/PLAN.md"), patch_run("s1", 12, UPDATE, "Success. Updated the following files:\nM docs/PLAN.md", ok=True)]
    assert find_error_patterns(runs, ["s1", "s2"]) == []
    assert build_answer(runs, [], ["s1", "s2"])["candidates"] == []
    # again and again in two sessions, something keeps the agent's copy stale there (the real labels' ANPR
    # constitution with non-ASCII text, a UGC project's mojibake): a memory of that project
    again = [*runs, patch_run("s2", 8, UPDATE, STALE, ok=False)]
    [found] = find_error_patterns(again, ["s1", "s2"])
    assert found.stale and found.why == "sessions"
    [candidate] = build_answer(again, [], ["s1", "s2"], slugs={"s1": "site", "s2": "site"})["candidates"]
    # what the refusal means and what to do, never the error's text as the claim
    assert candidate["claim"] == ("In site, `apply_patch` kept being refused because the text of `PLAN.md` was not what "
                                  "the agent had last read (across sessions): read a file again right before editing it.")
    edits = [edit_run("s1", n, "<tool_use_error>File has been modified since read, either by the user or by a linter. "
                      "Read it again before attempting to write it.</tool_use_error>", ok=False) for n in (3, 6, 9)]
    edits += [edit_run("s1", n, "<tool_use_error>String to replace not found in file.\nString: a</tool_use_error>", ok=False)
              for n in (12, 15, 18)]
    assert find_error_patterns([*edits, edit_run("s1", 20, "The file has been updated.", ok=True)], ["s1"]) == []


def test_a_stale_patch_got_round_another_way_is_still_a_pattern() -> None:
    runs = [patch_run("s1", n, UPDATE, STALE, ok=False) for n in (5, 9, 13)]
    rewrite = patch_run("s1", 16, "*** Delete File: docs/PLAN.md", "Success. Updated the following files:\nD docs/PLAN.md", ok=True)
    [found] = find_error_patterns([*runs, rewrite], ["s1"])
    assert found.workaround is not None and found.workaround.how == "other operations"
    # the file deleted, then added whole in the next call: the way round the claim gives
    add = patch_run("s1", 18, "*** Add File: docs/PLAN.md\n+step 4", "Success. Updated the following files:\nA docs/PLAN.md", ok=True)
    [candidate] = build_answer([*runs, rewrite, add], [], ["s1"], slugs={"s1": "site"})["candidates"]
    assert candidate["claim"].endswith("(repeatedly within a session); deleting the file and adding it whole worked.")
    # deleted and never added back is no way round to recommend
    [candidate] = build_answer([*runs, rewrite], [], ["s1"], slugs={"s1": "site"})["candidates"]
    assert candidate["claim"].endswith(": read a file again right before editing it.")


def test_edits_refused_because_the_file_changed_since_read_say_so() -> None:
    refused = ("<tool_use_error>File has been modified since read, either by the user or by a linter. "
               "Read it again before attempting to write it.</tool_use_error>")
    runs = [edit_run(s, n, refused, ok=False) for s in ("s1", "s2") for n in (3, 6)]
    [candidate] = build_answer(runs, [], ["s1", "s2"], slugs={"s1": "app", "s2": "app"})["candidates"]
    assert candidate["claim"] == ("In app, `Edit` kept being refused because `budget.ts` changed between the agent's read "
                                  "and its edit (across sessions): read a file again right before editing it.")


def test_what_worked_next_names_the_part_that_fixed_it() -> None:
    """`git add -u` had failed the same way: the `./` path prefix fixed it, not `-u`."""
    text = "Exit code 128\nfatal: pathspec '!/notes/a.md' did not match any files"
    runs = [failed("s1", 3, "git add '!/notes/a.md' '!/notes/b.md'", text),
            failed("s1", 5, "git add -u '!/notes/a.md'", text)]
    fix = worked("s1", 7, "git add -u './!/notes/a.md' '!/notes/b.md'", "")
    # twice in a session needs a strong workaround: `-u` is not one, so there is no pattern at all
    assert find_error_patterns([*runs, fix], ["s1"]) == []
    runs.append(failed("s1", 6, "git add -u '!/notes/b.md'", text.replace("a.md", "b.md")))
    [found] = find_error_patterns([*runs, fix], ["s1"])
    assert found.workaround is not None and (found.workaround.how, found.workaround.strong) == ("same program", False)
    assert all("with `-u` added" not in c["gist"] for c in build_answer([*runs, fix], [], ["s1"])["candidates"])
    # an addition no failing run had is what worked
    runs[1:] = [failed("s1", 5, "git add '!/notes/a.md'", text)]
    [found] = find_error_patterns([*runs, fix], ["s1"])
    assert found.workaround is not None and (found.workaround.how, found.workaround.added) == ("added", ["-u"])


def test_a_memory_names_the_projects_of_the_sessions_it_cites() -> None:
    """Sessions without a slug do not all take the first one's project name."""
    text = "Exit code 1\nError: listen EADDRINUSE: address already in use :::5173"
    runs = [failed("s1", 3, "npm run dev", text), failed("s2", 3, "npm run dev", text)]
    answer = build_answer(runs, [], ["s0", "s1", "s2"], slugs={"s0": None, "s1": None, "s2": None},
                          cwds={"s0": "/w/billing", "s1": "/w/storefront", "s2": "/w/storefront"})
    [candidate] = answer["candidates"]
    assert "storefront" in candidate["gist"] and "billing" not in candidate["gist"]


def test_a_powershell_script_s_words_are_not_settings() -> None:
    from pipeline.consolidator.rules.error_shapes import ToolResult
    from pipeline.consolidator.rules.routines import _powershell

    script = "$ErrorActionPreference='Stop'\n$body = @{ version='1.0'; ttl_seconds=900 } | ConvertTo-Json"
    ps = ToolResult("s1", 3, "", is_error=False, exit_code=0, name="shell_command", tool_input={"command": script},
                    call_id="c1", call_line=2, has_result=True)
    sh_run = ToolResult("s1", 5, "", is_error=False, exit_code=0, name="Bash", tool_input={"command": "GOPROXY=off go test ./..."},
                        call_id="c2", call_line=4, has_result=True)
    assert _powershell(ps) and not _powershell(sh_run)


@pytest.mark.parametrize(("command", "script"), [
    ("./iree_tuner.py models/m.mlir --profile -s 3", "iree_tuner.py"),
    ("qemu-validate/rebuild_single.sh src/conv.c", "qemu-validate/rebuild_single.sh"),
    ("python3 tools/gen_tables.py --out build", "tools/gen_tables.py"),
    ("pytest -q", None),  # a program on PATH
    ("/usr/bin/snmpwalk -v2c host", None),  # an absolute path is a pinned tool
    ("python -c 'print(1)'", None),  # an inline script
    ("cat scripts/setup.sh", None),  # reading a script is not running it
])
def test_a_script_of_the_project_s_own(command: str, script: str | None) -> None:
    from pipeline.consolidator.rules import shell_commands as sh
    from pipeline.consolidator.rules.routines import _own_script

    main = sh.parse(command).main
    assert main is not None
    assert _own_script(main) == script


def _bash(session: str, line: int, command: str, output: str, *, exit_code: int = 1) -> ToolResult:
    return ToolResult(session, line, output, is_error=exit_code != 0, exit_code=exit_code, name="Bash",
                      tool_input={"command": command})


def test_the_program_that_says_why_it_stopped_is_the_one_that_failed() -> None:
    # `lsblk` worked and printed its table; `sudo` then refused. The memory is about sudo, not about the
    # first program of the command line (a night once wrote "`lsblk`, `sudo ip link` and `sudo mount` fail").
    refused = ("Place your right index finger on the fingerprint reader\nVerification timed out\n"
               "sudo: a terminal is required to read the password\nsudo: a password is required")
    runs = [_bash("s1", 2, "lsblk /dev/sda && sudo parted /dev/sda print", "NAME SIZE\nsda 232.9G\n" + refused),
            _bash("s2", 4, "sudo ip link add x type macvlan", refused)]
    [candidate] = build_answer(runs, [], ["s1", "s2"])["candidates"]
    # and what is true is said plainly: sudo wants a password, and what ran under it failed
    assert candidate["claim"] == ("`sudo` asks for a password that the agent cannot type: `parted` and `ip link` "
                                  "failed under it (across sessions).")
    assert {"type": "tool", "name": "sudo"} in candidate["entities"]
    # awk names itself before its error; the pipe started with ss
    split = "awk: cmd. line:1: (FILENAME=- FNR=13) fatal: split: second argument is not an array"
    runs = [_bash("s1", n, "ss -tulpnH | awk '{split(p, \"/\", $7)}'", split, exit_code=2) for n in (2, 4, 6)]
    [candidate] = build_answer(runs, [], ["s1"])["candidates"]
    assert "`awk`" in candidate["claim"] and "`ss`" not in candidate["claim"]


def test_a_shell_speaks_for_itself_but_not_for_a_program_it_could_not_find() -> None:
    glob = [_bash(s, 2, f"sed -n 1,40p src/app/[{s}]/route.ts", f"zsh:1: no matches found: src/app/[{s}]/route.ts")
            for s in ("s1", "s2")]
    [candidate] = build_answer(glob, [], ["s1", "s2"])["candidates"]
    assert "`zsh`" in candidate["claim"]  # the glob failed in the shell, before sed ran
    missing = [_bash(s, 2, "pytest -q", "zsh:1: command not found: pytest", exit_code=127) for s in ("s1", "s2")]
    [candidate] = [c for c in build_answer(missing, [], ["s1", "s2"])["candidates"] if c["kind"] == "error_pattern"]
    assert "`pytest`" in candidate["claim"] and "zsh" not in candidate["claim"]
    # a shell's warning is not why a command failed
    warned = "bash: line 36: warning: here-document at line 1 delimited by end-of-file (wanted `PATCH')"
    assert speaker(warned, ["cat"]) is None
    assert speaker("sudo: a password is required", ["parted", "sudo"]) == "sudo"
    assert speaker("src: a password is required", ["parted"]) is None  # not a program the call ran


def test_a_line_that_calls_which_worked_print_as_often_is_not_the_failure() -> None:
    banner = "/opt/homebrew/Library/Homebrew/cmd/shellenv.sh: line 18: /bin/ps: Operation not permitted"
    failed = [_bash(s, n, "rg -n TODO src", banner) for s, n in (("s1", 2), ("s2", 2))]
    worked = [_bash(s, n, "ls", banner + "\na.txt", exit_code=0) for s, n in (("s1", 4), ("s1", 6), ("s2", 4))]
    shapes = [f.shape for f in find_error_patterns([*failed, *worked], ["s1", "s2"])]
    assert not any("Operation not permitted" in s for s in shapes)
    # the same failure printed only by failing calls is still a pattern
    assert any("Operation not permitted" in f.shape for f in find_error_patterns(failed, ["s1", "s2"]))


def test_two_errors_of_one_episode_are_one_memory() -> None:
    # `git push` refused over HTTPS three times, then over SSH three times, in one stretch of calls:
    # a night once wrote two memories of it ("could not read Username…", "Could not read from remote…").
    https = "fatal: could not read Username for 'https://github.com': No such device or address"
    ssh = "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository."
    runs = [_bash("s1", n, "git push", https, exit_code=128) for n in (2, 4, 6)]
    runs += [_bash("s1", n, "git push", ssh, exit_code=128) for n in (8, 10, 12)]
    [finding] = find_error_patterns(runs, ["s1"])
    assert finding.count == 6 and [n for n, _ in finding.occurrences["s1"]] == [2, 4, 6, 8, 10, 12]
    # the same two errors far apart are two stretches of work, and two memories
    far = runs[:3] + [_bash("s1", n, "ls", "a.txt", exit_code=0) for n in range(14, 30, 2)]
    far += [_bash("s1", n, "git push", ssh, exit_code=128) for n in (30, 32, 34)]
    assert len(find_error_patterns(far, ["s1"])) == 2
    # folding never makes a pattern: two errors twice each are still not one
    assert find_error_patterns(runs[1:3] + runs[3:5], ["s1"]) == []
