"""Tables the consolidate notebook shows: thin, testable views of a batch and its result.

They are `Table`s, not polars frames: a batch's kernel uses polars for nothing else, and importing
it costs about 0.3 s of CPU in every batch of every night. A table shows itself as HTML in the
executed notebook and as text in a terminal; `to_polars()` hands it to polars for analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipeline.consolidator import tools
from pipeline.consolidator.batch_input import BatchInput

if TYPE_CHECKING:
    import polars as pl

__all__ = ["Table", "candidates_table", "commitments_table", "manifest_table", "tokens_table"]

TEXT_WIDTH = 100  # longer cell texts are cut, in HTML and text alike


@dataclass(frozen=True)
class Table:
    """Rows under named columns, each column of one type (str, int, float or bool; a cell may be None)."""

    schema: tuple[tuple[str, type], ...]
    rows: tuple[tuple[Any, ...], ...]

    @classmethod
    def of(cls, schema: dict[str, type], records: list[dict[str, Any]]) -> Table:
        for record in records:
            for name, kind in schema.items():
                value = record[name]
                if value is not None and not isinstance(value, kind):
                    raise TypeError(f"column {name!r} holds {type(value).__name__} {value!r}, not {kind.__name__}")
        return cls(tuple(schema.items()), tuple(tuple(r[name] for name in schema) for r in records))

    @property
    def columns(self) -> list[str]:
        return [name for name, _ in self.schema]

    def __len__(self) -> int:
        return len(self.rows)

    def to_polars(self) -> pl.DataFrame:
        import polars as pl

        dtypes = {str: pl.String, int: pl.Int64, float: pl.Float64, bool: pl.Boolean}
        return pl.DataFrame([list(r) for r in self.rows], schema={n: dtypes[k] for n, k in self.schema},
                            orient="row")

    def _cells(self) -> list[list[str]]:
        return [["null" if v is None else _cut(str(v)) for v in row] for row in self.rows]

    def _repr_html_(self) -> str:
        from pipeline.templates import render

        return render("notebook_table.html.j2", schema=[(n, k.__name__) for n, k in self.schema], rows=self._cells())

    def __str__(self) -> str:
        grid = [self.columns, *self._cells()]
        widths = [max(len(r[i]) for r in grid) for i in range(len(self.schema))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in grid]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join([f"{len(self.rows)} rows", *lines])

    __repr__ = __str__


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TEXT_WIDTH else text[: TEXT_WIDTH - 1] + "…"


_MANIFEST = {"sessionId": str, "slug": str, "firstAt": str, "lastAt": str, "prompts": int, "turns": int,
             "lineCount": int, "sizeBytes": int, "newFromLine": int, "linkedMemories": int}


def manifest_table(session_ids: list[str], source: BatchInput) -> Table:
    """The batch as list_sessions shows it, from the batch's input."""
    with source.reading() as con:
        entries = tools.list_sessions(con, session_ids)
    return Table.of(_MANIFEST, [
        {k: e[k] for k in _MANIFEST if k != "linkedMemories"} | {"linkedMemories": len(e["linkedMemories"])}
        for e in entries
    ])


def candidates_table(result: Any) -> Table:
    answer = result.answer
    return Table.of({"kind": str, "claim": str, "entities": str, "sessions": int, "quotes": int}, [
        {"kind": c.kind, "claim": c.claim, "entities": ", ".join(f"{e.type}:{e.name}" for e in c.entities),
         "sessions": len({e.sessionId for e in c.evidence}), "quotes": len(c.evidence)}
        for c in (answer.candidates if answer else [])
    ])


def commitments_table(result: Any) -> Table:
    answer = result.answer
    return Table.of({"actor": str, "statement": str, "dueHint": str, "confidence": float, "resolved": bool,
                     "session": str}, [
        {"actor": c.actor, "statement": c.statement, "dueHint": c.dueHint, "confidence": float(c.confidence),
         "resolved": c.resolved, "session": c.evidence[0].sessionId}
        for c in (answer.commitments if answer else [])
    ])


def tokens_table(result: Any) -> Table:
    t = result.run.tokens
    return Table.of({"outcome": str, "reason": str, "prompt_tokens": int, "cached_tokens": int,
                     "completion_tokens": int, "cached_share": float, "tool_calls": int, "submits": int}, [{
        "outcome": result.outcome, "reason": result.reason, "prompt_tokens": t.prompt, "cached_tokens": t.cached,
        "completion_tokens": t.completion,
        "cached_share": None if result.run.cached_share is None else float(result.run.cached_share),
        "tool_calls": result.run.used.tool_calls, "submits": result.run.used.submits,
    }])
