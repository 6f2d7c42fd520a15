"""The published warehouse and the private working file behind it.

DuckDB lets one process write a database file, or any number of processes read it, never both at
once. So the file analysts open (`--db`, say `data/warehouse.duckdb`) is not opened for writing
(but by a small ingest when nobody reads it: "In place", below). A writing command works on a
private working file beside it, `data/warehouse.duckdb.work`, which no one else opens:

1. at its start (`prepare`), the working file is made a copy of the published one, unless the
   working file left by the last writer already holds it (a writer that published nothing keeps its
   copy for the next one);
2. at its end (`publish`), if it changed anything, the working file is checkpointed and closed
   (nothing of it is left in a `.wal`), then *renamed* onto `data/warehouse.duckdb` (`os.replace`,
   fsync of the folder). The working file is gone until the next writer copies the published one.

A rename is atomic: a program that opens the warehouse sees the old file or the new one, never a
half-written one. A connection that was already open keeps reading the old file (its inode lives
on until the last reader closes it), a consistent view of the last published state; the next
connection sees the new one. Nobody holds the working file but the writer, so nothing an analyst
does can stop a writing command, and the night never trips over its own readers.

Why copy at the start rather than at the end: the writes of a session need a file no reader holds,
so some copy of the warehouse is made per writing session either way, and made here it happens only
when the previous session published. A new warehouse is never copied (its first ingest writes the
file once and renames it), a write after one that changed nothing copies nothing, and between
commands the warehouse takes the disk of one copy, not two.

Between commands the published file is the writers' source of truth; during one, the working file
is (it holds every change committed so far, published or not). `data/warehouse.duckdb.work.json`
records the published file (size, modification time, inode and a hash of the file's header blocks)
and the working file that matches it, or `"work": null` after a rename. When the `--db` file is no
longer the recorded one (first use of a warehouse written before this design, a backup restored,
the file deleted, or another program wrote it), the working file is rebuilt from it. When the
working file also holds changes that were never published, neither can be preferred silently and
the command stops, saying what to do.

Crash points, and what the next writing command does about them:

* killed while copying the published file (`prepare:copying`): a stray `.work-copy`, removed; the
  published file is intact and is copied again;
* killed while writing the working file: DuckDB recovers it from its own `.wal`; published later;
* killed between recording the rename and making it (`publish:renaming`): `--db` is still the old
  file, which the state file still names, and the working file holds the changes: the next command
  works on it and publishes them;
* killed after the rename (`publish:replaced`): the state file names the new file as the one being
  published, so it is taken as published, and the next command copies it.

In place, for a small write. The copy costs time in proportion to the whole warehouse (2.4 s of a
5.6 s re-ingest that added 8 % to a 1.3 GB warehouse), whatever the write adds. So a writer that
adds little (`pipeline ingest` when the new transcripts are at most a quarter of what is stored; a
reviewer's `tasks` or `memories` decision) and finds no other process holding the published file
writes that file itself, through DuckDB's own
transactions and write-ahead log, and no working file is made (`prepare(..., in_place=True)`
returns IN_PLACE). What DuckDB guarantees stands in for the rename: every transaction lands whole or
not at all, also after `kill -9` (a read-only open replays what was committed). What it costs:
a reader that opens the warehouse during that write waits for it (`pipeline.warehouse.db.reading`
does, saying so; another DuckDB client is refused with DuckDB's lock error for those seconds). A
reader that already holds the file is never made to wait: the writer sees its lock and copies.
The state file records `"inPlace": true` while such a write runs; a writer killed in place leaves
the published file as DuckDB recovers it, and the next command takes it as published
(`inplace:writing` is its crash point).

Only the holder of the write lock (`pipeline.warehouse.db.write_session`) calls these functions.
Cost: disk for a second copy of the warehouse while a writer runs (and an old copy stays allocated
while a reader keeps it open), and one full copy per writing command that follows a publish. On a
file system with copy-on-write clones (btrfs, xfs with reflink) the copy is a clone: it takes
metadata time, and disk only for the blocks that later differ. ext4 has none: there the copy is the
kernel's `copy_file_range`, whose time grows with the warehouse (`make bench` measures it at 5 GB).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from pipeline.durable import fsync_dir
from pipeline.errors import OutcomeError, WarehouseBusyError
from pipeline.faults import crash_point

__all__ = ["IN_PLACE", "Files", "busy_message", "finish_in_place", "held_by_another_process", "identity",
           "prepare", "publish", "read_write_holder", "stop_in_place"]

COPY_CHUNK = 64 * 1024 * 1024
HEAD_BYTES = 16 * 1024  # DuckDB's main header and both database headers: they change at every checkpoint

# What `prepare` returns when the writer writes the published file itself.
IN_PLACE = "in place"

_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (?P<prog>.*?) \(PID (?P<pid>\d+)\)")


def busy_message(path: Path, exc: Exception | None = None, *, holder: tuple[str, int] | None = None) -> str:
    """What to tell a user whose command found `path` open for writing elsewhere: the holder named
    by DuckDB's lock error `exc`, or given as (program, pid)."""
    match = _LOCK_HOLDER.search(str(exc)) if exc is not None else None
    if holder is not None:
        who = f"{holder[0]} (PID {holder[1]})"
    else:
        who = f"{match['prog']} (PID {match['pid']})" if match else "another process"
    return (
        f"the warehouse {path} is in use by {who}, which opened it for writing. Close that program's connection "
        f"(an open notebook kernel or DuckDB shell keeps it), or wait for it to finish, then run this again; "
        f"open the warehouse read-only (duckdb -readonly, read_only=True) and it never stops a pipeline command."
    )


@dataclass(frozen=True)
class Files:
    """Every file of one warehouse, named after the published file `db`."""

    db: Path

    def _beside(self, suffix: str) -> Path:
        return self.db.with_name(self.db.name + suffix)

    @property
    def work(self) -> Path:
        return self._beside(".work")

    @property
    def work_wal(self) -> Path:
        return self._beside(".work.wal")

    @property
    def state(self) -> Path:
        return self._beside(".work.json")

    @property
    def publishing(self) -> Path:
        return self._beside(".publishing")

    @property
    def work_copy(self) -> Path:
        return self._beside(".work-copy")

    @property
    def db_wal(self) -> Path:
        return self._beside(".wal")

    @property
    def write_lock(self) -> Path:
        return self._beside(".write.lock")


def identity(path: Path) -> dict[str, Any] | None:
    """What tells one version of a file from another: None when there is no file."""
    try:
        st = path.stat()
        with path.open("rb") as fh:
            head = fh.read(HEAD_BYTES)
    except FileNotFoundError:
        return None
    return {"size": st.st_size, "mtimeNs": st.st_mtime_ns, "inode": st.st_ino,
            "head": hashlib.sha256(head).hexdigest()[:32]}


def _read_state(files: Files) -> dict[str, Any] | None:
    try:
        data = json.loads(files.state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "db" in data and "work" in data else None


def _write_state(files: Files, state: dict[str, Any]) -> None:
    tmp = files.state.with_name(files.state.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(state, indent=1))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, files.state)
    fsync_dir(files.state.parent, strict=True)


FICLONE = 0x40049409  # _IOW(0x94, 9, int), linux/fs.h


def _clone(fin: int, fout: int) -> bool:
    """Share src's blocks with dst (copy-on-write) when the file system can; False when it cannot."""
    try:
        import fcntl

        fcntl.ioctl(fout, FICLONE, fin)
    except (ImportError, OSError):  # EOPNOTSUPP (ext4, tmpfs), EXDEV, EINVAL, or not Linux
        return False
    return True


def _copy(src: Path, dst: Path, *, crash_step: str | None = None) -> str:
    """Copy `src` to a new file `dst` and fsync it, the cheapest way the file system offers; say which:
    "clone" (copy-on-write, the blocks are shared: btrfs, xfs with reflink), else an in-kernel copy,
    "copy_file_range" (which some file systems also turn into a clone or a server-side copy) or
    "sendfile". No bytes pass through Python either way."""
    with src.open("rb") as fin, dst.open("wb") as fout:
        size = os.fstat(fin.fileno()).st_size
        if size and _clone(fin.fileno(), fout.fileno()):
            method = "clone"
            if crash_step:
                crash_point(crash_step)
        else:
            method = _copy_bytes(fin.fileno(), fout.fileno(), size, crash_step)
        fout.flush()
        os.fsync(fout.fileno())
    return method


def _copy_bytes(fin: int, fout: int, size: int, crash_step: str | None) -> str:
    method = "copy_file_range" if hasattr(os, "copy_file_range") else "sendfile"
    done = 0
    while done < size:
        step = min(COPY_CHUNK, size - done)
        if method == "copy_file_range":
            try:
                sent = os.copy_file_range(fin, fout, step, done, done)
            except OSError:  # ENOSYS, EXDEV, EINVAL (an old kernel, another file system)
                method = "sendfile"
                continue
        else:
            sent = os.sendfile(fout, fin, done, step)
        if sent == 0:
            break
        done += sent
        if crash_step:
            crash_point(crash_step)
    return method


# struct flock on Linux: l_type, l_whence, l_start, l_len, l_pid (and padding to its 32 bytes).
_FLOCK = "@hhqqi4x"


def read_write_holder(db: Path) -> str | None:
    """A message naming the process that has `db` open for writing, or None when none has.

    Readers take DuckDB's shared lock, a writer its exclusive one (fcntl locks on the whole file): a
    read-only open fails exactly when some program holds the file for writing (a notebook that
    forgot read_only=True, say). On Linux the lock is asked about directly (F_GETLK, which also
    names the holder's pid); a DuckDB instance opened to try costs 30 ms, twice per write session.
    """
    if not db.exists():
        return None
    if sys.platform.startswith("linux"):
        held = _write_lock_holder(db)
        if held is False:
            return None
        if isinstance(held, tuple):
            return busy_message(db, holder=held) if held[1] > 0 else busy_message(db)
    return _probe_by_opening(db)


def _lock_probe(db: Path, kind: int) -> tuple[int, int] | None:
    """(lock type, pid) of another process's lock on `db` that a lock of `kind` would conflict with
    (F_UNLCK when none would), asked with F_GETLK; None when it cannot be asked. Locks of this process
    never conflict, as DuckDB's own open in this process would not."""
    try:
        fd = os.open(db, os.O_RDONLY)
    except OSError:
        return None
    try:
        probe = struct.pack(_FLOCK, kind, os.SEEK_SET, 0, 0, 0)
        found, _, _, _, pid = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    except OSError:
        return None
    finally:
        os.close(fd)
    return found, pid


def _write_lock_holder(db: Path) -> tuple[str, int] | bool | None:
    """(program, pid) of the process whose lock stops a read lock on `db`, False when none does,
    None when it cannot be asked."""
    held = _lock_probe(db, fcntl.F_RDLCK)
    if held is None:
        return None
    kind, pid = held
    if kind == fcntl.F_UNLCK:
        return False
    try:
        program = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        program = "another process"
    return program, pid


def held_by_another_process(db: Path) -> bool:
    """Does any other process have `db` open, to read or to write (DuckDB's fcntl lock on the file)?
    True also when that cannot be asked (not Linux, an unreadable file): the caller then copies."""
    if not sys.platform.startswith("linux"):
        return True
    held = _lock_probe(db, fcntl.F_WRLCK)  # a write probe: readers' shared locks conflict with it too
    return held is None or held[0] != fcntl.F_UNLCK


def _probe_by_opening(db: Path) -> str | None:
    con = duckdb.connect()
    try:
        con.execute("ATTACH ? AS probe (READ_ONLY)", [str(db)])
    except duckdb.Error as exc:
        if "lock" in str(exc).lower():
            return busy_message(db, exc)
        return None  # not ours to judge here: the command that opens it reports it
    finally:
        con.close()
    return None


def _start_work(files: Files, current: dict[str, Any] | None) -> str | None:
    """Make the working file anew: a copy of the published file `current` (with the published file's
    own `.wal` when one was left beside it, which DuckDB replays on open), or none when there is no
    published file yet. Records it in the state file; returns how it was copied (`_copy`), or None."""
    files.work.unlink(missing_ok=True)
    files.work_wal.unlink(missing_ok=True)
    method = None
    if current is not None:
        copy_wal = files.work_copy.with_name(files.work_copy.name + ".wal")
        method = _copy(files.db, files.work_copy, crash_step="prepare:copying")
        if files.db_wal.exists():
            _copy(files.db_wal, copy_wal)
            os.replace(copy_wal, files.work_wal)
        os.replace(files.work_copy, files.work)
        fsync_dir(files.db.parent, strict=True)
    _write_state(files, {"db": current, "work": identity(files.work)})
    return method


def prepare(files: Files, say: Callable[[str], None], *, in_place: bool = False) -> str | None:
    """Make the working file ready for a writer (the caller holds the write lock). Returns how the
    published file was copied to make it (`_copy`), or None when no copy was needed, or IN_PLACE when
    `in_place` was asked for and can be had: the last writer published, and no other process has the
    published file open. The writer then writes the published file; `finish_in_place` ends that."""
    for stray in (files.publishing, files.work_copy, files.work_copy.with_name(files.work_copy.name + ".wal")):
        stray.unlink(missing_ok=True)  # a copy that a killed command left half-made
    busy = read_write_holder(files.db)
    if busy:
        raise WarehouseBusyError(busy)
    state = _read_state(files)
    current = identity(files.db)
    if state is not None and state.get("next") and current == state["next"]["db"]:
        # Killed after the rename, before the state said so: the rename happened.
        state = {"db": state["next"]["db"], "work": state["next"]["work"]}
        _write_state(files, state)
    if state is not None and state.get("inPlace") and state["work"] is None:
        # A writer in place was killed: DuckDB makes the file whole (its committed transactions) when it is
        # next opened, and that file is the published state, whatever its identity now.
        state = {"db": current, "work": None}
        _write_state(files, state)
    if state is not None and current is not None and current == state["db"] and state["work"] is None:
        if in_place and not held_by_another_process(files.db):
            files.work.unlink(missing_ok=True)  # a copy cut short before the state recorded it
            _write_state(files, {**state, "inPlace": True})
            return IN_PLACE
        # The last writer published by renaming its working file onto `db`: this one works on a copy.
        # A working file here can only be a copy that was cut short before the state recorded it.
        return _start_work(files, current)
    if files.work.exists() and state is not None and current == state["db"]:
        return None
    if files.work.exists() and state is not None and identity(files.work) != state["work"]:
        raise OutcomeError(
            f"the warehouse {files.db} was replaced or changed by another program, and the working file "
            f"{files.work} holds changes that were never published; neither can be kept silently. To keep "
            f"{files.db} as it is now, delete {files.work} (and {files.state}); to keep the pipeline's "
            f"version, copy {files.work} over {files.db}. Then run this again."
        )
    if files.work.exists() or state is not None:
        say(f"the warehouse {files.db} is not the file last published from {files.work}; starting again from it")
    # First use of this warehouse, or a new file in its place: the working file starts as a copy.
    return _start_work(files, current)


def publish(files: Files, checkpoint: Callable[[Path], None]) -> bool:
    """Publish the working file as `db` by renaming it onto `db`, if it changed since it was last
    published; True when it did. Only when the write session ends: the file is gone afterwards, and
    the next session starts from a copy of what was published (`prepare`).

    `checkpoint(path)` opens the working file for writing and checkpoints it. It runs before the
    rename even when no `.wal` is left: opening the file is refused while a connection in this
    process still holds it, and such a connection would otherwise go on writing the published file.
    """
    checkpointed = files.work_wal.exists()
    if checkpointed:
        checkpoint(files.work)
    if not files.work.exists():
        return False
    state = _read_state(files) or {"db": None, "work": None}
    if identity(files.work) == state["work"] and identity(files.db) == state["db"]:
        return False
    busy = read_write_holder(files.db)
    if busy:
        raise WarehouseBusyError(
            f"{busy} (It cannot be replaced while that program may write it: this command's changes are kept "
            f"in {files.work} and the next writing command publishes them.)"
        )
    if not checkpointed:
        checkpoint(files.work)
    work = identity(files.work)
    files.db.parent.mkdir(parents=True, exist_ok=True)
    _write_state(files, {**state, "next": {"db": work, "work": None}})
    crash_point("publish:renaming")
    # A .wal beside the published file belongs to the file being replaced (its changes reached the
    # working file when it was first copied): beside the new file it would be replayed into it.
    files.db_wal.unlink(missing_ok=True)
    os.replace(files.work, files.db)
    fsync_dir(files.db.parent, strict=True)
    crash_point("publish:replaced")
    _write_state(files, {"db": work, "work": None})
    return True


def stop_in_place(files: Files) -> str | None:
    """Leave the published file to a reader that opened it before the writer did, and go on in a working
    file, as a writer that never wrote in place would (what was written in place is in the copy)."""
    return _start_work(files, identity(files.db))


def finish_in_place(files: Files, checkpoint: Callable[[Path], None]) -> bool:
    """End a write in place: the published file is checkpointed (when DuckDB left a `.wal`) and recorded
    as published. True when the file changed."""
    if files.db_wal.exists():
        with contextlib.suppress(duckdb.IOException):  # a reader opened it meanwhile: the next writer folds it
            checkpoint(files.db)
    state = _read_state(files) or {"db": None, "work": None}
    now = identity(files.db)
    _write_state(files, {"db": now, "work": None})
    return now != state["db"]


def disk_bytes(files: Files) -> int:
    """Bytes the warehouse's files take beside the published one (the working file, any leftovers)."""
    total = 0
    for path in (files.work, files.work_wal, files.publishing, files.work_copy):
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total
