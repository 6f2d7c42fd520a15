"""One nightly run per warehouse.

The lock is an flock on `<warehouse>.nightly.lock`, held for the whole run: the kernel releases it
when the holder dies, however it dies, so a lock that can be taken is by definition stale. The file
also says who holds it (pid, command, start time) and which process groups the run started for its
batches; a run that takes over a stale lock first ends those groups if they are still alive.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import LockedError


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".nightly.lock")


class NightlyLock:
    def __init__(self, db: Path, run_id: str):
        self.path = lock_path(db)
        self.run_id = run_id
        self._fh: Any = None
        self.groups: list[int] = []
        self.previous: dict[str, Any] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = _parse(fh.read())
            fh.close()
            who = (f"process {holder.get('pid')} ({holder.get('command')}, run {holder.get('runId')}, "
                   f"started {holder.get('startedAt')} on {holder.get('host')})") if holder else "another process"
            raise LockedError(
                f"another nightly run holds {self.path}: {who}. Wait for it to finish; if that process "
                "is hung, stop it (kill PID) and run this again: the lock is released when it exits."
            ) from None
        fh.seek(0)
        self.previous = _parse(fh.read())
        self._fh = fh
        if self.previous:
            end_groups(self.previous.get("batchGroups", []), self.previous.get("runId"))
        self._write()

    def _write(self) -> None:
        data = {
            "pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv[:3]),
            "runId": self.run_id, "startedAt": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "batchGroups": self.groups,
        }
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(json.dumps(data))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def add_group(self, pgid: int) -> None:
        self.groups.append(pgid)
        self._write()

    def remove_group(self, pgid: int) -> None:
        if pgid in self.groups:
            self.groups.remove(pgid)
            self._write()

    def release(self) -> None:
        if self._fh is None:
            return
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.flush()
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()
        self._fh = None


def _parse(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


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
