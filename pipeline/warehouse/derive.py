"""What every ingest derives from newly stored lines: session statistics and `llm_calls` usage rows.

The JSON of new lines is parsed inside DuckDB (vectorised, in parallel) into a narrow projection,
once per batch of lines, while the batch is still in memory. The per-format rules then run on the
projection with polars, for all sessions of a transaction at once. Work is proportional to the new
lines: what must carry over between ingests (Codex cumulative totals, the current model, prompt
counts) lives in `sessions.state`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from pipeline.warehouse import formats
from pipeline.warehouse.prompt_rules import CLAUDE_NOT_PROMPT, CODEX_INJECTED

# Every field any format needs, extracted with a single parse of each line.
FIELDS: dict[str, str] = {
    "type": "$.type",
    "ts": "$.timestamp",
    "cwd": "$.cwd",
    "is_meta": "$.isMeta",
    "msg_id": "$.message.id",
    "req_id": "$.requestId",
    "msg_model": "$.message.model",
    "u_in": "$.message.usage.input_tokens",
    "u_write": "$.message.usage.cache_creation_input_tokens",
    "u_read": "$.message.usage.cache_read_input_tokens",
    "u_out": "$.message.usage.output_tokens",
    "block0": "$.message.content[0].type",
    "block0_text": "$.message.content[0].text",
    "p_type": "$.payload.type",
    "p_role": "$.payload.role",
    "p_cwd": "$.payload.cwd",
    "p_model": "$.payload.model",
    "t_in": "$.payload.info.total_token_usage.input_tokens",
    "t_cached": "$.payload.info.total_token_usage.cached_input_tokens",
    "t_out": "$.payload.info.total_token_usage.output_tokens",
    "p_text0": "$.payload.content[0].text",
    "p_message": "$.payload.message",
    "g_ts": "$.ts",
    "g_time": "$.time",
    "g_created": "$.created_at",
    "role": "$.role",
}
_PATHS = list(FIELDS.values())
_TYPE = 1 + list(FIELDS).index("type")
_BLOCK0 = 1 + list(FIELDS).index("block0")

# Message texts are only ever tested for a prefix (is this injected context, a command's output?).
# Carrying whole texts out of DuckDB cost more than parsing the JSON itself, so only a head is kept:
# Claude Code's as written, Codex's after the leading whitespace that its prefix test skips.
_HEAD_CHARS = 64
_CLAUDE_HEADS = ("block0_text",)
_CODEX_HEADS = ("p_text0", "p_message")


def _column(i: int, name: str) -> str:
    if name in _CLAUDE_HEADS:
        return f"left(f[{i}], {_HEAD_CHARS}) AS {name}"
    if name in _CODEX_HEADS:
        return f"left(ltrim(f[{i}], chr(32) || chr(9) || chr(10) || chr(13)), {_HEAD_CHARS}) AS {name}"
    return f"f[{i}] AS {name}"


# Column positions are formatted in from the constant FIELDS; every value is a bound parameter.
PROJECTION_SQL = f"""
    SELECT session_id, line_no, f IS NOT NULL AS ok,
           {", ".join(_column(i + 1, name) for i, name in enumerate(FIELDS))},
           CASE WHEN f[{_TYPE}] = 'user' AND f[{_BLOCK0}] IS NULL
                THEN left(json_extract_string(text, '$.message.content'), {_HEAD_CHARS}) END AS prompt_head
    FROM (SELECT session_id, line_no, text, TRY(json_extract_string(text, $paths)) AS f FROM {{table}})
"""


def project(con: duckdb.DuckDBPyConnection, table: str) -> pl.DataFrame:
    """Parse the lines of a registered Arrow table (session_id, line_no, text) into the projection."""
    from pipeline.warehouse.db import frame

    return frame(con, PROJECTION_SQL.format(table=table), {"paths": _PATHS})


@dataclass
class Target:
    """A session whose new lines are being folded in."""

    session_id: str
    format: str
    path: str
    state: dict[str, Any] = field(default_factory=dict)


def _ts(expr: pl.Expr) -> pl.Expr:
    return expr.str.to_datetime(time_zone="UTC", strict=False)


def _int(col: str) -> pl.Expr:
    return pl.col(col).cast(pl.Int64, strict=False)


def fold(con: duckdb.DuckDBPyConnection, proj: pl.DataFrame, targets: dict[str, Target]) -> dict[str, int]:
    """Fold projected new lines into `sessions`, `llm_calls` and `ingest_problems`.

    Returns, per session, the number of new lines that are not JSON.
    """
    if proj.is_empty():
        return {}
    fmt = pl.DataFrame(
        {"session_id": list(targets), "format": [t.format for t in targets.values()]},
        schema={"session_id": pl.String, "format": pl.String},
    )
    proj = proj.join(fmt, on="session_id", how="left")
    generic_ts = pl.coalesce("ts", "g_ts", "g_time", "g_created")
    proj = proj.with_columns(
        _ts(pl.when(pl.col("format") == formats.JSONL).then(generic_ts).otherwise(pl.col("ts"))).alias("at"),
        pl.when(pl.col("format") == formats.CODEX).then(pl.col("p_cwd")).otherwise(pl.col("cwd")).alias("any_cwd"),
    )
    stats = proj.group_by("session_id").agg(
        pl.col("at").min().alias("first_at"),
        pl.col("at").max().alias("last_at"),
        pl.col("any_cwd").drop_nulls().first().alias("cwd"),
        (~pl.col("ok")).sum().alias("not_json"),
    )

    prompts: dict[str, int] = {}
    calls: list[pl.DataFrame] = []
    for name, part in proj.partition_by("format", as_dict=True).items():
        kind = name[0] if isinstance(name, tuple) else name
        if kind == formats.CLAUDE:
            calls.append(_claude(part, targets, prompts))
        elif kind == formats.CODEX:
            calls.append(_codex(part, targets, prompts))
        else:
            _generic(part, targets, prompts)
    calls = [c for c in calls if c.height]
    if calls:
        _upsert_calls(con, pl.concat(calls, how="vertical_relaxed"))

    bad = proj.filter(~pl.col("ok")).select("session_id", "line_no")
    if bad.height:
        bad = bad.with_columns(
            pl.col("session_id").replace_strict({k: t.path for k, t in targets.items()}, return_dtype=pl.String).alias("path")
        )
        _insert(con, "_new_problems", bad.to_arrow(), """
            INSERT INTO ingest_problems (session_id, line_no, kind, detail, path)
            SELECT session_id, line_no, 'not-json', 'line is not valid JSON; stored verbatim', path FROM _new_problems
        """)

    ids = list(targets)
    turns = dict(
        con.execute(
            "SELECT session_id, count(*) FROM llm_calls WHERE source IN ('claude-code', 'codex') "
            "AND session_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY session_id",
            [ids],
        ).fetchall()
    )
    rows = []
    not_json: dict[str, int] = {}
    stat_by_id = {r["session_id"]: r for r in stats.iter_rows(named=True)}
    for sid, t in targets.items():
        s = stat_by_id.get(sid)
        if s is None:
            continue
        not_json[sid] = int(s["not_json"])
        n_turns = t.state.get("assistant_lines", 0) if t.format == formats.JSONL else turns.get(sid, 0)
        rows.append({
            "session_id": sid, "first_at": s["first_at"], "last_at": s["last_at"], "cwd": s["cwd"],
            "slug": formats.slug_for(s["cwd"]), "prompts": prompts.get(sid, t.state.get("prompts", 0)),
            "turns": n_turns, "model": t.state.get("model"), "state": json.dumps(t.state),
        })
    if rows:
        table = pa.Table.from_pylist(rows, schema=pa.schema([
            ("session_id", pa.string()), ("first_at", pa.timestamp("us", tz="UTC")), ("last_at", pa.timestamp("us", tz="UTC")),
            ("cwd", pa.string()), ("slug", pa.string()), ("prompts", pa.int64()), ("turns", pa.int64()),
            ("model", pa.string()), ("state", pa.string()),
        ]))
        _insert(con, "_new_stats", table, """
            UPDATE sessions SET
                first_at = CASE WHEN sessions.first_at IS NULL OR n.first_at < sessions.first_at
                                THEN coalesce(n.first_at, sessions.first_at) ELSE sessions.first_at END,
                last_at = CASE WHEN sessions.last_at IS NULL OR n.last_at > sessions.last_at
                               THEN coalesce(n.last_at, sessions.last_at) ELSE sessions.last_at END,
                slug = CASE WHEN sessions.cwd IS NULL AND n.slug IS NOT NULL THEN n.slug ELSE sessions.slug END,
                cwd = coalesce(sessions.cwd, n.cwd),
                prompts = n.prompts, turns = n.turns, model = coalesce(n.model, sessions.model), state = n.state
            FROM _new_stats n WHERE sessions.session_id = n.session_id
        """)
    return not_json


def _claude(df: pl.DataFrame, targets: dict[str, Target], prompts: dict[str, int]) -> pl.DataFrame:
    users = df.filter((pl.col("type") == "user") & (pl.col("is_meta").fill_null("false") != "true"))
    string_prompt = pl.col("block0").is_null() & pl.col("prompt_head").is_not_null() & (pl.col("prompt_head") != "")
    for prefix in CLAUDE_NOT_PROMPT:
        string_prompt = string_prompt & ~pl.col("prompt_head").str.starts_with(prefix)
    block_prompt = pl.col("block0").is_in(["text", "image"])
    for prefix in CLAUDE_NOT_PROMPT:
        block_prompt = block_prompt & ~pl.col("block0_text").fill_null("").str.starts_with(prefix)
    counted = users.filter(string_prompt | block_prompt).group_by("session_id").len()
    new_counts = dict(counted.iter_rows())
    for sid in df["session_id"].unique().to_list():
        st = targets[sid].state
        st["prompts"] = st.get("prompts", 0) + new_counts.get(sid, 0)
        prompts[sid] = st["prompts"]

    responses = df.filter(
        (pl.col("type") == "assistant") & pl.col("msg_id").is_not_null()
        & (pl.col("msg_model").fill_null("") != "<synthetic>")
    )
    if responses.is_empty():
        return pl.DataFrame()
    for sid, model in responses.group_by("session_id").agg(pl.col("msg_model").drop_nulls().last()).iter_rows():
        if model:
            targets[sid].state["model"] = model
    # One response is several lines (one per content block) repeating its usage; the last is final.
    last = responses.group_by(["session_id", "msg_id", "req_id"], maintain_order=True).agg(pl.all().last())
    return last.select(
        pl.format("claude-code:{}:{}:{}", "session_id", "msg_id", pl.col("req_id").fill_null("")).alias("call_id"),
        pl.lit("claude-code").alias("source"),
        "session_id", "at",
        pl.col("msg_model").alias("model"),
        (_int("u_in") + _int("u_write").fill_null(0) + _int("u_read").fill_null(0)).alias("prompt_tokens"),
        _int("u_read").alias("cached_tokens"),
        _int("u_write").alias("cache_write_tokens"),
        _int("u_out").alias("completion_tokens"),
        "line_no",
    )


def _codex(df: pl.DataFrame, targets: dict[str, Target], prompts: dict[str, int]) -> pl.DataFrame:
    def injected(col: str) -> pl.Expr:
        out = pl.lit(False)
        for prefix in CODEX_INJECTED:
            out = out | pl.col(col).fill_null("").str.strip_chars_start().str.starts_with(prefix)
        return out

    # Older Codex versions also log the injected context as user_message events.
    events = df.filter(
        (pl.col("type") == "event_msg") & (pl.col("p_type") == "user_message") & ~injected("p_message")
    ).group_by("session_id").len()
    items = df.filter(
        (pl.col("type") == "response_item") & (pl.col("p_type") == "message") & (pl.col("p_role") == "user")
        & pl.col("p_text0").is_not_null() & ~injected("p_text0")
    ).group_by("session_id").len()
    ev, it = dict(events.iter_rows()), dict(items.iter_rows())
    seeds = []
    for sid in df["session_id"].unique().to_list():
        st = targets[sid].state
        st["prompt_events"] = st.get("prompt_events", 0) + ev.get(sid, 0)
        st["prompt_items"] = st.get("prompt_items", 0) + it.get(sid, 0)
        # The prompt is logged twice (event and response item); count the events when the log has them.
        prompts[sid] = st["prompt_events"] or st["prompt_items"]
        totals = st.get("totals") or [None, None, None]
        seeds.append({"session_id": sid, "seed_model": st.get("model"), "s_in": totals[0], "s_cached": totals[1], "s_out": totals[2]})
    seed = pl.DataFrame(seeds, schema={"session_id": pl.String, "seed_model": pl.String, "s_in": pl.Int64, "s_cached": pl.Int64, "s_out": pl.Int64})

    df = df.sort("session_id", "line_no").join(seed, on="session_id", how="left")
    df = df.with_columns(
        pl.when(pl.col("type") == "turn_context").then(pl.col("p_model")).otherwise(None)
        .forward_fill().over("session_id").fill_null(pl.col("seed_model")).alias("model")
    )
    for sid, model in df.group_by("session_id").agg(pl.col("model").drop_nulls().last()).iter_rows():
        if model:
            targets[sid].state["model"] = model
    counts = df.filter(pl.col("t_in").is_not_null()).select(
        "session_id", "line_no", "model", "at", "s_in", "s_cached", "s_out",
        _int("t_in").alias("inp"), _int("t_cached").fill_null(0).alias("cached"), _int("t_out").alias("out"),
    )
    if counts.is_empty():
        return pl.DataFrame()
    counts = counts.with_columns(
        pl.col("inp").shift(1).over("session_id").fill_null(pl.col("s_in")).alias("p_inp"),
        pl.col("cached").shift(1).over("session_id").fill_null(pl.col("s_cached")).alias("p_cached"),
        pl.col("out").shift(1).over("session_id").fill_null(pl.col("s_out")).alias("p_out"),
    )
    for sid, inp, cached, out in counts.group_by("session_id").agg(
        pl.col("inp").last(), pl.col("cached").last(), pl.col("out").last()
    ).iter_rows():
        targets[sid].state["totals"] = [inp, cached, out]
    # token_count events often repeat the previous cumulative total: only a change is a response.
    changed = counts.filter(
        pl.col("p_inp").is_null()
        | (pl.col("inp") != pl.col("p_inp")) | (pl.col("cached") != pl.col("p_cached")) | (pl.col("out") != pl.col("p_out"))
    )
    return changed.select(
        pl.format("codex:{}:{}", "session_id", "line_no").alias("call_id"),
        pl.lit("codex").alias("source"),
        "session_id", "at", "model",
        (pl.col("inp") - pl.col("p_inp").fill_null(0)).alias("prompt_tokens"),
        (pl.col("cached") - pl.col("p_cached").fill_null(0)).alias("cached_tokens"),
        pl.lit(None, dtype=pl.Int64).alias("cache_write_tokens"),
        (pl.col("out") - pl.col("p_out").fill_null(0)).alias("completion_tokens"),
        "line_no",
    )


def _generic(df: pl.DataFrame, targets: dict[str, Target], prompts: dict[str, int]) -> None:
    role = pl.coalesce("role", "type")
    counts = df.group_by("session_id").agg((role == "user").sum().alias("u"), (role == "assistant").sum().alias("a"))
    for sid, u, a in counts.iter_rows():
        st = targets[sid].state
        st["prompts"] = st.get("prompts", 0) + int(u)
        st["assistant_lines"] = st.get("assistant_lines", 0) + int(a)
        prompts[sid] = st["prompts"]


def _insert(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table, sql: str) -> None:
    con.register(name, table)
    try:
        con.execute(sql)
    finally:
        con.unregister(name)


def _upsert_calls(con: duckdb.DuckDBPyConnection, rows: pl.DataFrame) -> None:
    _insert(con, "_derived_calls", rows.to_arrow(), """
        INSERT OR REPLACE INTO llm_calls
            (call_id, source, session_id, "at", model, prompt_tokens, cached_tokens, cache_write_tokens,
             completion_tokens, line_no)
        SELECT call_id, source, session_id, "at", model, prompt_tokens, cached_tokens, cache_write_tokens,
               completion_tokens, line_no
        FROM _derived_calls
    """)
