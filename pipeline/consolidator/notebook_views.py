"""Tables the consolidate notebook shows: thin, testable views of a batch and its result."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.consolidator import tools
from pipeline.consolidator.batch_input import BatchInput


def manifest_table(session_ids: list[str], source: BatchInput) -> pl.DataFrame:
    """The batch as list_sessions shows it, from the batch's input."""
    with source.reading() as con:
        entries = tools.list_sessions(con, session_ids)
    return pl.DataFrame([
        {k: e[k] for k in ("sessionId", "slug", "firstAt", "lastAt", "prompts", "turns", "lineCount", "sizeBytes", "newFromLine")}
        | {"linkedMemories": len(e["linkedMemories"])}
        for e in entries
    ])


def candidates_table(result: Any) -> pl.DataFrame:
    answer = result.answer
    rows = [
        {"kind": c.kind, "claim": c.claim, "entities": ", ".join(f"{e.type}:{e.name}" for e in c.entities),
         "sessions": len({e.sessionId for e in c.evidence}), "quotes": len(c.evidence)}
        for c in (answer.candidates if answer else [])
    ]
    cols = {"kind": pl.String, "claim": pl.String, "entities": pl.String, "sessions": pl.Int64, "quotes": pl.Int64}
    return pl.DataFrame(rows) if rows else pl.DataFrame(schema=cols)


def commitments_table(result: Any) -> pl.DataFrame:
    answer = result.answer
    rows = [
        {"actor": c.actor, "statement": c.statement, "dueHint": c.dueHint, "confidence": c.confidence,
         "resolved": c.resolved, "session": c.evidence[0].sessionId}
        for c in (answer.commitments if answer else [])
    ]
    cols = ["actor", "statement", "dueHint", "confidence", "resolved", "session"]
    return pl.DataFrame(rows) if rows else pl.DataFrame(schema=dict.fromkeys(cols, pl.String))


def tokens_table(result: Any) -> pl.DataFrame:
    t = result.run.tokens
    return pl.DataFrame([{
        "outcome": result.outcome, "reason": result.reason, "prompt_tokens": t.prompt, "cached_tokens": t.cached,
        "completion_tokens": t.completion, "cached_share": result.run.cached_share,
        "tool_calls": result.run.used.tool_calls, "submits": result.run.used.submits,
    }])
