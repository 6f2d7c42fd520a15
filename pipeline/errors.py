"""Every exception the pipeline raises on purpose, in one catalogue (as papermill's `exceptions.py`).

Each message is meant for people: it says what was wrong, where, and what to do next. All derive
from `PipelineError`, whose `exit_code` the CLI returns after printing only the message:

    PipelineError                 1  base class
    ├── UsageError                2  the invocation is wrong: bad flag, unknown session, bad range, missing file
    │   ├── ToolError             2  a transcript tool refused a call (the model reads the message)
    │   └── ArtifactError         2  an artifact folder cannot be read (names the file and what is wrong)
    │       └── IncompleteArtifactError  the batch did not finish (no run.json): nothing in it may be applied
    ├── OutcomeError              1  the command ran and the outcome is negative
    │   └── NotebookError         1  a papermill notebook stopped on an exception in one of its cells
    ├── WarehouseBusyError        1  another program holds the warehouse file for writing
    ├── WarehouseLockedError      1  another writing command kept the write lock longer than --wait
    ├── NestedTransactionError    1  a bug: db.atomic() inside an open transaction (they do not nest)
    ├── LockedError               1  another nightly run holds the warehouse's nightly lock
    ├── CorpusError               1  git refused a corpus operation
    ├── ReportError               1  the night report could not be written
    ├── IngestAborted             1  DuckDB can no longer write the warehouse in this process (a fatal error)
    └── BadValue                     one field of an imported call log cannot be used (also a ValueError);
                                     the importer lists it with its file and line and keeps the row out

The modules that raise them import them from here (`pipeline.consolidator.tools.ToolError` is the
same class as `pipeline.errors.ToolError`).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ArtifactError",
    "BadValue",
    "CorpusError",
    "IncompleteArtifactError",
    "IngestAborted",
    "LockedError",
    "NestedTransactionError",
    "NotebookError",
    "OutcomeError",
    "PipelineError",
    "ReportError",
    "ToolError",
    "UsageError",
    "WarehouseBusyError",
    "WarehouseLockedError",
]


class PipelineError(Exception):
    """Base class; the message is shown to the user as is."""

    exit_code = 1


class UsageError(PipelineError):
    """The invocation is wrong: bad flag, unknown session, bad range, missing file."""

    exit_code = 2


class OutcomeError(PipelineError):
    """The command ran and the outcome is negative."""

    exit_code = 1


class WarehouseBusyError(PipelineError):
    """Another program holds the warehouse file for writing (the message names it)."""

    exit_code = 1


class WarehouseLockedError(PipelineError):
    """Another writing command held the warehouse's write lock for longer than this one would wait
    (the message names its process)."""

    exit_code = 1


class NestedTransactionError(PipelineError):
    """A bug: `db.atomic()` opened while a transaction is already open on the connection. DuckDB
    has no savepoints, so transactions do not nest; open one around the whole unit of work."""


class ToolError(UsageError):
    """A call the tool refuses (unknown session, bad range, empty phrase): shown to the caller as is."""


class ArtifactError(UsageError):
    """An artifact folder that cannot be read: says which file and what is wrong with it."""


class IncompleteArtifactError(ArtifactError):
    """The folder has no run.json: its batch did not finish, so nothing in it may be applied."""


class LockedError(PipelineError):
    """Another nightly run holds the lock beside the warehouse (the message names its process)."""

    exit_code = 1


class CorpusError(PipelineError):
    """A git operation on the memory corpus failed (the message has git's own words)."""


class ReportError(PipelineError):
    """The night report (its notebook or the HTML conversion) could not be written."""


class IngestAborted(PipelineError):
    """DuckDB can no longer write the warehouse in this process (a fatal error): the ingest stops, every
    group it committed before is kept, and the message says which files were in the failing group."""


class BadValue(PipelineError, ValueError):
    """A field of an imported call log is present but its value cannot be used; the message says why."""


class NotebookError(OutcomeError):
    """A notebook executed by papermill stopped on an exception, as its executed copy records it:
    `cell` is the index of the failing cell in that file (0-based, as nbformat reads it),
    `execution_count` the `In [n]` a reader sees, `name` and `message` the exception's."""

    def __init__(self, *, cell: int, execution_count: int | None, name: str, message: str) -> None:
        self.cell = cell
        self.execution_count = execution_count
        self.name = name
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"cell {self.cell}" + (f" (In [{self.execution_count}])" if self.execution_count is not None else "")
        first = next((ln.strip() for ln in self.message.splitlines() if ln.strip()), "")
        return f"{where} raised {self.name}" + (f": {first}" if first else "")

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "executionCount": self.execution_count, "name": self.name, "message": self.message}
