"""A lock file that says who holds it, and a polite wait for it.

The lock is an flock on a small file beside the warehouse. The kernel releases an flock when its
holder dies, however it dies (`kill -9` included), so a lock whose holder is gone is simply taken:
there is no stale lock to clean up by hand. While it holds the lock, a process keeps in the file
who it is (pid, host, command, since when, and whatever its owner adds), so that another process
that wants the lock can name the holder while it waits and when it gives up.

Two locks are built on this: the warehouse's write lock (`<db>.write.lock`, held by every writing
command while it writes; `pipeline.warehouse.db`) and the nightly lock (`<db>.nightly.lock`, one
night at a time; `pipeline.nightly.lock`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["HolderLock", "command_line", "describe_holder"]

POLL_SECONDS = 0.2


def command_line() -> str:
    """This process's command as a person would type it (`pipeline ingest data/samples`), shortened."""
    argv = list(sys.argv) or ["python"]
    head = Path(argv[0]).name
    # `python -m pipeline` runs pipeline/__main__.py; the console script is called pipeline.
    text = " ".join(["pipeline" if head == "__main__.py" else head, *argv[1:]])
    return text if len(text) <= 160 else text[:159] + "…"


def describe_holder(holder: dict[str, Any] | None) -> str:
    """`PID 123 (pipeline ingest data, since 2026-01-02T03:04:05+00:00 on host)`, or a vaguer phrase."""
    if not holder or not holder.get("pid"):
        return "another process (it has not said which yet)"
    extras = [str(holder.get("command") or "?")]
    if holder.get("startedAt"):
        extras.append(f"since {holder['startedAt']}")
    if holder.get("host") and holder.get("host") != socket.gethostname():
        extras.append(f"on {holder['host']}")
    return f"PID {holder['pid']} ({', '.join(extras)})"


def _parse(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class HolderLock:
    """An exclusive flock on `path`, whose file records the holder as one JSON object."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None
        self.previous: dict[str, Any] | None = None  # what the file said when we took it
        self.info: dict[str, Any] = {}

    @property
    def held(self) -> bool:
        return self._fh is not None

    def holder(self) -> dict[str, Any] | None:
        """Who holds the lock now, as the holder wrote it (None when it is free or unreadable)."""
        try:
            return _parse(self.path.read_text(encoding="utf-8"))
        except OSError:
            return None

    def held_by(self) -> dict[str, Any] | None:
        """Who holds the lock now, or None when nobody does (a holder that died left its words behind)."""
        holder = self.holder()
        if not holder:
            return None
        try:
            with self.path.open("rb") as fh:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)  # granted only while no one holds it
        except BlockingIOError:
            return holder
        except OSError:
            return None
        return None

    def try_acquire(self, **extra: Any) -> bool:
        """Take the lock if it is free; `extra` is recorded beside pid, host, command and start time."""
        if self._fh is not None:
            raise RuntimeError(f"{self.path} is already held by this object")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return False
        fh.seek(0)
        self.previous = _parse(fh.read())
        self._fh = fh
        self.info = {
            "pid": os.getpid(), "host": socket.gethostname(), "command": command_line(),
            "startedAt": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), **extra,
        }
        self.write()
        return True

    def acquire(self, wait: float, *, on_wait: Callable[[dict[str, Any] | None], None] | None = None,
                **extra: Any) -> dict[str, Any] | None:
        """Take the lock, waiting up to `wait` seconds; None once taken, else the holder (still held).

        `on_wait(holder)` is called once, when the lock is found taken and the caller is about to wait.
        """
        deadline = time.monotonic() + max(0.0, wait)
        told = False
        while True:
            if self.try_acquire(**extra):
                return None
            holder = self.holder()
            if time.monotonic() >= deadline:
                return holder or {}
            if not told and on_wait is not None:
                on_wait(holder)
                told = True
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))

    def write(self, **changes: Any) -> None:
        """Update what the file says about the holder (durably: a crash must not leave it half written)."""
        if self._fh is None:
            raise RuntimeError(f"{self.path} is not held")
        self.info.update(changes)
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(json.dumps(self.info))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def release(self) -> None:
        if self._fh is None:
            return
        with contextlib.suppress(OSError):
            self._fh.seek(0)
            self._fh.truncate()
            self._fh.flush()
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()
        self._fh = None
