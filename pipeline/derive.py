"""What every ingest derives from newly stored lines: session statistics and `llm_calls` usage rows.

The JSON of the new lines is parsed inside DuckDB (vectorised, in parallel) into a narrow projection;
the per-format rules then run on that projection with polars. Work is proportional to the new lines:
whatever must carry over between ingests (Codex cumulative totals, the current model, prompt counts)
lives in `sessions.state`.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import polars as pl

from pipeline import db, formats

# Claude Code user records that are output of local commands or interruptions, not prompts.
_CLAUDE_NOT_PROMPT = ("<local-command-stdout>", "<local-command-stderr>", "[Request interrupted")
# Codex injects these as user/developer messages; they are context, not prompts.
_CODEX_INJECTED = ("<environment_context>", "<user_instructions>", "<permissions", "# AGENTS.md", "<INSTRUCTIONS>")

_CLAUDE_PATHS = [
    "$.type", "$.timestamp", "$.cwd", "$.isMeta", "$.message.id", "$.requestId", "$.message.model",
    "$.message.usage.input_tokens", "$.message.usage.cache_creation_input_tokens",
    "$.message.usage.cache_read_input_tokens", "$.message.usage.output_tokens", "$.message.content[0].type",
]
_CODEX_PATHS = [
    "$.type", "$.timestamp", "$.payload.type", "$.payload.role", "$.payload.cwd", "$.payload.model",
    "$.payload.info.total_token_usage.input_tokens", "$.payload.info.total_token_usage.cached_input_tokens",
    "$.payload.info.total_token_usage.output_tokens", "$.payload.content[0].text",
]
_GENERIC_PATHS = ["$.timestamp", "$.ts", "$.time", "$.created_at", "$.role", "$.type", "$.cwd"]


def _project(con: duckdb.DuckDBPyConnection, session_id: str, first_line: int, paths: list[str], extra: str = "") -> pl.DataFrame:
    """Parse the new lines of one session into one row per line with the fields at `paths`."""
    cols = ", ".join(f"f[{i + 1}] AS c{i}" for i in range(len(paths)))
    sql = f"""
        WITH src AS (
            SELECT line_no, text, json_valid(text) AS ok FROM lines WHERE session_id = $sid AND line_no >= $from
        ), f AS (
            SELECT line_no, ok, text,
                   CASE WHEN ok THEN json_extract_string(text, $paths) END AS f
            FROM src
        )
        SELECT line_no, ok, {cols} {extra} FROM f ORDER BY line_no
    """  # only column positions are formatted in; every value is a bound parameter
    return db.frame(con, sql, {"sid": session_id, "from": first_line, "paths": paths})


def _ts(col: str) -> pl.Expr:
    return pl.col(col).str.to_datetime(time_zone="UTC", strict=False)


def _int(col: str) -> pl.Expr:
    return pl.col(col).cast(pl.Int64, strict=False)


def update_session(con: duckdb.DuckDBPyConnection, session_id: str, first_line: int, path: str) -> int:
    """Fold the lines from `first_line` on into the session's row and `llm_calls`.

    Returns the number of new lines that are not JSON (each also recorded in `ingest_problems`).
    """
    fmt, state_text = db.one(con, "SELECT format, state FROM sessions WHERE session_id = ?", [session_id])
    state: dict[str, Any] = json.loads(state_text) if state_text else {}
    if fmt == formats.CLAUDE:
        df = _project(
            con, session_id, first_line, _CLAUDE_PATHS,
            extra=", CASE WHEN ok AND f[1] = 'user' AND f[12] IS NULL "
                  "THEN left(json_extract_string(text, '$.message.content'), 64) END AS prompt_head",
        )
        stats = _claude(con, session_id, df, state)
    elif fmt == formats.CODEX:
        df = _project(con, session_id, first_line, _CODEX_PATHS)
        stats = _codex(con, session_id, df, state)
    else:
        df = _project(con, session_id, first_line, _GENERIC_PATHS)
        stats = _generic(df, state)

    bad = df.filter(~pl.col("ok"))["line_no"].to_list()
    if bad:
        con.executemany(
            "INSERT INTO ingest_problems (session_id, line_no, kind, detail, path) VALUES (?, ?, 'not-json', ?, ?)",
            [[session_id, n, "line is not valid JSON; stored verbatim", path] for n in bad],
        )
    turns = db.one(
        con, "SELECT count(*) FROM llm_calls WHERE session_id = ? AND source IN ('claude-code', 'codex')", [session_id]
    )[0]
    if fmt == formats.JSONL:
        turns = state.get("assistant_lines", 0)
    con.execute(
        """
        UPDATE sessions SET
            first_at = CASE WHEN first_at IS NULL OR $first < first_at THEN coalesce($first, first_at) ELSE first_at END,
            last_at = CASE WHEN last_at IS NULL OR $last > last_at THEN coalesce($last, last_at) ELSE last_at END,
            cwd = coalesce(cwd, $cwd),
            slug = CASE WHEN cwd IS NULL AND $slug IS NOT NULL THEN $slug ELSE slug END,
            prompts = $prompts, turns = $turns, model = coalesce($model, model), state = $state
        WHERE session_id = $sid
        """,
        {
            "first": stats["first_at"], "last": stats["last_at"], "cwd": stats["cwd"],
            "slug": formats.slug_for(stats["cwd"]), "prompts": stats["prompts"], "turns": turns,
            "model": state.get("model"), "state": json.dumps(state), "sid": session_id,
        },
    )
    return len(bad)


def _span(df: pl.DataFrame, ts_col: str) -> tuple[Any, Any]:
    ts = df.select(_ts(ts_col).alias("t")).drop_nulls()
    if ts.is_empty():
        return None, None
    return ts["t"].min(), ts["t"].max()


def _first(df: pl.DataFrame, col: str) -> str | None:
    vals = df[col].drop_nulls()
    return vals[0] if len(vals) else None


def _claude(con: duckdb.DuckDBPyConnection, session_id: str, df: pl.DataFrame, state: dict[str, Any]) -> dict:
    # c0 type, c1 timestamp, c2 cwd, c3 isMeta, c4 message.id, c5 requestId, c6 model,
    # c7..c10 usage (input, cache_creation, cache_read, output), c11 content[0].type
    first_at, last_at = _span(df, "c1")
    users = df.filter((pl.col("c0") == "user") & (pl.col("c3").fill_null("false") != "true"))
    string_prompt = pl.col("c11").is_null() & pl.col("prompt_head").is_not_null() & (pl.col("prompt_head") != "")
    for prefix in _CLAUDE_NOT_PROMPT:
        string_prompt = string_prompt & ~pl.col("prompt_head").str.starts_with(prefix)
    block_prompt = pl.col("c11").is_in(["text", "image"])
    state["prompts"] = state.get("prompts", 0) + users.filter(string_prompt | block_prompt).height

    responses = df.filter(
        (pl.col("c0") == "assistant") & pl.col("c4").is_not_null() & (pl.col("c6").fill_null("") != "<synthetic>")
    )
    if responses.height:
        # One response is several lines (one per content block) repeating its usage; the last is final.
        last = responses.group_by(["c4", "c5"], maintain_order=True).agg(pl.all().last())
        rows = last.select(
            pl.format("claude-code:{}:{}:{}", pl.lit(session_id), pl.col("c4"), pl.col("c5").fill_null("")).alias("call_id"),
            _ts("c1").alias("at"),
            pl.col("c6").alias("model"),
            (_int("c7") + _int("c8").fill_null(0) + _int("c9").fill_null(0)).alias("prompt_tokens"),
            _int("c9").alias("cached_tokens"),
            _int("c8").alias("cache_write_tokens"),
            _int("c10").alias("completion_tokens"),
            pl.col("line_no"),
        )
        _upsert_calls(con, session_id, "claude-code", rows)
        models = responses["c6"].drop_nulls()
        if len(models):
            state["model"] = models[-1]
    return {"first_at": first_at, "last_at": last_at, "cwd": _first(df, "c2"), "prompts": state["prompts"]}


def _codex(con: duckdb.DuckDBPyConnection, session_id: str, df: pl.DataFrame, state: dict[str, Any]) -> dict:
    # c0 type, c1 timestamp, c2 payload.type, c3 payload.role, c4 payload.cwd, c5 payload.model,
    # c6..c8 total_token_usage (input, cached_input, output), c9 payload.content[0].text
    first_at, last_at = _span(df, "c1")
    events = df.filter((pl.col("c0") == "event_msg") & (pl.col("c2") == "user_message"))
    items = df.filter(
        (pl.col("c0") == "response_item") & (pl.col("c2") == "message") & (pl.col("c3") == "user")
        & pl.col("c9").is_not_null()
    )
    injected = pl.lit(False)
    for prefix in _CODEX_INJECTED:
        injected = injected | pl.col("c9").str.strip_chars_start().str.starts_with(prefix)
    state["prompt_events"] = state.get("prompt_events", 0) + events.height
    state["prompt_items"] = state.get("prompt_items", 0) + items.filter(~injected).height
    # The prompt is logged twice (event and response item); count the events when the log has them.
    prompts = state["prompt_events"] or state["prompt_items"]

    model_col = pl.when(pl.col("c0") == "turn_context").then(pl.col("c5"))
    df = df.with_columns(model_col.alias("model"))
    df = df.with_columns(pl.col("model").forward_fill().fill_null(pl.lit(state.get("model"))))
    counts = df.filter(pl.col("c6").is_not_null()).select(
        "line_no", "model", _ts("c1").alias("at"),
        _int("c6").alias("inp"), _int("c7").fill_null(0).alias("cached"), _int("c8").alias("out"),
    )
    if counts.height:
        prev = state.get("totals") or [None, None, None]
        counts = counts.with_columns(
            pl.col("inp").shift(1).fill_null(pl.lit(prev[0], dtype=pl.Int64)).alias("p_inp"),
            pl.col("cached").shift(1).fill_null(pl.lit(prev[1], dtype=pl.Int64)).alias("p_cached"),
            pl.col("out").shift(1).fill_null(pl.lit(prev[2], dtype=pl.Int64)).alias("p_out"),
        )
        changed = counts.filter(
            pl.col("p_inp").is_null()
            | (pl.col("inp") != pl.col("p_inp")) | (pl.col("cached") != pl.col("p_cached")) | (pl.col("out") != pl.col("p_out"))
        )
        rows = changed.select(
            pl.format("codex:{}:{}", pl.lit(session_id), pl.col("line_no")).alias("call_id"),
            "at", "model",
            (pl.col("inp") - pl.col("p_inp").fill_null(0)).alias("prompt_tokens"),
            (pl.col("cached") - pl.col("p_cached").fill_null(0)).alias("cached_tokens"),
            pl.lit(None, dtype=pl.Int64).alias("cache_write_tokens"),
            (pl.col("out") - pl.col("p_out").fill_null(0)).alias("completion_tokens"),
            "line_no",
        )
        _upsert_calls(con, session_id, "codex", rows)
        last = counts.row(-1, named=True)
        state["totals"] = [last["inp"], last["cached"], last["out"]]
    models = df["model"].drop_nulls()
    if len(models):
        state["model"] = models[-1]
    cwd = _first(df.filter(pl.col("c0").is_in(["session_meta", "turn_context"])), "c4")
    return {"first_at": first_at, "last_at": last_at, "cwd": cwd, "prompts": prompts}


def _generic(df: pl.DataFrame, state: dict[str, Any]) -> dict:
    ts = df.select(pl.coalesce("c0", "c1", "c2", "c3").alias("t"))
    first_at, last_at = _span(ts, "t")
    role = pl.coalesce("c4", "c5")
    state["prompts"] = state.get("prompts", 0) + df.filter(role == "user").height
    state["assistant_lines"] = state.get("assistant_lines", 0) + df.filter(role == "assistant").height
    return {"first_at": first_at, "last_at": last_at, "cwd": _first(df, "c6"), "prompts": state["prompts"]}


def _upsert_calls(con: duckdb.DuckDBPyConnection, session_id: str, source: str, rows: pl.DataFrame) -> None:
    table = rows.with_columns(pl.lit(source).alias("source"), pl.lit(session_id).alias("session_id")).to_arrow()
    con.register("_derived_calls", table)
    try:
        con.execute(
            """
            INSERT OR REPLACE INTO llm_calls
                (call_id, source, session_id, "at", model, prompt_tokens, cached_tokens, cache_write_tokens,
                 completion_tokens, line_no)
            SELECT call_id, source, session_id, "at", model, prompt_tokens, cached_tokens, cache_write_tokens,
                   completion_tokens, line_no
            FROM _derived_calls
            """
        )
    finally:
        con.unregister("_derived_calls")
