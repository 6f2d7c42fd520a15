"""One nightly run per warehouse.

The lock is a `pipeline.warehouse.lock.HolderLock` on `<warehouse>.nightly.lock`, held for the whole
run: the kernel releases it when the holder dies, however it dies, so a lock that can be taken is by
definition stale. The file also says who holds it (pid, command, start time, run id) and which
process groups the run started for its batches; a run that takes over a stale lock first ends
those groups if they are still alive. A second night does not wait: it stops at once (exit 1),
naming the run that holds the lock.

This lock is not the warehouse's write lock (`<warehouse>.write.lock`, `pipeline.warehouse.db`):
the driver takes that one only while it writes the warehouse, so that other writing commands (an
`ingest`, a task confirmed by hand) can run while the night's batches do.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import LockedError
from pipeline.warehouse.lock import HolderLock


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".nightly.lock")


class NightlyLock:
    def __init__(self, db: Path, run_id: str):
        self.path = lock_path(db)
        self.run_id = run_id
        self._lock = HolderLock(self.path)
        self.groups: list[int] = []
        self.previous: dict[str, Any] | None = None

    def acquire(self) -> None:
        if not self._lock.try_acquire(runId=self.run_id, batchGroups=self.groups):
            holder = self._lock.holder()
            who = (f"process {holder.get('pid')} ({holder.get('command')}, run {holder.get('runId')}, "
                   f"started {holder.get('startedAt')} on {holder.get('host')})") if holder else "another process"
            raise LockedError(
                f"another nightly run holds {self.path}: {who}. Wait for it to finish; if that process "
                "is hung, stop it (kill PID) and run this again: the lock is released when it exits."
            )
        self.previous = self._lock.previous
        if self.previous:
            end_groups(self.previous.get("batchGroups", []), self.previous.get("runId"))

    def add_group(self, pgid: int) -> None:
        self.groups.append(pgid)
        self._lock.write(batchGroups=self.groups)

    def remove_group(self, pgid: int) -> None:
        if pgid in self.groups:
            self.groups.remove(pgid)
            self._lock.write(batchGroups=self.groups)

    def release(self) -> None:
        self._lock.release()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _group_belongs_to(pgid: int, run_id: str | None) -> bool:
    """Only end a group whose leader still looks like one of our batch processes (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{pgid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        environ = Path(f"/proc/{pgid}/environ").read_bytes()
    except OSError:
        return False
    return "papermill" in cmdline and (run_id is None or f"PIPELINE_RUN_ID={run_id}".encode() in environ)


def end_groups(groups: list[int], run_id: str | None) -> list[int]:
    ended = []
    for pgid in groups:
        if _group_alive(pgid) and _group_belongs_to(pgid, run_id):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            ended.append(pgid)
    for _ in range(50):
        if not any(_group_alive(g) for g in ended):
            break
        time.sleep(0.05)
    return ended


@contextlib.contextmanager
def nightly_lock(db: Path, run_id: str) -> Iterator[NightlyLock]:
    lock = NightlyLock(db, run_id)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()
