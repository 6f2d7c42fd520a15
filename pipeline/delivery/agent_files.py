"""The memories an agent loads at the start of every session: a section of AGENTS.md (Codex and the
agents that read it), or a file CLAUDE.md imports with `@path` (Claude Code).

The section sits between two fixed marker lines; everything else in the file is left byte for byte,
and the same corpus gives the same bytes, so a second export changes nothing. Reviewed (`kept`)
memories only, unless `include_new`. Every byte of the section counts against `max_bytes` (agents pay
for each one in every session): over it, the least recently kept memories drop out and the section
says how many. Claims are masked, then escaped so that no character of theirs is read as Markdown.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pipeline.console import shown
from pipeline.corpus.git_corpus import Corpus
from pipeline.delivery.memory_reads import Memory, in_project, memories_at_head, session_projects
from pipeline.errors import UsageError
from pipeline.secrets.redact import redacted
from pipeline.show import markdown
from pipeline.warehouse import db as warehouse

BEGIN = "<!-- trace-pipeline memories: begin (written by `pipeline memories export`; edits here are replaced) -->"
END = "<!-- trace-pipeline memories: end -->"
DEFAULT_MAX_BYTES = 8192
Format = Literal["agents-md", "claude-md"]
FORMATS: tuple[Format, ...] = ("agents-md", "claude-md")

KIND_TITLES = {
    "procedural": "How work is done here", "error_pattern": "Errors that recur", "semantic": "Facts",
    "agent_insight": "What helps agents", "precedent": "Decisions made before", "episodic": "Events",
}


@dataclass(frozen=True)
class Export:
    section: str  # the marker lines and what is between them, newline-terminated
    shown: int
    left_out: int
    path: Path | None = None
    changed: bool = False


def select(memories: Sequence[Memory], *, include_new: bool) -> list[Memory]:
    """The memories an export may show, most recently kept first (new ones, when asked for, by when
    they landed)."""
    chosen = [m for m in memories if m.doc.status == "kept" or include_new]
    return sorted(chosen, key=lambda m: (m.recency, m.doc.id), reverse=True)


def render(memories: Sequence[Memory], *, fmt: Format, project: str | None, include_new: bool,
           left_out: int, max_bytes: int) -> str:
    level = "#" if fmt == "claude-md" else "##"
    scope = f" of project {markdown.code(redacted(project))}" if project else ""
    what = "reviewed or new" if include_new else "reviewed"
    lines = [BEGIN, f"{level} Memories from past agent sessions{scope}", "",
             f"What {what} memories of earlier sessions say, one line each, ending with the memory's id: the "
             "`get_memory` tool of `pipeline mcp` shows the transcript lines behind it.", ""]
    if not memories:
        lines += ["No memory has been kept yet (`pipeline memories keep ID`).", ""]
    for kind in KIND_TITLES:
        group = [m for m in memories if m.doc.kind == kind]
        if not group:
            continue
        lines += [f"{level}# {KIND_TITLES[kind]}", ""]
        for m in sorted(group, key=lambda m: m.doc.id):
            mark = " (new, not yet reviewed)" if m.doc.status != "kept" else ""
            # control, bidi and zero-width characters as visible escapes, as on a terminal
            lines.append(f"- {markdown.inline(shown(redacted(m.doc.claim)))}{mark} `{m.doc.id}`")
        lines.append("")
    if left_out:
        lines += [f"{left_out} more memor{'y' if left_out == 1 else 'ies'} left out (the least recently kept) to "
                  f"keep this section under {max_bytes} bytes.", ""]
    lines.append(END)
    return "\n".join(lines) + "\n"


def build(memories: Sequence[Memory], *, fmt: Format, project: str | None, include_new: bool,
          max_bytes: int) -> Export:
    """The longest prefix of `memories` (most recent first) whose section fits in `max_bytes`."""
    n = len(memories)
    while True:
        section = render(memories[:n], fmt=fmt, project=project, include_new=include_new,
                         left_out=len(memories) - n, max_bytes=max_bytes)
        if len(section.encode("utf-8")) <= max_bytes or n == 0:
            break
        n -= 1
    if len(section.encode("utf-8")) > max_bytes:
        raise UsageError(f"--max-bytes {max_bytes} cannot hold even the section's heading "
                         f"({len(section.encode('utf-8'))} bytes); give at least that")
    return Export(section, n, len(memories) - n)


def splice(existing: str, section: str, path: Path) -> str:
    """`existing` with its marked section replaced by `section` (appended after a blank line when it
    has none); every other byte stays as it was."""
    begins = _marker_lines(existing, BEGIN)
    ends = _marker_lines(existing, END)
    if not begins and not ends:
        if not existing:
            return section
        sep = "" if existing.endswith("\n\n") else ("\n" if existing.endswith("\n") else "\n\n")
        return existing + sep + section
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        where = ", ".join(f"line {existing.count(chr(10), 0, at) + 1}" for at in sorted(begins + ends))
        raise UsageError(f"{path}: expected one begin marker, then one end marker of the memories section; found "
                         f"{len(begins)} begin and {len(ends)} end ({where}). Mend the file by hand (keep one pair "
                         "or none), then export again; nothing was written")
    start = begins[0]
    stop = ends[0] + len(END)
    if existing[stop:stop + 2] == "\r\n":
        stop += 2
    elif existing[stop:stop + 1] == "\n":
        stop += 1
    return existing[:start] + section + existing[stop:]


def _marker_lines(text: str, marker: str) -> list[int]:
    """Offsets of the lines that are exactly `marker` (a marker quoted inside a line is text)."""
    out, at = [], text.find(marker)
    while at >= 0:
        before_ok = at == 0 or text[at - 1] == "\n"
        after = text[at + len(marker):at + len(marker) + 2]
        if before_ok and (after in ("", "\n", "\r\n") or after.startswith("\n")):
            out.append(at)
        at = text.find(marker, at + 1)
    return out


def export(*, fmt: Format, db: str | Path | None, corpus: str | Path | None, project: str | None = None,
           out: str | Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES, include_new: bool = False) -> Export:
    """The section for `fmt`; written into `out` when given (and only there), atomically."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    if max_bytes < 1:
        raise UsageError(f"--max-bytes must be positive; got {max_bytes}")
    from pipeline import config

    repo = Corpus(config.corpus_path(corpus))
    if not (repo.git_dir / "HEAD").exists():
        raise UsageError(f"no corpus at {repo.root}: run a night (or `pipeline apply`) first")
    mems = memories_at_head(repo)
    if project is not None:
        with warehouse.reading(db) as con:
            where = session_projects(con, (s for m in mems for s in m.doc.sessions))
        mems = [m for m in mems if in_project(m, project, where)]
    result = build(select(mems, include_new=include_new), fmt=fmt, project=project, include_new=include_new,
                   max_bytes=max_bytes)
    if out is None:
        return result
    path = Path(out)
    if path.is_dir():
        raise UsageError(f"--out {path} is a folder; name the file (e.g. {path / 'AGENTS.md'})")
    try:
        raw = path.read_bytes() if path.exists() else b""
        existing = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}); nothing was written") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    new = splice(existing, result.section, path)
    if new == existing:
        return Export(result.section, result.shown, result.left_out, path, changed=False)
    _write_atomically(path.resolve() if path.is_symlink() else path, new)  # through a link, to its file
    return Export(result.section, result.shown, result.left_out, path, changed=True)


def _write_atomically(path: Path, text: str) -> None:
    """Write beside the file, then rename over it: a kill leaves the old file or the new one, never half."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"--out {path}: the folder {parent} does not exist")
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
