"""Making a rename durable: fsync the folder that holds the renamed entry.

Used wherever a file is written then renamed into place (the published warehouse, artifact files,
the lake's partitions and manifest), so that a power loss after the rename cannot bring back the
old entry.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def fsync_dir(folder: Path, *, strict: bool = False) -> None:
    """fsync `folder`. Not every platform lets a directory be opened: unless `strict`, that is not an
    error (the rename stands, only its durability is the platform's)."""
    if strict:
        _fsync(folder)
        return
    with contextlib.suppress(OSError):
        _fsync(folder)


def _fsync(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
