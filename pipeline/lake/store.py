"""Where the lake's files go, and how a reader never sees half of a change.

Every Parquet file is first written whole into a staging folder, then published:

- **A local folder** (a path or `file://` URL). A new file is renamed into its partition: it
  appears whole or not at all. A partition rewritten whole is built as a new folder beside it and
  swapped with the live one in one `renameat2(RENAME_EXCHANGE)` call (Linux), so a listing shows
  either the old partition or the new one; where that call does not exist the old folder is renamed
  away and the new one into place, two renames in a row. Staging (`_staging/`) and superseded
  folders (`_trash/`) sit in the lake root, on the same file system, and start with `_`, which Hive,
  Spark, Trino, pyarrow and polars skip; a glob such as `lines/*/*/*.parquet` never reaches them.
- **Any other fsspec URL** (`s3://…`, `gs://…`, `memory://…`). Object stores have no atomic rename,
  but an object appears only once its upload completes. So every file gets a new, unique name; a
  rewritten partition's new files are uploaded next to the old ones, then the manifest is switched,
  then the old files are deleted. A reader that lists the folder in that short window can see both;
  one that reads the file list from `_manifest.json` (`manifest.files_of`) always sees one export.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.durable import fsync_dir
from pipeline.errors import OutcomeError, UsageError
from pipeline.lake import manifest as mf

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2); False when the system cannot."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: this file system cannot swap
        return False
    raise OSError(err, os.strerror(err), str(b))


def part_dir(table: str, part: str) -> str:
    return f"{table}/{part}" if part else table


class Store:
    """The operations an export needs; `open_store` picks the implementation for a URL."""

    url: str
    local: bool = False

    def staging(self) -> Path:
        """A local folder for DuckDB to write files into before they are published."""
        raise NotImplementedError

    def read_manifest(self) -> str | None:
        raise NotImplementedError

    def write_manifest(self, text: str) -> None:
        raise NotImplementedError

    def listing(self, table: str) -> dict[str, list[str]]:
        """Partition → Parquet file names, as they are now."""
        raise NotImplementedError

    def add(self, table: str, part: str, files: list[tuple[Path, str]]) -> None:
        """Publish new files into a partition, each under its name."""
        raise NotImplementedError

    def replace(self, table: str, part: str, files: list[tuple[Path, str]], current: list[str]) -> list[str]:
        """Make `files` the partition's whole content (none: the partition goes). Returns the names
        to delete once the manifest no longer lists them (object stores); a local swap is done."""
        raise NotImplementedError

    def delete(self, table: str, part: str, names: list[str]) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        yield

    def finish(self) -> None:
        """Remove staging and superseded files."""

    def total_bytes(self) -> int:
        raise NotImplementedError


class LocalStore(Store):
    local = True

    def __init__(self, root: Path, export_id: str):
        self.root = root
        self.url = str(root)
        self.export_id = export_id
        self._staging = root / "_staging" / export_id
        self._trash = root / "_trash" / export_id

    def staging(self) -> Path:
        self._staging.mkdir(parents=True, exist_ok=True)
        return self._staging

    def read_manifest(self) -> str | None:
        path = self.root / mf.NAME
        return path.read_text(encoding="utf-8") if path.exists() else None

    def write_manifest(self, text: str) -> None:
        tmp = self.root / f"_manifest.{self.export_id}.tmp"
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.root / mf.NAME)
        fsync_dir(self.root)

    def listing(self, table: str) -> dict[str, list[str]]:
        base = self.root / table
        out: dict[str, list[str]] = {}
        if not base.is_dir():
            return out
        for path in base.rglob("*.parquet"):
            rel = path.parent.relative_to(base).as_posix()
            out.setdefault("" if rel == "." else rel, []).append(path.name)
        return out

    def add(self, table: str, part: str, files: list[tuple[Path, str]]) -> None:
        target = self.root / part_dir(table, part)
        target.mkdir(parents=True, exist_ok=True)
        for src, name in files:
            os.replace(src, target / name)
        fsync_dir(target)

    def replace(self, table: str, part: str, files: list[tuple[Path, str]], current: list[str]) -> list[str]:
        live = self.root / part_dir(table, part)
        if not files:
            if live.exists():
                self._retire(live, table, part)
            return []
        new = self.staging() / "swap" / part_dir(table, part)
        new.mkdir(parents=True, exist_ok=True)
        for src, name in files:
            os.replace(src, new / name)
        if not live.exists():
            live.parent.mkdir(parents=True, exist_ok=True)
            os.rename(new, live)
        elif _exchange(new, live):
            self._retire(new, table, part)  # `new` now holds the old files
        else:
            self._retire(live, table, part)
            os.rename(new, live)
        fsync_dir(live.parent)
        return []

    def _retire(self, folder: Path, table: str, part: str) -> None:
        dest = self._trash / part_dir(table, part)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(folder, dest)

    def delete(self, table: str, part: str, names: list[str]) -> None:
        folder = self.root / part_dir(table, part)
        for name in names:
            (folder / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            if part and not any(folder.iterdir()):
                folder.rmdir()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "_lake.lock"
        with path.open("a+", encoding="utf-8") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OutcomeError(
                    f"another export is writing {self.root} (it holds {path}); wait for it to finish, then run this again"
                ) from None
            # Leftovers of an export that was killed: nothing the manifest lists lives there.
            for leftover in ("_staging", "_trash"):
                shutil.rmtree(self.root / leftover, ignore_errors=True)
            for tmp in self.root.glob("_manifest.*.tmp"):
                tmp.unlink(missing_ok=True)
            yield

    def finish(self) -> None:
        shutil.rmtree(self._staging, ignore_errors=True)
        shutil.rmtree(self._trash, ignore_errors=True)
        for folder in ("_staging", "_trash"):
            with contextlib.suppress(OSError):
                (self.root / folder).rmdir()

    def total_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*.parquet") if not p.relative_to(self.root).parts[0].startswith("_"))


class FsspecStore(Store):
    def __init__(self, fs: Any, root: str, url: str):
        self.fs = fs
        self.root = root.rstrip("/")
        self.url = url
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def _path(self, *parts: str) -> str:
        return "/".join([self.root, *[p for p in parts if p]])

    def staging(self) -> Path:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="pipeline-export-")
        return Path(self._tmp.name)

    def read_manifest(self) -> str | None:
        path = self._path(mf.NAME)
        if not self.fs.exists(path):
            return None
        data: bytes = self.fs.cat_file(path)
        return data.decode("utf-8")

    def write_manifest(self, text: str) -> None:
        # One PUT: an object store shows the old manifest or the new one, never a mix.
        self.fs.pipe_file(self._path(mf.NAME), text.encode("utf-8"))

    def listing(self, table: str) -> dict[str, list[str]]:
        base = self._path(table)
        out: dict[str, list[str]] = {}
        if not self.fs.exists(base):
            return out
        for path in self.fs.find(base):
            path = str(path)
            if not path.endswith(".parquet"):
                continue
            rel = path[len(self.fs._strip_protocol(base)):].lstrip("/")
            folder, _, name = rel.rpartition("/")
            out.setdefault(folder, []).append(name)
        return out

    def add(self, table: str, part: str, files: list[tuple[Path, str]]) -> None:
        for src, name in files:
            self.fs.put_file(str(src), self._path(table, part, name))
            src.unlink()

    def replace(self, table: str, part: str, files: list[tuple[Path, str]], current: list[str]) -> list[str]:
        self.add(table, part, files)
        return [n for n in current if n not in {name for _, name in files}]

    def delete(self, table: str, part: str, names: list[str]) -> None:
        paths = [self._path(table, part, n) for n in names]
        if paths:
            self.fs.rm(paths)

    def finish(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def total_bytes(self) -> int:
        total = 0
        for path, info in self.fs.find(self.root, detail=True).items():
            rel = str(path)[len(self.fs._strip_protocol(self.root)):].lstrip("/")
            if rel.endswith(".parquet") and not rel.startswith("_"):
                total += int(info.get("size") or 0)
        return total


def open_store(url: str, export_id: str) -> Store:
    """A local path or `file://` URL gets atomic renames; anything else goes through fsspec."""
    if "://" not in url or url.startswith("file://"):
        path = Path(url.removeprefix("file://")).expanduser()
        if path.exists() and not path.is_dir():
            raise UsageError(f"--to {url}: that is a file; give a folder (created if missing) or a URL")
        return LocalStore(path.resolve(), export_id)
    try:
        import fsspec
    except ImportError as exc:  # a dependency, but say so plainly if an install lacks it
        raise UsageError("exporting to a URL needs the fsspec package: pip install fsspec") from exc
    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"--to {url}: {exc}") from exc
    return FsspecStore(fs, root, url)

