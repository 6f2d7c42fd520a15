"""What a memory is about, so that dedupe and links follow the thing, not the wording.

A finding is about its kind, the programs it names (`npm`, `python`: its `tool:`/`command:`
entities, or, without one, the first word of each `code span` in its claim), the error classes it names
(`error:` entities), the settings a routine needs (`setting:` entities) and the projects of its
sessions. Two claims that read alike are still two memories when these disagree: "command not found
in `pnpm`" is not the same memory as "command not found in `python`", and a routine of one repository
is not a routine of another. Two claims worded differently are one memory when they agree on all of
it (the same error class in the same program, or the same program run with the same setting).

A claim is about a repository when it says so ("In checkout-api, …", the rules engine's routines) or
names no program at all: its evidence may come only from that repository's sessions. A claim about a
program (an error class in `git`, say) may gather evidence across projects: they share the tool.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_CODE = re.compile(r"`([^`\n]+)`")
_IN_PROJECT = re.compile(r"^In [^,]{1,80},")
_PROGRAM_TYPES = ("tool", "command", "program", "cli", "binary")


def _program(span: str) -> str | None:
    """The program a code span names: its first word, without a path or a version ("./node_modules/.bin/jest"
    is jest), or None for a span that is a setting, a path or a value."""
    word = span.strip().split()[0] if span.strip() else ""
    if not word or "=" in word or word.startswith(("$", "-", "<", "{", "[")):
        return None
    name = word.rstrip(",;:").rsplit("/", 1)[-1].rsplit("\\", 1)[-1].lower()
    name = re.sub(r"(?:\.exe|@[\w.^~-]+)$", "", name)
    return name if re.fullmatch(r"[a-z0-9][\w.+-]{0,40}", name) else None


@dataclass(frozen=True)
class About:
    kind: str
    programs: frozenset[str]
    errors: frozenset[str]
    settings: frozenset[str]
    projects: frozenset[str]
    in_project: bool  # about a repository, not a tool: evidence only from its own projects

    def describe(self) -> str:
        parts = [self.kind]
        if self.programs:
            parts.append("programs " + ", ".join(sorted(self.programs)))
        if self.errors:
            parts.append("errors " + ", ".join(sorted(self.errors)))
        if self.settings:
            parts.append("settings " + ", ".join(sorted(self.settings)))
        if self.projects:
            parts.append(("in " if self.in_project else "seen in ") + ", ".join(sorted(self.projects)))
        return "; ".join(parts)


def about(kind: str, claim: str, entities: Iterable[str], projects: Iterable[str | None]) -> About:
    typed = [e.split(":", 1) for e in entities if ":" in e]
    # A program entity says what the finding is about; only without one do the claim's code spans (which
    # may also name what worked instead) stand for it.
    programs = {n.lower() for t, n in typed if t.lower() in _PROGRAM_TYPES and n}
    if not programs:
        programs = {p for span in _CODE.findall(claim) if (p := _program(span))}
    errors = {n.strip().lower() for t, n in typed if t.lower() == "error" and n.strip() and n.lower() != "unknown"}
    settings = {n.strip() for t, n in typed if t.lower() == "setting" and n.strip()}
    return About(kind=kind, programs=frozenset(programs), errors=frozenset(errors), settings=frozenset(settings),
                 projects=frozenset(p for p in projects if p), in_project=bool(_IN_PROJECT.match(claim)) or not programs)


def compatible(a: About, b: About) -> bool:
    """May these be one memory (if their claims say the same)? Never across kinds, programs, error
    classes or settings that differ, nor across projects for a claim about a repository."""
    if a.kind != b.kind:
        return False
    if a.programs and b.programs and a.programs != b.programs:
        return False
    if a.errors and b.errors and not a.errors & b.errors:
        return False
    if a.settings and b.settings and a.settings != b.settings:
        return False
    return not ((a.in_project or b.in_project) and a.projects and b.projects and not a.projects & b.projects)


def same_thing(a: About, b: About) -> bool:
    """One memory however worded: the same error class in the same programs, or the same programs run
    with the same settings, and compatible otherwise."""
    if not compatible(a, b) or not a.programs or a.programs != b.programs:
        return False
    return bool((a.errors and a.errors == b.errors) or (a.settings and a.settings == b.settings))
