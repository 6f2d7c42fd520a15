"""What the night is doing while its batches run, kept in the run folder, not the warehouse.

While batch processes are alive the driver does not write the warehouse (it does not even hold the
write lock: an `ingest` or a task confirmed by hand may run meanwhile). What it knows about its
batches goes to `<run>/progress.json`, rewritten whole (write, then rename) at each change, so a
person or a script can always read a complete document:

    {"runId": …, "updatedAt": …, "batches": [{"batch", "sessions", "status", "pid", "startedAt",
     "finishedAt", "seconds", "reason"}]}

`status` is `planned`, `running`, `finished` (its notebook ended; landing decides the rest) or
`failed`. Once the batches are done the driver takes the write lock again and records all of it in
the warehouse (`batches`), where the landing step gives each batch its final status.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

FILE = "progress.json"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class Progress:
    """The batches of one run and where each one is, written to `<run_dir>/progress.json`."""

    def __init__(self, run_dir: Path, run_id: str, batches: list[tuple[str, int]]) -> None:
        self.path = run_dir / FILE
        self.run_id = run_id
        self.batches: dict[str, dict[str, Any]] = {
            batch_id: {"batch": batch_id, "sessions": sessions, "status": "planned", "pid": None,
                       "startedAt": None, "finishedAt": None, "seconds": None, "reason": None}
            for batch_id, sessions in batches
        }

    def update(self, batch_id: str, **changes: Any) -> None:
        self.batches[batch_id].update(changes)
        self.write()

    def started(self, batch_id: str, pid: int) -> None:
        self.update(batch_id, status="running", pid=pid, startedAt=self.batches[batch_id]["startedAt"] or _now())

    def ended(self, batch_id: str, *, failed: bool, seconds: float, reason: str | None) -> None:
        self.update(batch_id, status="failed" if failed else "finished", pid=None, finishedAt=_now(),
                    seconds=seconds, reason=reason)

    def write(self) -> None:
        doc = {"runId": self.run_id, "updatedAt": _now(), "batches": list(self.batches.values())}
        tmp = self.path.with_name(f".{FILE}.tmp")
        tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)


def read(run_dir: Path) -> dict[str, Any] | None:
    """The progress document of a run, or None when it has none (yet)."""
    try:
        data = json.loads((run_dir / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
