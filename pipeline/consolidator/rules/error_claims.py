"""What a recurring error says is true, as a claim a reviewer acts on.

A pattern with no workaround used to be claimed as "<error> recurs in failed `<program>`", which
restates the error and leaves the reader to work out what it means. For a few error classes that
state a fact about the machine or the folder, the fact can be read off the failed calls themselves
and said plainly, with nothing added that the transcript does not show:

* `not a git repository`: the folders the calls ran in are not git repositories;
* `sudo: a password is required` / `no tty present and no askpass program`: `sudo` wants a password
  the agent cannot type, and the commands named failed under it;
* `Operation not permitted` (the failing program speaking): those commands are not permitted where
  the agent runs;
* `command timed out`: those commands ran into the tool call's time limit;
* `ModuleNotFoundError: No module named 'x'`: the modules named are not installed for the Python
  that ran.

A folder that was not a repository and became one later in the batch (a `git` call worked there) is
no finding at all (`outdated`): the memory would be out of date the day it is written.

Every part of such a claim is in the evidence or the calls (a folder is the call's own `workdir`, else
its session's folder; modules are named by the quoted error lines). Other errors keep the plain form.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol

from pipeline.consolidator.rules.tool_runs import ToolResult

__all__ = ["Failing", "Stated", "outdated", "statement"]


class Failing(Protocol):
    """What a claim is built from (an `error_shapes.PatternFinding`)."""

    head: str
    shape: str
    occurrences: dict[str, list[tuple[int, str]]]
    runs: dict[str, list[ToolResult]]


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


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


def _not_a_repository(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None]) -> str | None:
    folders = _folders(finding, cwds)
    if not folders or len(folders) > 3:
        return None
    # sibling folders are named under their common parent: `Test_Mons` and `HunHuan` in C:\…\UGCProjects
    parents = {re.split(r"[\\/](?=[^\\/]*$)", f)[0] for f in folders}
    if len(folders) > 1 and len(parents) == 1 and all(f != next(iter(parents)) for f in folders):
        parent = next(iter(parents))
        shown = _and([f"`{f[len(parent) + 1:]}`" for f in folders]) + f" in {parent}"
    else:
        shown = _and([f"`{f}`" for f in folders])
    verb = "is not a git repository" if len(folders) == 1 else "are not git repositories"
    return f"{shown} {verb}: {commands} failed there for want of one ({where})"


_NOT_A_REPOSITORY = re.compile(r"not a git repository", re.IGNORECASE)


def outdated(finding: Failing, later: Sequence[ToolResult], cwds: Mapping[str, str | None] | None = None) -> bool:
    """Has what the error says stopped being true by the end of the batch? A folder that was not a git
    repository is one once a later `git` call worked in it or in a folder above it (the repository was
    made or cloned meanwhile): a memory of it would be out of date the day it is written."""
    if not _NOT_A_REPOSITORY.search(f"{finding.head}\n{finding.shape}"):
        return False
    known = cwds or {}
    failing = {f for runs in finding.runs.values() for r in runs if (f := _folder_of(r, known))}
    if not failing:
        return False
    worked = {f for r in later if r.program.lower() == "git" and not r.is_error and r.exit_code in (None, 0)
              and r.has_result and (f := _folder_of(r, known))}
    return all(any(f == w or f.startswith(w + "/") or f.startswith(w + "\\") for w in worked) for f in failing)


def _sudo_password(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None]) -> str | None:
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
    return (f"`sudo` asks for a password here that the agent cannot type: {_and(list(under)[:3])} failed under it "
            f"({where})")


def _not_permitted(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None]) -> str | None:
    return f"{commands} {'are' if ' and ' in commands else 'is'} not permitted where the agent runs ({where})"


def _timed_out(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None]) -> str | None:
    return f"{commands} ran into the tool call's time limit here ({where})"


_MODULE = re.compile(r"No module named '([\w.]+)'")


def _no_module(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None]) -> str | None:
    modules = sorted({m for occ in finding.occurrences.values() for _, quote in occ for m in _MODULE.findall(quote)})
    if not modules or len(modules) > 4:
        return None
    them = _and([f"`{m}`" for m in modules])
    verb = "is" if len(modules) == 1 else "are"
    return f"The Python module{'s' if len(modules) > 1 else ''} {them} {verb} not installed for the Python that ran {commands} ({where})"


Builder = Callable[[Failing, str, str, Mapping[str, str | None]], "str | None"]
_CLASSES: tuple[tuple[re.Pattern[str], Builder], ...] = (
    (re.compile(r"not a git repository", re.IGNORECASE), _not_a_repository),
    (re.compile(r"a password is required|no tty present and no askpass", re.IGNORECASE), _sudo_password),
    (re.compile(r"Operation not permitted", re.IGNORECASE), _not_permitted),
    (re.compile(r"\bcommand timed out\b", re.IGNORECASE), _timed_out),
    (re.compile(r"ModuleNotFoundError|No module named", re.IGNORECASE), _no_module),
)


class Stated(NamedTuple):
    claim: str
    of_folders: bool  # about the project's own folders: a claim of that project only (corpus.about)


def statement(finding: Failing, commands: str, where: str, cwds: Mapping[str, str | None] | None = None) -> Stated | None:
    """The plain claim for the finding's error class (module docstring), or None when it has none.
    `commands` names the failed commands as a claim does ("`ip link` and `lsblk`"); `where` says how it
    recurred ("across sessions")."""
    text = f"{finding.head}\n{finding.shape}"
    for pattern, build in _CLASSES:
        if pattern.search(text):
            claim = build(finding, commands, where, cwds or {})
            return Stated(claim, build is _not_a_repository) if claim is not None else None
    return None
