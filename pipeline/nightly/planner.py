"""Plan the night: pending sessions grouped by the home they ran under into bounded batches.

A batch is bounded by its number of sessions and by the bytes the model may have to look at (new
bytes since the watermark), so that it fits the model's context budget: the tools cap every result,
and these caps keep the number of results a batch needs in proportion. Plans are deterministic: the
same pending sessions give the same batches with the same ids.

Sessions are grouped by **home** (`/home/ana`, `/Users/liza`, `C:\\Users\\namma`; for a folder outside
any home, its first two folders), and within a home taken in the order they started, so a batch holds
what one machine went through over the same days. One project per batch left most batches with one
session (51 batches for 116 real sessions), and what a machine does to every project (`python` missing,
the sandbox refusing netlink, a folder that is not a repository) was then split across batches that
each saw it once. The rules still count a routine per project and name each memory's projects.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

MAX_SESSIONS = 8
MAX_BYTES = 8 * 1024 * 1024


class PlannedBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    batch_id: str
    slug: str | None  # the project of every session, or None when the batch holds several
    session_ids: list[str]
    new_bytes: int
    home: str | None = None


_HOME = re.compile(r"^(?:/home/[^/]+|/Users/[^/]+|/root|[A-Za-z]:[\\/]Users[\\/][^\\/]+)", re.IGNORECASE)


# A drive, if any, then the first two folders.
_OUTSIDE = re.compile(r"^(?:[A-Za-z]:)?[\\/]*[^\\/]+(?:[\\/]+[^\\/]+)?")


def home_of(cwd: str | None) -> str | None:
    """The home folder a session ran under, or for a folder outside every home its first two folders
    (`/local/nick`, `C:\\WeGameApps\\rail_apps`); None when the session's folder is unknown."""
    if not cwd:
        return None
    found = _HOME.match(cwd)
    if found:
        return found.group(0)
    outside = _OUTSIDE.match(cwd)
    return outside.group(0) if outside else cwd


def batch_id_for(session_ids: Sequence[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(session_ids)).encode()).hexdigest()
    return f"b-{digest[:12]}"


def plan(entries: Sequence[dict[str, Any]], watermark_bytes: dict[str, int] | None = None, *,
         max_sessions: int = MAX_SESSIONS, max_bytes: int = MAX_BYTES) -> list[PlannedBatch]:
    """`entries` are list_sessions entries of pending sessions; a session is never split across batches."""
    if max_sessions < 1 or max_bytes < 1:
        raise ValueError("batch bounds must be positive")
    watermark_bytes = watermark_bytes or {}
    # A session that does not know its folder (a subagent's file, some Codex rollouts) goes where the
    # other sessions of its project went; one whose project knows no folder either, with its project.
    homes_of_slug: dict[str, str] = {}
    for e in sorted(entries, key=lambda e: (e["firstAt"] or "", e["sessionId"])):
        if (home := home_of(e.get("cwd"))) is not None:
            homes_of_slug.setdefault(e["slug"] or "", home)
    by_home: dict[str, list[dict[str, Any]]] = {}
    for e in sorted(entries, key=lambda e: (e["slug"] or "", e["firstAt"] or "", e["sessionId"])):
        key = home_of(e.get("cwd")) or homes_of_slug.get(e["slug"] or "")
        by_home.setdefault(f"home:{key}" if key else f"slug:{e['slug'] or ''}", []).append(e)
    batches: list[PlannedBatch] = []

    def close(items: list[dict[str, Any]], size: int, key: str) -> None:
        slugs = {e["slug"] for e in items}
        batches.append(PlannedBatch(
            batch_id=batch_id_for([e["sessionId"] for e in items]), slug=next(iter(slugs)) if len(slugs) == 1 else None,
            session_ids=[e["sessionId"] for e in items], new_bytes=size,
            home=key.removeprefix("home:") if key.startswith("home:") else None))

    for key, items in sorted(by_home.items()):
        items = sorted(items, key=lambda e: (e["firstAt"] or "", e["sessionId"]))
        current: list[dict[str, Any]] = []
        size = 0
        for e in items:
            new = max(0, e["sizeBytes"] - watermark_bytes.get(e["sessionId"], 0))
            if current and (len(current) >= max_sessions or size + new > max_bytes):
                close(current, size, key)
                current, size = [], 0
            current.append(e)
            size += new
        if current:
            close(current, size, key)
    return batches
