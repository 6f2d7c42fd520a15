"""Procedures and constraints that show in how commands are run: the rules engine's `procedural` candidates.

The rules read the shell commands of the batch's tool calls (subagent replays removed; parsed by
`pipeline.consolidator.rules.shell_commands`) and report three kinds of routine, per project (the batch's
sessions grouped by their project slug):

* **an environment setting carried by many commands**: the same `VAR=value` prefix
  (`PYTHONPATH=. pytest -q`) or `export VAR=value` step on commands of two or more sessions, or on
  three or more commands of one session that did not go on to set it otherwise (tries replaced by
  a later value are the agent searching). A workaround that became routine looks like this. Settings
  that only make output plain (`GIT_PAGER=cat`, `NO_COLOR=1`, `TERM=dumb`, …) are habits, not facts,
  and the harness's own variables (`CLAUDE_PROJECT_DIR=…` set by hand while testing a hook) are
  the harness emulated, not a setting of the project.
* **a pinned program path**: a program called by its absolute path (`/usr/bin/snmpwalk`,
  `~/Library/Python/3.9/bin/yt-dlp`) in two or more sessions, or three or more times in one. Shells
  (`/bin/bash script.sh`) are not pinned tools. The memory says the bare name is not on PATH only
  when the batch shows it: a run of the bare name that failed as not found ("command not found", "is
  not recognized"). Otherwise it says only that the program is called by its path: a claim that the
  bare name fails, when it was never tried, is one the memory's own evidence does not back.
* **a script of the project's own**: a program run by its path inside the project (`./iree_tuner.py …`,
  `qemu-validate/rebuild_single.sh x.c`, `python tools/gen.py …`), whatever its arguments, that worked
  in two or more sessions or `SCRIPT_RUNS` times in one: how work is done there;
* **the project's routine commands**:
  - a check (tests, type checker, linter, build: `shell_commands.is_checker`) run the same way
    (same program, subcommand and flags) in most of the project's sessions (more than half, at
    least two), or at least `SOLO_CHECKS` times in a project's only session. A package manager's
    `run` names its script (`npm run lint`, not `npm run`): runs of different scripts are different
    checks, and "the routine check is `npm run`" tells a reader nothing;
  - any other step that names something specific (a path-like operand, or an assignment) run
    verbatim in most of the project's sessions, at least `STEP_SESSIONS` (`cat _bmad/bmm/config.yaml`
    at the start of every session, `rm -rf .pytest_cache` before the tests). A step does something:
    commands that only look at things (`shell_commands.INSPECTION`: `cat`, `ls`, `sed -n`, `rg`,
    `git status`, …) are never steps, whatever file they name. Reading `package.json` or `AGENTS.md`
    in most sessions is how an agent finds its way around, and "most sessions run `cat` on
    package.json" was the noise a reviewer of the real sessions had to read most often.

Settings that always come together on the same commands are one routine (`GOCACHE=$(pwd)/.gobuild-cache
GOPROXY=off`), and a value built on the working folder (`$(pwd)/…`, `$PWD/…`) is a steady one. One
command feeds at most one routine (an environment prefix absorbs the check it prefixes), and a
routine is reported only when one of its runs is new to the batch (at or after `new_from_line`).
Evidence is the commands themselves, one per session first; a single-session routine adds the
summary line a check printed (`57 passed in 3.2s`) so that its quotes are distinct passages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from pipeline.consolidator.contract import MAX_CLAIM_CHARS, MAX_GIST_CHARS, MAX_QUOTE_CHARS, MIN_QUOTE_CHARS
from pipeline.consolidator.rules import shell_commands as sh
from pipeline.consolidator.rules.tool_runs import ToolResult
from pipeline.consolidator.rules.wording import clip

__all__ = ["SOLO_CHECKS", "STEP_SESSIONS", "Routine", "find_routines", "project_name", "routine_candidate"]

# How often a check must run in a project's only session to be its routine.
SOLO_CHECKS = 4
# How often a prefix or pinned path must appear in one session to count without a second session.
SOLO_REPEATS = 3
# In how many sessions (and more than half of the project's) a plain step must recur.
STEP_SESSIONS = 3
# How often a project's own script must run, and work, in one session to count without a second session.
SCRIPT_RUNS = 3
_INTERPRETERS = frozenset({"python", "python3", "bash", "sh", "zsh", "node", "ruby", "perl", "pwsh", "powershell", "tsx", "deno"})
_SCRIPT_FILE = re.compile(r"\.(?:py|sh|js|mjs|ts|rb|pl|ps1|bash)$")
_ABSOLUTE = re.compile(r"^(?:/|~/|[A-Za-z]:[\\/])")
_PATHISH = re.compile(r"[\\/]|\.[A-Za-z0-9]{1,6}$|^\.[\w-]|^~")
_SUMMARY = re.compile(r"\d+ (?:passed|failed|errors?|tests?|warnings?|problems?)\b|\bok\b|\bOK\b", re.IGNORECASE)


@dataclass
class Routine:
    kind: str  # "env", "path", "check", "script", "step"
    key: str  # the assignment, the path, the check's key or the step's text
    project: str | None
    runs: dict[str, list[tuple[ToolResult, str]]] = field(default_factory=dict)  # session → [(run, quoted text)]
    bare_name_failed: bool = False  # for a pinned path: the bare name failed as not found in the batch

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.runs.values())


# Folder names too common to name a project alone: "In dl, …" could be any of several checkouts.
_GENERIC_FOLDERS = frozenset({
    "app", "apps", "bin", "build", "code", "dev", "dist", "dl", "docs", "lib", "out", "packages", "project",
    "projects", "repo", "repos", "scratch", "server", "site", "src", "test", "tests", "tmp", "web", "work",
})
_HOMES = frozenset({"users", "home"})


def project_name(slug: str | None, cwd: str | None = None) -> str:
    """A readable project name: the last folder of the working directory, else the slug.

    A short or generic last folder takes its parents with it (`SNMP_PLAN_E/buildroot/dl`), and a home
    folder reads as one (`~liza`), so that two checkouts do not share a name in the corpus."""
    if cwd:
        path = PureWindowsPath(cwd) if re.match(r"^[A-Za-z]:[\\/]", cwd) or "\\" in cwd else PurePosixPath(cwd)
        parts = [p for p in path.parts[1:] if p]  # without the root or drive
        if parts and len(parts) == 2 and parts[0].lower() in _HOMES:
            return f"~{parts[1]}"
        if parts:
            name = parts[-1]
            if len(name) < 4 or name.lower() in _GENERIC_FOLDERS:
                name = "/".join(parts[-3:])
            return name
    return slug or "unknown project"


def _segments(run: ToolResult) -> list[sh.Segment]:
    return [s for s in run.parsed.segments if s.words or s.env] if run.parsed else []


def _exports(seg: sh.Segment) -> list[str]:
    if seg.program.lower() == "export" and len(seg.words) > 1:
        return [w for w in seg.words[1:] if "=" in w and not w.startswith("-")]
    return []


# Settings agents add to any command to get plain, non-interactive output: habits, not project facts.
_HYGIENE = frozenset({
    "PAGER", "GIT_PAGER", "MANPAGER", "SYSTEMD_PAGER", "LESS", "TERM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR",
    "CLICOLOR_FORCE", "COLUMNS", "LINES", "PYTHONUNBUFFERED", "GIT_TERMINAL_PROMPT", "DEBIAN_FRONTEND", "CI",
})
# Shells called by their path are how a script is run, not a pinned tool.
_SHELL_PROGRAMS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish", "env"})


# The harness's own variables (Claude Code sets CLAUDE_PROJECT_DIR for its hooks): a command that sets
# one by hand is emulating the harness, testing a hook, not carrying a setting of the project.
_HARNESS_VARS = re.compile(r"^(?:CLAUDE|CODEX|ANTHROPIC|OPENAI)_")


# A script's own variable, not an environment setting: PowerShell's `$params = @{…}` and `$args`, a value
# that is another variable or a hash table, a name that is not an environment variable's.
_SCRIPT_VALUE = re.compile(r"^(?:@[{(]|[{}(])|^\$[A-Za-z_]\w*$|[{}]$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# The working folder, however written: a value built on it (`GOCACHE=$(pwd)/.gobuild-cache`) is the
# same setting in every run, though the shell computes it.
_HERE = re.compile(r"\$\(pwd\)|\$\{?PWD\}?")


def _steady(value: str) -> bool:
    """An assignment worth remembering: a literal value, not a computed one, a one-off variable, an
    output setting (`GIT_PAGER=cat`, `NO_COLOR=1`), one of the harness's own variables or a script's
    own variable (`params=@{}`, `arguments=$args`)."""
    name, _, val = value.partition("=")
    return (bool(name) and _ENV_NAME.match(name) is not None and name not in _HYGIENE and not _HARNESS_VARS.match(name)
            and "$(" not in _HERE.sub("", val) and "`" not in val and len(value) <= 120
            and not _SCRIPT_VALUE.search(val.strip("'\""))
            and "[REDACTED" not in val)  # a masked secret is not a setting to remember


# Package managers whose `run` (or `exec`) takes the script to run as its next word.
_SCRIPT_RUNNERS = frozenset({"npm", "yarn", "pnpm", "bun"})
_NOT_FOUND = re.compile(r"command not found|not found: |is not recognized as|No such file or directory", re.IGNORECASE)


def _check_key(main: sh.Segment) -> str:
    """A check's key (`Segment.key`), with the script a package manager's `run`/`exec` runs."""
    key = main.key()
    words = main.words
    if (sh.program_name(main.program_word).lower() in _SCRIPT_RUNNERS and len(words) > 2
            and words[1] in ("run", "run-script", "exec") and not words[2].startswith("-")):
        key = f"{key} {words[2]}"
    return key


def _bare_name_failures(runs: Sequence[ToolResult]) -> set[str]:
    """Programs called by their bare name that failed as not found somewhere in the batch."""
    out: set[str] = set()
    for run in runs:
        if not (run.is_error or run.exit_code not in (None, 0)) or not _NOT_FOUND.search(run.text or ""):
            continue
        for seg in _segments(run):
            if seg.words and not _ABSOLUTE.match(seg.program_word) and seg.program_word in run.text:
                out.add(seg.program_word)
    return out


# PowerShell read with a POSIX tokenizer: a statement that starts with a variable (`$x = …`,
# `$ErrorActionPreference='Stop'`) or a cmdlet (`Get-Content`, `ConvertTo-Json`).
_POWERSHELL_WORD = re.compile(r"^(?:\$[A-Za-z_]|[A-Z][a-z]+-[A-Z][A-Za-z]+$)")


def _powershell(run: ToolResult) -> bool:
    """Is the run's command a PowerShell script? Its words are not shell assignments and programs."""
    name = (run.name or "").lower()
    if "powershell" in name or name in ("pwsh",):
        return True
    return any(seg.words and _POWERSHELL_WORD.match(seg.program_word) for seg in _segments(run))


def find_routines(
    runs: Iterable[ToolResult],
    session_order: Sequence[str],
    slugs: Mapping[str, str | None],
    new_from_line: Mapping[str, int] | None = None,
    roots: Mapping[str, str] | None = None,
) -> list[Routine]:
    """The routines of the batch's runs (see the module docstring), in a stable order. `roots` maps
    a subagent's session to its parent's: a subagent file is part of its parent's session."""
    new_from = new_from_line or {}
    root = roots or {}
    rank = {sid: i for i, sid in enumerate(session_order)}
    runs = list(runs)
    bare_failed = _bare_name_failures(runs)
    ordered = sorted((r for r in runs if r.command), key=lambda r: (rank.get(r.session_id, 1 << 30), r.session_id, r.call_line or r.line_no))
    sessions_of: dict[str | None, set[str]] = {}
    for sid in session_order:
        sessions_of.setdefault(slugs.get(sid), set()).add(root.get(sid, sid))
    found: dict[tuple[str, str, str | None], Routine] = {}

    def note(kind: str, key: str, run: ToolResult, quote: str) -> None:
        project = slugs.get(run.session_id)
        routine = found.setdefault((kind, key, project), Routine(kind, key, project))
        routine.runs.setdefault(run.session_id, []).append((run, quote))

    for run in ordered:
        powershell = _powershell(run)
        for seg in _segments(run):
            # a prefix (`VAR=x cmd`) or an export; a bare `VAR=x` line only sets a script variable; and a
            # PowerShell script's `key=value` (a hash table's entries) read as shell words sets nothing
            prefixes = seg.env if seg.words and seg.program.lower() != "export" and not powershell else []
            for value in [*prefixes, *_exports(seg)]:
                if _steady(value):
                    note("env", value, run, run.command or seg.text)
            if seg.words and _ABSOLUTE.match(seg.program_word) and seg.program and seg.program not in _SHELL_PROGRAMS:
                note("path", seg.program_word, run, seg.text if len(seg.text) >= 16 else (run.command or seg.text))
        main = run.parsed.main if run.parsed else None
        if main is None:
            continue
        script = _own_script(main)
        if script is not None and not run.is_error and run.exit_code in (None, 0) and not sh.is_inspection(main):
            note("script", script, run, run.command or main.text)
        elif sh.is_checker(main):
            note("check", _check_key(main), run, main.text)
        elif not sh.is_inspection(main):
            specific = main.env or any(_PATHISH.search(o) for o in main.operands)
            if specific and main.program.lower() not in ("cd", "set-location", "echo", "sleep", "git"):
                note("step", " ".join(main.text.split()), run, run.command or main.text)
    out: list[Routine] = []
    for (kind, _, project), routine in found.items():
        in_project = sessions_of.get(project, set())
        spread = len({root.get(sid, sid) for sid in routine.runs})
        most = max(len(v) for v in routine.runs.values())
        if kind == "env":
            # in one session, a setting the session went on to replace (`GOCACHE=$(pwd)/.cache`, then
            # `GOCACHE=$(pwd)/.gobuild-cache` on every later command) was the agent searching
            keep = spread >= 2 or (most >= SOLO_REPEATS and not _replaced(routine, ordered))
        elif kind == "path":
            keep = spread >= 2 or most >= SOLO_REPEATS
        elif kind == "script":
            keep = spread >= 2 or most >= SCRIPT_RUNS
        elif kind == "check":
            keep = (spread >= 2 and spread * 2 > len(in_project)) or (len(in_project) == 1 and most >= SOLO_CHECKS)
        else:
            keep = spread >= STEP_SESSIONS and spread * 2 > len(in_project)
        fresh = any(r.line_no >= new_from.get(sid, 1) for sid, items in routine.runs.items() for r, _ in items)
        if keep and fresh:
            routine.bare_name_failed = kind == "path" and sh.program_name(routine.key) in bare_failed
            out.append(routine)
    return _one_routine_per_command(out, rank)


def _replaced(routine: Routine, ordered: Sequence[ToolResult]) -> bool:
    """Did a later command of the routine's session set one of its variables to another value?"""
    [(sid, items)] = routine.runs.items() if len(routine.runs) == 1 else [(None, [])]
    if sid is None:
        return False
    mine = dict(a.partition("=")[::2] for a in routine.key.split(" ") if "=" in a)
    last = max(r.call_line or r.line_no for r, _ in items)
    for run in ordered:
        if run.session_id != sid or (run.call_line or run.line_no) <= last or run.parsed is None:
            continue
        for seg in run.parsed.segments:
            for a in seg.env:
                name, _, value = a.partition("=")
                if name in mine and value != mine[name]:
                    return True
    return False


def _one_routine_per_command(routines: list[Routine], rank: Mapping[str, int]) -> list[Routine]:
    """A command feeds one routine: env prefixes first, then pinned paths, checks, steps."""
    order = {"env": 0, "path": 1, "check": 2, "script": 3, "step": 4}
    routines.sort(key=lambda r: (order[r.kind], -len(r.runs), -r.count, r.key))
    used: set[tuple[str, int]] = set()
    kept: list[Routine] = []
    settings: list[tuple[Routine, set[tuple[str, int]]]] = []
    for routine in routines:
        calls = {(r.session_id, r.line_no) for items in routine.runs.values() for r, _ in items}
        together = next((k for k, kc in settings if routine.kind == "env" and kc == calls), None)
        if together is not None:
            # settings every one of these commands carries together are one routine
            # (`GOCACHE=$(pwd)/.gobuild-cache GOPROXY=off go test ./...`): one memory names them all
            together.key = f"{together.key} {routine.key}"
            continue
        if len(calls & used) * 2 > len(calls):
            continue
        if routine.kind == "env":
            settings.append((routine, calls))
        used |= calls
        kept.append(routine)
    return sorted(kept, key=lambda r: (order[r.kind], -len(r.runs), -r.count, r.key))


def _own_script(main: sh.Segment) -> str | None:
    """The project's own script a command runs, by its path inside the project (`./iree_tuner.py …`,
    `qemu-validate/rebuild_single.sh x.c`, `python tools/gen.py`), or None: a program on PATH, an
    absolute path (a pinned tool) or an inline script is not one."""
    words = main.words
    if not words:
        return None
    first = main.program_word
    if "/" in first and not _ABSOLUTE.match(first) and (first.startswith("./") or _SCRIPT_FILE.search(first)):
        return first.removeprefix("./")
    if sh.program_name(first).lower() in _INTERPRETERS:
        target = next((w for w in words[1:] if not w.startswith("-")), None)
        if target and _SCRIPT_FILE.search(target) and not _ABSOLUTE.match(target) and "\n" not in target:
            return target.removeprefix("./")
    return None



def _summary_line(run: ToolResult) -> str | None:
    lines = [ln.strip() for ln in run.body.split("\n") if ln.strip()]
    for line in reversed(lines[-3:]):
        if _SUMMARY.search(line) and MIN_QUOTE_CHARS <= len(line) <= 200:
            return line
    return None


def _evidence(routine: Routine) -> list[dict[str, str]]:
    items: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()

    def add(sid: str, quote: str | None) -> None:
        quote = quote[:MAX_QUOTE_CHARS] if quote else None
        if quote and MIN_QUOTE_CHARS <= len(quote.strip()) and (sid, quote) not in seen and len(items) < 5:
            seen.add((sid, quote))
            items.append({"sessionId": sid, "quote": quote})

    for sid, items_ in list(routine.runs.items())[:4]:
        add(sid, items_[0][1])
    if len(routine.runs) == 1:
        sid, items_ = next(iter(routine.runs.items()))
        for _, quote in items_[1:]:
            add(sid, quote)
            if len(items) >= 3:
                break
        for run, _ in reversed(items_):
            summary = _summary_line(run)
            if summary:
                add(sid, summary)
                break
    return items


def routine_candidate(routine: Routine, names: Mapping[str | None, str]) -> dict[str, Any]:
    """The routine as a candidate; `names` gives each session's project name (by session id, or by
    slug): the wording names the projects of the sessions the routine cites, and only those."""
    own = sorted({names.get(sid) or names.get(routine.project) or routine.project or "this project" for sid in routine.runs})
    project = ", ".join(own) if own else (names.get(routine.project) or routine.project or "this project")
    sessions = list(routine.runs)
    programs = sorted({r.program for items in routine.runs.values() for r, _ in items if r.program and r.program not in sh.SYNTAX})
    example = sorted({" ".join(q.split()) for items in routine.runs.values() for _, q in items}, key=len)
    spread = f"{routine.count} command(s) in {len(sessions)} session(s)"
    if routine.kind == "env":
        what = ", ".join(f"`{p}`" for p in programs[:3]) or "its commands"
        claim = f"In {project}, {what} run with {routine.key} set"
        entity = {"type": "setting", "name": routine.key.split("=", 1)[0]}
        gist = (f"The assignment {routine.key} was carried by {spread} of {project}, "
                "a setting the commands there need rather than a one-off.")
    elif routine.kind == "path":
        name = sh.program_name(routine.key)
        claim = f"In {project}, `{name}` is called by its full path {routine.key}"
        entity = {"type": "command", "name": name}
        if routine.bare_name_failed:
            gist = (f"{spread} of {project} called `{name}` by the absolute path {routine.key}: the bare name "
                    "failed as not found in these sessions, so on that machine it is not on PATH.")
        else:
            # The bare name was never seen failing: why the path is used is not something the commands show.
            gist = (f"{spread} of {project} called `{name}` by the absolute path {routine.key} rather than by "
                    "its bare name.")
    elif routine.kind == "script":
        claim = f"In {project}, work is done by running the project's own script `{routine.key}`"
        entity = {"type": "command", "name": routine.key.rsplit("/", 1)[-1]}
        gist = (f"The project's script {routine.key} ran and worked {spread} of {project}, with the arguments "
                "each task needed: it is how this work is done there, rather than by hand.")
    elif routine.kind == "check":
        claim = f"{project}'s routine check is `{routine.key}`"
        entity = {"type": "command", "name": routine.key.split(" ")[0] if " " in routine.key else routine.key}
        gist = (f"The same check ({routine.key}: program, subcommand and flags) ran {spread} of {project}; "
                "it is how work there is verified.")
    else:
        step = sh.parse(routine.key).main
        program = step.program if step is not None and step.program else (programs[0] if programs else "a command")
        on = ", ".join(step.operands[:2]) if step is not None else ""
        claim = f"In {project}, most sessions run `{program}`" + (f" on {clip(on, 90)}" if on else "")
        entity = {"type": "command", "name": program}
        gist = (f"The step was run verbatim in {len(sessions)} of the project's sessions ({routine.count} time(s) in all), "
                "so it belongs to how work in this project starts or is done.")
    lines = "; ".join(
        f"{sid} line{'s' if len(items) > 1 else ''} {', '.join(str(r.call_line or r.line_no) for r, _ in items[:6])}"
        f"{' …' if len(items) > 6 else ''}"
        for sid, items in routine.runs.items()
    )
    gist += f" Where: {lines}. Found by the offline rules engine from the commands alone."
    if example:
        gist += f" Shortest form: {clip(example[0], 60)}."
    return {
        "kind": "procedural",
        "claim": clip(claim + ".", MAX_CLAIM_CHARS),
        "gist": clip(gist, MAX_GIST_CHARS),
        "entities": [entity],
        "evidence": _evidence(routine),
    }
