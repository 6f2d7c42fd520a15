"""The offline rules engine: what plain rules can find honestly, under the same answer contract.

No model and no network. It reads every session of the batch (one `scan` entry per session in the
tool log, every scanned session named in readSessionIds) and reports recurring error shapes
(`pipeline.consolidator.error_shapes`) and first-person commitments (`pipeline.consolidator.commitments`). Everything is
deterministic: same batch input, same answer. It reads the batch's input folder, never the warehouse. The answer goes through the same contract
as a model's; a quote the checker would not find is dropped before submission rather than allowed
to refuse the whole answer.

Secrets are masked in what the rules read before anything else happens to it (`masked`): error
shapes are normalised from masked text, so a key can never come out of the normaliser with its
digits turned into `<n>` and the rest of it intact. Quotes then hold masks, which the contract's
mask rule verifies against the stored lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from pipeline.consolidator.commitments import Message, commitment_entry, find_commitments
from pipeline.consolidator.context import BatchContext, EngineResult, Recorder, utc_now
from pipeline.consolidator.contract import check_answer, written_text
from pipeline.consolidator.error_shapes import ToolResult, find_error_patterns, pattern_candidate
from pipeline.consolidator.quotes import WarehouseQuotes
from pipeline.secret_gate import SecretSet

__all__ = ["BatchText", "build_answer", "masked", "read_batch", "run_rules"]


@dataclass(frozen=True)
class BatchText:
    """What the rules read of a batch: failed tool calls, what was said, and each session's size."""

    failed_calls: list[ToolResult]
    messages: list[Message]
    lines: dict[str, tuple[int, int]]  # session → (line count, characters)
    slugs: dict[str, str | None]


def read_batch(con: duckdb.DuckDBPyConnection, session_ids: Sequence[str]) -> BatchText:
    """Read the batch through the analyst views (`tool_results`, `messages`); ids are bound."""
    in_batch = "session_id IN (SELECT unnest(?::VARCHAR[]))"
    ids = [list(session_ids)]
    failed = con.execute(
        f"SELECT session_id, line_no, text FROM tool_results WHERE is_error AND text IS NOT NULL AND {in_batch} "
        "ORDER BY session_id, line_no",
        ids,
    ).fetchall()
    said = con.execute(
        f"SELECT session_id, line_no, role, text, \"at\" FROM messages WHERE role IN ('user', 'assistant') "
        f"AND text IS NOT NULL AND {in_batch} ORDER BY session_id, line_no",
        ids,
    ).fetchall()
    sizes = con.execute(
        f"SELECT session_id, count(*), sum(length(text)) FROM lines WHERE {in_batch} GROUP BY session_id", ids
    ).fetchall()
    slugs = con.execute(f"SELECT session_id, slug FROM sessions WHERE {in_batch}", ids).fetchall()
    return BatchText(
        failed_calls=[ToolResult(sid, int(n), text) for sid, n, text in failed],
        messages=[Message(sid, int(n), role, text, at) for sid, n, role, text, at in said],
        lines={sid: (int(count), int(chars or 0)) for sid, count, chars in sizes},
        slugs=dict(slugs),
    )


def masked(text: BatchText, known: SecretSet) -> BatchText:
    """The batch as the rules may read it: every known secret of the batch masked in every text.
    Only the batch's known values are masked (they were detected on the stored lines), so that the
    contract, which masks the stored lines with the same values, finds the quotes again."""
    if not known:
        return text
    return BatchText(
        failed_calls=[ToolResult(r.session_id, r.line_no, known.mask_known(r.text)) for r in text.failed_calls],
        messages=[Message(m.session_id, m.line_no, m.role, known.mask_known(m.text), m.at) for m in text.messages],
        lines=text.lines,
        slugs=text.slugs,
    )


def build_answer(
    results: Iterable[ToolResult],
    messages: Sequence[Message],
    session_ids: Sequence[str],
    *,
    new_from_line: Mapping[str, int] | None = None,
    slugs: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """The rules engine's answer for a batch whose every session was read (pure: no warehouse)."""
    patterns = find_error_patterns(results, session_ids, new_from_line)
    commitments = find_commitments(messages, new_from_line, slugs)
    return {
        "candidates": [pattern_candidate(p, slugs or {}) for p in patterns],
        "commitments": [commitment_entry(c) for c in commitments],
        "readSessionIds": list(session_ids),
    }


def _drop_unquotable(answer: dict[str, Any], quotes: WarehouseQuotes) -> dict[str, Any]:
    """Keep only findings whose quotes the contract will find (belt and braces: rules quote what
    they read, but a quote the checker cannot see would refuse the whole answer)."""

    def ok(evidence: list[dict[str, str]]) -> list[dict[str, str]]:
        return [e for e in evidence if quotes.contains(e["sessionId"], e["quote"])]

    candidates = []
    for candidate in answer["candidates"]:
        evidence = ok(candidate["evidence"])
        if len({e["sessionId"] for e in evidence}) >= 2:
            candidates.append({**candidate, "evidence": evidence})
    commitments = [c for c in answer["commitments"] if ok(c["evidence"])]
    return {**answer, "candidates": candidates, "commitments": commitments}


def dropped_claims(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    """(kind, claim in lowercase with single spaces) of every memory a reviewer took back."""
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_catalog = current_database() "
        "AND table_name = 'dropped_memories'"
    ).fetchone()
    if not exists or not exists[0]:
        return set()  # a warehouse from before memories could be dropped
    return {(kind, _normalised(claim)) for kind, claim in con.execute("SELECT kind, claim FROM dropped_memories").fetchall()}


def _normalised(claim: str) -> str:
    return " ".join(claim.lower().split())


def leave_out_dropped(answer: dict[str, Any], dropped: set[tuple[str, str]]) -> tuple[dict[str, Any], int]:
    """The answer without the candidates whose claim, as it would be written, a reviewer took back."""
    kept = [c for c in answer["candidates"]
            if (c["kind"], _normalised(written_text(c["claim"], "", [])[0])) not in dropped]
    return {**answer, "candidates": kept}, len(answer["candidates"]) - len(kept)


def run_rules(ctx: BatchContext, recorder: Recorder) -> EngineResult:
    """Scan every session of the batch, build the answer, and check it with the contract."""
    ctx.emit("engine", f"engine rules: scanning {len(ctx.session_ids)} session(s), no model involved")
    # No model to wait on, so one connection to the batch's input for the whole (short) scan.
    with ctx.source.reading() as con:
        at = utc_now()
        text = masked(read_batch(con, ctx.session_ids), ctx.secrets)
        for sid in ctx.session_ids:
            count, chars = text.lines.get(sid, (0, 0))
            recorder.tool("scan", {"sessionId": sid}, session_id=sid, ok=True, result_chars=chars, at=at)
            ctx.emit("tool_call", f"scan {sid}: {count} lines", name="scan", sessionId=sid, ok=True)
        quotes = WarehouseQuotes(con, ctx.secrets)
        answer = build_answer(
            text.failed_calls, text.messages, ctx.session_ids, new_from_line=ctx.new_from_line, slugs=text.slugs
        )
        answer = _drop_unquotable(answer, quotes)
        # A claim a reviewer took back (`pipeline memories drop`) is not proposed again.
        answer, left_out = leave_out_dropped(answer, dropped_claims(con))
        if left_out:
            ctx.emit("engine", f"left out {left_out} candidate(s) whose claim a reviewer dropped earlier")
        at = utc_now()
        result = check_answer(answer, ctx.session_ids, quotes)
    recorder.tool("submit_answer", answer, session_id=None, ok=result.accepted, result_chars=len(result.tool_result()), at=at)
    if result.accepted:
        ctx.emit(
            "submit",
            f"answer accepted: {len(answer['candidates'])} candidate(s), {len(answer['commitments'])} commitment(s)",
            attempt=1, accepted=True,
        )
        return EngineResult("accepted", "answer accepted on attempt 1", answer=result.answer, submits=1)
    recorder.refusal(1, result.problems)
    ctx.emit("submit", f"answer refused: {len(result.problems)} problem(s)", attempt=1, accepted=False)
    return EngineResult("refused", f"the contract refused the rules answer ({len(result.problems)} problem(s))", submits=1)
