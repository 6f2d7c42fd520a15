"""Reading a call-log file: one table from file kind to reader, for every verb that reads one.

`READERS` maps each kind (jsonl, csv, tsv, parquet) to its file-name suffixes and two readers:
`records` (every row with the position a person would look up, for `pipeline import-calls`) and
`scan` (the columns as a polars LazyFrame, for `pipeline cache-report --calls`, which may read ten
million rows). `kind_of` decides the kind the same way for both: content first where it is
unambiguous (Parquet magic), then the suffix, then a sniff of the first line.

JSONL is split on `\\n` and parsed line by line, so one broken line becomes one bad row at its
1-based line number instead of failing the whole file. CSV and Parquet are read with polars; a
CSV record's position is its first physical line (the header is line 1, and a quoted cell that
spans lines moves the rows below it), a Parquet record's is its 1-based row number.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import polars as pl

from pipeline.errors import UsageError

Kind = Literal["jsonl", "csv", "tsv", "parquet"]

_PARQUET_MAGIC = b"PAR1"
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark (Windows editors) is not part of the first record


@dataclass
class Record:
    """One row of the file: `data` is None when the row itself is unusable (then `reason` says why)."""

    position: int
    data: dict[str, Any] | None
    reason: str | None = None


@dataclass
class Table:
    path: Path
    kind: Kind
    records: list[Record] = field(default_factory=list)
    blank: int = 0                      # empty lines / rows with no value at all: nothing to import
    columns: list[str] | None = None    # tabular files: the header, to check --map against

    @property
    def unit(self) -> Literal["line", "row"]:
        return "row" if self.kind == "parquet" else "line"


def detect(path: Path, head: bytes) -> Kind:
    """Content first where it is unambiguous (Parquet magic), then the extension, then a sniff."""
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    head = head.removeprefix(_BOM)
    if head.startswith(_GZIP_MAGIC):
        raise UsageError(f"{path} is gzip-compressed: decompress it first (gunzip -k {path})")
    stripped = head.lstrip()
    if stripped.startswith(b"["):
        raise UsageError(
            f"{path} holds one JSON array; import wants one object per line: convert it with "
            f"`jq -c '.[]' {path} > {path.with_suffix('.jsonl').name}`"
        )
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is not None:
        return kind
    if not stripped or stripped.startswith(b"{"):
        return "jsonl"
    first_line = stripped.split(b"\n", 1)[0]
    if b"," in first_line:
        return "csv"
    if b"\t" in first_line:
        return "tsv"
    raise UsageError(
        f"cannot tell the format of {path}: name it .jsonl, .csv, .tsv or .parquet "
        "(or give it content of one of those)"
    )


def kind_of(path: str | Path) -> Kind:
    """The kind of a call-log file. Raises UsageError when it is missing, unreadable or of no kind
    we read."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no such file: {p}" if not p.exists() else f"{p} is not a file")
    try:
        with p.open("rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise UsageError(f"cannot read {p}: {exc.strerror or exc}") from exc
    return detect(p, head)


def read(path: str | Path) -> Table:
    """Every record of the file. Raises UsageError when the file is missing or unreadable."""
    return READERS[kind_of(path)].records(Path(path))


def scan(path: str | Path) -> pl.LazyFrame:
    """The file's columns, read lazily. Raises UsageError when it is missing or unreadable."""
    p = Path(path)
    kind = kind_of(p)
    try:
        frame = READERS[kind].scan(p)
        frame.collect_schema()  # a malformed file shows itself here, not deep inside a later query
        return frame
    except Exception as exc:  # polars raises several classes for a malformed file; all are the user's
        raise UsageError(f"cannot read {p} as {kind.upper()}: {_first_line(exc)}") from exc


def _jsonl(path: Path) -> Table:
    table = Table(path, "jsonl")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    lines = data.removeprefix(_BOM).split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line does not start another
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            table.records.append(Record(number, None, f"not valid UTF-8 (byte {exc.start + 1})"))
            continue
        if not text.strip():
            table.blank += 1
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            table.records.append(Record(number, None, f"not valid JSON: {exc.msg} at column {exc.colno}"))
            continue
        if not isinstance(value, dict):
            table.records.append(Record(number, None, f"not a JSON object (found {type(value).__name__})"))
            continue
        table.records.append(Record(number, value))
    return table


def _csv(path: Path, kind: Literal["csv", "tsv"]) -> Table:
    try:
        # Every cell as text: counts are parsed per row, so one bad cell is one bad row, and an
        # id like 007 keeps its zeros. Empty cells are null (unknown).
        frame = pl.read_csv(path, separator="\t" if kind == "tsv" else ",", infer_schema=False, raise_if_empty=False)
    except Exception as exc:  # polars raises several classes for a malformed file; all are the user's
        raise UsageError(f"cannot read {path} as {kind.upper()}: {_first_line(exc)}") from exc
    table = Table(path, kind, columns=frame.columns)
    line = 1 + sum(name.count("\n") for name in frame.columns) + 1
    for row in frame.iter_rows(named=True):
        start = line
        line += 1 + sum(v.count("\n") for v in row.values() if isinstance(v, str))
        if all(v is None for v in row.values()):
            table.blank += 1
            continue
        table.records.append(Record(start, unflatten(row)))
    return table


def _parquet(path: Path) -> Table:
    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # a truncated or foreign file surfaces as several exception classes
        raise UsageError(f"cannot read {path} as Parquet: {_first_line(exc)}") from exc
    table = Table(path, "parquet", columns=frame.columns)
    for number, row in enumerate(frame.iter_rows(named=True), start=1):
        if all(v is None for v in row.values()):
            table.blank += 1
            continue
        table.records.append(Record(number, unflatten(row)))
    return table


@dataclass(frozen=True)
class Reader:
    """How one kind of file is read: `records` row by row, `scan` as lazy columns."""

    kind: Kind
    suffixes: tuple[str, ...]
    records: Callable[[Path], Table]
    scan: Callable[[Path], pl.LazyFrame]


READERS: dict[Kind, Reader] = {
    r.kind: r for r in (
        Reader("jsonl", (".jsonl", ".ndjson", ".jsonlines", ".json"), _jsonl,
               lambda p: pl.scan_ndjson(p, infer_schema_length=None)),
        Reader("csv", (".csv",), lambda p: _csv(p, "csv"), lambda p: pl.scan_csv(p, infer_schema_length=None)),
        Reader("tsv", (".tsv", ".tab"), lambda p: _csv(p, "tsv"),
               lambda p: pl.scan_csv(p, separator="\t", infer_schema_length=None)),
        Reader("parquet", (".parquet", ".pq", ".parq"), _parquet, pl.scan_parquet),
    )
}
SUFFIXES: dict[str, Kind] = {suffix: r.kind for r in READERS.values() for suffix in r.suffixes}


def unflatten(row: dict[str, Any]) -> dict[str, Any]:
    """`{"usage.prompt_tokens": 5}` → `{"usage": {"prompt_tokens": 5}}`, so a flat export of a
    response reads like the response. A dotted name that clashes with a plain column stays flat
    (lookups try flat names first, so it is still reachable)."""
    out: dict[str, Any] = {k: v for k, v in row.items() if "." not in k}
    for key, value in row.items():
        if "." not in key:
            continue
        *parents, leaf = key.split(".")
        node: dict[str, Any] | None = out
        for part in parents:
            child = node.setdefault(part, {}) if node is not None else None
            node = child if isinstance(child, dict) else None
        if node is None or leaf in node:
            out[key] = value
        else:
            node[leaf] = value
    return out


def has_path(columns: list[str], path: str) -> bool:
    """Whether a dotted path can exist in rows with these columns (names may contain dots)."""
    return any(
        path == c or path.startswith(c + ".") or c.startswith(path + ".") for c in columns
    )


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
