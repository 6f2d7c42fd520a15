"""What every ingest derives from newly stored lines: session statistics and `llm_calls` usage rows.

The JSON of new lines is parsed inside DuckDB (vectorised, in parallel) into a narrow projection,
once per batch of lines, while the batch is still in memory. The per-format rules then run on the
projection with polars, for all sessions of a transaction at once. Work is proportional to the new
lines: what must carry over between ingests (Codex cumulative totals, the current model, prompt
counts) lives in `sessions.state`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import warnings
from dataclasses import dataclass, field
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from pipeline.warehouse import formats, prompt_rules

# The version of these rules lives in `derive_version` (a reader checks it without importing polars).
from pipeline.warehouse.derive_version import DERIVE_VERSION as DERIVE_VERSION
from pipeline.warehouse.transaction import atomic

# Every field any format needs, extracted with a single parse of each line.
FIELDS: dict[str, str] = {
    "type": "$.type",
    "ts": "$.timestamp",
    "cwd": "$.cwd",
    "msg_id": "$.message.id",
    "req_id": "$.requestId",
    "msg_model": "$.message.model",
    "u_in": "$.message.usage.input_tokens",
    "u_write": "$.message.usage.cache_creation_input_tokens",
    "u_read": "$.message.usage.cache_read_input_tokens",
    "u_write_1h": "$.message.usage.cache_creation.ephemeral_1h_input_tokens",
    "u_write_5m": "$.message.usage.cache_creation.ephemeral_5m_input_tokens",
    "u_out": "$.message.usage.output_tokens",
    "block0": "$.message.content[0].type",
    "version": "$.version",
    "p_type": "$.payload.type",
    "p_role": "$.payload.role",
    "p_cwd": "$.payload.cwd",
    "p_model": "$.payload.model",
    "p_forked": "$.payload.forked_from_id",
    "p_created": "$.payload.timestamp",
    "p_started": "$.payload.started_at",
    "p_cli": "$.payload.cli_version",
    "t_in": "$.payload.info.total_token_usage.input_tokens",
    "t_cached": "$.payload.info.total_token_usage.cached_input_tokens",
    "t_out": "$.payload.info.total_token_usage.output_tokens",
    "t_reason": "$.payload.info.total_token_usage.reasoning_output_tokens",
    "t_total": "$.payload.info.total_token_usage.total_tokens",
    "l_in": "$.payload.info.last_token_usage.input_tokens",
    "l_cached": "$.payload.info.last_token_usage.cached_input_tokens",
    "l_out": "$.payload.info.last_token_usage.output_tokens",
    "g_ts": "$.ts",
    "g_time": "$.time",
    "g_created": "$.created_at",
    "role": "$.role",
}
# The fields each format's rules read. The fold never reads another format's columns, so a batch of
# one format parses only its own paths and leaves the others NULL: parsing paths is most of what a
# projection costs (the bench corpus's 1.1 GB of Claude Code lines: 1.03 s with its 16 paths, 1.22 s
# with all 37).
FORMAT_FIELDS: dict[str, tuple[str, ...]] = {
    formats.CLAUDE: ("type", "ts", "cwd", "msg_id", "req_id", "msg_model", "u_in", "u_write", "u_read", "u_write_1h",
                     "u_write_5m", "u_out", "block0", "version"),
    formats.CODEX: ("type", "ts", "p_type", "p_role", "p_cwd", "p_model", "p_forked", "p_created", "p_started", "p_cli",
                    "t_in", "t_cached", "t_out", "t_reason", "t_total", "l_in", "l_cached", "l_out", "role"),
}


@dataclass(frozen=True)
class Projection:
    """The projection's SQL over a registered table (`{table}`) and the JSON paths it binds as $paths."""

    sql: str
    paths: list[str]


def _projection(names: tuple[str, ...], claude: bool, codex: bool) -> Projection:
    """The projection parsing only the fields `names` (the others are NULL), with the prompt tests of
    Claude Code and of Codex when asked (else false).

    The prompt rule's header paths are parsed with the fields (those not among them are not kept): the
    rule then parses only the content of a candidate line, not the whole line three more times. Column
    positions are formatted in from constants; every value is a bound parameter.
    """
    paths = [FIELDS[n] for n in names]
    if claude:
        paths += [p for p in prompt_rules.CLAUDE_HEADER_PATHS if p not in paths]

    def at(path: str) -> str:
        return f"f[{1 + paths.index(path)}]"

    def f(name: str) -> str:
        return at(FIELDS[name])

    columns = ", ".join(f"{f(n)} AS {n}" if n in names else f"NULL::VARCHAR AS {n}" for n in FIELDS)
    claude_prompt = (
        prompt_rules.claude_prompt("text", [at(p) for p in prompt_rules.CLAUDE_HEADER_PATHS])
        if claude else "false"
    )
    codex_prompt = (
        f"""CASE WHEN ({f("type")} = 'response_item' AND {f("p_type")} = 'message' AND {f("p_role")} = 'user')
                  OR ({f("type")} = 'message' AND {f("role")} = 'user')
                THEN {prompt_rules.codex_prompt("text")} ELSE false END"""
        if codex else "false"
    )
    # Tool calls as the `tool_calls` view counts them: a Claude Code assistant record's tool_use
    # blocks, a Codex call item (wrapped in a response_item, or bare in the 2025 format).
    claude_tools = (
        f"""CASE WHEN {f("type")} = 'assistant' AND contains(text, '"tool_use"')
                 THEN coalesce(len(list_filter(TRY(json_extract_string(text, '$.message.content[*].type')),
                                               lambda x: x = 'tool_use')), 0) ELSE 0 END"""
        if claude else "0"
    )
    calls = "('function_call', 'custom_tool_call', 'local_shell_call')"
    codex_tools = (
        f"""CASE WHEN ({f("type")} = 'response_item' AND {f("p_type")} IN {calls})
                   OR ({f("type")} IN {calls} AND {f("p_type")} IS NULL) THEN 1 ELSE 0 END"""
        if codex else "0"
    )
    sql = f"""
    SELECT session_id, line_no, f IS NOT NULL AS ok, {columns},
           {claude_prompt} AS claude_prompt, {codex_prompt} AS codex_prompt, ({claude_tools}) + ({codex_tools}) AS n_tools
    FROM (SELECT session_id, line_no, text, TRY(json_extract_string(text, $paths)) AS f FROM {{table}})
"""
    return Projection(sql, paths)


# Any mix of formats (and plain JSONL, whose rules read the generic fields): every field.
_ALL = _projection(tuple(FIELDS), claude=True, codex=True)
_BY_FORMAT = {
    formats.CLAUDE: _projection(FORMAT_FIELDS[formats.CLAUDE], claude=True, codex=False),
    formats.CODEX: _projection(FORMAT_FIELDS[formats.CODEX], claude=False, codex=True),
}


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: object) -> pl.DataFrame:
    """A query's result as a polars frame, inside the caller's transaction (as `db.frame`, which
    this module does not import: the migrations that open the warehouse call derive)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return pl.from_arrow(con.execute(sql, params).to_arrow_table())  # type: ignore[return-value]


def project(con: duckdb.DuckDBPyConnection, table: str, fmts: set[str] | None = None) -> pl.DataFrame:
    """Parse the lines of a registered Arrow table (session_id, line_no, text) into the projection.
    `fmts`, the formats of the sessions in it when known, lets a table of one format parse less."""
    chosen = _BY_FORMAT.get(next(iter(fmts)), _ALL) if fmts is not None and len(fmts) == 1 else _ALL
    return _frame(con, chosen.sql.format(table=table), {"paths": chosen.paths})


@dataclass
class Target:
    """A session whose new lines are being folded in."""

    session_id: str
    format: str
    path: str
    state: dict[str, Any] = field(default_factory=dict)
    # True when the session has no usage rows of its own yet (a new file, a rewritten one, a re-derive):
    # its rows are then inserted, without the look-up for a row to replace.
    fresh: bool = False


# The timestamps Claude Code and Codex write. Parsing with it given is twice as fast as letting polars
# infer it (0.11 s against 0.22 s for the bench corpus's 416,730 lines).
_ISO_UTC = "%Y-%m-%dT%H:%M:%S%.fZ"


def _timestamps(text: pl.Series) -> pl.Series:
    """ISO 8601 timestamps as UTC datetimes (NULL where a value is not one). The format is inferred
    from the values unless every one is written as `_ISO_UTC`, which the inference reads the same."""
    fast = text.str.to_datetime(_ISO_UTC, time_zone="UTC", strict=False)
    if fast.null_count() == text.null_count():
        return fast
    return text.str.to_datetime(time_zone="UTC", strict=False)


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
    written = proj.select(pl.when(pl.col("format") == formats.JSONL).then(generic_ts).otherwise(pl.col("ts"))).to_series()
    proj = proj.with_columns(
        _timestamps(written).alias("at"),
        pl.when(pl.col("format") == formats.CODEX).then(pl.col("p_cwd")).otherwise(pl.col("cwd")).alias("any_cwd"),
    )
    # The harness version each record names (Claude Code stamps every record; Codex names it in session_meta).
    harness = (pl.when(pl.col("format") == formats.CLAUDE).then(pl.col("version"))
               .when((pl.col("format") == formats.CODEX) & (pl.col("type") == "session_meta")).then(pl.col("p_cli")))
    stats = proj.group_by("session_id").agg(
        pl.col("at").min().alias("first_at"),
        pl.col("at").max().alias("last_at"),
        pl.col("any_cwd").drop_nulls().first().alias("cwd"),
        (~pl.col("ok")).sum().alias("not_json"),
        pl.col("n_tools").fill_null(0).sum().alias("n_tools"),
        harness.drop_nulls().unique().alias("versions"),
    )

    prompts: dict[str, int] = {}
    problems: list[dict[str, Any]] = []
    calls: list[pl.DataFrame] = []
    kinds = proj.get_column("format").unique().to_list()
    # One format (the usual transaction) needs no partition, which would copy every column.
    parts = [(kinds[0], proj)] if len(kinds) == 1 else [
        (name[0] if isinstance(name, tuple) else name, part)
        for name, part in proj.partition_by("format", as_dict=True).items()
    ]
    for kind, part in parts:
        if kind == formats.CLAUDE:
            calls.append(_claude(part, targets, prompts))
        elif kind == formats.CODEX:
            calls.append(_codex(part, targets, prompts, problems))
        else:
            _generic(part, targets, prompts)
    calls = [c for c in calls if c.height]
    if calls:
        _upsert_calls(con, pl.concat(calls, how="vertical_relaxed"), {sid for sid, t in targets.items() if t.fresh})
    claude_ids = [sid for sid, t in targets.items() if t.format == formats.CLAUDE]
    if claude_ids:
        drop_copied_responses(con, claude_ids)

    bad = proj.filter(~pl.col("ok")).select("session_id", "line_no")
    if bad.height:
        bad = bad.with_columns(
            pl.col("session_id").replace_strict({k: t.path for k, t in targets.items()}, return_dtype=pl.String).alias("path")
        )
        _insert(con, "_new_problems", bad.to_arrow(), """
            INSERT INTO ingest_problems (session_id, line_no, kind, detail, path)
            SELECT session_id, line_no, 'not-json', 'line is not valid JSON; stored verbatim', path FROM _new_problems
        """)
    if problems:
        table = pa.Table.from_pylist(
            [{**p, "path": targets[p["session_id"]].path} for p in problems],
            schema=pa.schema([("session_id", pa.string()), ("line_no", pa.int64()), ("kind", pa.string()),
                              ("detail", pa.string()), ("path", pa.string())]),
        )
        _insert(con, "_usage_problems", table, """
            INSERT INTO ingest_problems (session_id, line_no, kind, detail, path)
            SELECT session_id, line_no, kind, detail, path FROM _usage_problems
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
        if t.format in (formats.CLAUDE, formats.CODEX):
            t.state["tool_calls"] = t.state.get("tool_calls", 0) + int(s["n_tools"] or 0)
            t.state["versions"] = sorted(set(t.state.get("versions", [])) | set(s["versions"] or []))
        if t.format == formats.JSONL:
            n_turns = t.state.get("assistant_lines", 0)
        elif t.format == formats.CODEX and not turns.get(sid):
            n_turns = t.state.get("responses", 0)  # a rollout without token counts (the 2025 format)
        else:
            n_turns = turns.get(sid, 0)
        rows.append({
            "session_id": sid, "first_at": s["first_at"], "last_at": s["last_at"], "cwd": s["cwd"],
            "slug": formats.slug_for(s["cwd"]), "prompts": prompts.get(sid, t.state.get("prompts", 0)),
            "turns": n_turns, "model": t.state.get("model"), "state": json.dumps(t.state),
            "tool_calls": int(t.state.get("tool_calls", 0)), "harness_versions": list(t.state.get("versions", [])),
        })
    if rows:
        table = pa.Table.from_pylist(rows, schema=pa.schema([
            ("session_id", pa.string()), ("first_at", pa.timestamp("us", tz="UTC")), ("last_at", pa.timestamp("us", tz="UTC")),
            ("cwd", pa.string()), ("slug", pa.string()), ("prompts", pa.int64()), ("turns", pa.int64()),
            ("model", pa.string()), ("state", pa.string()), ("tool_calls", pa.int64()),
            ("harness_versions", pa.list_(pa.string())),
        ]))
        _insert(con, "_new_stats", table, """
            UPDATE sessions SET
                first_at = CASE WHEN sessions.first_at IS NULL OR n.first_at < sessions.first_at
                                THEN coalesce(n.first_at, sessions.first_at) ELSE sessions.first_at END,
                last_at = CASE WHEN sessions.last_at IS NULL OR n.last_at > sessions.last_at
                               THEN coalesce(n.last_at, sessions.last_at) ELSE sessions.last_at END,
                slug = CASE WHEN sessions.cwd IS NULL AND n.slug IS NOT NULL THEN n.slug ELSE sessions.slug END,
                cwd = coalesce(sessions.cwd, n.cwd),
                prompts = n.prompts, turns = n.turns, model = coalesce(n.model, sessions.model), state = n.state,
                tool_calls = n.tool_calls, harness_versions = n.harness_versions
            FROM _new_stats n WHERE sessions.session_id = n.session_id
        """)
    if claude_ids:
        drop_copied_prompts(con, claude_ids)
    return not_json


def _claude(df: pl.DataFrame, targets: dict[str, Target], prompts: dict[str, int]) -> pl.DataFrame:
    new_counts = dict(df.group_by("session_id").agg(pl.col("claude_prompt").fill_null(False).sum()).iter_rows())
    for sid in df["session_id"].unique().to_list():
        st = targets[sid].state
        st["prompts"] = st.get("prompts", 0) + int(new_counts.get(sid, 0))
        prompts[sid] = st["prompts"]

    # Only the columns a usage row reads: the sort below gathers every column it is given (a third
    # of the time with all of the projection's).
    responses = df.filter(
        (pl.col("type") == "assistant") & pl.col("msg_id").is_not_null()
        & (pl.col("msg_model").fill_null("") != "<synthetic>")
    ).select("session_id", "msg_id", "req_id", "line_no", "at", "msg_model", "u_in", "u_write", "u_read", "u_out",
             "u_write_1h", "u_write_5m")
    if responses.is_empty():
        return pl.DataFrame()
    for sid, model in responses.group_by("session_id").agg(pl.col("msg_model").drop_nulls().last()).iter_rows():
        if model:
            targets[sid].state["model"] = model
    # One response is several lines (one per content block) repeating its usage as it grows; the
    # line with the largest total is final (the last one on ties). Proxies to other models may
    # write usage on one block only, or shrink it on a later one: the largest is still the response.
    total = pl.sum_horizontal(_int(c).fill_null(0) for c in ("u_in", "u_write", "u_read", "u_out"))
    last = (
        responses.with_columns(total.alias("u_total"))
        .sort(["session_id", "msg_id", "req_id", "u_total", "line_no"], nulls_last=False)
        .group_by(["session_id", "msg_id", "req_id"], maintain_order=True)
        .agg(pl.all().last())
        .sort("session_id", "line_no")
    )
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
        # The TTL split is known when the response reports `cache_creation` (either field): its
        # 1-hour part, never more than the written total; the rest was written for 5 minutes.
        pl.when(_int("u_write").is_not_null() & (_int("u_write_1h").is_not_null() | _int("u_write_5m").is_not_null()))
        .then(pl.min_horizontal(_int("u_write_1h").fill_null(0), _int("u_write")))
        .otherwise(None).cast(pl.Int64).alias("cache_write_1h_tokens"),
    )


# Codex items a model writes (a response is a run of them) and items that feed the next response.
_CODEX_OUTPUT_ITEMS = ("reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call")


def _epoch(value: Any) -> float | None:
    """Seconds since the epoch of an ISO timestamp (None when it is not one)."""
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _fork_points(df: pl.DataFrame, targets: dict[str, Target]) -> dict[str, int | None]:
    """Per session, the first line of the rollout's own part (lines before it were copied from the
    parent rollout it was forked from), or None while that line has not arrived yet.

    A rollout whose first `session_meta` names `forked_from_id` opens with a copy of its parent's
    history. Its own part starts at the first `task_started` event that began at or after the
    rollout's creation (`session_meta.payload.timestamp`); a `task_started` without `started_at`
    (older CLIs) is taken as the start, so such a fork is counted whole.
    """
    out: dict[str, int | None] = {}
    for sid, part in df.partition_by("session_id", as_dict=True).items():
        key = sid[0] if isinstance(sid, tuple) else sid
        st = targets[str(key)].state
        fork = st.get("fork")
        if fork is None:
            meta = part.filter(pl.col("type") == "session_meta").sort("line_no").head(1)
            if meta.height and meta["p_forked"][0]:
                fork = {"created": _epoch(meta["p_created"][0]), "own_from": None}
            else:
                fork = {"created": None, "own_from": 1}
            st["fork"] = fork
        if fork["own_from"] is None:
            created = fork["created"]
            starts = part.filter(pl.col("p_type") == "task_started").sort("line_no")
            for line_no, started in starts.select("line_no", "p_started").iter_rows():
                began = None if started is None else float(started)
                if began is None or created is None or began >= int(created):
                    fork["own_from"] = int(line_no)
                    break
        if fork["own_from"] is None:
            st["inherited_lines"] = int(part.get_column("line_no").cast(pl.Int64).max() or 0)  # type: ignore[arg-type]
        else:
            st["inherited_lines"] = int(fork["own_from"]) - 1
        out[str(key)] = fork["own_from"]
    return out


def _codex(
    df: pl.DataFrame, targets: dict[str, Target], prompts: dict[str, int], problems: list[dict[str, Any]]
) -> pl.DataFrame:
    df = df.sort("session_id", "line_no")
    own_from = _fork_points(df, targets)
    own = pl.DataFrame(
        {"session_id": list(own_from), "own_from": list(own_from.values())},
        schema={"session_id": pl.String, "own_from": pl.Int64},
    )
    df = df.join(own, on="session_id", how="left").with_columns(
        (pl.col("own_from").is_not_null() & (pl.col("line_no") >= pl.col("own_from"))).alias("own")
    )

    # Prompts: the user message items the shared rule accepts, in the rollout's own part.
    new_counts = dict(
        df.group_by("session_id").agg((pl.col("codex_prompt").fill_null(False) & pl.col("own")).sum()).iter_rows()
    )
    # Responses (for rollouts without token counts): runs of items the model wrote.
    item_type = pl.when(pl.col("type") == "response_item").then(pl.col("p_type")).when(
        pl.col("p_type").is_null() & pl.col("type").is_in(prompt_rules.CODEX_BARE_ITEMS)
    ).then(pl.col("type"))
    item_role = pl.coalesce("p_role", "role")
    items = df.with_columns(item_type.alias("item"), item_role.alias("item_role")).filter(pl.col("item").is_not_null())
    items = items.with_columns(
        (pl.col("item").is_in(_CODEX_OUTPUT_ITEMS) | ((pl.col("item") == "message") & (pl.col("item_role") == "assistant")))
        .alias("output")
    )
    seeds = []
    for sid in df["session_id"].unique().to_list():
        st = targets[sid].state
        st["prompts"] = st.get("prompts", 0) + int(new_counts.get(sid, 0))
        prompts[sid] = st["prompts"]
        totals = st.get("totals") or [None, None, None]
        seeds.append({
            "session_id": sid, "seed_model": st.get("model"), "s_in": totals[0], "s_cached": totals[1], "s_out": totals[2],
            "s_output": bool(st.get("last_output", False)),
        })
    seed = pl.DataFrame(seeds, schema={
        "session_id": pl.String, "seed_model": pl.String, "s_in": pl.Int64, "s_cached": pl.Int64, "s_out": pl.Int64,
        "s_output": pl.Boolean,
    })
    if items.height:
        runs = items.join(seed, on="session_id", how="left").with_columns(
            (pl.col("output") & ~pl.col("output").shift(1).over("session_id").fill_null(pl.col("s_output"))).alias("starts")
        )
        for sid, started, last_output in runs.group_by("session_id").agg(
            pl.col("starts").sum(), pl.col("output").last()
        ).iter_rows():
            st = targets[sid].state
            st["responses"] = st.get("responses", 0) + int(started)
            st["last_output"] = bool(last_output)

    df = df.join(seed, on="session_id", how="left")
    df = df.with_columns(
        pl.when(pl.col("type") == "turn_context").then(pl.col("p_model")).otherwise(None)
        .forward_fill().over("session_id").fill_null(pl.col("seed_model")).alias("model")
    )
    for sid, model in df.group_by("session_id").agg(pl.col("model").drop_nulls().last()).iter_rows():
        if model:
            targets[sid].state["model"] = model
    return _codex_usage(df, targets, problems)


def _codex_usage(df: pl.DataFrame, targets: dict[str, Target], problems: list[dict[str, Any]]) -> pl.DataFrame:
    """One `llm_calls` row per response, from Codex `token_count` events.

    Each event's own `last_token_usage` is the response's usage. An event whose running total
    (`total_token_usage`) was already seen earlier in the file is not a new response: Codex writes
    most events twice, and replays earlier totals after leaving review mode. Running totals also
    restart (after an aborted turn, on entering review), so they are differenced only when an
    event lacks `last_token_usage`; a difference that would be negative is an `ingest_problems`
    entry, never a row. Events in the part of a forked rollout copied from its parent are the
    parent's responses: they are remembered as seen, not counted.
    """
    counts = df.filter(pl.col("t_in").is_not_null()).select(
        "session_id", "line_no", "model", "at", "own", "s_in", "s_cached", "s_out",
        _int("t_in").alias("inp"), _int("t_cached").alias("cached"), _int("t_out").alias("out"),
        _int("l_in").alias("l_in"), _int("l_cached").alias("l_cached"), _int("l_out").alias("l_out"),
        pl.concat_str(
            [pl.col(c).fill_null("") for c in ("t_in", "t_cached", "t_out", "t_reason", "t_total")], separator=","
        ).alias("key"),
    )
    if counts.is_empty():
        return pl.DataFrame()
    prior_rows = [(sid, key) for sid in counts["session_id"].unique().to_list() for key in targets[sid].state.get("seen", [])]
    prior = pl.DataFrame(prior_rows, schema={"session_id": pl.String, "key": pl.String}, orient="row").unique()
    counts = counts.join(prior.with_columns(pl.lit(True).alias("prior")), on=["session_id", "key"], how="left")
    counts = counts.with_columns(
        (pl.col("key").is_first_distinct().over("session_id") & pl.col("prior").is_null()).alias("new_total"),
        pl.col("inp").shift(1).over("session_id").fill_null(pl.col("s_in")).alias("p_inp"),
        pl.col("cached").shift(1).over("session_id").fill_null(pl.col("s_cached")).alias("p_cached"),
        pl.col("out").shift(1).over("session_id").fill_null(pl.col("s_out")).alias("p_out"),
    )
    for sid, inp, cached, out, keys in counts.group_by("session_id").agg(
        pl.col("inp").last(), pl.col("cached").last(), pl.col("out").last(),
        pl.col("key").filter(pl.col("new_total")),
    ).iter_rows():
        st = targets[sid].state
        st["totals"] = [inp, cached, out]
        st["seen"] = st.get("seen", []) + list(keys)
    counted = counts.filter(pl.col("new_total") & pl.col("own"))
    has_last = pl.col("l_in").is_not_null()
    counted = counted.with_columns(
        pl.when(has_last).then(pl.col("l_in")).otherwise(pl.col("inp") - pl.col("p_inp").fill_null(0)).alias("prompt_tokens"),
        pl.when(has_last).then(pl.col("l_cached"))
        .otherwise(pl.col("cached") - pl.col("p_cached").fill_null(0)).alias("cached_tokens"),
        pl.when(has_last).then(pl.col("l_out")).otherwise(pl.col("out") - pl.col("p_out").fill_null(0)).alias("completion_tokens"),
    )
    negative = (pl.col("prompt_tokens") < 0) | (pl.col("cached_tokens") < 0) | (pl.col("completion_tokens") < 0)
    for sid, line_no, p, c, o, from_last in counted.filter(negative).select(
        "session_id", "line_no", "prompt_tokens", "cached_tokens", "completion_tokens", has_last
    ).iter_rows():
        how = "its last_token_usage" if from_last else "the difference of its running totals"
        problems.append({
            "session_id": sid, "line_no": line_no, "kind": "negative-usage",
            "detail": f"token_count event: {how} gives a negative count (prompt {p}, cached {c}, completion {o}); no llm_calls row",
        })
    return counted.filter(~negative).select(
        pl.format("codex:{}:{}", "session_id", "line_no").alias("call_id"),
        pl.lit("codex").alias("source"),
        "session_id", "at", "model", "prompt_tokens", "cached_tokens",
        pl.lit(None, dtype=pl.Int64).alias("cache_write_tokens"),
        "completion_tokens", "line_no",
        pl.lit(None, dtype=pl.Int64).alias("cache_write_1h_tokens"),
    )


def _generic(df: pl.DataFrame, targets: dict[str, Target], prompts: dict[str, int]) -> None:
    counts = df.group_by("session_id").agg(
        (pl.col("role") == "user").fill_null(False).sum().alias("u"),
        (pl.coalesce("role", "type") == "assistant").fill_null(False).sum().alias("a"),
    )
    for sid, u, a in counts.iter_rows():
        st = targets[sid].state
        st["prompts"] = st.get("prompts", 0) + int(u)
        st["assistant_lines"] = st.get("assistant_lines", 0) + int(a)
        prompts[sid] = st["prompts"]


def _scope_subagents(con: duckdb.DuckDBPyConnection, session_ids: list[str]) -> bool:
    """Fill `_subs(session_id, parent_session_id)` with the Claude Code subagents in or under
    `session_ids`, and `_parents(session_id)` with their parents. Every statement that compares a
    subagent with its parent reads only these sessions, so its working set is the group's, never
    the warehouse's (a correlated join over all of `lines` ran out of memory at 1 GB of real
    transcripts). Returns False when there is no subagent to look at."""
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _subs AS
        SELECT session_id, parent_session_id FROM sessions
        WHERE format = 'claude-code' AND parent_session_id IS NOT NULL
          AND (session_id IN (SELECT unnest(?::VARCHAR[])) OR parent_session_id IN (SELECT unnest(?::VARCHAR[])))
        """,
        [session_ids, session_ids],
    )
    con.execute("CREATE OR REPLACE TEMP TABLE _parents AS SELECT DISTINCT parent_session_id AS session_id FROM _subs")
    return bool(con.execute("SELECT count(*) FROM _subs").fetchall()[0][0])


def _drop_temp(con: duckdb.DuckDBPyConnection, *names: str) -> None:
    # In a transaction DuckDB has aborted (the statement before failed), a DROP fails too; the
    # rollback that follows removes the tables, and the first error is the one to report.
    with contextlib.suppress(duckdb.TransactionException):
        for name in names:
            con.execute(f"DROP TABLE IF EXISTS {name}")  # name: a constant of this module


def _session_list(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    # A literal list lets DuckDB prune `lines`' row groups by their session_id zone maps; a
    # semi-join on a temp table would scan every row group of the warehouse.
    return [r[0] for r in con.execute(f"SELECT session_id FROM {table}").fetchall()]  # table: a constant


def drop_copied_responses(con: duckdb.DuckDBPyConnection, session_ids: list[str]) -> None:
    """Drop the Claude Code responses a subagent file copied from its parent session.

    Some subagents (a side question, a compaction) start from the parent's conversation: their file
    repeats the parent's lines, responses included, with the same message and request ids. Those
    responses are the parent's calls, so the subagent keeps only its own. Whichever of the two files
    is ingested first, a response stays with the parent. `session_ids` are the sessions that just
    changed; their subagents and their parents are looked at too. The subagents' `turns` follow.
    """
    try:
        if not _scope_subagents(con, session_ids):
            return
        subs, parents = _session_list(con, "_subs"), _session_list(con, "_parents")
        con.execute(
            """
            CREATE OR REPLACE TEMP TABLE _copied AS
            WITH c AS (
                SELECT call_id, session_id, replace(call_id, 'claude-code:' || session_id || ':', '') AS key
                FROM llm_calls WHERE source = 'claude-code' AND session_id IN (SELECT unnest(?::VARCHAR[]))
            ), p AS (
                SELECT session_id, replace(call_id, 'claude-code:' || session_id || ':', '') AS key
                FROM llm_calls WHERE source = 'claude-code' AND session_id IN (SELECT unnest(?::VARCHAR[]))
            )
            SELECT c.call_id, c.session_id
            FROM c JOIN _subs s ON s.session_id = c.session_id
            SEMI JOIN p ON p.session_id = s.parent_session_id AND p.key = c.key
            """,
            [subs, parents],
        )
        if not con.execute("SELECT count(*) FROM _copied").fetchall()[0][0]:
            return
        con.execute("DELETE FROM llm_calls WHERE call_id IN (SELECT call_id FROM _copied)")
        con.execute(
            "UPDATE sessions SET turns = (SELECT count(*) FROM llm_calls c WHERE c.session_id = sessions.session_id "
            "AND c.source = 'claude-code') WHERE session_id IN (SELECT DISTINCT session_id FROM _copied)"
        )
    finally:
        _drop_temp(con, "_copied", "_subs", "_parents")


# The header paths the prompt rule reads, then the line's uuid: one extract gives them all.
_PROMPT_PATHS = (*prompt_rules.CLAUDE_HEADER_PATHS, "$.uuid")
_PROMPT_PATHS_SQL = ", ".join(f"'{p}'" for p in _PROMPT_PATHS)
_PROMPT_HEADER = [f"v[{i}]" for i in range(1, len(prompt_rules.CLAUDE_HEADER_PATHS) + 1)]
# Up to this many prompt uuids a parent's lines are searched for one by one; beyond, every line is parsed.
_UUIDS_SEARCHED = 16


def drop_copied_prompts(con: duckdb.DuckDBPyConnection, session_ids: list[str]) -> None:
    """Leave the prompts a Claude Code subagent file copied from its parent session out of its count.

    A side-question or compaction subagent repeats its parent's lines with their `uuid`
    (`prompt_rules.CLAUDE_COPIED`): a copied prompt is the parent's, as a copied response is the
    parent's call. `sessions.state` keeps the count of the subagent's lines the prompt rule accepts;
    `sessions.prompts` is that count less the copies among them, recomputed for the subagents in or
    under `session_ids` (the sessions that just changed), whichever of the two files came first.
    Only those subagents' lines and their parents' are read.
    """
    try:
        if not _scope_subagents(con, session_ids):
            return
        subs, parents = _session_list(con, "_subs"), _session_list(con, "_parents")
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE _copied_prompts AS
            WITH k AS MATERIALIZED (
                -- the subagents' prompts and their parents, in one parse per line (TRY: a line that is no
                -- JSON is no prompt); the prompt test runs here, so no line's text reaches the joins
                SELECT l.session_id, s.parent_session_id, v[{len(_PROMPT_PATHS)}] AS uuid
                FROM (SELECT session_id, TRY(json_extract_string(text, [{_PROMPT_PATHS_SQL}])) AS v, text
                      FROM lines WHERE session_id IN (SELECT unnest(?::VARCHAR[]))) l
                JOIN _subs s USING (session_id)
                WHERE v[1] = 'user' AND {prompt_rules.claude_prompt("text", _PROMPT_HEADER)}
            ), pl AS MATERIALIZED (
                SELECT session_id, text FROM lines WHERE session_id IN (SELECT unnest(?::VARCHAR[]))
            ), wanted AS (
                SELECT parent_session_id AS session_id, count(DISTINCT uuid) AS n FROM k GROUP BY 1
            ), candidates AS (
                -- a parent line can carry one of those uuids only if it spells it, or spells something with
                -- a \\u escape: only these are parsed (parsing every parent line was a sixth of an ingest).
                -- A parent wanted for many uuids (a compaction copies them all) has every line parsed, once,
                -- rather than each line searched for each uuid.
                SELECT DISTINCT pl.session_id, pl.text
                FROM pl JOIN wanted w ON w.session_id = pl.session_id AND w.n <= {_UUIDS_SEARCHED}
                JOIN k ON k.parent_session_id = pl.session_id AND contains(pl.text, k.uuid)
                UNION ALL
                SELECT pl.session_id, pl.text
                FROM pl JOIN wanted w ON w.session_id = pl.session_id
                WHERE w.n > {_UUIDS_SEARCHED} OR contains(pl.text, '\\u')
            ), pu AS (
                SELECT DISTINCT session_id, v[2] AS uuid
                FROM (SELECT session_id, TRY(json_extract_string(text, ['$.type', '$.uuid'])) AS v FROM candidates)
                WHERE v[1] = 'user'
            )
            SELECT k.session_id, count(*) AS n
            FROM k SEMI JOIN pu ON pu.session_id = k.parent_session_id AND pu.uuid = k.uuid
            GROUP BY k.session_id
            """,
            [subs, parents],
        )
        con.execute(
            """
            UPDATE sessions SET prompts = coalesce(TRY_CAST(json_extract_string(sessions.state, '$.prompts') AS BIGINT), 0)
                - coalesce((SELECT n FROM _copied_prompts c WHERE c.session_id = sessions.session_id), 0)
            WHERE state IS NOT NULL AND session_id IN (SELECT session_id FROM _subs)
            """
        )
    finally:
        _drop_temp(con, "_copied_prompts", "_subs", "_parents")


def _insert(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table, sql: str) -> None:
    con.register(name, table)
    try:
        con.execute(sql)
    finally:
        con.unregister(name)


_CALL_COLUMNS = ('call_id, source, session_id, "at", model, prompt_tokens, cached_tokens, cache_write_tokens, '
                 "completion_tokens, line_no, cache_write_1h_tokens")


def _upsert_calls(con: duckdb.DuckDBPyConnection, rows: pl.DataFrame, fresh: set[str]) -> None:
    """Store derived usage rows. A later line of a grown file may complete a response stored before,
    so those rows replace theirs; the rows of `fresh` sessions cannot, and a plain insert skips the
    look-up (204,581 rows: 0.43 s instead of 0.74 s)."""
    new = rows.get_column("session_id").is_in(list(fresh))
    for part, verb in ((rows.filter(new), "INSERT"), (rows.filter(~new), "INSERT OR REPLACE")):
        if part.height:
            _insert(con, "_derived_calls", part.to_arrow(),
                    f"{verb} INTO llm_calls ({_CALL_COLUMNS}) SELECT {_CALL_COLUMNS} FROM _derived_calls")


# Bytes of stored lines re-derived at once by `rederive` (a bound on memory, not on correctness).
REDERIVE_BYTES = 64 * 1024 * 1024


def rederive(con: duckdb.DuckDBPyConnection, session_ids: list[str] | None = None, *,
             transaction_per_group: bool = False) -> int:
    """Derive every statistic and usage row again from the stored lines, with the current rules.

    For a warehouse ingested by an older version: its formats are sniffed again from the stored
    first lines (a 2025 Codex rollout stored as plain JSONL becomes `codex`; session ids are kept),
    then prompts, turns, models, usage rows and the problems derive reports are rebuilt exactly as
    a fresh ingest of the same lines would build them, a group of about REDERIVE_BYTES of lines at a
    time. Runs inside the caller's transaction, or with `transaction_per_group` commits each group
    on its own (a whole warehouse in one transaction grew by 130 MB a group outside DuckDB's memory
    limit: 2.9 GB for 1 GB of lines); a group re-derived twice gives the same rows, so a stop half
    way leaves nothing the next run does not redo. Returns the number of sessions re-derived.
    """
    where = "" if session_ids is None else " WHERE session_id IN (SELECT unnest(?::VARCHAR[]))"
    params: list[Any] = [] if session_ids is None else [session_ids]
    sessions = con.execute(
        f"SELECT session_id, format, path, size_bytes, cwd FROM sessions{where} ORDER BY session_id", params
    ).fetchall()
    group: list[tuple[str, str, str]] = []
    budget = 0
    for i, (sid, fmt, path, size, _cwd) in enumerate(sessions):
        group.append((sid, fmt, path))
        budget += int(size or 0)
        if budget < REDERIVE_BYTES and i + 1 < len(sessions):
            continue
        with atomic(con) if transaction_per_group else contextlib.nullcontext():
            _rederive_group(con, group)
        group, budget = [], 0
    return len(sessions)


def _rederive_group(con: duckdb.DuckDBPyConnection, group: list[tuple[str, str, str]]) -> None:
    targets: dict[str, Target] = {}
    for sid, fmt, path in group:
        if fmt in (formats.JSONL, formats.CODEX):
            head = [
                row[0].encode("utf-8")
                for row in con.execute(
                    "SELECT text FROM lines WHERE session_id = ? AND line_no <= ? ORDER BY line_no", [sid, formats.SNIFF_LINES]
                ).fetchall()
            ]
            ident = formats.sniff(head) if head else None
            if ident is not None and (ident.format != fmt or ident.parent_session_id is not None):
                fmt = ident.format
                con.execute(
                    "UPDATE sessions SET format = ?, parent_session_id = coalesce(?, parent_session_id), "
                    "slug = CASE WHEN cwd IS NULL AND ? IS NOT NULL THEN ? ELSE slug END, cwd = coalesce(cwd, ?) "
                    "WHERE session_id = ?",
                    [fmt, ident.parent_session_id, ident.cwd, formats.slug_for(ident.cwd), ident.cwd, sid],
                )
        targets[sid] = Target(sid, fmt, path, {}, fresh=True)
    ids = list(targets)
    con.execute(
        "DELETE FROM llm_calls WHERE source IN ('claude-code', 'codex') AND session_id IN (SELECT unnest(?::VARCHAR[]))", [ids]
    )
    con.execute(
        "DELETE FROM ingest_problems WHERE kind IN ('not-json', 'negative-usage') "
        "AND session_id IN (SELECT unnest(?::VARCHAR[]))",
        [ids],
    )
    con.execute(
        "UPDATE sessions SET prompts = 0, turns = 0, model = NULL, state = NULL, first_at = NULL, last_at = NULL, "
        "tool_calls = 0, harness_versions = [] WHERE session_id IN (SELECT unnest(?::VARCHAR[]))",
        [ids],
    )
    lines = _frame(
        con,
        "SELECT session_id, line_no, text FROM lines WHERE session_id IN (SELECT unnest(?::VARCHAR[])) "
        "ORDER BY session_id, line_no",
        [ids],
    )
    if lines.height:
        con.register("_rederive_lines", lines.to_arrow())
        try:
            proj = project(con, "_rederive_lines", {t.format for t in targets.values()})
        finally:
            con.unregister("_rederive_lines")
        fold(con, proj, targets)
