"""Plan the night: pending sessions grouped by project into bounded batches.

A batch is bounded by its number of sessions and by the bytes the model may have to look at (new
bytes since the watermark), so that it fits the model's context budget: the tools cap every result,
and these caps keep the number of results a batch needs in proportion. Plans are deterministic: the
same pending sessions give the same batches with the same ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

MAX_SESSIONS = 8
MAX_BYTES = 8 * 1024 * 1024


class PlannedBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    batch_id: str
    slug: str | None
    session_ids: list[str]
    new_bytes: int


def batch_id_for(session_ids: Sequence[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(session_ids)).encode()).hexdigest()
    return f"b-{digest[:12]}"


def plan(entries: Sequence[dict[str, Any]], watermark_bytes: dict[str, int] | None = None, *,
         max_sessions: int = MAX_SESSIONS, max_bytes: int = MAX_BYTES) -> list[PlannedBatch]:
    """`entries` are list_sessions entries of pending sessions; a session is never split across batches."""
    if max_sessions < 1 or max_bytes < 1:
        raise ValueError("batch bounds must be positive")
    watermark_bytes = watermark_bytes or {}
    by_project: dict[str, list[dict[str, Any]]] = {}
    for e in sorted(entries, key=lambda e: (e["slug"] or "", e["firstAt"] or "", e["sessionId"])):
        by_project.setdefault(e["slug"] or "", []).append(e)
    batches: list[PlannedBatch] = []
    for slug, items in sorted(by_project.items()):
        current: list[str] = []
        size = 0
        for e in items:
            new = max(0, e["sizeBytes"] - watermark_bytes.get(e["sessionId"], 0))
            if current and (len(current) >= max_sessions or size + new > max_bytes):
                batches.append(PlannedBatch(batch_id=batch_id_for(current), slug=slug or None, session_ids=current, new_bytes=size))
                current, size = [], 0
            current.append(e["sessionId"])
            size += new
        if current:
            batches.append(PlannedBatch(batch_id=batch_id_for(current), slug=slug or None, session_ids=current, new_bytes=size))
    return batches
