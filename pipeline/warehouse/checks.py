"""Invariants that must hold on any folder of real transcripts (`pipeline check-real`, `make check-real`).

`run_checks(folder)` ingests the folder into a scratch warehouse and checks, on every session, what
the warehouse derives against small, independent re-readings of the files themselves (plain
`json.loads`, line by line; none of the SQL or polars that ingest uses):

* no `llm_calls` row has a negative token count;
* each session's usage equals a recount (Codex: `last_token_usage` of each new running total;
  Claude Code: the last line of each message id + request id);
* `tool_results.exit_code` equals the status the transcript records wherever it records one, and
  `is_error` is true exactly for the failures;
* `sessions.prompts`, the number of `messages.is_prompt` rows and a recount agree;
* every stored line equals the file's line byte for byte;
* figures without a pass or fail: sessions whose model is not recorded, formats detected, secrets
  found and masked per kind (what the consolidator's tools would hide from a model).

Each invariant is a function registered with :func:`invariant`; it receives a :class:`RealSet`
(the scratch warehouse, the files, their parsed records) and returns a :class:`CheckResult`, which
the command prints as one line. Adding an invariant is adding one decorated function.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from pipeline.errors import UsageError
from pipeline.warehouse import formats, prompt_rules

__all__ = ["INVARIANTS", "CheckReport", "CheckResult", "RealSet", "invariant", "run_checks"]

Json = dict[str, Any]
EXAMPLES = 5  # failures listed per invariant


@dataclass
class CheckResult:
    """One invariant's outcome: `ok` is None for a figure that cannot fail."""

    name: str
    ok: bool | None
    summary: str
    figures: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def line(self) -> str:
        mark = "info" if self.ok is None else "ok" if self.ok else "FAIL"
        return f"{mark:<5}{self.name}: {self.summary}"

    def to_json(self) -> Json:
        return {"name": self.name, "ok": self.ok, "summary": self.summary, "figures": self.figures,
                "failures": self.failures}


@dataclass
class CheckReport:
    folder: str
    files: int
    results: list[CheckResult]

    @property
    def ok(self) -> bool:
        return all(r.ok is not False for r in self.results)

    def lines(self) -> list[str]:
        out = [r.line() for r in self.results]
        for r in self.results:
            out += [f"     {r.name}: {f}" for f in r.failures]
        return out

    def to_json(self) -> Json:
        return {"folder": self.folder, "files": self.files, "ok": self.ok, "invariants": [r.to_json() for r in self.results]}


@dataclass
class RealSet:
    """What an invariant may look at: the scratch warehouse and the files it was built from."""

    con: duckdb.DuckDBPyConnection
    folder: Path
    paths: dict[str, Path]  # session id → file
    formats: dict[str, str]  # session id → detected format
    _records: dict[str, list[Json | None]] = field(default_factory=dict)

    def sessions(self, fmt: str | None = None) -> list[str]:
        return sorted(sid for sid, f in self.formats.items() if fmt is None or f == fmt)

    def records(self, session_id: str) -> list[Json | None]:
        """The file's complete lines parsed one by one (None for a line that is not a JSON object)."""
        if session_id not in self._records:
            out: list[Json | None] = []
            for raw in _complete_lines(self.paths[session_id].read_bytes()):
                try:
                    rec = json.loads(raw.decode("utf-8", "replace"))
                except ValueError:
                    rec = None
                out.append(rec if isinstance(rec, dict) else None)
            self._records[session_id] = out
        return self._records[session_id]


Invariant = Callable[[RealSet], CheckResult]
INVARIANTS: list[tuple[str, Invariant]] = []


def invariant(name: str) -> Callable[[Invariant], Invariant]:
    """Register a check; they run, and print, in the order they are registered."""

    def register(fn: Invariant) -> Invariant:
        INVARIANTS.append((name, fn))
        return fn

    return register


def run_checks(folder: str | Path, *, db: str | Path | None = None) -> CheckReport:
    """Ingest `folder` into a scratch warehouse (or `db`) and run every registered invariant."""
    from pipeline.warehouse import db as warehouse
    from pipeline.warehouse import ingest

    root = Path(folder)
    if not root.is_dir():
        raise UsageError(
            f"no folder of real transcripts at {root}: pass one (make check-real REAL=DIR, pipeline check-real DIR)"
        )
    with tempfile.TemporaryDirectory(prefix="check-real-") as tmp:
        target = Path(db) if db is not None else Path(tmp) / "warehouse.duckdb"
        with warehouse.writing(target) as con:
            report = ingest.ingest(con, [root])
            if not report.files:
                raise UsageError(f"{root} holds no *.jsonl transcript")
            rows = con.execute("SELECT session_id, path, format FROM sessions ORDER BY session_id").fetchall()
            real = RealSet(con, root, {r[0]: Path(r[1]) for r in rows}, {r[0]: r[2] for r in rows})
            results = [fn(real) for _name, fn in INVARIANTS]
    return CheckReport(str(root), len(real.paths), results)


# --------------------------------------------------------------------------- reading files


def _complete_lines(data: bytes) -> list[bytes]:
    """The lines a reader stores: split on \\n only; a last line without its newline is not yet one."""
    parts = data.split(b"\n")
    return parts[:-1]


def _item(rec: Json) -> Json | None:
    """A Codex line's item: a response_item's payload, or a bare item of the 2025 format."""
    if rec.get("type") == "response_item" and isinstance(rec.get("payload"), dict):
        return rec["payload"]
    if "payload" not in rec and rec.get("type") in prompt_rules.CODEX_BARE_ITEMS:
        return rec
    return None


def _n(value: Any) -> str:
    return f"{value:,}"


# --------------------------------------------------------------------------- usage


def codex_recount(records: list[Json | None]) -> Json:
    """Usage of a Codex rollout, recounted from its token_count events.

    A running total seen before (a repeated event, or a replay after review mode) is no new
    response; a response's tokens are its `last_token_usage` (the difference of running totals
    when that is missing); a forked rollout's events before its own first turn are its parent's.
    """
    usage = {"prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0, "calls": 0, "negative": 0}
    seen: set[tuple[Any, ...]] = set()
    previous: Json | None = None
    own, created, meta_seen = True, None, False
    for rec in records:
        if rec is None:
            continue
        payload: Json = rec["payload"] if isinstance(rec.get("payload"), dict) else {}
        if rec.get("type") == "session_meta" and not meta_seen:
            meta_seen = True
            if not payload.get("forked_from_id"):
                continue
            own = False
            stamp = payload.get("timestamp")
            created = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if isinstance(stamp, str) else None
        if not own and rec.get("type") == "event_msg" and payload.get("type") == "task_started":
            started = payload.get("started_at")
            own = started is None or created is None or float(started) >= int(created)
        info = payload.get("info") if rec.get("type") == "event_msg" and payload.get("type") == "token_count" else None
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if not isinstance(total, dict):
            continue
        key = tuple(total.get(k) for k in ("input_tokens", "cached_input_tokens", "output_tokens",
                                          "reasoning_output_tokens", "total_tokens"))
        if key in seen:
            previous = total
            continue
        seen.add(key)
        if own:
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            if isinstance(last, dict) and last.get("input_tokens") is not None:
                p, c, o = last["input_tokens"], last.get("cached_input_tokens") or 0, last.get("output_tokens") or 0
            else:
                before = previous or {}
                p = total["input_tokens"] - before.get("input_tokens", 0)
                c = (total.get("cached_input_tokens") or 0) - (before.get("cached_input_tokens") or 0)
                o = total["output_tokens"] - before.get("output_tokens", 0)
            if min(p, c, o) < 0:
                usage["negative"] += 1
            else:
                usage["prompt_tokens"] += p
                usage["cached_tokens"] += c
                usage["completion_tokens"] += o
                usage["calls"] += 1
        previous = total
    return usage


def claude_responses(records: list[Json | None]) -> dict[tuple[str, Any], Json]:
    """A Claude Code file's responses by message id + request id: the line with the largest usage."""
    best: dict[tuple[str, Any], Json] = {}

    def total(u: Json) -> int:
        return sum(u.get(k) or 0 for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
                                            "output_tokens"))

    for rec in records:
        if rec is None or rec.get("type") != "assistant" or not isinstance(rec.get("message"), dict):
            continue
        msg = rec["message"]
        if not msg.get("id") or msg.get("model") == "<synthetic>":
            continue
        usage = msg.get("usage") if isinstance(msg.get("usage"), dict) else {}
        key = (msg["id"], rec.get("requestId"))
        if key not in best or total(usage) >= total(best[key]):
            best[key] = usage
    return best


def claude_recount(records: list[Json | None], copied: set[tuple[str, Any]] | frozenset = frozenset()) -> Json:
    """Usage of a Claude Code file, leaving out the responses in `copied` (its parent's)."""
    own = {k: u for k, u in claude_responses(records).items() if k not in copied}
    usage = {"prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0, "calls": len(own), "negative": 0}
    for u in own.values():
        read, write = u.get("cache_read_input_tokens") or 0, u.get("cache_creation_input_tokens") or 0
        usage["prompt_tokens"] += (u.get("input_tokens") or 0) + read + write
        usage["cached_tokens"] += read
        usage["completion_tokens"] += u.get("output_tokens") or 0
    return usage


@invariant("no negative count")
def _no_negative(real: RealSet) -> CheckResult:
    rows, negative = real.con.execute(
        "SELECT count(*), count(*) FILTER (WHERE prompt_tokens < 0 OR cached_tokens < 0 OR cache_write_tokens < 0 "
        "OR completion_tokens < 0) FROM llm_calls"
    ).fetchall()[0]
    kept_out = real.con.execute("SELECT count(*) FROM ingest_problems WHERE kind = 'negative-usage'").fetchall()[0][0]
    return CheckResult(
        "no negative count", negative == 0,
        f"{_n(rows)} llm_calls rows, {negative} with a negative count; "
        f"{kept_out} would-be negative Codex events kept out (listed in ingest_problems)",
        {"rows": rows, "negative": negative, "keptOut": kept_out},
    )


@invariant("usage = recount")
def _usage(real: RealSet) -> CheckResult:
    stored = {
        r[0]: {"prompt_tokens": r[1], "cached_tokens": r[2], "completion_tokens": r[3], "calls": r[4]}
        for r in real.con.execute(
            "SELECT session_id, coalesce(sum(prompt_tokens), 0), coalesce(sum(cached_tokens), 0), "
            "coalesce(sum(completion_tokens), 0), count(*) FROM usage GROUP BY session_id"
        ).fetchall()
    }
    figures: Json = {}
    failures: list[str] = []
    parts = []
    parents = dict(real.con.execute("SELECT session_id, parent_session_id FROM sessions").fetchall())
    for fmt in (formats.CODEX, formats.CLAUDE):
        ids = real.sessions(fmt)
        equal = 0
        totals = {"prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0, "calls": 0}
        for sid in ids:
            if fmt == formats.CODEX:
                want = codex_recount(real.records(sid))
            else:
                parent = parents.get(sid)
                copied = set(claude_responses(real.records(parent))) if parent in real.paths else set()
                want = claude_recount(real.records(sid), copied)
            got = stored.get(sid, {"prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0, "calls": 0})
            for k in totals:
                totals[k] += want[k]
            if all(got[k] == want[k] for k in totals):
                equal += 1
            else:
                failures.append(
                    f"{sid} ({fmt}): warehouse " + ", ".join(f"{k} {got[k]}" for k in totals)
                    + " ≠ recount " + ", ".join(f"{k} {want[k]}" for k in totals)
                )
        figures[fmt] = {"sessions": len(ids), "equal": equal, **totals}
        label = "last_token_usage recount" if fmt == formats.CODEX else "message-id recount (parent's copies left out)"
        parts.append(
            f"{equal}/{len(ids)} {fmt} sessions equal to the {label} "
            f"({_n(totals['calls'])} calls, {_n(totals['prompt_tokens'])} prompt, {_n(totals['cached_tokens'])} cached, "
            f"{_n(totals['completion_tokens'])} completion tokens)"
        )
    return CheckResult("usage = recount", not failures, "; ".join(parts), figures, failures[:EXAMPLES])


# --------------------------------------------------------------------------- tool results

_EXIT_LINE = re.compile(r"^(?:Exit code:|Process exited with code) (-?\d+)$", re.MULTILINE)
_SANDBOX_EXIT = re.compile(r"exit[ _]code:? (-?\d+)")
_CLAUDE_EXIT = re.compile(r"^Exit code (-?\d+)")
# A status-looking phrase near the top of an output: a format the parser above would miss.
_LOOKS_LIKE_STATUS = re.compile(r"(?i)\bexit(?:ed with)?[ _]?(?:code|status)\b")
_CODEX_FAILED = (
    "apply_patch verification failed", "failed in sandbox", "exec_command failed",
    "error: Failed to find expected lines", "error: invalid hunk", "error: invalid patch", "Script failed",
)


def codex_status(output: Any) -> tuple[int | None, str | None]:
    """The exit status a Codex tool output records (None when it records none), and its text."""
    if isinstance(output, list):
        inner: Any = output  # code mode stores the script's items as a JSON array, not as a string
        output = json.dumps(output)
    elif not isinstance(output, str):
        return None, None
    else:
        try:
            inner = json.loads(output)
        except ValueError:
            inner = None
    text = output
    if isinstance(inner, list):
        # code mode (`exec`): the script's text items; its status is its first failing command's, else its first
        text = "\n".join(i["text"] for i in inner if isinstance(i, dict) and isinstance(i.get("text"), str))
        codes = [int(c) for c in _EXIT_LINE.findall(text)]
        return next((c for c in codes if c != 0), codes[0] if codes else None), text
    if isinstance(inner, dict) and isinstance(inner.get("output"), str):
        text = inner["output"]
        code = (inner.get("metadata") or {}).get("exit_code") if isinstance(inner.get("metadata"), dict) else None
        if isinstance(code, int):
            return code, text
    header = output.split("\nOutput:\n", 1)[0]
    if m := _EXIT_LINE.search(header):
        return int(m.group(1)), text
    if output.startswith(("failed in sandbox", "exec_command failed")) and (m := _SANDBOX_EXIT.search(output)):
        return int(m.group(1)), text
    return None, text


@invariant("exit codes")
def _exit_codes(real: RealSet) -> CheckResult:
    stored = {
        (r[0], r[1], r[2]): (r[3], r[4])
        for r in real.con.execute("SELECT session_id, line_no, call_id, exit_code, is_error FROM tool_results").fetchall()
    }
    failures: list[str] = []
    fig = {"codexResults": 0, "codexWithStatus": 0, "codexNonZero": 0, "codexErrors": 0, "claudeResults": 0,
           "claudeWithStatus": 0, "claudeErrors": 0, "unparsedLookalikes": 0}
    lookalikes: list[str] = []
    for sid in real.sessions(formats.CODEX):
        for n, rec in enumerate(real.records(sid), 1):
            item = _item(rec) if rec else None
            if not item or item.get("type") not in ("function_call_output", "custom_tool_call_output"):
                continue
            fig["codexResults"] += 1
            code, text = codex_status(item.get("output"))
            failed = (code is not None and code != 0) or (text or "").startswith(_CODEX_FAILED)
            fig["codexWithStatus"] += code is not None
            fig["codexNonZero"] += code is not None and code != 0
            fig["codexErrors"] += failed
            got = stored.get((sid, n, item.get("call_id")))
            if got != (code, failed):
                failures.append(f"{sid}:{n}: warehouse exit_code, is_error = {got}, transcript says {(code, failed)}")
            if code is None and text and _LOOKS_LIKE_STATUS.search(text[:300]):
                fig["unparsedLookalikes"] += 1
                lookalikes.append(f"{sid}:{n}: {text[:80]!r}")
    for sid in real.sessions(formats.CLAUDE):
        for n, rec in enumerate(real.records(sid), 1):
            content = (rec or {}).get("message", {}).get("content") if (rec or {}).get("type") == "user" else None
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                fig["claudeResults"] += 1
                body = block.get("content")
                text = body if isinstance(body, str) else "\n".join(
                    b.get("text", "") for b in body or [] if isinstance(b, dict) and isinstance(b.get("text"), str))
                failed = block.get("is_error") is True
                m = _CLAUDE_EXIT.match(text) if failed else None
                code = int(m.group(1)) if m else None
                fig["claudeWithStatus"] += code is not None
                fig["claudeErrors"] += failed
                got = stored.get((sid, n, block.get("tool_use_id")))
                if got != (code, failed):
                    failures.append(f"{sid}:{n}: warehouse exit_code, is_error = {got}, transcript says {(code, failed)}")
    summary = (
        f"{_n(fig['codexWithStatus'])} of {_n(fig['codexResults'])} Codex results record a status "
        f"({fig['codexNonZero']} non-zero), {fig['codexErrors']} failures; "
        f"{fig['claudeWithStatus']} of {_n(fig['claudeResults'])} Claude Code results record one, "
        f"{fig['claudeErrors']} is_error; {len(failures)} disagree with the warehouse"
    )
    if fig["unparsedLookalikes"]:
        summary += f"; {fig['unparsedLookalikes']} outputs mention an exit status in a form not parsed"
    return CheckResult("exit codes", not failures, summary, fig, (failures + lookalikes)[:EXAMPLES])


# --------------------------------------------------------------------------- prompts


def _typed(text: Any, harness: tuple[str, ...]) -> bool:
    if not isinstance(text, str):
        return False
    stripped = text.lstrip(" \t\r\n")
    return bool(stripped) and not stripped.startswith(harness)


def claude_prompt(rec: Json | None) -> bool:
    """The prompt rule of `prompt_rules`, re-read in plain Python for a Claude Code record."""
    if not rec or rec.get("type") != "user" or rec.get("isMeta") is True or rec.get("isCompactSummary") is True:
        return False
    if isinstance(rec.get("agentId"), str) and rec["agentId"].startswith(prompt_rules.CLAUDE_HARNESS_AGENTS):
        return False
    content = (rec.get("message") or {}).get("content") if isinstance(rec.get("message"), dict) else None
    if isinstance(content, str):
        return _typed(content, prompt_rules.CLAUDE_NOT_PROMPT)
    if not isinstance(content, list) or not content:
        return False
    if isinstance(content[0], dict) and content[0].get("type") == "tool_result":
        return False
    return any(
        isinstance(b, dict) and (b.get("type") == "image" or (b.get("type") == "text" and _typed(b.get("text"), prompt_rules.CLAUDE_NOT_PROMPT)))
        for b in content
    )


def codex_prompt(rec: Json | None) -> bool:
    """The prompt rule of `prompt_rules`, re-read in plain Python for a Codex record."""
    item = _item(rec) if rec else None
    if not item or item.get("type") != "message" or item.get("role") != "user" or not isinstance(item.get("content"), list):
        return False
    return any(
        isinstance(b, dict) and (b.get("type") == "input_image" or (
            b.get("type") in ("input_text", "text") and _typed(b.get("text"), prompt_rules.CODEX_INJECTED)))
        for b in item["content"]
    )


@invariant("prompts agree")
def _prompts(real: RealSet) -> CheckResult:
    counted = dict(real.con.execute("SELECT session_id, prompts FROM sessions").fetchall())
    flagged = dict(real.con.execute("SELECT session_id, count(*) FROM messages WHERE is_prompt GROUP BY 1").fetchall())
    inherited = {
        r[0]: int(r[1] or 0)
        for r in real.con.execute(
            "SELECT session_id, TRY_CAST(json_extract_string(state, '$.inherited_lines') AS BIGINT) FROM sessions"
        ).fetchall()
    }
    parents = dict(real.con.execute("SELECT session_id, parent_session_id FROM sessions").fetchall())
    failures = []
    total = agree = copied = 0
    for sid, fmt in sorted(real.formats.items()):
        records = real.records(sid)
        if fmt == formats.CLAUDE:
            # a subagent's copy of a parent's user line (same uuid) is the parent's prompt
            parent = parents.get(sid)
            theirs = {r.get("uuid") for r in real.records(parent) if r and r.get("type") == "user"} if parent in real.paths else set()
            mine = [claude_prompt(r) for r in records]
            recount = sum(p for p, r in zip(mine, records, strict=True) if not (r and r.get("uuid") in theirs))
            copied += sum(mine) - recount
        elif fmt == formats.CODEX:
            recount = sum(codex_prompt(r) for n, r in enumerate(records, 1) if n > inherited.get(sid, 0))
        else:
            recount = sum(1 for r in records if r and r.get("role") == "user")
        trio = (counted.get(sid, 0), flagged.get(sid, 0), recount)
        total += recount
        if len(set(trio)) == 1:
            agree += 1
        else:
            failures.append(f"{sid}: sessions.prompts {trio[0]}, messages.is_prompt {trio[1]}, recount {trio[2]}")
    return CheckResult(
        "prompts agree", not failures,
        f"sessions.prompts = count(messages.is_prompt) = recount in {agree}/{len(real.formats)} sessions "
        f"({_n(total)} prompts; {_n(copied)} copies of a parent session's prompts left out)",
        {"sessions": len(real.formats), "agree": agree, "prompts": total, "copiedFromParent": copied},
        failures[:EXAMPLES],
    )


# --------------------------------------------------------------------------- bytes, models, formats


def _stored_lines(con: duckdb.DuckDBPyConnection, session_id: str) -> Iterator[tuple[int, str]]:
    yield from con.execute("SELECT line_no, text FROM lines WHERE session_id = ? ORDER BY line_no", [session_id]).fetchall()


@invariant("byte-exact lines")
def _byte_exact(real: RealSet) -> CheckResult:
    lines = exact = not_utf8 = 0
    failures = []
    for sid, path in sorted(real.paths.items()):
        raw = _complete_lines(path.read_bytes())
        stored = list(_stored_lines(real.con, sid))
        if len(stored) != len(raw):
            failures.append(f"{sid}: {len(stored)} lines stored, the file has {len(raw)}")
        for (line_no, text), want in zip(stored, raw, strict=False):
            lines += 1
            if text.encode("utf-8") == want:
                exact += 1
                continue
            try:
                want.decode("utf-8")
            except UnicodeDecodeError:
                not_utf8 += 1  # stored with replacement characters, and listed in ingest_problems
                continue
            failures.append(f"{sid}:{line_no}: the stored text differs from the file's bytes")
    summary = f"{_n(exact)} of {_n(lines)} lines in {len(real.paths)} files stored byte for byte"
    if not_utf8:
        summary += f" ({not_utf8} not UTF-8, stored with replacement characters and listed in ingest_problems)"
    return CheckResult("byte-exact lines", not failures, summary, {"lines": lines, "exact": exact, "notUtf8": not_utf8},
                       failures[:EXAMPLES])


@invariant("model not recorded")
def _null_models(real: RealSet) -> CheckResult:
    rows = real.con.execute(
        "SELECT session_id, format, turns FROM sessions WHERE model IS NULL AND (turns > 0 OR prompts > 0) ORDER BY session_id"
    ).fetchall()
    by_format: dict[str, int] = {}
    for _sid, fmt, _turns in rows:
        by_format[fmt] = by_format.get(fmt, 0) + 1
    detail = ", ".join(f"{n} {fmt}" for fmt, n in sorted(by_format.items())) or "none"
    return CheckResult(
        "model not recorded", None,
        f"{len(rows)} conversations with model NULL ({detail}): their transcripts name no model (no turn_context, "
        "or the 2025 Codex format), so their calls are not priced",
        {"sessions": len(rows), "byFormat": by_format, "ids": [r[0] for r in rows]},
    )


@invariant("formats")
def _formats(real: RealSet) -> CheckResult:
    counts: dict[str, int] = {}
    for fmt in real.formats.values():
        counts[fmt] = counts.get(fmt, 0) + 1
    legacy = sum(1 for sid in real.sessions(formats.CODEX) if (real.records(sid)[:1] or [None])[0] and
                 "type" not in (real.records(sid)[0] or {"type": 1}))
    return CheckResult(
        "formats", None,
        ", ".join(f"{counts.get(f, 0)} {f}" for f in (formats.CLAUDE, formats.CODEX, formats.JSONL))
        + f" (of the Codex rollouts, {legacy} in the 2025 format)",
        {**counts, "codexLegacy": legacy},
    )


@invariant("secrets")
def _secrets(real: RealSet) -> CheckResult:
    """What the consolidator's tools would mask: secrets found (distinct values) and occurrences
    masked, per kind, with the detection speed. A figure: real transcripts may hold secrets."""
    from pipeline.secrets.scan import summarise_lines

    def read() -> Iterator[str]:
        cur = real.con.execute("SELECT text FROM lines ORDER BY session_id, line_no")
        while batch := cur.fetchmany(512):
            yield from (text for (text,) in batch)

    summary = summarise_lines(read)
    return CheckResult("secrets", None, summary.line().removeprefix("secrets: "), summary.to_json())


# --------------------------------------------------------------------------- cache causes


def _markers_from_files(real: RealSet) -> tuple[list[tuple[str, int]], list[tuple[str, int, str]]]:
    """Compaction records and date notices read from the files themselves (not from SQL): a
    Claude Code `compact_boundary` or compact summary, a Codex `compacted`; a Claude Code
    `date_change` attachment, a Codex environment context whose `<current_date>` differs from the
    session's previous one."""
    compactions: list[tuple[str, int]] = []
    notices: list[tuple[str, int, str]] = []
    for sid in real.sessions():
        told: str | None = None
        for n, rec in enumerate(real.records(sid), 1):
            if rec is None:
                continue
            if rec.get("subtype") == "compact_boundary" or rec.get("isCompactSummary") is True or rec.get("type") == "compacted":
                compactions.append((sid, n))
            attachment = rec.get("attachment")
            if isinstance(attachment, dict) and attachment.get("type") == "date_change":
                notices.append((sid, n, str(attachment.get("newDate"))))
            payload = rec.get("payload")
            if real.formats[sid] == formats.CODEX and isinstance(payload, dict) and payload.get("role") == "user":
                text = json.dumps(payload.get("content"), ensure_ascii=False)
                start = text.find("<current_date>")
                if start >= 0:
                    day = text[start + len("<current_date>"):start + len("<current_date>") + 10]
                    if told is not None and day != told:
                        notices.append((sid, n, day))
                    told = day
    return compactions, notices


def _calls_around(real: RealSet, marks: list[tuple[str, int]]) -> dict[tuple[str, int], list[tuple[Any, ...]]]:
    """For each (session, line), the calls whose interval from their previous call of the same
    conversation holds that line: one query for every marker."""
    out: dict[tuple[str, int], list[tuple[Any, ...]]] = {m: [] for m in marks}
    if not marks:
        return out
    rows = real.con.execute(
        "SELECT m.sid, m.line, c.line_no, c.cause, c.crossing, c.gap_s, c.ttl_s FROM cache_calls c "
        "JOIN (SELECT unnest(?::VARCHAR[]) AS sid, unnest(?::BIGINT[]) AS line) m "
        "ON c.session_id = m.sid AND c.prev_line < m.line AND c.line_no > m.line ORDER BY m.sid, m.line, c.line_no",
        [[sid for sid, _ in marks], [line for _, line in marks]],
    ).fetchall()
    for sid, line, *rest in rows:
        out[(sid, line)].append(tuple(rest))
    return out


@invariant("cache causes")
def _cache_causes(real: RealSet) -> CheckResult:
    """A call that read at least the hit share of its previous prompt is never a miss; each
    compaction record between two calls yields `compaction` or `hit` (or `ttl_expiry`, when the
    gap alone already exceeded the TTL in force, which outranks it); each date notice between two
    calls makes the call after it a crossing."""
    from pipeline.warehouse import cache_calls

    misses = list(cache_calls.MISS_CAUSES)
    bad_hits = real.con.execute(
        "SELECT session_id, line_no, cause, cached_tokens, prev_prompt FROM cache_calls "
        "WHERE prev_prompt IS NOT NULL AND coalesce(cached_tokens, 0) >= ? * prev_prompt AND list_contains(?, cause) "
        "ORDER BY session_id, line_no",
        [cache_calls.HIT_SHARE, misses],
    ).fetchall()
    failures = [f"{sid} line {n}: read {c:,} of a previous prompt of {p:,} but is {cause}" for sid, n, cause, c, p in bad_hits]
    compactions, notices = _markers_from_files(real)
    compaction_causes: dict[str, int] = {}
    after_compactions = _calls_around(real, compactions)
    after_notices = _calls_around(real, [(sid, line) for sid, line, _day in notices])
    for sid, line in compactions:
        for n, cause, _crossing, gap, ttl in after_compactions[(sid, line)]:
            compaction_causes[cause] = compaction_causes.get(cause, 0) + 1
            allowed = cause in ("compaction", "hit", "no_cache_reported") or (cause == "ttl_expiry" and gap > ttl)
            if not allowed:
                failures.append(f"{sid}: compaction record at line {line}, but the call at line {n} is {cause}")
    crossings = 0
    for sid, line, day in notices:
        around = after_notices[(sid, line)]
        crossings += sum(1 for r in around if r[2])
        if around and not any(r[2] for r in around):
            failures.append(f"{sid}: date notice ({day}) at line {line}, but the next call (line {around[0][0]}) is no crossing")
    counts = dict(real.con.execute("SELECT cause, count(*) FROM cache_calls GROUP BY cause").fetchall())
    summary = (
        f"{sum(counts.values()):,} calls classified; {len(bad_hits)} read ≥ {cache_calls.HIT_SHARE:.0%} of their previous "
        f"prompt and got a miss cause; {len(compactions)} compaction records (calls after them: "
        + (", ".join(f"{k} {v}" for k, v in sorted(compaction_causes.items())) or "none")
        + f"); {len(notices)} date notices, {crossings} crossings after them"
    )
    return CheckResult("cache causes", not failures, summary,
                       {"causes": counts, "hitsWithMissCause": len(bad_hits), "compactions": len(compactions),
                        "compactionCauses": compaction_causes, "dateNotices": len(notices), "crossings": crossings},
                       failures[:EXAMPLES])


@invariant("session facts")
def _session_facts(real: RealSet) -> CheckResult:
    """`sessions.tool_calls` and `sessions.harness_versions`, kept by the ingest, equal what the
    `tool_calls` view and the records' own version fields give when read from every line."""
    rows = real.con.execute(
        """
        WITH v AS (
            SELECT session_id, list(DISTINCT ver ORDER BY ver) AS vs FROM (
                SELECT l.session_id, CASE s.format WHEN 'claude-code' THEN json_extract_string(l.text, '$.version')
                                                   ELSE json_extract_string(l.text, '$.payload.cli_version') END AS ver
                FROM lines l JOIN sessions s USING (session_id)
                WHERE (s.format = 'claude-code' AND contains(l.text, '"version":"'))
                   OR (s.format = 'codex' AND contains(l.text, '"cli_version"') AND contains(l.text, '"session_meta"'))
            ) WHERE ver IS NOT NULL GROUP BY 1
        ), t AS (SELECT session_id, count(*) AS n FROM tool_calls GROUP BY 1)
        SELECT s.session_id, s.tool_calls, coalesce(t.n, 0), s.harness_versions, coalesce(v.vs, [])
        FROM sessions s LEFT JOIN t USING (session_id) LEFT JOIN v USING (session_id) ORDER BY s.session_id
        """
    ).fetchall()
    failures = [f"{sid}: {kept} tool calls kept, {counted} in the view; versions kept {kv}, read {rv}"
                for sid, kept, counted, kv, rv in rows if kept != counted or list(kv or []) != list(rv)]
    total = sum(int(r[2]) for r in rows)
    summary = (f"{len(rows) - len(failures)}/{len(rows)} sessions keep the tool calls ({total:,}) and harness versions "
               "their lines give")
    return CheckResult("session facts", not failures, summary, {"sessions": len(rows), "toolCalls": total},
                       failures[:EXAMPLES])
