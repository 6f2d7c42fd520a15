"""Recurring failures of tool calls, reduced to their shape: the rules engine's `error_pattern` candidates.

Which calls failed is `pipeline.consolidator.rules.tool_runs`' business (`is_error`, a non-zero exit code,
or a pipe that hid one; no-match searches, refusals and sandbox retries are not failures). Here each
failed call gives its **error lines**, read from the program's own output (`tool_runs.output_body`):

1. lines naming an error: an exception or error class followed by a colon (`ModuleNotFoundError: …`,
   `psycopg.errors.ObjectInUse: …`, `error[E0425]: …`, `fatal: …`, `ERROR: …`, `npm error code X`);
2. when there is none, lines stating a failure in words shell tools use (`command not found`, `No such
   file or directory`, `is not recognized as`, `Permission denied`, `Access is denied`, `timed out`,
   `Unrecognized argument`, `did not match any`, `exceeds maximum`, `HTTP Error 403`, …);
3. when there is none either, the output itself if it is a single line (`File does not exist.`).

Each line is reduced to a **shape** by `normalise`, the one place where text is made comparable:
quoted values, URLs, ids, hosts, paths (POSIX and Windows), file names, command-line flags and
numbers are replaced by placeholders, so `fatal: pathspec 'a.md' did not match any files` and the same
refusal for `b.md` group together. A *missing* file or folder ("No such file or directory", "does not
exist", "Cannot find path") is the exception: it is a fact about that file, so such failures group
only when the same thing is missing again; likewise a request a server refused with a status code
groups only with refusals from the same host. Two shapes that always occur in the same calls are one
failure told twice (a chained traceback): only the one printed last is kept.

A shape is a **pattern** when, counting each call once (subagent replays removed):

* it occurs in **two or more sessions** of the batch (a batch holds one project's sessions), or
* it occurs **three or more times in one session**, or
* it occurs **twice in one session and a strong workaround followed** (`workarounds`: the same
  program with something added, or another program on the same target): a retry failed the same
  way and something else worked, which is exactly what the next session should know.

**Stale-context edits are not patterns.** A patch or an edit that fails its own precondition
(`apply_patch` "Failed to find expected lines", Edit's "String to replace not found", "File has been
modified since read", "File has not been read yet") says only that the agent's copy of the file was
out of date; the generic recovery, reading the file again and retrying the same edit, is what every
agent does, and a memory of it costs a reviewer a commit to read for nothing (all three false
memories of the first unseen real batch were of this kind). Such a failure becomes a pattern only
with a workaround other than that recovery: the file written by another program (a program that only
reads or formats it, `gofmt` after a failed patch, is the re-read), or deleted and added again instead
of updated (`stale_edit`, `_generic_recovery`); or when it comes back again and again (twice or more)
in two sessions or more: then something keeps the agent's copy of the project's files stale (an
editor or linter writing them meanwhile, an encoding read one way and written another, which the
labelled real sessions show), and it is claimed of that project only (`_stale_again`).

**One episode, one memory.** Two patterns met in the same sessions, by calls of a common program, each
time within `EPISODE_GAP` calls of each other, are one stretch of trouble told in two errors (`git push`
refused over HTTPS, then over SSH): they are folded into the one with more occurrences. Only patterns
are folded, so folding never makes a pattern of what was not one.

**Who failed.** A line in which a program names itself (`sudo: a password is required`, `awk: … fatal:
…`, `zsh:1: no matches found`) says which program failed, whatever the command line started with; a
shell speaks for itself but not for a program it could not find. A line that calls which worked print
as often (a sandbox's shell-profile banner) is not why the others failed.

Sessions are counted as people work: a subagent's file belongs to its parent's session. Failures of
checks (tests, type checkers, linters, builds: `shell_commands.is_checker`) count only across
sessions: within one session a failing test is rerun until the bug it found is fixed, which is the
work itself, not a recurring failure.

Its gist says where it happened, which commands failed, and what worked next (the workaround, from
`pipeline.consolidator.rules.workarounds`) when something did. A pattern is reported only when something
of it is new to the batch (a line at or after its session's `new_from_line`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from pipeline.consolidator.contract import (
    MAX_CLAIM_CHARS,
    MAX_GIST_CHARS,
    MAX_QUOTE_CHARS,
    MIN_QUOTE_CHARS,
    QUOTE_LEAK_MIN,
)
from pipeline.consolidator.rules import shell_commands as sh
from pipeline.consolidator.rules.error_claims import outdated, statement
from pipeline.consolidator.rules.tool_runs import ANSI, Outcome, ToolResult, outcomes, output_body
from pipeline.consolidator.rules.wording import clip, listed
from pipeline.consolidator.rules.workarounds import LOOK_AHEAD, Workaround, find_workaround, settings

__all__ = [
    "MAX_PATTERN_EVIDENCE",
    "PatternFinding",
    "ToolResult",
    "error_head",
    "error_lines",
    "error_shape",
    "failure_lines",
    "find_error_patterns",
    "normalise",
    "pattern_candidate",
    "speaker",
    "stale_edit",
    "verbatim_quote",
]

# Quotes per candidate: errors from up to this many sessions, plus the failing and working commands.
MAX_PATTERN_EVIDENCE = 4
MAX_EVIDENCE_ITEMS = 6

# "Name: message" where Name is an exception class (dotted or not), a module's errors namespace, or
# one of the bare words tools print before a message (Error, error[E0425], fatal, panic, Failed).
_ERROR_NAME = (
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Failure|Exit|Interrupt)"
    r"|errors?\.[A-Za-z_]\w*|Error|ERROR|error|Fatal|FATAL|fatal|Failed|FAILED|panic)"
)
_ERROR_LINE = re.compile(rf"(?<![\w.\-/])(?P<sig>(?P<name>{_ERROR_NAME})(?:\[[\w-]+\])?: +\S.*)")
# A tool's error code line: `npm error code ENOTEMPTY`, `npm ERR! code E404`.
_CODE_LINE = re.compile(r"(?P<sig>(?P<name>[\w.-]+ (?:error|ERR!)) code \S+)")
_ERRNO = re.compile(r"\bE[A-Z]{3,}\b|\bE\d{3}\b")
# Failure wording of shells and command-line tools (second choice, when no line names an error).
_PHRASE = re.compile(
    r"command not found|not found: |is not recognized as|No such file or directory|cannot access|Cannot find path|"
    r"does not exist|Permission denied|Access is denied|not permitted|timed out|Un-?recognized (?:argument|option)|"
    r"unrecognized escape|unknown (?:option|command|flag)|invalid (?:option|argument)|did not match any|"
    r"exceeds maximum|HTTP Error \d{3}|\b(?:401|403|404|500|502|503) (?:Unauthorized|Forbidden|Not Found|"
    r"Internal Server Error|Bad Gateway|Service Unavailable)|no matches found|has been modified since|"
    r"not found in file|has not been read yet|Usage Error|Couldn't find|could not be found|unable to|Unable to|"
    r"Unsupported URL|failed to (?:run|open|load|start|connect)|Failed to (?:find|run|open|load|start|connect)|"
    r"already locked|Connection refused|could not resolve|syntax error|ParserError|"
    r"Die Zeichenfolge hat kein Abschlusszeichen|is not a valid|not a git repository|Traceback",
    re.IGNORECASE,
)
# Lines that are never the error: PowerShell's position and category lines, progress, warnings.
_NOISE = re.compile(
    r"^\s*(?:At line:\d+ char:\d+|\+ |~+$|CategoryInfo|FullyQualifiedErrorId|warning:|WARNING:|npm warn|"
    r"Deprecated Feature|\[download\]|\d+%|\(use \")",
)

# Normalising: the parts that differ between two occurrences of the same failure. Order matters:
# quoted values first (they may hold paths and numbers), numbers last. Whitespace is made single spaces
# first as well as last: a path or a quote that a tab or a control separator cut in two on the first
# pass must not become one on a second, or normalising a shape would change it again.
_NORMALISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\s+"), " "),
    (re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|«[^»\n]*»|“[^”\n]*”|‘[^’\n]*’"), "<value>"),
    (re.compile(r"\"[^\"\n]*$"), "<value>"),  # a quoted value cut off by the end of the line
    (re.compile(r"\[?<value>(?:\s*,\s*<value>)+\]?|\[<value>\]"), "<value>"),  # a list of values is one value
    (re.compile(r"\b[a-z][a-z0-9+.\-]*://\S+"), "<url>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b|\blocalhost\b|\[[0-9a-fA-F:]+\]"), "<host>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/]?[\w.~!$\-]+)?(?:[\\/][\w.~!$\- ]*[\w.~!$\-])+[\\/]?"), "<path>"),
    (re.compile(r"(?<![\w<])[\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,4}\b(?!\()"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b"), "<id>"),
    (re.compile(r"(?<![\w/.<-])--?[A-Za-z][\w-]*"), "<flag>"),
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>"),
    (re.compile(r"\s+"), " "),
)


_MAX_EXTRA_PASSES = 8


def normalise(text: str) -> str:
    """`text` with what varies between occurrences of one failure replaced by placeholders.

    The only normalisation of the rules engine: whatever must be masked or cleaned before shapes are
    compared is applied to the text given here, never after.
    """
    # A placeholder can make a later rule match where the text it replaced did not (`0-A` becomes
    # `<n>-A`, whose `-A` now reads as a flag): passes repeat until one changes nothing, so that a
    # shape normalised again is the same shape. Every pass only turns text into placeholders.
    shape = _one_pass(text)
    for _ in range(_MAX_EXTRA_PASSES):
        again = _one_pass(shape)
        if again == shape:
            break
        shape = again
    return shape


def _one_pass(text: str) -> str:
    for pattern, placeholder in _NORMALISE:
        text = pattern.sub(placeholder, text)
    return text.strip()


def error_lines(text: str) -> list[str]:
    """The lines of a tool output that name an error, each cut to the part that starts at the name.

    Every returned string is a substring of `text` (so it can be quoted verbatim), at most
    MAX_QUOTE_CHARS long, without surrounding whitespace.
    """
    out: list[str] = []
    for line in text.split("\n"):
        match = _ERROR_LINE.search(line) or _CODE_LINE.search(line)
        if match:
            sig = match.group("sig")[:MAX_QUOTE_CHARS].strip()
            if sig:
                out.append(sig)
    return out


# `sudo: a password is required`, `zsh:1: no matches found: …`, `bash: line 1: x: command not found`:
# a program saying, in its own name, why it stopped.
_SPEAKER = re.compile(r"^(?P<program>[A-Za-z][\w.+-]*)(?::\d+|: line \d+)*: +(?=\S)")
# What a shell says of another program (the one it could not find) is about that program.
_ABOUT_ANOTHER = re.compile(r"command not found|not found: |is not recognized", re.IGNORECASE)
_NOT_A_FAILURE = re.compile(r"(?:warning|note|hint|info)\b", re.IGNORECASE)


def speaker(line: str, programs: Iterable[str]) -> str | None:
    """The program a failure line names as its speaker, when it is one the call ran (or its shell
    speaking of itself), and the line states a failure rather than a warning."""
    text = line.strip()
    match = _SPEAKER.match(text)
    if match is None or _NOT_A_FAILURE.match(text, match.end()):
        return None
    name = match.group("program").lower()
    if sh.is_shell(name):  # shells name themselves in their errors but are never in the command they ran
        return None if _ABOUT_ANOTHER.search(text) else name
    return name if name in {p.lower() for p in programs} else None


def failure_lines(text: str, programs: Iterable[str] = ()) -> list[str]:
    """The error lines of a failed call's output (named errors, else failure wording or a line in which
    one of the call's `programs` says why it stopped, else its only line; see the module docstring).
    Substrings of `text`, each at most MAX_QUOTE_CHARS long."""
    body = output_body(text)
    named = error_lines(body)
    if named:
        return named
    lines = [ln.strip() for ln in body.split("\n") if ln.strip() and not _NOISE.match(ln)]
    programs = set(programs)
    worded = [ln[:MAX_QUOTE_CHARS].strip() for ln in lines if _PHRASE.search(ln) or speaker(ln, programs)]
    if worded:
        return worded
    if len(lines) == 1 and len(lines[0]) >= MIN_QUOTE_CHARS:
        return [lines[0][:MAX_QUOTE_CHARS].strip()]
    return []


_ANSI_GAP = r"(?:\x1b\[[0-9;?]*[A-Za-z])*"


def verbatim_quote(line: str, raw: str) -> str:
    """A failure line as it can be quoted from the stored output `raw`: the line itself, or, where
    terminal colour codes cut it there (`output_body` reads it without them), its longest uncut piece."""
    if line in raw:
        return line
    found = re.search(_ANSI_GAP.join(re.escape(c) for c in line), raw)
    if found is None:
        return line
    return max((piece.strip() for piece in ANSI.split(found.group(0))), key=len)


def error_shape(line: str) -> str:
    """The line with the parts that vary between occurrences replaced by placeholders."""
    return normalise(line)


_CONNECTORS = re.compile(r"(?:\s+(?:in|at|for|of|to|from|on|with|by|after|before|than|named|called|the|a|an))+\s*$", re.IGNORECASE)


def error_head(line: str) -> str:
    """A short name for the failure: the exception class, the errno an `Error:` line names, or the
    clause of the line that states the failure, up to the first part that varies."""
    match = _ERROR_LINE.search(line) or _CODE_LINE.search(line)
    if match:
        name = match.group("name")
        if name.lower() in {"error", "fatal", "failed", "panic"} or name.endswith(("error", "ERR!")):
            message = re.sub(r"^(?:\[[\w-]+\])?:?\s*(?:code\s+)?", "", match.group("sig")[len(name):])
            errno = _ERRNO.search(message)
            if errno and errno.group(0) not in ("ERROR", "ERR"):
                return errno.group(0)
            head = _cut(normalise(message))
            if len(head) >= 6:
                return head
            # `fatal: split: second argument is not an array`: the first clause only names the
            # function that complained, so the clause that states the failure is added to it.
            clauses = [c for c in (_cut(normalise(part)) for part in re.split(r":\s", message)) if c]
            stated = next((c for c in clauses[1:] if len(c) >= 6), None)
            if stated is not None:
                return f"{clauses[0]}: {stated}" if head else stated
        return name
    spoken = _SPEAKER.match(line.strip())
    if spoken is not None and len(line.strip()) - spoken.end() >= 6:
        line = line.strip()[spoken.end():]  # `sudo: a password is required`: the program is named elsewhere
    clause = _clause(normalise(line))
    if len(clause) >= 6:
        return clause
    words = re.split(r"(?<=[.;:!?])\s|\s[-–—]\s", line.strip(), maxsplit=1)[0]
    words = re.sub(r"^[#>*\s]+", "", words).rstrip(" .;:!?")
    return words[:60].rstrip() or line[:60]


def _clause(shape: str) -> str:
    """The clause of a shape that states the failure, cut before the first placeholder."""
    phrase = _PHRASE.search(shape)
    start = 0
    if phrase:
        before = [m.end() for m in re.finditer(r"[:;.]\s|^\s*[#>*]+\s*", shape[: phrase.start()])]
        start = before[-1] if before else 0

    clause = _cut(shape[start:])
    if phrase and phrase.group(0).lower() not in clause.lower():
        clause = _cut(shape[phrase.start():])
    return clause


def _cut(shape: str) -> str:
    """A shape's opening words: quoted values and paths left out, cut at the first other placeholder,
    bracket or clause mark, without trailing connectors."""
    text = re.sub(r"<(?:value|path)>\s*", "", shape)
    text = re.split(r"<|\(|[,.;:](?:\s|$)", text, maxsplit=1)[0]
    return _CONNECTORS.sub("", text.strip(" :#>*")).strip(" :")[:80].rstrip()


# A missing file or folder is a fact about that file: such failures recur only when the same thing
# is missing again (agents guessing at several paths that do not exist is not a pattern).
_MISSING = re.compile(
    r"No such file or directory|does not exist|Cannot find path|cannot access|cannot find the (?:file|path)|"
    r"\bENOENT\b|FileNotFoundError",
    re.IGNORECASE,
)
_NAMED_THING = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|(?:[A-Za-z]:)?(?:[\\/]?[\w.~!$\-]+)?(?:[\\/][\w.~!$\- ]*[\w.~!$\-])+")


# A web request refused by its server (a status code): a fact about that host, so such failures recur only
# when the same host refuses again (403s from several unrelated sites are no pattern).
_HTTP_REFUSED = re.compile(r"\bstatus code \d{3}\b|\bHTTP Error \d{3}\b|\b(?:40[0-9]|429|5\d\d) (?:Forbidden|Not Found|"
                           r"Too Many Requests|Unauthorized|Bad Gateway|Service Unavailable)\b", re.IGNORECASE)
_HOST = re.compile(r"https?://([^/\s'\"?#]+)")


def _host(run: ToolResult) -> str | None:
    url = run.input_field("url")
    found = _HOST.search(url if isinstance(url, str) else run.command or "")
    return found.group(1).lower() if found else None


def _missing_thing(line: str, run: ToolResult) -> str | None:
    """What a not-found failure says is missing, or which host refused a request (None for other failures)."""
    if _HTTP_REFUSED.search(line) and (host := _host(run)) is not None:
        return f"host:{host}"
    if not _MISSING.search(line):
        return None
    named = _NAMED_THING.findall(re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0])  # its first sentence names it
    if named:
        return "|".join(named)
    return run.target or run.command or ""


# An edit tool's own precondition failing: the agent's view of the file was stale (module docstring).
_STALE_EDIT = re.compile(
    r"Failed to find expected lines|String to replace not found|has been modified since (?:it was )?read|"
    r"has not been read yet|Found \d+ matches of the string to replace|old_string (?:was )?not found|"
    r"No replacement was performed|could not find (?:the )?(?:old|original) (?:string|text)",
    re.IGNORECASE,
)
_EDIT_TOOLS = frozenset({"apply_patch", *sh.WRITE_TOOLS, "str_replace_editor", "str_replace_based_edit_tool"})


def stale_edit(line: str, run: ToolResult) -> bool:
    """Is this failure line an edit tool's stale-context refusal (see the module docstring)?"""
    return bool(_STALE_EDIT.search(line)) and ((run.name or "") in _EDIT_TOOLS or run.program in _EDIT_TOOLS
                                               or sh.patch_text(run.tool_input) is not None)


def _stale_again(finding: PatternFinding, root: Mapping[str, str]) -> bool:
    """Edits refused for a stale view of the file again and again in two or more sessions: something keeps
    the agent's copy out of date there (an editor or a linter writing the files meanwhile, an encoding
    the agent reads differently from what it writes), which the next session meets too."""
    per_session: dict[str, int] = {}
    for sid, occ in finding.occurrences.items():
        per_session[root.get(sid, sid)] = per_session.get(root.get(sid, sid), 0) + len(occ)
    return sum(1 for n in per_session.values() if n >= 2) >= 2


def _generic_recovery(workaround: Workaround | None) -> bool:
    """What worked after a stale edit was the same edit tool updating the same file again (or nothing
    was seen to work): the recovery every agent does, not something to remember."""
    if workaround is None or not workaround.strong:
        return True
    if workaround.how == "other operations":
        # a patch that deletes or adds the file instead of updating it is a different way round
        patch = sh.patch_text(workaround.run.tool_input)
        return not any(op in ("Delete", "Add") for op, _ in (sh.patch_targets(patch) if patch else []))
    if workaround.how == "same target":
        # another program on the file is a way round only when it writes the file (a shell redirect, an
        # in-place edit); `gofmt` or `cat` on it after a failed patch is the usual re-read, then the retry
        return not _writes_file(workaround.run)
    return True


_IN_PLACE = re.compile(r"(?:^|[\s;&|])(?:sed\s+-i|perl\s+-p?i|tee\b|Set-Content\b|Out-File\b|Add-Content\b|"
                       r"python3?\s+-\s*<<|cat\s*>)|[^<>=!]>{1,2}\s*[\w./'\"~$\\-]", re.IGNORECASE)


def _writes_file(run: ToolResult) -> bool:
    return bool(sh.written_files(run.name or "", run.tool_input)) or bool(_IN_PLACE.search(run.command or ""))


def _group(shape: str) -> str:
    """Shapes that differ only by a leading `error:`/`fatal:` word are one failure (a tool prints it
    on one path and not on another)."""
    return re.sub(r"^(?:error|fatal|Error|ERROR|FATAL)(?:\[[\w-]+\])?:\s*", "", shape)


@dataclass
class PatternFinding:
    """One error shape that recurs (see the module docstring for when)."""

    shape: str
    head: str
    # session id → [(line number, verbatim error line)], in the order seen
    occurrences: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    runs: dict[str, list[ToolResult]] = field(default_factory=dict)  # the failed calls, per session
    workaround: Workaround | None = None
    why: str = ""  # which threshold made it a pattern
    missing: str | None = None  # for a missing file or folder: what is missing (`_missing_thing`)
    stale: bool = False  # every occurrence is an edit refused for a stale view of the file

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.occurrences.values())


def session_runs(results: Iterable[ToolResult], order: Sequence[str]) -> dict[str, list[ToolResult]]:
    rank = {sid: i for i, sid in enumerate(order)}
    by_session: dict[str, list[ToolResult]] = {}
    for r in sorted(results, key=lambda r: (rank.get(r.session_id, 1 << 30), r.session_id, r.call_line or r.line_no, r.line_no)):
        by_session.setdefault(r.session_id, []).append(r)
    return by_session


def _is_check(run: ToolResult) -> bool:
    main = run.parsed.main if run.parsed else None
    return main is not None and sh.is_checker(main)


# Failures of one episode lie at most this many calls apart (module docstring).
EPISODE_GAP = 3


def _merge_episodes(by_shape: dict[str, PatternFinding], calls: dict[str, set[tuple[str, int]]],
                    by_session: Mapping[str, Sequence[ToolResult]]) -> set[str]:
    """Fold into one finding the patterns that are one episode told in two errors: met in the same
    sessions, by calls of a common program, and in each session within EPISODE_GAP calls of each other
    (`git push` refused over HTTPS, then over SSH; `pathspec did not match` and `Invalid path` while
    adding the same odd path). Only patterns are folded, so folding never makes one. The pattern with
    more occurrences keeps its name and takes the other's evidence; the shapes folded away are returned."""
    position = {id(r): i for runs in by_session.values() for i, r in enumerate(runs)}

    def spans(f: PatternFinding) -> dict[str, tuple[int, int]]:
        return {sid: (min(position[id(r)] for r in rs), max(position[id(r)] for r in rs)) for sid, rs in f.runs.items()}

    def programs(f: PatternFinding) -> set[str]:
        return {r.program for rs in f.runs.values() for r in rs if r.program}

    order = sorted(by_shape, key=lambda k: (-by_shape[k].count, k))
    folded: set[str] = set()
    for i, keep in enumerate(order):
        if keep in folded:
            continue
        for other in order[i + 1:]:
            a, b = by_shape[keep], by_shape[other]
            if other in folded or calls[keep] == calls[other] or set(a.occurrences) != set(b.occurrences):
                continue  # the same calls are twins, handled apart
            if not programs(a) & programs(b):
                continue
            sa, sb = spans(a), spans(b)
            if any(max(sa[sid][0], sb[sid][0]) - min(sa[sid][1], sb[sid][1]) > EPISODE_GAP for sid in sa):
                continue
            for sid in a.occurrences:
                pairs = sorted(zip(a.occurrences[sid] + b.occurrences[sid], a.runs[sid] + b.runs[sid], strict=True),
                               key=lambda p: (position[id(p[1])], p[0][0]))
                a.occurrences[sid] = [o for o, _ in pairs]
                a.runs[sid] = [r for _, r in pairs]
            calls[keep] |= calls[other]
            folded.add(other)
    return folded


def find_error_patterns(
    results: Iterable[ToolResult],
    session_order: Sequence[str],
    new_from_line: Mapping[str, int] | None = None,
    roots: Mapping[str, str] | None = None,
    cwds: Mapping[str, str | None] | None = None,
) -> list[PatternFinding]:
    """Error shapes that recur (see the module docstring), widest spread first.

    `results` are the batch's tool runs, replays already removed (`tool_runs.distinct_runs`); runs
    built from a failed call's text alone count as failures. `roots` maps a subagent's session to
    its parent's: a subagent file is part of its parent's session when sessions are counted.
    """
    new_from = new_from_line or {}
    root = roots or {}
    by_session = session_runs(results, session_order)
    states: dict[str, list[Outcome]] = {sid: outcomes(runs) for sid, runs in by_session.items()}
    by_shape: dict[str, PatternFinding] = {}
    calls: dict[str, set[tuple[str, int]]] = {}
    last_seen: dict[str, int] = {}
    for sid, runs in by_session.items():
        for run, (state, _) in zip(runs, states[sid], strict=True):
            if state != "failed":
                continue
            seen_here: set[str] = set()
            for position, line in enumerate(failure_lines(run.text, run.programs)):
                shown = _group(error_shape(line))
                if not re.search(r"[^\W\d_]", shown.replace("<value>", "").replace("<path>", "")):
                    continue  # nothing but placeholders: no failure to name
                missing = _missing_thing(line, run)
                shape = shown if missing is None else f"{shown}\x00{missing}"
                last_seen[shape] = max(last_seen.get(shape, -1), position)
                if shape in seen_here:
                    continue
                seen_here.add(shape)
                finding = by_shape.setdefault(shape, PatternFinding(shape=shown, head=error_head(line), missing=missing))
                finding.occurrences.setdefault(sid, []).append((run.line_no, verbatim_quote(line, run.text)))
                finding.runs.setdefault(sid, []).append(run)
                calls.setdefault(shape, set()).add((sid, run.line_no))
    # A line that calls which worked print just as often is not why the others failed (a shell profile's
    # banner, `/bin/ps: Operation not permitted`, printed before every command in a sandbox).
    printed_by_ok: dict[str, int] = {}
    for sid, runs in by_session.items():
        for run, (state, _) in zip(runs, states[sid], strict=True):
            if state == "ok" and run.text:
                for shape in {_group(error_shape(line)) for line in failure_lines(run.text, run.programs)}:
                    printed_by_ok[shape] = printed_by_ok.get(shape, 0) + 1
    rank = {sid: i for i, sid in enumerate(session_order)}
    found = []
    for shape, finding in by_shape.items():
        twins = [s for s in by_shape if s != shape and calls[s] == calls[shape]]
        if any((last_seen[t], t) > (last_seen[shape], shape) for t in twins):
            continue
        if printed_by_ok.get(finding.shape, 0) >= len(calls[shape]):
            continue
        finding.workaround = _workaround(finding, by_session, states)
        stale = all(stale_edit(line, run) for (sid, occ) in finding.occurrences.items()
                    for (_, line), run in zip(occ, finding.runs[sid], strict=True))
        spread = len({root.get(sid, sid) for sid in finding.occurrences})
        if stale and _generic_recovery(finding.workaround) and not _stale_again(finding, root):
            continue  # a stale copy of the file, recovered as every agent does (module docstring)
        finding.stale = stale
        # A check that keeps failing in one session is a bug being fixed, not a recurring failure. Repeats
        # are counted per session as people work: a parent's subagents add to its count.
        repeats: dict[str, int] = {}
        for sid, runs in finding.runs.items():
            repeats[root.get(sid, sid)] = repeats.get(root.get(sid, sid), 0) + sum(1 for r in runs if not _is_check(r))
        most = max(repeats.values()) if repeats else 0
        if spread >= 2:
            finding.why = "sessions"
        elif most >= 3:
            finding.why = "repeats"
        elif most == 2 and finding.workaround is not None and finding.workaround.strong:
            finding.why = "worked around"
        else:
            continue
        fresh = any(
            line_no >= new_from.get(sid, 1) for sid, occ in finding.occurrences.items() for line_no, _ in occ
        )
        if fresh and not outdated(finding, partial(_after, finding, by_session, rank), cwds):
            finding.occurrences = dict(sorted(finding.occurrences.items(), key=lambda kv: rank.get(kv[0], 1 << 30)))
            found.append(finding)
    # Widest spread first, then the shape itself: a stable order for a stable answer.
    patterns = {shape: f for shape, f in by_shape.items() if any(f is g for g in found)}
    folded = _merge_episodes(patterns, calls, by_session)
    return sorted((f for shape, f in patterns.items() if shape not in folded),
                  key=lambda f: (-len(f.occurrences), -f.count, f.shape))


def _after(finding: PatternFinding, by_session: Mapping[str, list[ToolResult]], rank: Mapping[str, int]) -> list[ToolResult]:
    """The batch's runs after the finding's last failure, sessions in batch order."""
    last = max((rank.get(sid, 1 << 30), r.call_line or r.line_no) for sid, runs in finding.runs.items() for r in runs)
    return [r for sid, runs in by_session.items() for r in runs if (rank.get(sid, 1 << 30), r.call_line or r.line_no) > last]


_RANK = {"added": 0, "other operations": 0, "same target": 1, "same program": 2}


def _workaround(
    finding: PatternFinding, by_session: Mapping[str, list[ToolResult]], states: Mapping[str, list[Outcome]]
) -> Workaround | None:
    """What worked after a failure of the pattern: of the workarounds found after its occurrences
    (sessions in batch order), the most telling (a setting added or another operation on the same
    file, then another program on the same target, then the same program again), the earliest first."""
    best: Workaround | None = None
    for sid, failed in finding.runs.items():
        runs = by_session[sid]
        position = {id(r): i for i, r in enumerate(runs)}
        for run in failed:
            index = position[id(run)]
            later = list(zip(runs[index + 1 :], states[sid][index + 1 :], strict=True))
            found = find_workaround(run, later)
            if found is not None and (best is None or _RANK[found.how] < _RANK[best.how]):
                best = found
    if best is not None and best.how == "added":
        # an addition a failing run of the pattern already had is not what fixed it (workarounds docstring)
        tried = set().union(*(settings(r) for runs in finding.runs.values() for r in runs))
        fixed = [a for a in best.added if a not in tried]
        best = replace(best, added=fixed) if fixed else replace(best, strong=False, how="same program", added=[])
    return best


_PLACEHOLDER = re.compile(r"<(?:value|url|id|host|path|n|flag)>")



def _project(slugs: Mapping[str, str | None], sessions: Sequence[str], names: Mapping[str | None, str] | None) -> str:
    """The projects of these sessions: each session's own name (`names` by session id, from its own
    folder), else its slug's; never another session's."""
    named = names or {}
    projects = sorted({named.get(s) or named.get(slugs.get(s)) or slugs.get(s) or "unknown project" for s in sessions})
    return ", ".join(projects)


# A command shorter than this (`pytest -q`) says too little to stand as evidence of its own.
_COMMAND_QUOTE_MIN = 16


def _command_quote(run: ToolResult) -> str | None:
    """A verbatim quote of what a run did: its command, else its target (file or patch line)."""
    if run.command:
        return run.command[:MAX_QUOTE_CHARS] if len(run.command.strip()) >= _COMMAND_QUOTE_MIN else None
    patch = sh.patch_text(run.tool_input)
    for op, path in sh.patch_targets(patch) if patch else []:
        return f"*** {op} File: {path}"
    if run.target and len(run.target) >= MIN_QUOTE_CHARS:
        return run.target
    return None


def _evidence(finding: PatternFinding) -> list[dict[str, str]]:
    items: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()

    def add(sid: str, quote: str | None) -> None:
        quote = quote[:MAX_QUOTE_CHARS] if quote else None
        if quote and len(quote.strip()) >= MIN_QUOTE_CHARS and (sid, quote) not in seen and len(items) < MAX_EVIDENCE_ITEMS:
            seen.add((sid, quote))
            items.append({"sessionId": sid, "quote": quote})

    sessions = list(finding.occurrences)[:MAX_PATTERN_EVIDENCE]
    for sid in sessions:
        add(sid, finding.occurrences[sid][0][1])
    if len(sessions) == 1:
        sid = sessions[0]
        for _, quote in finding.occurrences[sid][1:]:
            add(sid, quote)
        for run in finding.runs[sid][:2]:
            add(sid, _command_quote(run))
    else:
        first = sessions[0]
        add(first, _command_quote(finding.runs[first][0]))
    if finding.workaround is not None:
        add(finding.workaround.run.session_id, _command_quote(finding.workaround.run))
    return items


def _what_worked(w: Workaround) -> str:
    what = sh.summary(w.run.name or "", w.run.tool_input)
    where = f"line {w.run.call_line or w.run.line_no}"
    if w.how == "added" and w.added:
        extra = ", ".join(f"`{clip(a, 60)}`" for a in w.added[:3])
        return f"What worked next ({where}): the same `{what}` with {extra} added."
    if w.how == "other operations":
        return f"What worked next ({where}): {what}, other operations on the same file."
    if w.how == "same target":
        return f"What worked next ({where}): `{what}` on the same target instead."
    return f"The next `{what}` that worked was on {where}."


# An error that says the program itself is missing: another program on the same target is the way round it.
_MISSING_PROGRAM = re.compile(r"not found|not recognized|no such file|cannot find|is not installed", re.IGNORECASE)


def _remedy(w: Workaround, head: str, after: Sequence[ToolResult] = (), *, one_program: bool = False) -> str | None:
    """What to do, from the command that worked next; None when it says nothing a person can act on.
    A different program on the same target is a way round only when it replaced the first: the first is
    missing, or it never worked on that target again in the session (`rm -rf node_modules` refused by an
    `rm` that is not the usual one, then `node -e "…rmSync('node_modules', …)"` each time). After a failed
    edit or patch it never is: `gofmt` on the file is no replacement for the change, nor when the calls
    that failed were of several programs (`one_program` false). `after` are the workaround's session's
    calls after it."""
    what = clip(sh.summary(w.run.name or "", w.run.tool_input), 80)
    inline = _INLINE_SCRIPT.search(w.run.command or "")
    if what and " " not in what and inline:
        # `node -e "require('fs').rmSync(…)"`: the script is the point, named by what it calls (the whole
        # command is an evidence quote, which a claim never repeats)
        calls = [c for c in re.findall(r"([A-Za-z_][\w.]*)\(", w.run.command or "")
                 if c.rsplit(".", 1)[-1] not in _NOT_THE_WORK]
        what = f"{what} {inline.group(1)}` with `{calls[0]}" if calls else f"{what} {inline.group(1)}"
    if w.how == "added" and w.added:
        return "run it again with " + ", ".join(f"`{clip(a, 60)}`" for a in w.added[:3]) + " (that worked next)"
    if w.how == "same target" and what and (_MISSING_PROGRAM.search(head) or (one_program and _replaced(w, after))):
        return f"`{what}` worked next instead"
    return None


# A program given its script on the command line (`node -e "…"`, `python3 -c "…"`): its name alone says nothing.
_INLINE_SCRIPT = re.compile(r"^\s*\S+\s+(-e|-c|--eval|-Command)\s")

# Calls of an inline script that load or print rather than do the work (`console.log('removed')`).
_NOT_THE_WORK = frozenset({"require", "import", "__import__", "print", "log", "info", "puts", "printf", "echo",
                           "write", "exit", "then", "catch"})

def _replaced(w: Workaround, after: Sequence[ToolResult]) -> bool:
    """The failed program did not work on the same target again in the session: the one that worked
    took its place there."""
    failed = w.after
    # an edit tool's change: another program on the same file does not do what it failed to
    if not failed.program or failed.program in _EDIT_TOOLS or (failed.name or "") in _EDIT_TOOLS:
        return False
    if w.run.program.lower() == failed.program.lower():
        return False  # another subcommand of the same tool (`git remote` after `git push`) replaces nothing
    targets = {failed.target} if failed.target else set()
    targets |= {word for seg in (failed.parsed.segments if failed.parsed else ()) for word in seg.operands if len(word) >= 4}
    if not targets:
        return False
    for run in after:
        if run.program == failed.program and run.worked and any(t in (run.command or "") for t in targets):
            return False
    return True


def _command_counts(finding: PatternFinding, *, sudo: bool = False) -> list[tuple[str, int]]:
    """The failed calls' commands with how often each failed, most frequent first; with `sudo`, a
    command run under `sudo` keeps it in front, since it is often why they failed (a password or a
    fingerprint the agent cannot give)."""
    counts: dict[str, int] = {}
    for runs in finding.runs.values():
        for r in runs:
            key = sh.summary(r.name or "", r.tool_input)
            if sudo and key and (r.command or "").lstrip().startswith("sudo ") and not key.startswith("sudo"):
                key = f"sudo {key}"
            counts[key] = counts.get(key, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _commands(finding: PatternFinding) -> list[str]:
    """The failed calls' commands, most frequent first, `sudo` kept."""
    return [k for k, _ in _command_counts(finding, sudo=True) if k]


def _failing_commands(finding: PatternFinding) -> str:
    """Up to three of the failed commands, as a claim names them: "`ip link`, `lsblk` and `mount`"."""
    return listed([f"`{clip(c, 40)}`" for c in _commands(finding)[:3]] or ["tool calls"])


def _failed_summary(finding: PatternFinding) -> str:
    shown = _command_counts(finding)
    return ", ".join(f"`{clip(k, 60)}`" + (f" ×{n}" if n > 1 else "") for k, n in shown[:4]) + (" …" if len(shown) > 4 else "")


def _speakers(finding: PatternFinding) -> list[str]:
    """The one program every occurrence's error line names as its speaker (`sudo: …`, `awk: … fatal: …`,
    `zsh:1: …`), which is what failed whatever the command started with; else none."""
    names = set()
    for sid, occ in finding.occurrences.items():
        for (_, quote), run in zip(occ, finding.runs[sid], strict=True):
            line = next((ln for ln in run.body.split("\n") if quote in ln), quote)
            name = speaker(line, run.programs)
            if name is None:
                return []
            names.add(name)
    return sorted(names) if len(names) == 1 else []


_ONE_PATH = re.compile(r"(?:[A-Za-z]:)?[\\/]?(?:[\w.~\-]+[\\/])+[\w.~\-]+")


def _found_instead(finding: PatternFinding, missing: str, by_session: Mapping[str, Sequence[ToolResult]]) -> str | None:
    """A path of the same name that a later call of the same sessions read or ran and that worked: where
    the missing file really is (`tests/e2e.sh` for `tests/hybrid/e2e.sh`)."""
    name = re.split(r"[\\/]", missing)[-1]
    for sid, failed in finding.runs.items():
        runs = list(by_session.get(sid, ()))
        after = max((i for i, r in enumerate(runs) if any(r is f for f in failed)), default=-1)
        for run in runs[after + 1 :]:
            if not run.worked:
                continue
            for path in {run.target or "", *(run.parsed.main.operands if run.parsed and run.parsed.main else [])}:
                if path != missing and _ONE_PATH.fullmatch(path) and re.split(r"[\\/]", path)[-1] == name:
                    return path
    return None


def _missing_claim(finding: PatternFinding, where: str, by_session: Mapping[str, Sequence[ToolResult]],
                   cwds: Mapping[str, str | None] | None = None) -> str | None:
    """For a file or folder missing again and again, a claim that names it (and where it is instead, when a
    later call found it there) rather than restating the error's text; None for other failures."""
    missing = (finding.missing or "").strip("'\"`")
    if not _ONE_PATH.fullmatch(missing):
        return None
    tools = sorted({r.program for runs in finding.runs.values() for r in runs if r.program})
    how = f"`{tools[0]}` failed on it" if len(tools) == 1 else "calls failed on it"
    instead = _found_instead(finding, missing, by_session)
    # shown from the session's working folder when both paths are in it, else from the folder they share
    base = next((c.rstrip("/\\") for sid in finding.runs if (c := (cwds or {}).get(sid)) and _inside(missing, c)
                 and (instead is None or _inside(instead, c))), None)
    if base is None and instead is not None:
        base = _common_folder(missing, instead).rstrip("/\\") or None
    cut = len(base) + 1 if base else 0
    under = f" in {base}" if base else ""
    if instead is None:
        return f"`{missing[cut:]}` does not exist{under} ({how} {where})"
    return (f"`{missing[cut:]}` does not exist{under}: the file is `{instead[cut:]}` ({how} {where}; a later call "
            "found it at the second path)")


def _inside(path: str, folder: str) -> bool:
    top = folder.rstrip("/\\")
    return bool(top) and path.startswith(top) and path[len(top):len(top) + 1] in ("/", "\\")


def _common_folder(a: str, b: str) -> str:
    """The longest folder both paths start with, with its trailing separator ("" when none)."""
    cut = 0
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            break
        if x in "/\\":
            cut = i + 1
    return a[:cut] if cut > 1 else ""


_CHANGED_SINCE_READ = re.compile(r"modified since (?:it was )?read", re.IGNORECASE)


def _stale_claim(finding: PatternFinding, where: str, by_session: Mapping[str, Sequence[ToolResult]]) -> str:
    """What a reviewer acts on when edits keep being refused for a stale view of the files: which files,
    what the refusal means, and the way round the transcript shows (the file deleted and added whole,
    or written by another program), else the re-read before each edit that the refusal itself asks for."""
    runs = [r for rs in finding.runs.values() for r in rs]
    files = list(dict.fromkeys(_base_name(t) for r in runs if (t := (r.target or "").strip())))
    tools = sorted({r.program if r.program in _EDIT_TOOLS else (r.name or r.program) for r in runs})
    edits = f"`{tools[0]}`" if len(tools) == 1 and tools[0] else "edits"
    named = listed([f"`{f}`" for f in files[:3]]) if files and len(files) <= 3 else ""
    if _CHANGED_SINCE_READ.search(finding.head) or _CHANGED_SINCE_READ.search(finding.shape):
        why = f"{named or 'the files'} changed between the agent's read and its edit"
    else:
        why = f"the text of {named or 'the files'} was not what the agent had last read"
    said = f"{edits} kept being refused because {why} ({where})"
    reread = f"{said}: read a file again right before editing it"
    fix = finding.workaround
    if fix is None or not fix.strong or _generic_recovery(fix):
        return reread
    if fix.how != "other operations":
        return f"{said}; writing the file with `{clip(sh.summary(fix.run.name or '', fix.run.tool_input), 60)}` worked"
    # the delete and the add may be two calls: the add is looked for among the next few
    start = fix.run.call_line or fix.run.line_no
    nearby = [fix.run, *[r for r in by_session.get(fix.run.session_id, ()) if (r.call_line or r.line_no) > start][:LOOK_AHEAD]]
    refused = set(files)
    ops = {(op, name) for r in nearby if r.worked and (patch := sh.patch_text(r.tool_input))
           for op, path in sh.patch_targets(patch) if (name := _base_name(path)) in refused or not refused}
    deleted = {f for op, f in ops if op == "Delete"}
    if deleted & {f for op, f in ops if op == "Add"}:
        return f"{said}; deleting the file and adding it whole worked"
    if not deleted and any(op == "Add" for op, _ in ops):
        return f"{said}; adding the file whole worked"
    return reread


def _base_name(path: str) -> str:
    return re.split(r"[\\/]", path.rstrip("/\\"))[-1] or path


def pattern_candidate(
    finding: PatternFinding, slugs: Mapping[str, str | None], names: Mapping[str | None, str] | None = None,
    by_session: Mapping[str, Sequence[ToolResult]] | None = None, cwds: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    sessions = list(finding.occurrences)
    quotes = {q for occ in finding.occurrences.values() for _, q in occ}
    programs = _speakers(finding) or sorted({r.program for runs in finding.runs.values() for r in runs if r.program})
    tool = f"`{programs[0]}`" if len(programs) == 1 else "tool calls"
    # The shape is shown only when it differs from every quote: memory text never repeats a quote.
    show_shape = finding.shape not in quotes and bool(_PLACEHOLDER.search(finding.shape))
    # The error's name leads, so the memory's file name (a slug of the claim) says what it is about.
    # No count in the claim: later nights link more sessions to the same memory, and a count would go stale.
    # "Repeatedly within a session" stays true when a later night links another session where it
    # recurred again; "within one session" would not.
    # The claim says what to do when the transcript shows what worked next, and never pastes the error's
    # text (that stays in the gist and the evidence): a reviewer acts on a sentence, not on a log line.
    where = "across sessions" if finding.why == "sessions" else "repeatedly within a session"
    fix = finding.workaround
    after = [r for r in (by_session or {}).get(fix.run.session_id, ()) if (r.call_line or r.line_no) > (fix.run.call_line or fix.run.line_no)] \
        if fix is not None else []
    remedy = _remedy(fix, finding.head, after, one_program=len(programs) == 1) if fix is not None and fix.strong else None
    # A head that is a whole quoted line ("Verification timed out") would paste the evidence into the
    # claim, which the contract refuses; the claim then names the commands that failed instead.
    pasted = any(len(q.strip()) >= QUOTE_LEAK_MIN and q in finding.head for q in quotes)
    failing = _failing_commands(finding)
    if remedy and not pasted:
        claim = f"When {tool if len(programs) == 1 else 'a tool call'} fails with {finding.head} ({where}), {remedy}"
    elif remedy:
        claim = f"When {tool if len(programs) == 1 else failing} fails with the error quoted below ({where}), {remedy}"
    elif pasted:
        claim = f"{failing} {'fail' if ' and ' in failing or failing == 'tool calls' else 'fails'} with the same error {where}"
    else:
        claim = f"{finding.head} recurs in failed {tool} {where}"
    stated = None
    if remedy is None:
        # the calls of its sessions after each session's last failure, for the statement's checks
        ends = {sid: max(f.call_line or f.line_no for f in failed) for sid, failed in finding.runs.items()}
        later = [r for sid, end in ends.items() for r in (by_session or {}).get(sid, ()) if (r.call_line or r.line_no) > end]
        stated = statement(finding, failing, where, cwds, later)
    gone = _missing_claim(finding, where, by_session or {}, cwds)
    if gone is not None or stated is not None:
        claim = gone or stated or claim
        # a fact of the project's files or of the machine it ran on: said of the project (a reader needs
        # the place, not "here"), so that a later night links only evidence of the same project to it
        # (corpus.about)
        place = _project(slugs, sessions, names)
        claim = f"In {place}, {claim}" if "unknown project" not in place else claim[:1].upper() + claim[1:]
    elif finding.stale:
        # why a project's files keep going stale is the project's (its editor, its encoding): evidence of
        # another project's stale edits is not linked to it
        claim = f"In {_project(slugs, sessions, names)}, {_stale_claim(finding, where, by_session or {})}"
    claim = clip(claim + ".", MAX_CLAIM_CHARS)
    places = "; ".join(
        f"{sid} line{'s' if len(occ) > 1 else ''} {', '.join(str(n) for n, _ in occ)}"
        for sid, occ in finding.occurrences.items()
    )
    # Counted as of this batch: later nights link more sessions in the front matter, not here.
    gist = (
        f"When first recorded, the same failure (quoted values, paths, ids, flags and numbers set aside) "
        f"appeared {finding.count} times in {len(sessions)} session(s) of {_project(slugs, sessions, names)}: {places}. "
        + (f"The error reads: {clip(finding.shape, 200).rstrip(' :;,.')}. " if show_shape else "")
        + f"What failed: {_failed_summary(finding)}. "
    )
    if finding.workaround is not None:
        gist += _what_worked(finding.workaround) + " "
    gist += "Found by the offline rules engine from the failed calls' error lines; it says nothing about the cause beyond what the error text states."
    evidence = _evidence(finding)
    cited = list(dict.fromkeys(e["sessionId"] for e in evidence))
    if _project(slugs, cited, names) != _project(slugs, sessions, names):
        gist = gist.replace(f"of {_project(slugs, sessions, names)}:", f"of {_project(slugs, sessions, names)} "
                            f"(quoted here: {_project(slugs, cited, names)}):", 1)
    return {
        "kind": "error_pattern",
        "claim": claim,
        "gist": clip(gist, MAX_GIST_CHARS),
        # the failing program as an entity: what the memory is about (corpus.about), whatever else the claim names
        "entities": ([] if pasted else [{"type": "error", "name": finding.head[:120]}])
        + ([{"type": "tool", "name": programs[0][:120]}] if len(programs) == 1 else
           [{"type": "command", "name": clip(c, 120)} for c in _commands(finding)[:3]] if pasted else []),
        "evidence": evidence,
    }
