"""Tool calls with their results, and which of them failed: what the rules engine's failure rules read.

A `ToolResult` is one tool call and its result (the call's line, name and input; the result's
line, text, `is_error` flag and exit code). `outcome` sorts each into one of three states, by fixed
rules applied in this order:

* **ignored**, with a reason, when the result is not news about the work:
  - `sibling`: Claude Code cancelled the call because another call of the same batch failed;
  - `rejected`: the user refused the call ("doesn't want to proceed", "was rejected");
  - `denied`: the harness's permission system refused it (a denial message, an auto-mode
    classifier, "don't ask" mode); a shell's own "Permission denied" is not this, it is a failure;
  - `interrupted`: the user interrupted the call;
  - `polling`: a poll of a background task (`TaskOutput`, `BashOutput`) that was still running;
  - `no match`: a search (`rg`, `grep`, `Select-String`, …, alone or as a pipeline's last stage)
    exited with status 1 and printed nothing, or only "0 matches" / "No matches found";
  - `quiet`: any other non-zero exit that printed nothing: there is no error text to learn from;
  - `sandbox`: the next call of the session runs the same command again asking for escalated
    permissions (`sandbox_permissions: require_escalated`, `with_escalated_permissions`), so the
    refusal was the sandbox's, and it was resolved by escalating;
  - `own timeout`: the agent ran the command under its own `timeout 30s …` and the limit stopped it
    (status 124, or the program reporting the signal: nix's "interrupted by the user"), which is the
    agent's choice of limit, not the program failing.
* **failed** when the call is flagged `is_error` or has a non-zero `exit_code`; or when its exit
  status says success only because a pipe hid it (`cmd 2>&1 | head`: the shell reports the last
  stage) and its output holds an error line of the first stage (`npm error code ENOTEMPTY`,
  `fatal: …`, `error: …`, a traceback).
* **ok** otherwise.

`output_body` removes what the harness wraps around a command's output (Claude Code's `Exit code N`
line, alone or before the output, and `<tool_use_error>` tags, terminal colour codes, Codex's `Exit code:` / `Wall time:` / `Process exited with code` /
`Output:` header, a code-mode script's `Script completed` / `Script failed` header, a sandbox refusal's
`stdout:` prefix) so that only the program's own text is read.

Subagent files often replay their parent's calls (same call id): `distinct_runs` keeps one copy of
each call, the one of the earliest session in the order given (parents first), so a replay never
counts as a second session or a second occurrence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from pipeline.consolidator.rules import shell_commands as sh

__all__ = ["Outcome", "ToolResult", "distinct_runs", "error_token_line", "outcome", "outcomes", "output_body"]

Outcome = tuple[Literal["ok", "failed", "ignored"], str]


@dataclass(frozen=True)
class ToolResult:
    """One tool call and its result. Built with three arguments it is a failed call's text."""

    session_id: str
    line_no: int  # the result's line (the call's line when there is no result)
    text: str
    is_error: bool = True
    exit_code: int | None = None
    name: str | None = None
    tool_input: Any = None  # the call's input, parsed JSON or its JSON text
    call_id: str | None = None
    call_line: int | None = None
    has_result: bool = True

    @property
    def worked(self) -> bool:
        """A result came back and nothing in it says the call failed (no error flag, exit code 0 or none)."""
        return self.has_result and not self.is_error and self.exit_code in (None, 0)

    @cached_property
    def command(self) -> str | None:
        return sh.tool_command(self.name or "", self.tool_input)

    @cached_property
    def parsed(self) -> sh.Command | None:
        return sh.parse(self.command) if self.command else None

    @cached_property
    def programs(self) -> frozenset[str]:
        """Every program of the command line, lower case, `sudo` included (the parser sets it aside)."""
        if self.parsed is None:
            return frozenset()
        found = {p.lower() for p in self.parsed.programs if p}
        if any(seg.text.lstrip().startswith("sudo ") for seg in self.parsed.segments):
            found.add("sudo")
        return frozenset(found)

    @cached_property
    def target(self) -> str | None:
        return sh.tool_target(self.name or "", self.tool_input)

    @cached_property
    def program(self) -> str:
        """What ran: the main segment's program for a shell command, else the tool's name."""
        main = self.parsed.main if self.parsed else None
        if main is not None and main.program:
            return main.program
        if self.target and self.name and self.name not in sh.FILE_TOOLS and "*** Begin Patch" in _raw(self.tool_input):
            return "apply_patch"
        return self.name or ""

    @cached_property
    def body(self) -> str:
        return output_body(self.text)

    @property
    def escalated(self) -> bool:
        """The call asked the sandbox for escalated permissions (Codex's `sandbox_permissions`)."""
        return any(self.input_field(k) not in (None, False, "", "use_default") for k in _ESCALATE)

    def input_field(self, key: str) -> Any:
        data = self.tool_input
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError:
                return None
        return data.get(key) if isinstance(data, dict) else None


def _raw(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False) if value is not None else ""


# Claude Code's status line, alone when the command printed nothing (`Exit code 1`): then there is no
# error text at all, and the status line must not stand in for one.
_CLAUDE_EXIT = re.compile(r"\AExit code -?\d+(?:\n|\Z)")
# Terminal colour and cursor codes (PowerShell 7 colours its errors): not text a reader sees, and they
# would keep two prints of one error from having the same shape. A line that they cut is quoted by
# its longest uncut piece (`error_shapes.verbatim_quote`): a quote must be found in the stored output.
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_TOOL_ERROR = re.compile(r"</?tool_use_error>")
# Codex puts `Key: value` lines (Exit code, Wall time, Process exited with code, Chunk ID, Command,
# Original token count, Total output lines) before an `Output:` line.
_CODEX_HEADER = re.compile(
    r"\A(?:(?:Command|Chunk ID|Wall time|Exit code|Process exited with code|Original token count|Total output lines)"
    r"\b[^\n]*\n)+(?:Output:\n)?"
)
# Code mode (`exec`): the script's own status before the header of each command it ran.
_SCRIPT_HEADER = re.compile(r"\AScript (?:completed|failed)\nWall time [^\n]*\n(?:Output:\n)?\n*(?:Script error:\n)?")
_SANDBOX = re.compile(r"\A(?:failed in sandbox [^\n]*?(?:stdout|output): ?)", re.DOTALL)


def output_body(text: str) -> str:
    """The program's own output: the harness's status header and wrapper tags removed."""
    body = ANSI.sub("", _TOOL_ERROR.sub("", text or ""))
    body = _CLAUDE_EXIT.sub("", body, count=1)
    body = _SCRIPT_HEADER.sub("", body, count=1)
    body = _CODEX_HEADER.sub("", body, count=1)
    sandbox = _SANDBOX.match(body)
    if sandbox:
        body = body[sandbox.end() :]
        body = re.sub(r",? ?stderr: ?", "\n", body, count=1)
    return body.strip()


_SIBLING = re.compile(r"Sibling tool call errored")
_REJECTED = re.compile(r"doesn't want to (?:proceed with this tool use|take this action)|tool use was rejected|user rejected",
                       re.IGNORECASE)
_DENIED = re.compile(
    r"Permission to use \w+ has been denied|Permission for this action (?:was|has been) denied|"
    r"auto mode classifier|don't ask mode|requires approval|was blocked by (?:a|the) hook|denied by (?:the )?user",
    re.IGNORECASE,
)
_INTERRUPTED = re.compile(r"\[Request interrupted by user|interrupted by user", re.IGNORECASE)
_POLLING = frozenset({"TaskOutput", "BashOutput", "write_stdin"})
_STILL_RUNNING = re.compile(r"<retrieval_status>timeout|<status>running</status>")
_NO_MATCH = re.compile(r"\A(?:0 matches(?: for\b.*)?|No matches found\.?|No files found\.?)\Z", re.IGNORECASE | re.DOTALL)
_ESCALATE = ("sandbox_permissions", "with_escalated_permissions")

# An error line printed by a program, at the start of a line: `npm error code X`, `npm ERR! code X`,
# `error: …`, `fatal: …`, `Error: …`, `ERROR: …`, `E: …` (apt), `Traceback (most recent call last):`.
_ERROR_TOKEN = re.compile(
    r"^\s*(?:(?:npm|yarn|pnpm|pip|cargo|go|git|make|docker|uv)(?:\[\d+\])?:?\s+)?"
    r"(?:(?:error|ERROR|Error|ERR!|fatal|FATAL|E)(?:\[[\w-]+\])?(?::|\s+code\b)\s*\S|Traceback \(most recent call last\))"
)


def error_token_line(line: str) -> bool:
    """True for a line that starts with an error marker (see `_ERROR_TOKEN`)."""
    return bool(_ERROR_TOKEN.match(line))


def _search_exit(run: ToolResult) -> bool:
    parsed = run.parsed
    if parsed is None:
        return run.name in ("Grep", "Glob")
    words = [s for s in parsed.segments if s.words]
    if not words:
        return False
    last, main = words[-1], parsed.main
    progs = {last.program.lower(), main.program.lower() if main else ""}
    if main is not None and main.program.lower() == "git" and len(main.words) > 1 and main.words[1] == "grep":
        return True
    return bool(progs & sh.SEARCH)


# The agent's own `timeout 30s cmd` stopping the command: exit status 124, or what the program prints when
# it is sent SIGTERM (nix: "error: interrupted by the user").
_OWN_TIMEOUT = re.compile(r"^\s*(?:sudo\s+)?timeout\s+(?:-\S+\s+)*\d+(?:\.\d+)?[smhd]?\s")
_KILLED = re.compile(r"interrupted by the user|^Terminated$", re.IGNORECASE | re.MULTILINE)


def _own_timeout(run: ToolResult) -> bool:
    if not any(_OWN_TIMEOUT.match(seg.text) for seg in (run.parsed.segments if run.parsed else ())):
        return False
    return run.exit_code == 124 or bool(_KILLED.search(run.body))


def _escalated_rerun(run: ToolResult, following: Sequence[ToolResult]) -> bool:
    if run.command is None:
        return False
    for nxt in following[:3]:
        if nxt.command == run.command:
            return nxt.escalated
    return False


# Claude Code's answer to a command it sent to the background (run_in_background, or a long command it
# moved there), and Codex's to a session it left running.
_BACKGROUND = re.compile(r"^\s*(?:Command running in background with ID:|Process running with session ID)", re.IGNORECASE | re.MULTILINE)


def outcome(run: ToolResult, following: Sequence[ToolResult] = ()) -> Outcome:
    """("ok" | "failed" | "ignored", reason) for one run; `following` are the session's later runs."""
    text = run.text or ""
    failed_flag = bool(run.is_error) or (run.exit_code is not None and run.exit_code != 0)
    if failed_flag:
        if _SIBLING.search(text):
            return "ignored", "sibling"
        if _REJECTED.search(text):
            return "ignored", "rejected"
        if _DENIED.search(text):
            return "ignored", "denied"
        if _INTERRUPTED.search(text) and len(text) < 200:
            return "ignored", "interrupted"
        if run.name in _POLLING and _STILL_RUNNING.search(text):
            return "ignored", "polling"
        body = run.body
        if _search_exit(run) and (run.exit_code in (1, None)) and (not body or _NO_MATCH.match(body)):
            return "ignored", "no match"
        if not body:
            return "ignored", "quiet"
        if _escalated_rerun(run, following):
            return "ignored", "sandbox"
        if _own_timeout(run):
            return "ignored", "own timeout"
        return "failed", "status"
    if run.name in _POLLING and _STILL_RUNNING.search(text):
        return "ignored", "polling"
    if _BACKGROUND.search(text.split("\nOutput:", 1)[0][:600]):  # in the result's header, never in its output
        # started, not finished: how it ended comes later, in a notice or an output file ("npm install"
        # sent to the background, then failing with E401, is no install that worked)
        return "ignored", "background"
    if run.parsed is not None and run.parsed.pipes_stderr and any(error_token_line(x) for x in run.body.split("\n")):
        return "failed", "piped"
    return "ok", ""


def outcomes(runs: Sequence[ToolResult]) -> list[Outcome]:
    """`outcome` of every run of one session, in order (each sees the runs after it)."""
    return [outcome(run, runs[i + 1 :]) for i, run in enumerate(runs)]


def distinct_runs(runs: Iterable[ToolResult], session_order: Sequence[str]) -> list[ToolResult]:
    """One copy of each call: a call id seen in an earlier session of `session_order` is a replay."""
    rank = {sid: i for i, sid in enumerate(session_order)}
    ordered = sorted(runs, key=lambda r: (rank.get(r.session_id, 1 << 30), r.session_id, r.line_no))
    seen: set[str] = set()
    out: list[ToolResult] = []
    for run in ordered:
        if run.call_id:
            if run.call_id in seen:
                continue
            seen.add(run.call_id)
        out.append(run)
    return out
