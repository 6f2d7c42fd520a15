"""The warehouse schema, as a history of small named steps.

Each step runs once, inside a transaction, and is recorded in `schema_migrations`, so an older
warehouse upgrades itself on its next read-write open. Add a new step at the end; never edit one
that has shipped.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from pipeline.warehouse.transaction import atomic

Step = Callable[[duckdb.DuckDBPyConnection], None]
STEPS: list[tuple[str, Step]] = []


def step(name: str) -> Callable[[Step], Step]:
    def register(fn: Step) -> Step:
        STEPS.append((name, fn))
        return fn

    return register


@step("001_transcripts")
def _transcripts(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE sessions (
            session_id VARCHAR PRIMARY KEY,
            path VARCHAR NOT NULL,          -- absolute path of the transcript file
            format VARCHAR NOT NULL,        -- claude-code | codex | jsonl
            parent_session_id VARCHAR,      -- Claude Code subagent files: the session that spawned them
            slug VARCHAR,
            cwd VARCHAR,
            first_at TIMESTAMPTZ,
            last_at TIMESTAMPTZ,
            prompts INTEGER NOT NULL DEFAULT 0,
            turns INTEGER NOT NULL DEFAULT 0,
            size_bytes BIGINT NOT NULL DEFAULT 0,   -- bytes of the complete lines stored
            line_count BIGINT NOT NULL DEFAULT 0,
            problems INTEGER NOT NULL DEFAULT 0,    -- lines that are not JSON or not valid UTF-8
            claimed_session_id VARCHAR,     -- the id the records carry, when we had to rename
            model VARCHAR,                  -- last model seen
            held_back_bytes BIGINT NOT NULL DEFAULT 0,  -- a trailing line without newline, not yet stored
            head_hash VARCHAR,              -- sha256 of the first bytes, to notice a rewritten file
            head_len INTEGER NOT NULL DEFAULT 0,
            tail_hash VARCHAR,              -- sha256 of the bytes just before size_bytes
            tail_len INTEGER NOT NULL DEFAULT 0,
            state JSON,                     -- per-format derivation state carried between ingests
            rewritten_at TIMESTAMPTZ,       -- last time the file was found rewritten and re-read whole
            ingested_at TIMESTAMPTZ
        )
        """
    )
    con.execute("CREATE TABLE lines (session_id VARCHAR NOT NULL, line_no BIGINT NOT NULL, text VARCHAR NOT NULL)")
    con.execute(
        """
        CREATE TABLE ingest_problems (
            session_id VARCHAR NOT NULL,
            line_no BIGINT,
            kind VARCHAR NOT NULL,          -- not-json | invalid-utf8 | duplicate-id | unreadable | held-back
            detail VARCHAR,
            path VARCHAR,
            "at" TIMESTAMPTZ DEFAULT current_timestamp
        )
        """
    )


@step("002_llm_calls")
def _llm_calls(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE llm_calls (
            call_id VARCHAR PRIMARY KEY,
            source VARCHAR NOT NULL,        -- claude-code | codex | consolidator | simulated | import:<name>
            session_id VARCHAR,
            "at" TIMESTAMPTZ,
            model VARCHAR,
            prompt_tokens BIGINT,           -- all input tokens, cached ones included
            cached_tokens BIGINT,
            cache_write_tokens BIGINT,
            completion_tokens BIGINT,
            latency_ms DOUBLE,
            run_id VARCHAR,
            batch_id VARCHAR,
            system_fp VARCHAR,
            tools_fp VARCHAR,
            prefix_fp VARCHAR,
            changed_sections VARCHAR[],
            true_cause VARCHAR,             -- simulated rows only
            line_no BIGINT,                 -- transcript or import-file line the row came from
            origin VARCHAR                  -- file the row was imported from, if any
        )
        """
    )


@step("003_consolidation")
def _consolidation(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE memories (
            memory_id VARCHAR PRIMARY KEY, path VARCHAR NOT NULL, kind VARCHAR NOT NULL,
            claim VARCHAR NOT NULL, created_at TIMESTAMPTZ, run_id VARCHAR, batch_id VARCHAR,
            "commit" VARCHAR
        )
        """
    )
    con.execute("CREATE TABLE memory_links (memory_id VARCHAR NOT NULL, session_id VARCHAR NOT NULL)")
    con.execute(
        """
        CREATE TABLE tasks (
            task_id VARCHAR PRIMARY KEY, path VARCHAR, status VARCHAR NOT NULL, statement VARCHAR NOT NULL,
            actor VARCHAR, due_hint VARCHAR, session_id VARCHAR, confidence DOUBLE,
            created_at TIMESTAMPTZ, closed_at TIMESTAMPTZ
        )
        """
    )
    con.execute(
        """
        CREATE TABLE watermarks (
            session_id VARCHAR NOT NULL, line_count BIGINT NOT NULL, size_bytes BIGINT NOT NULL,
            run_id VARCHAR, batch_id VARCHAR, "at" TIMESTAMPTZ DEFAULT current_timestamp
        )
        """
    )
    con.execute(
        """
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ,
            engine VARCHAR, model VARCHAR, status VARCHAR, details JSON
        )
        """
    )
    con.execute(
        """
        CREATE TABLE batches (
            run_id VARCHAR NOT NULL, batch_id VARCHAR NOT NULL, status VARCHAR, reason VARCHAR,
            sessions VARCHAR[], started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, artifact_dir VARCHAR,
            details JSON
        )
        """
    )
    con.execute(
        """
        CREATE TABLE agent_tool_calls (
            run_id VARCHAR, batch_id VARCHAR, seq INTEGER, name VARCHAR, arguments JSON,
            session_id VARCHAR, ok BOOLEAN, result_chars BIGINT, "at" TIMESTAMPTZ
        )
        """
    )


@step("004_analyst_views")
def _views(con: duckdb.DuckDBPyConnection) -> None:
    from pipeline.warehouse.views import create_views

    create_views(con)


@step("005_applied_artifacts")
def _applied(con: duckdb.DuckDBPyConnection) -> None:
    # One row per artifact folder that `apply` has landed: re-applying it is then a no-op.
    con.execute(
        """
        CREATE TABLE applied_artifacts (
            artifact_id VARCHAR PRIMARY KEY, run_id VARCHAR, batch_id VARCHAR, path VARCHAR,
            outcome VARCHAR, applied_at TIMESTAMPTZ, details JSON
        )
        """
    )


@step("006_messages_is_prompt")
def _messages_is_prompt(con: duckdb.DuckDBPyConnection) -> None:
    # messages gains is_prompt, so that "what the user asked" leaves out injected context.
    from pipeline.warehouse.views import create_views

    create_views(con)


def _ensure_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMPTZ)"
    )


def applied(con: duckdb.DuckDBPyConnection) -> set[str]:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_catalog = current_database() AND table_name = 'schema_migrations'"
    ).fetchall()[0]
    if not exists or not exists[0]:
        return set()
    return {row[0] for row in con.execute("SELECT name FROM schema_migrations").fetchall()}


def pending(con: duckdb.DuckDBPyConnection) -> list[str]:
    done = applied(con)
    return [name for name, _ in STEPS if name not in done]


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply every step not yet recorded; returns the names applied now."""
    _ensure_table(con)
    done = applied(con)
    ran: list[str] = []
    for name, fn in STEPS:
        if name in done:
            continue
        with atomic(con):
            fn(con)
            con.execute("INSERT INTO schema_migrations VALUES (?, current_timestamp)", [name])
        ran.append(name)
    return ran
