"""Importing a file of LLM calls into `llm_calls`: read, check every row, store once.

Reading and storing are separate steps so that a notebook can look at the rows (and the bad
ones) before anything is written, and so that the CLI refuses a missing file before it opens the
warehouse. `import_calls` does both.

Identity: a row's `call_id` is `import:<name>:<id>` when the response carries an id (the
provider's `id`, else the row's `call_id`/`id`), and `import:<name>:sha256:<hash of the row>`
when it does not. A row seen twice in one file is stored once (the last occurrence wins, as
streamed logs end with the final usage); a row already in the warehouse is left as it is, so
importing the same file again adds nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import duckdb
import polars as pl
from pydantic import BaseModel, ConfigDict, computed_field
from pydantic.alias_generators import to_camel

from pipeline.calls import conventions, files
from pipeline.calls import rates as price_rates
from pipeline.calls.conventions import CONTEXT_DEFAULTS, FORMATS, MAPPABLE, TOKEN_COLUMNS, Format
from pipeline.errors import UsageError
from pipeline.warehouse import db

# The rows handed to DuckDB, in llm_calls' own column names and types.
SCHEMA: dict[str, pl.DataType] = {
    "call_id": pl.String(), "source": pl.String(), "session_id": pl.String(),
    "at": pl.Datetime("us", "UTC"), "model": pl.String(),
    "prompt_tokens": pl.Int64(), "cached_tokens": pl.Int64(), "cache_write_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(), "latency_ms": pl.Float64(),
    "run_id": pl.String(), "batch_id": pl.String(), "system_fp": pl.String(), "tools_fp": pl.String(),
    "prefix_fp": pl.String(), "changed_sections": pl.List(pl.String()),
    "line_no": pl.Int64(), "origin": pl.String(), "cache_write_1h_tokens": pl.Int64(),
}
_COLUMNS_SQL = ", ".join(f'"{c}"' for c in SCHEMA)  # constant names, quoted: "at" is reserved
_STAGING = "_imported_calls"


class _Model(BaseModel):
    # camelCase in JSON like every other report of the CLI; snake_case in Python.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class Problem(_Model):
    """One bad field of one row (a row with two bad fields has two problems)."""

    file: str
    line: int  # 1-based line for JSONL and CSV, 1-based row number for Parquet
    unit: Literal["line", "row"]
    field: str | None  # dotted path in the row; None when the whole row is unusable (not JSON)
    reason: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def message(self) -> str:
        where = f"{self.file}:{self.line}" if self.unit == "line" else f"{self.file}: row {self.line}"
        return f"{where}: {self.field}: {self.reason}" if self.field else f"{where}: {self.reason}"


class Totals(_Model):
    """Sums over the distinct calls of the file (stored now or before); None when all unknown."""

    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    completion_tokens: int | None = None


class ImportReport(_Model):
    file: str
    format: Format
    source: str
    read_as: files.Kind
    unit: Literal["line", "row"]
    rows: int = 0              # records read, bad ones included, blank ones not
    blank: int = 0             # empty lines or rows with no value: nothing to import
    bad_rows: int = 0          # rows kept out of the table (each has one or more problems)
    good_rows: int = 0         # rows that passed every check
    duplicates: int = 0        # good rows whose call_id another good row of the file also has
    calls: int = 0             # distinct calls among the good rows = good_rows - duplicates
    new: int | None = None     # distinct calls added to the warehouse (None until stored)
    already_present: int | None = None
    totals: Totals = Totals()
    problems: list[Problem] = []
    warnings: list[str] = []   # columns the calls lack, and what that means for the analysis

    def summary(self) -> str:
        text = f"{self.file} as {self.format} ({self.read_as}) → {self.source}: {_n(self.rows, 'row')}"
        if self.blank:
            text += f" (+{self.blank} blank)"
        text += f", {self.bad_rows} bad, {_n(self.calls, 'call')}"
        if self.duplicates:
            text += f" ({_n(self.duplicates, 'duplicate row')} merged)"
        if self.new is not None:
            text += f"; {self.new} new, {self.already_present} already present"
        return text

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


@dataclass
class CallBatch:
    """Rows read from one file, ready to store: `frame` has llm_calls' columns."""

    frame: pl.DataFrame
    report: ImportReport


def parse_mapping(pairs: Iterable[str]) -> dict[str, str]:
    """`["session_id=sess", "at=ts,model=m"]` → a mapping; UsageError for anything malformed."""
    out: dict[str, str] = {}
    for item in pairs:
        for pair in item.split(","):
            if not pair.strip():
                continue
            column, sep, path = (s.strip() for s in pair.partition("="))
            if not sep or not column or not path:
                raise UsageError(f"--map wants COLUMN=FIELD (for example session_id=conversation.id), got {pair!r}")
            if column in out and out[column] != path:
                raise UsageError(f"--map names {column} twice ({out[column]!r} and {path!r})")
            out[column] = path
    return out


def check_mapping(fmt: str, mapping: dict[str, str]) -> None:
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    unknown = sorted(set(mapping) - set(MAPPABLE))
    if unknown:
        raise UsageError(f"--map: {', '.join(unknown)} is not an llm_calls column that can be mapped; use one of {', '.join(MAPPABLE)}")
    tokens = sorted(set(mapping) & set(TOKEN_COLUMNS))
    if tokens and fmt != "columns":
        raise UsageError(
            f"--map {tokens[0]}: with --format {fmt} token counts follow the {fmt} convention; "
            "map token columns only with --format columns"
        )


def _check_columns(table: files.Table, fmt: str, mapping: dict[str, str]) -> None:
    """A tabular file states its columns up front: a mapping to a column it lacks is a usage error,
    not one bad row per line."""
    if table.columns is None or not table.records:
        return
    listing = ", ".join(table.columns)
    for column, path in mapping.items():
        if not files.has_path(table.columns, path):
            raise UsageError(f"--map {column}={path}: {table.path} has no column {path!r} (its columns: {listing})")
    if fmt == "columns":
        for column in ("prompt_tokens", "completion_tokens"):
            path = mapping.get(column, column)
            if not files.has_path(table.columns, path):
                raise UsageError(
                    f"{table.path} has no column {path!r} for {column}: pass --map {column}=COLUMN (its columns: {listing})"
                )


def read_calls(
    path: str | Path, fmt: str, *, name: str | None = None, mapping: dict[str, str] | None = None
) -> CallBatch:
    """Read and check every row of an import file; nothing is written.

    Raises UsageError for a missing or unreadable file, an unknown format, or a bad mapping.
    Bad rows do not raise: they are in `report.problems`, with file, line and field.
    """
    mapping = dict(mapping or {})
    check_mapping(fmt, mapping)
    table = files.read(path)
    _check_columns(table, fmt, mapping)
    shown = str(path)
    origin = str(Path(path).resolve())
    source = f"import:{(name or '').strip() or Path(path).stem or fmt}"
    report = ImportReport(file=shown, format=fmt, source=source, read_as=table.kind, unit=table.unit, blank=table.blank)

    def problem(position: int, field: str | None, reason: str) -> Problem:
        return Problem(file=shown, line=position, unit=table.unit, field=field, reason=reason)

    good: dict[str, dict[str, Any]] = {}
    for record in table.records:
        report.rows += 1
        if record.data is None:
            report.bad_rows += 1
            report.problems.append(problem(record.position, None, record.reason or "unusable row"))
            continue
        row = conventions.extract(fmt, record.data, mapping)  # type: ignore[arg-type]  # checked above
        if row.problems:
            report.bad_rows += 1
            report.problems.extend(problem(record.position, f, r) for f, r in row.problems)
            continue
        report.good_rows += 1
        call_id = f"{source}:{row.raw_id}" if row.raw_id else f"{source}:sha256:{_digest(record.data)}"
        if call_id in good:
            report.duplicates += 1
            del good[call_id]  # re-insert so the stored order follows the last occurrence
        good[call_id] = {**row.out, "call_id": call_id, "source": source, "line_no": record.position, "origin": origin}
    frame = pl.DataFrame(list(good.values()), schema=SCHEMA) if good else pl.DataFrame(schema=SCHEMA)
    report.calls = frame.height
    report.totals = _totals(frame)
    report.warnings = missing_columns(frame, mapping)
    return CallBatch(frame, report)


def _fields(column: str, mapping: dict[str, str]) -> str:
    if column in mapping:
        return f"value in {mapping[column]!r}, the field --map {column}={mapping[column]} names"
    return "field " + " / ".join(repr(f) for f in CONTEXT_DEFAULTS[column])


def missing_columns(frame: pl.DataFrame, mapping: dict[str, str] | None = None) -> list[str]:
    """Warnings for calls that lack a time, a session or a model, and what each gap costs the analysis."""
    mapping = mapping or {}
    total = frame.height
    if not total:
        return []
    out: list[str] = []
    undated = frame["at"].null_count()
    if undated:
        out.append(
            f"{undated:,} of {total:,} calls have no time (no {_fields('at', mapping)}): cache-report leaves them out of "
            "every time-based figure (miss causes, TTL expiry, daily rates, the effect of anchoring) and says how many. "
            "Map the time with --map at=FIELD"
        )
    sessionless = frame["session_id"].null_count()
    if sessionless:
        out.append(
            f"{sessionless:,} of {total:,} calls have no conversation id (no {_fields('session_id', mapping)}): without one "
            "no call can be told to continue an earlier one, so cache-report leaves them out rather than count each as a "
            "cold start. Map the conversation with --map session_id=FIELD"
        )
    no_model = frame["model"].null_count()
    if no_model:
        out.append(
            f"{no_model:,} of {total:,} calls name no model (no {_fields('model', mapping)}): they cannot be priced, "
            "so their cost is left out of cache-report's spend figures. Map it with --map model=FIELD"
        )
    return out


def store_calls(con: duckdb.DuckDBPyConnection, batch: CallBatch) -> ImportReport:
    """Insert the batch's calls that the warehouse does not have yet, in one transaction."""
    report = batch.report.model_copy(deep=True)
    if batch.frame.is_empty():
        report.new, report.already_present = 0, 0
        return report
    con.register(_STAGING, batch.frame.to_arrow())
    try:
        with db.atomic(con):
            row = db.one(con, f"SELECT count(*) FROM {_STAGING} WHERE call_id IN (SELECT call_id FROM llm_calls)")
            present = int(row[0]) if row else 0
            con.execute(f"INSERT OR IGNORE INTO llm_calls ({_COLUMNS_SQL}) SELECT {_COLUMNS_SQL} FROM {_STAGING}")
            price_rates.store(con)
    finally:
        con.unregister(_STAGING)
    report.already_present = present
    report.new = batch.frame.height - present
    return report


def import_calls(
    con: duckdb.DuckDBPyConnection,
    path: str | Path,
    fmt: str,
    *,
    name: str | None = None,
    mapping: dict[str, str] | None = None,
) -> ImportReport:
    """Read an import file and store its good rows in `llm_calls` as source `import:<name>`.

    `fmt` is one of openai, anthropic, deepseek, columns (conventions: pipeline.calls.conventions);
    `name` defaults to the file's stem; `mapping` maps llm_calls columns to the file's fields
    (dotted paths from the top of a row). Bad rows are reported, never stored.
    """
    return store_calls(con, read_calls(path, fmt, name=name, mapping=mapping))


def _n(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _digest(record: dict[str, Any]) -> str:
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def _totals(frame: pl.DataFrame) -> Totals:
    def total(column: str) -> int | None:
        series = frame[column]
        return None if series.null_count() == frame.height else int(series.sum())

    return Totals(**{c: total(c) for c in TOKEN_COLUMNS})
