"""What a recurring error says is true, as a claim a reviewer acts on.

A pattern with no workaround used to be claimed as "<error> recurs in failed `<program>`", which
restates the error and leaves the reader to work out what it means. For a few error classes that
state a fact about the machine or the folder, the fact can be read off the failed calls themselves
and said plainly, with nothing added that the transcript does not show:

* `not a git repository`: the folders the calls ran in are not git repositories;
* `sudo: a password is required` / `no tty present and no askpass program`: `sudo` wants a password
  the agent cannot type, and the commands named failed under it;
* `Operation not permitted` (the failing program speaking): those commands are not permitted where
  the agent runs, or, when a later call of the same program asked the sandbox for escalated
  permissions and worked, not permitted in the agent's sandbox;
* `command timed out`: those commands ran into the tool call's time limit;
* `ModuleNotFoundError: No module named 'x'`: the modules named are not installed for the Python
  that ran;
* an error naming a file under Git for Windows' own folder (`C:/…/Programs/Git/x`): Git Bash rewrote a
  path argument that looked like a POSIX path; paths are to start with `./`;
* `zsh: no matches found: <word>`: the word holds characters zsh reads as a file pattern (a route
  folder `(admin)`, `[id]`, an output template `%(title)s`), so it must be quoted; a later call that
  worked with the word quoted is named.

A folder that was not a repository and became one later in the batch (a `git` call worked there), or
modules that a later call installed, are no finding at all (`outdated`): the memory would be out of
date the day it is written.

Every part of such a claim is in the evidence or the calls (a folder is the call's own `workdir`, else
its session's folder; modules are named by the quoted error lines). Other errors keep the plain form.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from pipeline.consolidator.rules.tool_runs import ToolResult
from pipeline.consolidator.rules.wording import clip, listed

__all__ = ["Failing", "outdated", "statement"]


class Failing(Protocol):
    """What a claim is built from (an `error_shapes.PatternFinding`)."""

    head: str
    shape: str
    occurrences: dict[str, list[tuple[int, str]]]
    runs: dict[str, list[ToolResult]]


def _folders(finding: Failing, cwds: Mapping[str, str | None]) -> list[str]:
    seen: dict[str, None] = {}
    for runs in finding.runs.values():
        for run in runs:
            if (folder := _folder_of(run, cwds)) is not None:
                seen.setdefault(folder, None)
    return list(seen)


def _folder_of(run: ToolResult, cwds: Mapping[str, str | None]) -> str | None:
    folder = run.input_field("workdir") or run.input_field("cwd") or cwds.get(run.session_id)
    return folder.rstrip("/\\") or folder if isinstance(folder, str) and folder.strip() else None


def _not_a_repository(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None],
                      later: Sequence[ToolResult] = ()) -> str | None:
    folders = _folders(finding, cwds)
    if not folders or len(folders) > 3:
        return None
    # sibling folders are named under their common parent: `Test_Mons` and `HunHuan` in C:\…\UGCProjects
    parents = {re.split(r"[\\/](?=[^\\/]*$)", f)[0] for f in folders}
    if len(folders) > 1 and len(parents) == 1 and all(f != next(iter(parents)) for f in folders):
        parent = next(iter(parents))
        shown = listed([f"`{f[len(parent) + 1:]}`" for f in folders]) + f" in {parent}"
    else:
        shown = listed([f"`{f}`" for f in folders])
    verb = "is not a git repository" if len(folders) == 1 else "are not git repositories"
    return f"{shown} {verb}: {commands} failed there for want of one ({where})"


_NOT_A_REPOSITORY = re.compile(r"not a git repository", re.IGNORECASE)


def outdated(finding: Failing, later_runs: Callable[[], Sequence[ToolResult]],
             cwds: Mapping[str, str | None] | None = None) -> bool:
    """Has what the error says stopped being true by the end of the batch? A folder that was not a git
    repository is one once a later `git` call worked in it or in a folder above it (the repository was
    made or cloned meanwhile); missing Python modules are there once a later install of each worked
    (`pip install python-docx` for `docx`): a memory of it would be out of date the day it is written."""
    text = f"{finding.head}\n{finding.shape}"
    if not (_NO_MODULE.search(text) or _NOT_A_REPOSITORY.search(text)):
        return False  # the batch's later runs are gathered only for the two classes that can go out of date
    later = later_runs()
    if _NO_MODULE.search(text):
        # every module it named was installed by a later call that worked
        modules = _modules(finding)
        return bool(modules) and all(_installed_later(m, later) for m in modules)
    known = cwds or {}
    failing = {f for runs in finding.runs.values() for r in runs if (f := _folder_of(r, known))}
    if not failing:
        return False
    worked = {f for r in later if r.program.lower() == "git" and r.worked and (f := _folder_of(r, known))}
    return all(any(f == w or f.startswith(w + "/") or f.startswith(w + "\\") for w in worked) for f in failing)


def _sudo_password(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None],
                   later: Sequence[ToolResult] = ()) -> str | None:
    # what ran under sudo, not what else the command line ran first (`lsblk && sudo parted …`)
    under: dict[str, None] = {}
    for runs in finding.runs.values():
        for run in runs:
            for seg in run.parsed.segments if run.parsed else ():
                if seg.text.lstrip().startswith("sudo ") and seg.words:
                    sub = seg.words[1] if len(seg.words) > 1 and re.fullmatch(r"[a-z][\w-]*", seg.words[1]) else ""
                    under.setdefault(f"`{seg.program} {sub}`" if sub else f"`{seg.program}`", None)
    if not under:
        return None
    return (f"`sudo` asks for a password that the agent cannot type: {listed(list(under)[:3])} failed under it "
            f"({where})")


def _not_permitted(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None],
                   later: Sequence[ToolResult] = ()) -> str | None:
    verb = "are" if " and " in commands else "is"
    # Codex's sandbox refuses what the machine allows: a later call of the same program that asked for
    # escalated permissions and worked says where the refusal came from, and the way round it
    programs = {r.program.lower() for runs in finding.runs.values() for r in runs if r.program}
    for run in later:
        # the program may run inside a shell the call starts (`bash -lc 'ip addr && ip route'`)
        runs_it = run.programs & programs or any(
            re.search(rf"(?:^|[\s;&|'\"(]){re.escape(p)}(?:\s|$)", run.command or "") for p in programs)
        if run.escalated and run.worked and runs_it:
            return (f"{commands} {verb} not permitted in the agent's sandbox, and worked with escalated permissions "
                    f"({run.session_id} line {run.call_line or run.line_no}) ({where})")
    return f"{commands} {verb} not permitted where the agent runs ({where})"


def _timed_out(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None],
               later: Sequence[ToolResult] = ()) -> str | None:
    return f"{commands} ran into the tool call's time limit ({where})"


_MODULE = re.compile(r"No module named '([\w.]+)'")


def _modules(finding: Failing) -> list[str]:
    return sorted({m for occ in finding.occurrences.values() for _, quote in occ for m in _MODULE.findall(quote)})


def _no_module(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None],
               later: Sequence[ToolResult] = ()) -> str | None:
    modules = [m for m in _modules(finding) if not _installed_later(m, later)]
    if not modules or len(modules) > 4:
        return None
    them = listed([f"`{m}`" for m in modules])
    verb = "is" if len(modules) == 1 else "are"
    # the Python that ran: the commands that run one (`identify` in the same call is ImageMagick)
    pythons = list(dict.fromkeys(f"`{seg.text.split()[0]}`" for runs in finding.runs.values() for r in runs
                                 for seg in (r.parsed.segments if r.parsed else ()) if seg.words
                                 and _PYTHON.fullmatch(seg.words[0].rsplit("/", 1)[-1])))
    ran = f"for the Python that ran {listed(pythons[:3])}" if pythons else "where these commands ran"
    return f"the Python module{'s' if len(modules) > 1 else ''} {them} {verb} not installed {ran} ({where})"


_PYTHON = re.compile(r"python(?:\d(?:\.\d+)?)?|py")
# A module's package when its name differs (what `pip install` is given)
_PACKAGE_OF = {"pil": "pillow", "yaml": "pyyaml", "cv2": "opencv", "sklearn": "scikit-learn", "bs4": "beautifulsoup4",
               "docx": "python-docx", "dateutil": "python-dateutil", "dotenv": "python-dotenv"}
_INSTALL = re.compile(r"\b(?:pip3?|uv pip|uv|poetry|pipx|conda|mamba) (?:install|add)\b", re.IGNORECASE)


def _installed_later(module: str, later: Sequence[ToolResult]) -> bool:
    top = module.split(".")[0].lower()
    names = {top, _PACKAGE_OF.get(top, top)}
    for run in later:
        command = (run.command or "").lower()
        if not run.worked or not _INSTALL.search(command):
            continue
        if any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", command) for n in names):
            return True
    return False


# zsh's own words for a pattern that matched no file; the word it could not expand follows the colon
_NO_MATCH_WORD = re.compile(r"no matches found: (\S+)")
_GLOB_PAIRS = (("(", ")"), ("[", "]"))


def _no_glob_match(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None],
                   later: Sequence[ToolResult] = ()) -> str | None:
    """zsh reads ( ), [ ], *, ? and ^ in an unquoted word as a file pattern and refuses to run the
    command when no file matches it: a route folder such as `src/app/(admin)/page.tsx`, an output
    template such as `%(title)s`. The remedy is in the error itself (quote the word); that a later call
    worked with the word quoted is said as well (its line is in the evidence and the gist)."""
    words = list(dict.fromkeys(w.rstrip(".,;") for occ in finding.occurrences.values() for _, quote in occ
                               for w in _NO_MATCH_WORD.findall(quote)))
    if not words:
        return None
    marks = [f"`{a}` `{b}`" for a, b in _GLOB_PAIRS if any(a in w and b in w for w in words)]
    marks += [f"`{c}`" for c in "*?^" if any(c in w for w in words)]
    if not marks:
        return None
    shown = listed([f"`{clip(w, 60)}`" for w in words[:2]])
    programs = {r.program for runs in finding.runs.values() for r in runs if r.program}
    quoted = [run for run in later if run.program in programs and run.worked and any(re.search(rf"""["'][^"'\s]*{re.escape(w)}""", run.command or "") for w in words)]
    after = "; quoted, the same command worked" if quoted else ""
    return (f"quote words that hold {listed(marks)} in shell commands: `zsh` reads them as a file pattern and "
            f"refuses the command when no file matches, as with {shown} ({where}){after}")


# Git for Windows' own folder inside a path an error names: its shell (MSYS) rewrote an argument that
# looked like a POSIX path into one under that folder before git saw it.
_GIT_FOLDER = re.compile(r"(?<![\w/])([A-Za-z]:/(?:[^'\"\s:]*/)?(?:Programs/Git|Program Files(?: \(x86\))?/Git)/)")


def _msys_rewrote(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None],
                  later: Sequence[ToolResult] = ()) -> str | None:
    """Git Bash (MSYS) turns an argument that looks like an absolute POSIX path (`/x`, or `!/x` through
    its leading part) into a Windows path under Git's own install folder, so the program looks for a file
    that is not there (`pathspec '!C:/…/Programs/Git/!README.md' did not match any files`). The way
    round is a path that does not start with `/`: `./!/README.md`. A later call that worked with such a
    `./` path is said as well."""
    folders = list(dict.fromkeys(m for occ in finding.occurrences.values() for _, quote in occ
                                 for m in _GIT_FOLDER.findall(quote)))
    if not folders:
        return None
    programs = {r.program.lower() for runs in finding.runs.values() for r in runs if r.program}
    fixed = [run for run in later if run.program.lower() in programs and run.worked and re.search(r"""(?:^|[\s'"=])\./""", run.command or "")]
    after = "; with `./` in front, the same command worked" if fixed else ""
    return (f"Git Bash rewrote path arguments into paths under Git's own folder (`{clip(folders[0], 70)}`), so {commands} "
            f"found no such files ({where}): start such paths with `./`{after}")


Builder = Callable[[Failing, str, str, Mapping[str, str | None], Sequence[ToolResult]], "str | None"]
_NO_MODULE = re.compile(r"ModuleNotFoundError|No module named", re.IGNORECASE)
_CLASSES: tuple[tuple[re.Pattern[str], Builder], ...] = (
    (re.compile(r"not a git repository", re.IGNORECASE), _not_a_repository),
    (re.compile(r"a password is required|no tty present and no askpass", re.IGNORECASE), _sudo_password),
    (re.compile(r"Operation not permitted", re.IGNORECASE), _not_permitted),
    (re.compile(r"\bcommand timed out\b", re.IGNORECASE), _timed_out),
    (_NO_MODULE, _no_module),
    (re.compile(r"no matches found: \S"), _no_glob_match),
)


def statement(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None] | None = None,
              later: Sequence[ToolResult] = ()) -> str | None:
    """The plain claim for the finding's error class (module docstring), or None when it has none.
    `commands` names the failed commands as a claim does ("`ip link` and `lsblk`"); `where` says how it
    recurred ("across sessions"); `later` are the calls of its sessions after its failures."""
    text = f"{finding.head}\n{finding.shape}"
    for pattern, build in _CLASSES:
        if pattern.search(text):
            return build(finding, commands, where, cwds or {}, later)
    # a path the shell rewrote shows only in the quoted lines (the shape sets paths aside)
    return _msys_rewrote(finding, commands, where, cwds or {}, later)
