"""Recurring error shapes in failed tool calls: the rules engine's `error_pattern` candidates.

The error line of each failed tool call (a Claude Code tool_result with is_error, a Codex
function_call_output with a non-zero exit code) is reduced to a shape: numbers, paths, ids, hosts
and ports, and quoted values are set aside. A shape seen in at least two sessions becomes a
candidate whose evidence is the error line, verbatim, from each session; one session failing the
same way many times is not a pattern across sessions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.consolidator.contract import MAX_CLAIM_CHARS, MAX_GIST_CHARS, MAX_QUOTE_CHARS

__all__ = [
    "MAX_PATTERN_EVIDENCE",
    "PatternFinding",
    "ToolResult",
    "error_head",
    "error_lines",
    "error_shape",
    "find_error_patterns",
    "pattern_candidate",
]

# One quote per session, from at most this many sessions: enough to show the spread.
MAX_PATTERN_EVIDENCE = 4


@dataclass(frozen=True)
class ToolResult:
    """The decoded text of one failed tool call."""

    session_id: str
    line_no: int
    text: str


# "Name: message" where Name is an exception class (dotted or not), a module's errors namespace, or
# one of the bare words tools print before a message (Error, error[E0425], fatal, panic, Failed).
_ERROR_NAME = (
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Failure|Exit|Interrupt)"
    r"|errors?\.[A-Za-z_]\w*|Error|ERROR|error|Fatal|FATAL|fatal|Failed|FAILED|panic)"
)
_ERROR_LINE = re.compile(rf"(?<![\w.\-/])(?P<sig>(?P<name>{_ERROR_NAME})(?:\[[\w-]+\])?: +\S.*)")
_ERRNO = re.compile(r"\bE[A-Z]{3,}\b")

# Normalising: the parts that differ between two occurrences of the same failure. Order matters:
# quoted values first (they may hold paths and numbers), numbers last.
_NORMALISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|«[^»\n]*»|“[^”\n]*”"), "<value>"),
    (re.compile(r"\b[a-z][a-z0-9+.\-]*://\S+"), "<url>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b|\blocalhost\b|\[[0-9a-fA-F:]+\]"), "<host>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/]?[\w.~\-]+)?(?:[\\/][\w.~\-]+)+[\\/]?"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b"), "<id>"),
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>"),
    (re.compile(r"\s+"), " "),
)


def error_lines(text: str) -> list[str]:
    """The error lines of a tool output, each cut to the part that starts at the error's name.

    Every returned string is a substring of `text` (so it can be quoted verbatim), at most
    MAX_QUOTE_CHARS long, without surrounding whitespace.
    """
    out: list[str] = []
    for line in text.split("\n"):
        match = _ERROR_LINE.search(line)
        if match:
            sig = match.group("sig")[:MAX_QUOTE_CHARS].strip()
            if sig:
                out.append(sig)
    return out


def error_shape(line: str) -> str:
    """The line with the parts that vary between occurrences replaced by placeholders."""
    shape = line
    for pattern, placeholder in _NORMALISE:
        shape = pattern.sub(placeholder, shape)
    return shape.strip()


def error_head(line: str) -> str:
    """A short name for the failure: the exception class, or the errno an `Error:` line names."""
    match = _ERROR_LINE.search(line)
    name = match.group("name") if match else line.split(":", 1)[0]
    if name.lower() in {"error", "fatal", "failed", "panic"}:
        errno = _ERRNO.search(line)
        if errno:
            return errno.group(0)
    return name


@dataclass
class PatternFinding:
    """One error shape seen in failed tool calls of at least two sessions."""

    shape: str
    head: str
    # session id → [(line number, verbatim error line)], in the order seen
    occurrences: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.occurrences.values())


def find_error_patterns(
    results: Iterable[ToolResult], session_order: Sequence[str], new_from_line: Mapping[str, int] | None = None
) -> list[PatternFinding]:
    """Error shapes recurring across sessions.

    Every distinct error shape of a failed call counts (one pytest run can fail in two unrelated
    ways). Two shapes that occur in exactly the same calls are one failure told twice (a chained
    traceback, say): only the one printed last, the exception finally raised, is kept. A shape is
    reported only when something of it is new to the batch, a line at or after its session's
    `new_from_line`, so a session that grew does not re-report what an earlier night reported.
    """
    new_from = new_from_line or {}
    by_shape: dict[str, PatternFinding] = {}
    calls: dict[str, set[tuple[str, int]]] = {}
    last_seen: dict[str, int] = {}
    for result in results:
        seen_here: set[str] = set()
        for position, line in enumerate(error_lines(result.text)):
            shape = error_shape(line)
            last_seen[shape] = max(last_seen.get(shape, -1), position)
            if shape in seen_here:
                continue
            seen_here.add(shape)
            finding = by_shape.setdefault(shape, PatternFinding(shape=shape, head=error_head(line)))
            finding.occurrences.setdefault(result.session_id, []).append((result.line_no, line))
            calls.setdefault(shape, set()).add((result.session_id, result.line_no))
    rank = {sid: i for i, sid in enumerate(session_order)}
    found = []
    for shape, finding in by_shape.items():
        if len(finding.occurrences) < 2:
            continue
        twins = [s for s in by_shape if s != shape and calls[s] == calls[shape]]
        if any((last_seen[t], t) > (last_seen[shape], shape) for t in twins):
            continue
        fresh = any(
            line_no >= new_from.get(sid, 1) for sid, occ in finding.occurrences.items() for line_no, _ in occ
        )
        if fresh:
            finding.occurrences = dict(sorted(finding.occurrences.items(), key=lambda kv: rank.get(kv[0], 1 << 30)))
            found.append(finding)
    # Widest spread first, then the shape itself: a stable order for a stable answer.
    return sorted(found, key=lambda f: (-len(f.occurrences), -f.count, f.shape))


_PLACEHOLDER = re.compile(r"<(?:value|url|id|host|path|n)>")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def pattern_candidate(finding: PatternFinding, slugs: Mapping[str, str | None]) -> dict[str, Any]:
    sessions = list(finding.occurrences)
    projects = sorted({slugs.get(s) or "unknown project" for s in sessions})
    quotes = {q for occ in finding.occurrences.values() for _, q in occ}
    # The shape is shown only when it differs from every quote: memory text never repeats a quote.
    show_shape = finding.shape not in quotes and bool(_PLACEHOLDER.search(finding.shape))
    # The error's name leads, so the memory's file name (a slug of the claim) says what it is about.
    # No count in the claim: later nights link more sessions to the same memory, and a count would go stale.
    claim = f"{finding.head} recurs in failed tool calls across sessions"
    if show_shape:
        claim += f", as {_clip(finding.shape, 160)}"
    claim = _clip(claim + ".", MAX_CLAIM_CHARS)
    places = "; ".join(
        f"{sid} line{'s' if len(occ) > 1 else ''} {', '.join(str(n) for n, _ in occ)}"
        for sid, occ in finding.occurrences.items()
    )
    # Counted as of this batch: later nights link more sessions in the front matter, not here.
    gist = (
        f"When first recorded, the same failure (numbers, paths, ids, hosts and quoted values set aside) "
        f"appeared {finding.count} times in {len(sessions)} sessions of {len(projects)} project(s) "
        f"({', '.join(projects)}): {places}. Found by the offline rules engine from the last error line "
        f"of each failed tool call; it says nothing about the cause beyond what the error text states."
    )
    evidence = [
        {"sessionId": sid, "quote": occ[0][1]}
        for sid, occ in list(finding.occurrences.items())[:MAX_PATTERN_EVIDENCE]
    ]
    return {
        "kind": "error_pattern",
        "claim": claim,
        "gist": _clip(gist, MAX_GIST_CHARS),
        "entities": [{"type": "error", "name": finding.head}],
        "evidence": evidence,
    }
