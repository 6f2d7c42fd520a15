"""The lake's manifest, `_manifest.json` at its root: the one file that says what the lake holds.

For each table, each partition (`source=…/day=…`, or `""` for an unpartitioned table) lists its
files, and a fingerprint of the rows they hold when the partition is rewritten whole on change.
For each session, the partition it lives in and how many of its lines were exported, so that the
next export writes only the lines that came after.

The manifest is written last: files it does not list are left over from an export that did not
finish, and the next export removes them. A reader on an object store, where a listing may show a
file being replaced, reads the table's file list from here (`files_of`) for a consistent snapshot.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from pipeline.errors import UsageError

NAME = "_manifest.json"
FORMAT = 1


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class LakeFile(_Model):
    name: str
    rows: int
    bytes: int


class Partition(_Model):
    files: list[LakeFile] = Field(default_factory=list)
    # Rows' fingerprint (count and xor of row hashes) for partitions rewritten whole on change.
    fingerprint: str | None = None

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)


class SessionState(_Model):
    part: str                     # the partition of its rows: source=<format>/day=<first day>
    lines: int                    # lines exported (1..lines)
    rewritten_at: str | None = None  # sessions.rewritten_at then: a new value means read again whole


class Manifest(_Model):
    format: int = FORMAT
    export_id: str | None = None
    exported_at: str | None = None
    warehouse: str | None = None
    since: str | None = None
    tables: dict[str, dict[str, Partition]] = Field(default_factory=dict)
    sessions: dict[str, SessionState] = Field(default_factory=dict)

    def table(self, name: str) -> dict[str, Partition]:
        return self.tables.setdefault(name, {})

    def to_text(self) -> str:
        return json.dumps(self.model_dump(by_alias=True), ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def parse(text: str | None, where: str) -> Manifest:
    if text is None:
        return Manifest()
    try:
        data: Any = json.loads(text)
        manifest = Manifest.model_validate(data)
    except (ValueError, ValidationError) as exc:
        raise UsageError(
            f"{where} is not a manifest this version can read ({str(exc).splitlines()[0]}); "
            "export to an empty folder, or remove that folder first"
        ) from exc
    if manifest.format != FORMAT:
        raise UsageError(f"{where} has format {manifest.format}; this version writes format {FORMAT}")
    return manifest


def files_of(manifest: Manifest, table: str) -> list[str]:
    """The table's files, relative to the lake root, as the last finished export left them."""
    out: list[str] = []
    for part, entry in sorted(manifest.tables.get(table, {}).items()):
        prefix = f"{table}/{part}/" if part else f"{table}/"
        out.extend(prefix + f.name for f in entry.files)
    return out
