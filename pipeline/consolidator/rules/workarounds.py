"""What worked after a failure: the workaround an error pattern's gist reports.

After the last failure of a pattern in a session, the rules look at that session's next runs (at
most `LOOK_AHEAD` of them) for the first one that worked (outcome `ok`) and did something rather
than look at something (`shell_commands.is_inspection`: `ls`, `cat`, `git status`, `Read`, … are
never workarounds). It is the workaround when it is one of:

* the **same program on the same target with something added**: the failed command's program
  (with its subcommand, for tools such as `npm` or `git`) again, on the same files or operands, with
  flags, flag values or environment assignments the failed run did not have (`yt-dlp …
  --extractor-args …`; a flag whose value is a path names another target, not a setting), or, for a
  patch, other operations on the same file (`Delete File` + `Add File` after an `Update File` that
  did not apply);
* a **different program on the same target**: a command that names the failed run's file or operand
  (`node -e "require('fs').rmSync('node_modules/x', …)"` after `rm -rf node_modules/x` failed);
* the **same program again** (weaker): the same tool or program succeeding with other arguments.

The first two are *strong*: they show how the failure was got around. The third only says that
the work went on. `added` lists the flags and assignments the working command added.

"What worked next" must name the part that fixed it. An addition that an earlier failing run of
the same pattern already had did not fix anything (`git add -u` failed, then `git add -u './!/x'`
worked: the path prefix fixed it, not `-u`); `error_shapes` drops such additions, and a workaround
left with none is only the same program again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.consolidator.rules import shell_commands as sh
from pipeline.consolidator.rules.tool_runs import Outcome, ToolResult

__all__ = ["LOOK_AHEAD", "Workaround", "find_workaround", "settings"]

LOOK_AHEAD = 12


@dataclass(frozen=True)
class Workaround:
    run: ToolResult
    after: ToolResult  # the failure it follows
    strong: bool
    how: str  # "added", "other operations", "same target", "same program"
    added: list[str] = field(default_factory=list)


_NEUTRAL = frozenset({"cd", "pushd", "popd", "set-location", "export", "set", "source", "."})


def _is_inspection(run: ToolResult) -> bool:
    """Only looks at things (moving to a folder or setting a variable on the way does not count)."""
    if run.parsed is not None and run.parsed.segments:
        doing = [s for s in run.parsed.segments if s.words and s.program.lower() not in _NEUTRAL]
        return all(sh.is_inspection(s) for s in doing)
    return (run.name or "") in sh.INSPECTION


def _operands(run: ToolResult) -> set[str]:
    """Path-like operands (with a `/`, a `\\` or a dot) of the failed run, and its target."""
    found: set[str] = set()
    if run.target:
        found.add(run.target)
    if run.parsed is not None:
        for seg in run.parsed.segments:
            for word in seg.operands:
                if len(word) >= 4 and any(c in word for c in "/\\.") and not word.startswith(("http://", "https://")):
                    found.add(word)
    return found


def _patch_ops(run: ToolResult) -> set[str]:
    patch = sh.patch_text(run.tool_input)
    return {op for op, _ in sh.patch_targets(patch)} if patch else set()


def _identity(run: ToolResult) -> str:
    """The program and, for tools made of subcommands (`npm test`, `git add`), the subcommand."""
    main = run.parsed.main if run.parsed else None
    if main is None or not main.words:
        return run.program
    sub = main.words[1] if len(main.words) > 1 and re.fullmatch(r"[a-z][a-z0-9:_-]*", main.words[1]) else ""
    return f"{run.program} {sub}" if sub and run.program.lower() in _SUBCOMMANDS else run.program


_SUBCOMMANDS = frozenset({
    "git", "npm", "yarn", "pnpm", "bun", "cargo", "go", "docker", "kubectl", "uv", "pip", "pip3", "poetry", "brew",
    "apt", "apt-get", "gh", "make", "dotnet", "gradle", "mvn", "conda", "helm", "terraform", "systemctl",
})
_PATH_VALUE = re.compile(r"[\\/]|\.[A-Za-z0-9]{1,6}$|^\.|^~")


def _units(seg: sh.Segment) -> list[str]:
    """A segment's assignments and flags, each flag with the value that follows it (a value that is
    a path is an operand, not part of the setting)."""
    out = list(seg.env)
    words = seg.words
    for i, word in enumerate(words[1:], start=1):
        if word.startswith("-") and len(word) > 1 and word != "--":
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if "=" not in word and nxt and not nxt.startswith("-") and not _PATH_VALUE.search(nxt):
                out.append(f"{word} {nxt}")
            else:
                out.append(word)
    return out


def settings(run: ToolResult) -> set[str]:
    """The flags (with their values) and assignments of a run's main segment."""
    main = run.parsed.main if run.parsed else None
    return set(_units(main)) if main is not None else set()


def _extras(run: ToolResult, failed: ToolResult) -> list[str]:
    """Flags (with their values) and assignments of `run`'s main segment that `failed`'s lacks."""
    a = run.parsed.main if run.parsed else None
    b = failed.parsed.main if failed.parsed else None
    if a is None or b is None:
        return []
    before = set(_units(b))
    return [x for x in _units(a) if x not in before]


def find_workaround(failed: ToolResult, later: Sequence[tuple[ToolResult, Outcome]]) -> Workaround | None:
    """The first later run that worked around `failed` (see the module docstring), or None."""
    operands = _operands(failed)
    weak: Workaround | None = None
    for run, (state, _) in later[:LOOK_AHEAD]:
        if state != "ok" or not run.has_result or _is_inspection(run):
            continue
        same_program = bool(run.program) and _identity(run) == _identity(failed)
        theirs = _operands(run)
        same_target = (not operands and not theirs) or (
            bool(operands) and ((run.target is not None and run.target in operands) or bool(operands & theirs))
        )
        if same_program and same_target:
            added = _extras(run, failed)
            # flags a command only looks with (`git remote -v` after a failed `git remote set-url … && git
            # push`) are no fix, whatever else the run did
            looks = run.parsed is not None and run.parsed.main is not None and sh.is_inspection(run.parsed.main)
            if added and not looks:
                return Workaround(run, failed, True, "added", added)
            if failed.program == "apply_patch" and _patch_ops(run) - _patch_ops(failed):
                return Workaround(run, failed, True, "other operations")
        if not same_program and operands and run.command is not None and any(o in run.command for o in operands):
            return Workaround(run, failed, True, "same target")
        if same_program and weak is None:
            weak = Workaround(run, failed, False, "same program")
    return weak
