"""Programs the machine does not have: the rules engine's "`lua` is not installed here" memories.

A program is **absent** from the machine where a call ran when:

* a shell says it could not find it: `bash: line 1: python: command not found`, `zsh:1: command not
  found: python`, `sh: 1: pnpm: not found`, PowerShell's `The term 'lua' is not recognized as …`,
  cmd's `'lua' is not recognized as an internal or external command`; the name must be a program of
  the call's own command line (a here-document's `PY` read as a command is not one, nor is a path);
* or a call that only looks a program up failed: `where.exe lua` ("INFO: Could not find files"),
  `which lua`, `command -v lua`, `type lua`, `Get-Command lua` (alone, or piped into
  `Select-Object`/`Out-Null`), and its output does not name the program as found.

An absence is a fact about the machine, not about one command: the next session will not find the
program either. It is a memory when it is seen as a pattern, never as a single event:

* absent in **two or more sessions** of the batch (a batch is one machine's sessions), or
* absent once and **another program ran the same command line in its place and worked** (`python`
  missing, then `python3 - <<'PY'` with the same script), or ran the very command that failed and worked
  (`nix-shell -p cargo --run 'cargo check …'` after `cargo: command not found`): the machine's own way
  round it, recorded.

A program that later worked in the batch was installed or found meanwhile (`pytest: command not
found`, `pip install pytest`, `pytest` passes): its absence was an event of the session, and is left
out. So is one whose full path the same batch pins (`routines` says that already: "called by its
full path").

The claim says what is true and what to do: "`python` is not installed where the agent runs; use
`python3`", or, with no substitute seen, that the program is missing and a step that needs it cannot
run there. The error class is `command not found` whatever the shell's wording, so that a later
night's sighting of the same program links to the same memory instead of writing a second one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz

from pipeline.consolidator.contract import MAX_CLAIM_CHARS, MAX_GIST_CHARS, MAX_QUOTE_CHARS, MIN_QUOTE_CHARS
from pipeline.consolidator.rules import shell_commands as sh
from pipeline.consolidator.rules.error_shapes import session_runs
from pipeline.consolidator.rules.tool_runs import ToolResult
from pipeline.consolidator.rules.wording import clip, listed

__all__ = ["ERROR_CLASS", "Absence", "MissingProgram", "absences", "find_missing_programs", "missing_candidate"]

ERROR_CLASS = "command not found"
# How many later calls of the session may stand between the failure and the substitute that worked.
SUBSTITUTE_WITHIN = 6
# How alike the substitute's command line must be to the failed one with the program's name swapped.
SUBSTITUTE_SIMILARITY = 90.0

_NAME = r"[A-Za-z0-9][\w.+-]{0,40}"
_SAYS_MISSING = (
    re.compile(rf"(?:^|:\s)(?P<name>{_NAME}): command not found\s*$"),  # bash, sh
    re.compile(rf"command not found: (?P<name>{_NAME})\s*$"),  # zsh
    re.compile(rf"^(?:/bin/)?(?:sh|dash|ash): \d+: (?P<name>{_NAME}): not found\s*$"),  # dash
    re.compile(rf"The term '(?P<name>{_NAME})' is not recognized as (?:the|a) name of a cmdlet"),  # PowerShell
    re.compile(rf"^'(?P<name>{_NAME})' is not recognized as an internal or external command"),  # cmd
    re.compile(rf"^fish: Unknown command:? '?(?P<name>{_NAME})'?"),
)
# Commands that only look a program up; the word after them (and their flags) is the program.
# (`type` is left out: in cmd and PowerShell it prints a file; `where` in PowerShell is Where-Object, so its
# output must say it found nothing.)
_LOOKUPS = frozenset({"which", "where", "where.exe", "get-command", "gcm"})
# What a lookup prints when it finds nothing (most print nothing at all).
_NOTHING_FOUND = re.compile(r"\A\s*\Z|could not find|not found|no \S+ in \(|is not recognized", re.IGNORECASE)
# What may follow a lookup in its pipeline without changing what it says.
_QUIET_TAILS = frozenset({"select-object", "select", "out-null", "format-list", "fl", "ft", "format-table", "head"})
_FOUND_AT = r"(?:^|[\\/\s])%s(?:\.exe|\.cmd|\.bat|\.ps1)?(?:\s|$)"


@dataclass(frozen=True)
class Absence:
    """One sighting: `run` found `program` missing; `quote` is the line that says so (or the lookup)."""

    program: str
    run: ToolResult
    quote: str
    lookup: bool  # found by looking the program up, not by running it


@dataclass
class MissingProgram:
    program: str
    also: list[str] = field(default_factory=list)  # programs missing in the same places (`lua`, `luac`)
    sightings: dict[str, list[Absence]] = field(default_factory=dict)  # session → its sightings, in order
    substitute: ToolResult | None = None  # the call that ran another program in its place, and worked
    instead: str | None = None  # that program
    wrapped: bool = False  # it ran the failed command itself (`nix develop -c cargo test`), not a twin of it

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.sightings.values())


def _failed(run: ToolResult) -> bool:
    return bool(run.is_error) or (run.exit_code is not None and run.exit_code != 0)


def _lookup(seg: sh.Segment) -> str | None:
    """The program a lookup segment asks about (`where.exe lua` → lua), else None."""
    words = sh._tokens(seg.text)
    words = [w for w in words if not re.fullmatch(r"\d?>>?\S*|2>\$null|\$null", w)]
    if not words:
        return None
    head = sh.program_name(words[0]).lower()
    if head == "command" and len(words) >= 3 and words[1] in ("-v", "-V"):
        named = words[2:]
    elif head in _LOOKUPS:
        named = [w for i, w in enumerate(words[1:], 1) if not w.startswith("-") and not words[i - 1].lower() == "-erroraction"]
    else:
        return None
    if len(named) != 1 or not re.fullmatch(_NAME, named[0]):
        return None
    return named[0]


def _looked_up(run: ToolResult) -> str | None:
    """The program a failed lookup-only call did not find; None for any other call."""
    if run.parsed is None or not _failed(run):
        return None
    segs = [s for s in run.parsed.segments if s.words]
    if not segs:
        return None
    name = _lookup(segs[0])
    if name is None or any(s.program.lower() not in _QUIET_TAILS for s in segs[1:]):
        return None
    if not _NOTHING_FOUND.search(run.body) or re.search(_FOUND_AT % re.escape(name), run.body, re.IGNORECASE | re.MULTILINE):
        return None  # it printed something else, or where the program is: something else failed
    return name


def _named_in_command(name: str, run: ToolResult) -> bool:
    low = name.lower()
    return low in run.programs or any(sh.program_name(w).lower() == low for s in (run.parsed.segments if run.parsed else ())
                                      for w in s.words[:1])


def absences(run: ToolResult) -> list[Absence]:
    """Every program this run found missing."""
    if not _failed(run) or not run.command:
        return []
    found: list[Absence] = []
    name = _looked_up(run)
    if name is not None:
        found.append(Absence(name, run, run.command[:MAX_QUOTE_CHARS], lookup=True))
        return found
    for line in run.body.split("\n"):
        line = line.strip()
        for pattern in _SAYS_MISSING:
            m = pattern.search(line)
            if m is None:
                continue
            name = m.group("name")
            # a here-document's end word (`PY`, `EOF`) run as a command is a quoting slip, not a missing program
            if name.isupper() or not _named_in_command(name, run):
                continue
            quote = line if line in (run.text or "") else m.group(0)
            if len(quote.strip()) >= MIN_QUOTE_CHARS and all(a.program != name for a in found):
                found.append(Absence(name, run, quote[:MAX_QUOTE_CHARS], lookup=False))
            break
    return found


def _substitute(absence: Absence, later: Sequence[ToolResult]) -> tuple[ToolResult, str, bool] | None:
    """A later call that worked and either ran the same command line with another program in the missing
    one's place, or ran the very command that failed through another program (`nix-shell -p cargo --run
    'cargo check …'`, `nix develop -c cargo test …`): (that call, the program it used, whether it wrapped)."""
    failed = absence.run.command or ""
    if absence.lookup or not failed:
        return None
    name = absence.program
    needing = [seg.text for seg in (absence.run.parsed.segments if absence.run.parsed else ())
               if seg.words and seg.program.lower() == name.lower() and len(seg.words) >= 2]
    for run in later[:SUBSTITUTE_WITHIN]:
        if not run.worked or not run.command:
            continue
        main = run.parsed.main if run.parsed else None
        if main is not None and main.program.lower() != name.lower() and any(text in run.command for text in needing):
            return run, main.program, True
        for other in sorted(run.programs - absence.run.programs):
            if other == name.lower():
                continue
            swapped = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", other, failed, count=1)
            if swapped != failed and fuzz.ratio(swapped[:2000], run.command[:2000]) >= SUBSTITUTE_SIMILARITY:
                return run, other, False
    return None


def find_missing_programs(
    runs: Sequence[ToolResult],
    session_order: Sequence[str],
    new_from_line: Mapping[str, int] | None = None,
    roots: Mapping[str, str] | None = None,
    pinned: frozenset[str] = frozenset(),
) -> list[MissingProgram]:
    """The programs missing as a pattern (module docstring); `runs` are distinct runs, `roots` maps a
    subagent's session to its parent's, `pinned` are programs a routine already calls by full path."""
    new_from = new_from_line or {}
    root = roots or {}
    by_session = session_runs(runs, session_order)
    found: dict[str, MissingProgram] = {}
    worked_later: dict[str, list[tuple[str, int]]] = {}  # program → (session, line) of calls of it that worked
    for sid in session_order:
        for run in by_session.get(sid, []):
            if run.worked and run.parsed is not None and not sh.is_shell(run.program):
                for seg in run.parsed.segments:
                    if seg.words and _lookup(seg) is None:
                        worked_later.setdefault(seg.program.lower(), []).append((sid, run.line_no))
    rank = {sid: i for i, sid in enumerate(session_order)}
    for sid in session_order:
        in_session = by_session.get(sid, [])
        for i, run in enumerate(in_session):
            for absence in absences(run):
                key = absence.program.lower()
                if key in pinned:
                    continue
                item = found.setdefault(key, MissingProgram(absence.program))
                item.sightings.setdefault(sid, []).append(absence)
                if item.substitute is None and (sub := _substitute(absence, in_session[i + 1 :])) is not None:
                    item.substitute, item.instead, item.wrapped = sub
    out: list[MissingProgram] = []
    for key, item in found.items():
        first = min(((rank[s], a.run.line_no) for s, items in item.sightings.items() for a in items))
        # found or installed after its first sighting: the absence was an event of the work, not of the machine
        if any((rank.get(s, -1), n) > first for s, n in worked_later.get(key, [])):
            continue
        spread = len({root.get(s, s) for s in item.sightings})
        fresh = any(a.run.line_no >= new_from.get(s, 1) for s, items in item.sightings.items() for a in items)
        if fresh and (spread >= 2 or item.substitute is not None):
            out.append(item)
    out.sort(key=lambda m: (-len(m.sightings), -m.count, m.program.lower()))
    return _together(out, by_session)


# Two programs missing in the same sessions are one finding, a toolchain that is not there, when each
# time they were missing within this many calls of each other, or when one's name extends the other's
# (`lua` and `luac`, `node` and `nodejs`).
TOGETHER_WITHIN = 3


def _together(items: list[MissingProgram], by_session: Mapping[str, Sequence[ToolResult]]) -> list[MissingProgram]:
    index = {(r.session_id, r.line_no): i for runs in by_session.values() for i, r in enumerate(runs)}

    def near(a: MissingProgram, b: MissingProgram) -> bool:
        if set(a.sightings) != set(b.sightings) or a.instead != b.instead:
            return False
        x, y = sorted((a.program.lower(), b.program.lower()), key=len)
        if y.startswith(x):
            return True
        return all(any(abs(index[(sid, x.run.line_no)] - index[(sid, y.run.line_no)]) <= TOGETHER_WITHIN
                       for x in a.sightings[sid] for y in b.sightings[sid]) for sid in a.sightings)

    kept: list[MissingProgram] = []
    for item in items:
        home = next((k for k in kept if near(k, item)), None)
        if home is None:
            kept.append(item)
            continue
        home.also.append(item.program)
        for sid, found in item.sightings.items():
            home.sightings[sid] = sorted([*home.sightings[sid], *found], key=lambda a: a.run.line_no)
    return kept



def _how(item: MissingProgram) -> str:
    lookups = sorted({sh.program_name(a.run.parsed.segments[0].words[0]) if a.run.parsed and a.run.parsed.segments
                      and a.run.parsed.segments[0].words else "a lookup"
                      for items in item.sightings.values() for a in items if a.lookup})
    ran = any(not a.lookup for items in item.sightings.values() for a in items)
    looked = " and ".join(f"`{name}`" for name in lookups[:2])
    parts = (["running it failed as not found"] if ran else []) + ([f"{looked} found nothing"] if looked else [])
    return "; ".join(parts)


def missing_candidate(item: MissingProgram, names: Mapping[str | None, str]) -> dict[str, Any]:
    """The finding as a candidate; `names` gives each session's project name by session id."""
    name = item.program
    named = [f"`{p}`" for p in [name, *item.also]]
    them = listed(named)
    is_ = "is" if len(named) == 1 else "are"
    sessions = list(item.sightings)
    projects = ", ".join(sorted({names.get(s) or "unknown project" for s in sessions}))
    if item.substitute is not None and item.instead is not None:
        done = clip(sh.summary(item.substitute.name or "", item.substitute.tool_input), 60)
        shown = f"`{done}`, " if done.lower() != item.instead.lower() else ""
        if item.wrapped:
            how = f"`{done}` ran" if done.lower() != item.instead.lower() else "it ran"
            claim = (f"{them} {is_} not on the PATH where the agent runs; run {'it' if len(named) == 1 else 'them'} "
                     f"through `{item.instead}` ({how} the command that had failed, and worked).")
        else:
            claim = (f"{them} {is_} not on the PATH where the agent runs; `{item.instead}` worked in its place "
                     f"({shown}the same command line once `{name}` was not found).")
    else:
        claim = (f"{them} {is_} not on this machine's PATH ({_how(item)}, in {len(sessions)} sessions): a step that "
                 f"needs {'it' if len(named) == 1 else 'them'} cannot run there as things are.")
    places = "; ".join(f"{sid} line{'s' if len(v) > 1 else ''} {', '.join(str(a.run.line_no) for a in v)}"
                       for sid, v in item.sightings.items())
    gist = (f"When first recorded, {them} {'was' if len(named) == 1 else 'were'} missing {item.count} time(s) in {len(sessions)} session(s) of "
            f"{projects}: {places}. ")
    if item.substitute is not None:
        where = item.substitute.call_line or item.substitute.line_no
        gist += (f"{'Through' if item.wrapped else 'In its place'} `{item.instead}` the same command ran and worked "
                 f"({item.substitute.session_id} line {where}). ")
    gist += ("No later call of the batch ran it directly and worked. Found by the offline rules engine from the "
             "shells' not-found errors and failed lookups.")
    evidence: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()

    def add(sid: str, quote: str | None) -> None:
        if quote and len(quote.strip()) >= MIN_QUOTE_CHARS and (sid, quote) not in seen and len(evidence) < 6:
            seen.add((sid, quote))
            evidence.append({"sessionId": sid, "quote": quote[:MAX_QUOTE_CHARS]})

    for sid, items in item.sightings.items():
        add(sid, items[0].quote)
    if item.substitute is not None and item.substitute.command:
        add(item.substitute.session_id, item.substitute.command)
    for sid, items in item.sightings.items():
        first = items[0]
        if not first.lookup and first.run.command:
            add(sid, first.run.command)
    # A fact of the machine these projects ran on: said of them, so that a later night links evidence of
    # the same projects to it, never another machine's (corpus.about)
    if all(names.get(s) for s in sessions):
        claim = f"In {projects}, {claim}"
    return {
        "kind": "error_pattern",
        "claim": clip(claim, MAX_CLAIM_CHARS),
        "gist": clip(gist, MAX_GIST_CHARS),
        "entities": [{"type": "tool", "name": name[:120]}, {"type": "error", "name": ERROR_CLASS}],  # what it is about
        "evidence": evidence,
    }
