"""Which tool calls failed, by the rules of `pipeline.consolidator.rules.tool_runs`."""

from __future__ import annotations

import pytest

from pipeline.consolidator.rules.error_shapes import error_shape, failure_lines, verbatim_quote
from pipeline.consolidator.rules.tool_runs import (
    ToolResult,
    distinct_runs,
    error_token_line,
    outcome,
    outcomes,
    output_body,
)


def bash(command: str, text: str, *, exit_code: int | None = None, is_error: bool = False, line: int = 2,
         session: str = "s1", call_id: str | None = None, **extra: object) -> ToolResult:
    return ToolResult(session, line, text, is_error=is_error, exit_code=exit_code, name="Bash",
                      tool_input={"command": command, **extra}, call_id=call_id, call_line=line - 1)


def test_output_body_drops_what_the_harness_wraps_around_the_output() -> None:
    assert output_body("Exit code 1\nfatal: not a git repository") == "fatal: not a git repository"
    assert output_body("Exit code: 2\nWall time: 0.1 seconds\nOutput:\nboom\n") == "boom"
    codex = "Command: /bin/zsh -lc 'x'\nChunk ID: 1a\nWall time: 0.0 seconds\nProcess exited with code 1\nOriginal token count: 3\nOutput:\nzsh:1: command not found: x\n"
    assert output_body(codex) == "zsh:1: command not found: x"
    assert output_body("<tool_use_error>File does not exist.</tool_use_error>") == "File does not exist."
    sandboxed = "failed in sandbox Seccomp with execution error: sandbox denied exec error, exit code: 1, stdout: , stderr: E: boom\n"
    assert output_body(sandboxed) == "E: boom"


def test_a_silent_failure_has_no_error_text_and_colour_codes_are_not_text() -> None:
    # `git config user.name` printing nothing: the status line alone is not an error to group by (three
    # unrelated silent failures were once one "Exit code recurs" memory).
    assert output_body("Exit code 1") == ""
    assert failure_lines("Exit code 1") == []
    coloured = "Exit code 1\n\x1b[31;1mInvoke-Expression: \x1b[31;1mVariable reference is not valid.\x1b[0m"
    lines = failure_lines(coloured)
    assert lines == ["Invoke-Expression: Variable reference is not valid."]
    # quoted by the longest piece the colour codes left whole, which the stored output holds verbatim
    assert verbatim_quote(lines[0], coloured) == "Variable reference is not valid."
    assert verbatim_quote("fatal: boom", "Exit code 1\nfatal: boom") == "fatal: boom"
    plain = "Exit code 1\nInvoke-Expression: Variable reference is not valid."
    assert error_shape(failure_lines(plain)[0]) == error_shape(lines[0])


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (bash("npm test", "Exit code 1\nFAIL src/a.test.ts", exit_code=1, is_error=True), ("failed", "status")),
        (bash("rg -n TODO src", "Exit code 1\n", exit_code=1, is_error=True), ("ignored", "no match")),
        (bash("ls x | grep y", "Exit code: 1\nWall time: 0 seconds\nOutput:\n", exit_code=1), ("ignored", "no match")),
        (bash("grep -rn x src", "Exit code 1\n0 matches for 'x'", exit_code=1, is_error=True), ("ignored", "no match")),
        (bash("test -f a", "Exit code 1\n", exit_code=1, is_error=True), ("ignored", "quiet")),
        (bash("make", "<tool_use_error>Sibling tool call errored</tool_use_error>", is_error=True), ("ignored", "sibling")),
        (bash("rm -rf build", "The user doesn't want to proceed with this tool use.", is_error=True), ("ignored", "rejected")),
        (bash("git push", "The user doesn't want to take this action right now. STOP what you are doing and wait for the user "
              "to tell you how to proceed.", is_error=True), ("ignored", "rejected")),
        (bash("curl x", "Permission to use Bash has been denied because of a rule.", is_error=True), ("ignored", "denied")),
        (bash("cat /etc/shadow", "Exit code 1\ncat: /etc/shadow: Permission denied", exit_code=1, is_error=True), ("failed", "status")),
        (bash("npm install 2>&1 | head -20", "npm warn x\nnpm error code ENOTEMPTY\nnpm error syscall rename"), ("failed", "piped")),
        (bash("npm install | head -20", "npm warn x\nadded 3 packages"), ("ok", "")),
        (bash("cat build.log", "npm error code E401"), ("ok", "")),
        # started, not finished: how it ends comes later
        (bash("npm install", "Command running in background with ID: bzb8c339g. Output is being written to: /tmp/x.output"),
         ("ignored", "background")),
        (bash("npm run dev", "Process running with session ID 41807\nChunk ID: 9f2\nOutput:\n> dev"), ("ignored", "background")),
        (ToolResult("s1", 3, "<retrieval_status>timeout</retrieval_status>\n<status>running</status>", is_error=True,
                    name="TaskOutput", tool_input={"task_id": "x"}), ("ignored", "polling")),
    ],
)
def test_outcome(run: ToolResult, expected: tuple[str, str]) -> None:
    assert outcome(run) == expected


def test_a_sandbox_refusal_resolved_by_escalating_is_not_a_failure() -> None:
    refused = ToolResult("s1", 2, "Exit code: 1\nOutput:\nerror: cannot open '.git/FETCH_HEAD': Permission denied",
                         exit_code=1, name="shell_command", tool_input={"command": "git fetch origin"})
    again = ToolResult("s1", 4, "Exit code: 0\nOutput:\n", is_error=False, exit_code=0, name="shell_command",
                       tool_input={"command": "git fetch origin", "sandbox_permissions": "require_escalated"})
    other = ToolResult("s1", 4, "Exit code: 0\nOutput:\n", is_error=False, exit_code=0, name="shell_command",
                       tool_input={"command": "git status"})
    assert outcomes([refused, again]) == [("ignored", "sandbox"), ("ok", "")]
    assert outcomes([refused, other])[0] == ("failed", "status")


def test_three_argument_results_are_failures() -> None:
    assert outcome(ToolResult("s1", 3, "ValueError: bad")) == ("failed", "status")


def test_error_token_lines() -> None:
    assert error_token_line("npm error code ENOTEMPTY") and error_token_line("fatal: bad object")
    assert error_token_line("Traceback (most recent call last):") and error_token_line("error[E0425]: cannot find")
    assert not error_token_line("npm warn deprecated") and not error_token_line("  no errors found")


def test_replays_of_a_parent_s_calls_count_once() -> None:
    parent = bash("make", "Exit code 2\nboom", exit_code=2, session="p", call_id="c1")
    replay = bash("make", "Exit code 2\nboom", exit_code=2, session="agent-x", call_id="c1")
    own = bash("make", "Exit code 2\nboom", exit_code=2, session="agent-x", call_id="c2")
    kept = distinct_runs([replay, own, parent], ["p", "agent-x"])
    assert [(r.session_id, r.call_id) for r in kept] == [("p", "c1"), ("agent-x", "c2")]


def test_a_code_mode_script_s_header_is_not_the_program_s_output() -> None:
    text = ("Script failed\nWall time 0.2 seconds\nOutput:\n\nScript error:\nExit code: 1\nWall time: 0.2 seconds\n"
            "Output:\nINFO: Could not find files for the given pattern(s).\r\n")
    assert output_body(text) == "INFO: Could not find files for the given pattern(s)."


@pytest.mark.parametrize(("command", "output", "code", "state"), [
    ("timeout 30s nix run ./tests#run . -- --jobs 4", "warning: x\nerror: interrupted by the user", None, "ignored"),
    ("timeout 5 pytest -q", "", 124, "ignored"),
    ("timeout 5 pytest -q", "FAILED tests/test_a.py::test_b - assert 1 == 2", 1, "failed"),  # it failed within its limit
    ("nix run ./tests#run", "error: interrupted by the user", 1, "failed"),  # no timeout of the agent's
])
def test_the_agent_s_own_time_limit_is_not_the_program_failing(command: str, output: str, code: int | None, state: str) -> None:
    run = ToolResult("s", 2, output, is_error=True, exit_code=code, name="Bash", tool_input={"command": command}, call_line=1)
    assert outcome(run)[0] == state


def test_codex_s_running_session_header_is_no_result_yet() -> None:
    header = "Command: /bin/bash -lc 'npm run dev'\nChunk ID: 9f2\nWall time: 10.0 seconds\nProcess running with session ID 4121\nOutput:\n> dev"
    assert outcome(bash("npm run dev", header)) == ("ignored", "background")
    # the words inside a command's own output are not the harness speaking
    printed = "Exit code: 0\nOutput:\nProcess running with session ID 7 is the sample text we grep for"
    assert outcome(bash("grep -r 'session ID' docs", printed)) == ("ok", "")
