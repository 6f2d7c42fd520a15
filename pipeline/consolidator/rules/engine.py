"""The offline rules engine: what plain rules can find honestly, under the same answer contract.

No model and no network. It reads every session of the batch (one `scan` entry per session in the
tool log, every scanned session named in readSessionIds) through the analyst views: tool calls with
their results (`tool_calls`, `tool_results`: `is_error` and `exit_code`), and what the user and the
agent said (`messages`). Then, each rule explained in its own module:

* `tool_runs`: which calls failed (and which "failures" are not: empty searches, refusals, sandbox
  retries), subagent replays counted once;
* `error_shapes` (with `workarounds`): failures whose normalised shape recurs, with what worked next;
* `missing_programs`: programs the machine does not have (not-found errors, failed lookups), with the
  program that ran in their place;
* `routines`: environment prefixes, pinned program paths, and checks or steps run in most sessions;
* `commitments` (with `promise_phrases`): promises left outstanding at the end of a turn, in eight
  languages.

Everything is deterministic: same batch input, same answer. It reads the batch's input folder, never
the warehouse. It refuses rather than pads: a finding the rules are not sure of is left out. The
answer goes through the same contract as a model's; a quote the checker would not find, or that the
memory's own text repeats, is dropped before submission rather than allowed to refuse the whole
answer. A claim a reviewer took back (`pipeline memories drop`) is not proposed again.

Secrets are masked in what the rules read before anything else happens to it (`masked`): error
shapes are normalised from masked text, so a key can never come out of the normaliser with its
digits turned into `<n>` and the rest of it intact. Quotes then hold masks, which the contract's
mask rule verifies against the stored lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import duckdb

from pipeline.consolidator.context import BatchContext, EngineResult, Recorder, utc_now
from pipeline.consolidator.contract import MIN_CANDIDATE_EVIDENCE, QUOTE_LEAK_MIN, check_answer, written_text
from pipeline.consolidator.quotes import WarehouseQuotes
from pipeline.consolidator.rules import shell_commands as sh
from pipeline.consolidator.rules.commitments import Message, commitment_entry, find_commitments
from pipeline.consolidator.rules.error_shapes import (
    MAX_EVIDENCE_ITEMS,
    find_error_patterns,
    pattern_candidate,
    session_runs,
)
from pipeline.consolidator.rules.missing_programs import find_missing_programs, missing_candidate
from pipeline.consolidator.rules.routines import find_routines, project_name, routine_candidate
from pipeline.consolidator.rules.tool_runs import ToolResult, distinct_runs
from pipeline.secrets.gate import SecretSet
from pipeline.warehouse import db

__all__ = ["BatchText", "build_answer", "dropped_claims", "leave_out_dropped", "masked", "read_batch", "run_rules"]

@dataclass(frozen=True)
class BatchText:
    """What the rules read of a batch: tool runs, what was said, and each session's size and project."""

    runs: list[ToolResult]
    messages: list[Message]
    lines: dict[str, tuple[int, int]]  # session → (line count, characters)
    slugs: dict[str, str | None]
    cwds: dict[str, str | None] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)


# Tools whose call asks the user and waits for the answer (Claude Code's, Codex's): the turn ends there.
ASKS_THE_USER = frozenset({"AskUserQuestion", "ExitPlanMode", "request_user_input"})

def _has_column(con: duckdb.DuckDBPyConnection, view: str, column: str) -> bool:
    rows = con.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_name = ? AND column_name = ?", [view, column]
    ).fetchall()
    return bool(rows)


def read_batch(con: duckdb.DuckDBPyConnection, session_ids: Sequence[str]) -> BatchText:
    """Read the batch through the analyst views (`tool_calls`, `tool_results`, `messages`); ids are bound."""
    in_batch = "session_id IN (SELECT unnest(?::VARCHAR[]))"
    ids = [list(session_ids)]
    # A warehouse whose views predate `tool_results.exit_code` reads it as unknown.
    exit_code = "r.exit_code" if _has_column(con, "tool_results", "exit_code") else "CAST(NULL AS INTEGER)"
    runs = con.execute(
        f"""
        WITH c AS (SELECT session_id, line_no, name, call_id, CAST(input AS VARCHAR) AS input FROM tool_calls WHERE {in_batch}),
             r AS (SELECT * FROM tool_results WHERE {in_batch})
        SELECT coalesce(c.session_id, r.session_id), coalesce(r.line_no, c.line_no), r.text, r.is_error, {exit_code},
               c.name, c.input, coalesce(c.call_id, r.call_id), c.line_no, r.line_no IS NOT NULL
        FROM c FULL OUTER JOIN r ON c.session_id = r.session_id AND c.call_id = r.call_id
        ORDER BY 1, coalesce(c.line_no, r.line_no), 2
        """,
        [*ids, *ids],
    ).fetchall()
    said = con.execute(
        f"SELECT session_id, line_no, role, text, \"at\", is_prompt FROM messages WHERE role IN ('user', 'assistant') "
        f"AND text IS NOT NULL AND {in_batch} ORDER BY session_id, line_no",
        ids,
    ).fetchall()
    sizes = con.execute(
        f"SELECT session_id, count(*), sum(length(text)) FROM lines WHERE {in_batch} GROUP BY session_id", ids
    ).fetchall()
    about = con.execute(f"SELECT session_id, slug, cwd, parent_session_id FROM sessions WHERE {in_batch}", ids).fetchall()
    return BatchText(
        runs=[
            ToolResult(sid, int(n), text or "", is_error=bool(err), exit_code=code, name=name, tool_input=inp,
                       call_id=cid, call_line=int(cl) if cl is not None else None, has_result=bool(has))
            for sid, n, text, err, code, name, inp, cid, cl, has in runs
        ],
        messages=[Message(sid, int(n), role, text, at, prompt) for sid, n, role, text, at, prompt in said],
        lines={sid: (int(count), int(chars or 0)) for sid, count, chars in sizes},
        slugs={sid: slug for sid, slug, _, _ in about},
        cwds={sid: cwd for sid, _, cwd, _ in about},
        parents={sid: parent for sid, _, _, parent in about},
    )


def masked(text: BatchText, known: SecretSet) -> BatchText:
    """The batch as the rules may read it: every known secret of the batch masked in every text the
    rules read (tool output, tool input, what was said). Only the batch's known values are masked
    (they were detected on the stored lines), so that the contract, which masks the stored lines with
    the same values, finds the quotes again."""
    if not known:
        return text

    def inp(value: Any) -> Any:
        if isinstance(value, str):
            return known.mask_known(value)
        if isinstance(value, dict):
            return {k: inp(v) for k, v in value.items()}
        if isinstance(value, list):
            return [inp(v) for v in value]
        return value

    return replace(
        text,
        runs=[replace(r, text=known.mask_known(r.text), tool_input=inp(r.tool_input)) for r in text.runs],
        messages=[replace(m, text=known.mask_known(m.text)) for m in text.messages],
    )


def _reading_order(session_ids: Sequence[str], parents: Mapping[str, str | None]) -> list[str]:
    """The batch's sessions, subagent files after the others (so a replay loses to its original)."""
    return sorted(session_ids, key=lambda s: (parents.get(s) is not None, list(session_ids).index(s)))


def _keep_quotes_out(candidate: dict[str, Any]) -> dict[str, Any] | None:
    """Memory text never repeats an evidence quote (quotes belong in the commit message): where the
    gist holds one, that mention is shortened. A claim that holds one is the error's text pasted
    with nothing a person can act on (a claim with a remedy names the error by a shorter head): the
    candidate is dropped rather than left with a claim cut in the middle of a word."""
    claim, gist = candidate["claim"], candidate["gist"]
    # A shorter quote is a name ("ENOTEMPTY", "pytest -q") that a memory's text may hold (the contract's rule).
    quotes = sorted((q for i in candidate["evidence"] if len((q := i["quote"]).strip()) >= QUOTE_LEAK_MIN),
                    key=len, reverse=True)
    if any(q in claim for q in quotes):
        return None
    for quote in quotes:
        short = quote[: max(1, min(40, len(quote) // 2))].rstrip() + "…"
        claim, gist = claim.replace(quote, short), gist.replace(quote, short)
    entities = [e for e in candidate["entities"] if not any(q in e["name"] for q in quotes)]
    return {**candidate, "claim": claim, "gist": gist, "entities": entities or [{"type": "unknown", "name": "unknown"}]}


def _one_per_claim(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Candidates that would be written with the same claim are one memory: two error shapes that read
    the same once named ("no matches found" for a `[id]` path and for a `(group)` path) keep the first
    one's text and both one's evidence, rather than landing as a memory and a link to it."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for candidate in candidates:
        key = (candidate["kind"], " ".join(candidate["claim"].lower().split()))
        first = merged.get(key)
        if first is None:
            merged[key] = candidate
            continue
        seen = {(e["sessionId"], e["quote"]) for e in first["evidence"]}
        extra = [e for e in candidate["evidence"] if (e["sessionId"], e["quote"]) not in seen]
        first["evidence"] = (first["evidence"] + extra)[:MAX_EVIDENCE_ITEMS]
    return list(merged.values())


def build_answer(
    results: Iterable[ToolResult],
    messages: Sequence[Message],
    session_ids: Sequence[str],
    *,
    new_from_line: Mapping[str, int] | None = None,
    slugs: Mapping[str, str | None] | None = None,
    cwds: Mapping[str, str | None] | None = None,
    parents: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """The rules engine's answer for a batch whose every session was read (pure: no warehouse)."""
    slugs = slugs or {}
    order = _reading_order(session_ids, parents or {})
    runs = distinct_runs(results, order)
    # Each session is named from its own folder; one that does not know it takes the name its slug has
    # in a session that does. A memory's project wording comes from the sessions it cites, so names are
    # kept per session: sessions without a slug must not all take the first one's name.
    by_slug: dict[str, str] = {}
    for sid in order:
        slug, cwd = slugs.get(sid), (cwds or {}).get(sid)
        if slug is not None and cwd:
            by_slug.setdefault(slug, project_name(slug, cwd))
    names: dict[str | None, str] = {
        sid: project_name(slugs.get(sid), (cwds or {}).get(sid)) if (cwds or {}).get(sid)
        else by_slug.get(slugs.get(sid) or "", project_name(slugs.get(sid), None))
        for sid in order
    }
    # A subagent's file belongs to its parent's session when sessions are counted.
    roots = {sid: parent for sid, parent in (parents or {}).items() if parent and parent in session_ids}
    patterns = find_error_patterns(runs, order, new_from_line, roots, cwds)
    routines = find_routines(runs, order, slugs, new_from_line, roots)
    pinned = frozenset(sh.program_name(r.key).lower() for r in routines if r.kind == "path")
    missing = find_missing_programs(runs, order, new_from_line, roots, pinned)
    # A pattern of not-found errors of a program already written as missing is the same finding.
    sighted = {(a.run.session_id, a.run.line_no) for m in missing for items in m.sightings.values() for a in items}
    patterns = [p for p in patterns
                if not all((r.session_id, r.line_no) in sighted for runs_ in p.runs.values() for r in runs_)]
    calls: dict[str, list[int]] = {}
    edits: dict[str, list[tuple[int, str]]] = {}  # the files each session's calls wrote (a kept promise shows there)
    ran: dict[str, list[tuple[int, str]]] = {}  # the commands each session ran successfully (likewise)
    asks: dict[str, list[int]] = {}  # calls that put a question or a plan to the user and wait: a turn ends there
    for run in runs:
        if run.call_line is not None and (run.name or "") in ASKS_THE_USER:
            asks.setdefault(run.session_id, []).append(run.call_line)
        elif run.call_line is not None:
            calls.setdefault(run.session_id, []).append(run.call_line)
            if run.worked:
                for path in sh.written_files(run.name or "", run.tool_input):
                    edits.setdefault(run.session_id, []).append((run.call_line, path))
                if run.command:
                    ran.setdefault(run.session_id, []).append((run.call_line, " ".join(run.command.split())))
    commitments = find_commitments(
        messages, new_from_line, slugs, {s: sorted(v) for s, v in calls.items()}, {s: sorted(v) for s, v in edits.items()},
        asks, {s: sorted(v) for s, v in ran.items()},
    )
    by_session = session_runs(runs, order)
    candidates = ([missing_candidate(m, names) for m in missing] + [pattern_candidate(p, slugs, names, by_session, cwds) for p in patterns]
                  + [routine_candidate(r, names) for r in routines])
    return {
        "candidates": _one_per_claim([kept for c in candidates if (kept := _keep_quotes_out(c)) is not None]),
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
        if len(evidence) >= MIN_CANDIDATE_EVIDENCE:
            candidates.append({**candidate, "evidence": evidence})
    commitments = [c for c in answer["commitments"] if ok(c["evidence"])]
    return {**answer, "candidates": candidates, "commitments": commitments}


def dropped_claims(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    """(kind, claim in lowercase with single spaces) of every memory a reviewer took back."""
    if not db.has_tables(con, "dropped_memories"):
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
            text.runs, text.messages, ctx.session_ids, new_from_line=ctx.new_from_line, slugs=text.slugs,
            cwds=text.cwds, parents=text.parents,
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
