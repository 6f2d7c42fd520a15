"""The warehouse schema, as a history of small named steps (as llm's and sqlite-utils' migrations).

Each step runs once, inside a transaction, and is recorded by name in `schema_migrations`, so an
older warehouse upgrades itself on its next read-write open (a read-only open of a warehouse with
steps missing is refused with a message that says how to upgrade it).

Tables are steps; views are rebuilt. A step changes what holds data (tables, columns, rows) and
never changes once shipped: a warehouse that ran it will not run it again, so an edit would reach
only new warehouses. The analyst views (`pipeline.warehouse.views`) are not steps: they hold no
data, and their SQL embeds the prompt rules that `derive` also applies, so they must always be the
code's current SQL. A writing open rebuilds them whenever that SQL changed (its hash is recorded
in `schema_migrations` as `views:<hash>`), after the steps. Freezing each view's SQL in the step
that ships it would copy a hundred lines of SQL per change, and a step that called today's
`create_views` (as 004 and 006 once did) would run today's SQL against an older warehouse's
tables, before the later steps those views need. 004 and 006 keep their names, recorded in every
warehouse, and do nothing now.

Derived rows are rebuilt the same way: `derive.DERIVE_VERSION` names the rules that computed a
warehouse's session statistics and usage rows (`derived:<version>`); a writing open of a warehouse
derived under another version derives every stored session again from its lines (`rederive`).

To add a step: append a function at the end of the steps below, decorated `@step("NNN_what")`
with the next number, that takes the connection and issues the statements it needs with their SQL
written out (not built from constants or functions that may change later). A duplicate name is
refused when this module is imported. Then run `.venv/bin/python -m tests.warehouse.test_migrations`
to record the step and the new schema in `tests/warehouse/expected_schema.json`; the tests upgrade
a warehouse stopped before every step (`migrate(con, stop_before=…)`) and compare it with a fresh
one, and fail if a recorded step's source changes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import cast

import duckdb

from pipeline.warehouse.transaction import atomic

Step = Callable[[duckdb.DuckDBPyConnection], None]
STEPS: list[tuple[str, Step]] = []
VIEWS_PREFIX = "views:"
DERIVED_PREFIX = "derived:"


def step(name: str) -> Callable[[Step], Step]:
    """Register the decorated function as the next step, under a name no other step has."""
    if any(name == done for done, _ in STEPS):
        raise ValueError(f"migration step {name!r} is defined twice; give the new step the next free number")
    if not name or name.startswith((VIEWS_PREFIX, DERIVED_PREFIX)):
        raise ValueError(f"{name!r} cannot name a migration step")

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
    # Created the views; views are now rebuilt after the steps whenever their SQL changes.
    pass


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
    # Gave messages is_prompt; views are now rebuilt after the steps whenever their SQL changes.
    pass


@step("007_dropped_memories")
def _dropped_memories(con: duckdb.DuckDBPyConnection) -> None:
    # Memories a reviewer took back (`pipeline memories drop`), mirrored from the corpus's drop: commits.
    con.execute(
        """
        CREATE TABLE dropped_memories (
            memory_id VARCHAR PRIMARY KEY, kind VARCHAR, claim VARCHAR NOT NULL, why VARCHAR,
            path VARCHAR, "commit" VARCHAR
        )
        """
    )


@step("008_cache_write_1h")
def _cache_write_1h(con: duckdb.DuckDBPyConnection) -> None:
    # Of a call's cache_write_tokens, those written with a 1-hour TTL (Claude Code's
    # usage.cache_creation.ephemeral_1h_input_tokens); the rest were written for 5 minutes. NULL when
    # the split is unknown (other sources, imported logs, transcripts from before the split).
    con.execute("ALTER TABLE llm_calls ADD COLUMN cache_write_1h_tokens BIGINT")


@step("009_session_facts")
def _session_facts(con: duckdb.DuckDBPyConnection) -> None:
    # What `pipeline sessions` shows of each session without reading its lines: the tool calls the
    # `tool_calls` view counts and the harness versions its records name, kept by every ingest.
    con.execute("ALTER TABLE sessions ADD COLUMN tool_calls BIGINT DEFAULT 0")
    con.execute("ALTER TABLE sessions ADD COLUMN harness_versions VARCHAR[] DEFAULT []")


@step("010_review_state")
def _memory_status(con: duckdb.DuckDBPyConnection) -> None:
    # The review state of each memory, mirrored from its file's front matter: `new` as a night landed
    # it, `kept` once a reviewer vouched for it (`pipeline memories keep`), and when that was.
    con.execute("ALTER TABLE memories ADD COLUMN status VARCHAR DEFAULT 'new'")
    con.execute("ALTER TABLE memories ADD COLUMN kept_at TIMESTAMPTZ")
    # and the project each task was promised in
    con.execute("ALTER TABLE tasks ADD COLUMN project VARCHAR")



@step("011_price_rates")
def _price_rates(con: duckdb.DuckDBPyConnection) -> None:
    # The list price of each (model, source, UTC day) the calls hold, one row per prompt-length tier
    # (prompts in (lo, hi]), under the price data named by `prices` (the genai-prices release). A model
    # with no known price has one row with NULL rates. Kept by every ingest so that a usage report is
    # SQL alone, without loading the price data (a quarter of a second) on every answer.
    con.execute(
        """
        CREATE TABLE price_rates (
            prices VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            source VARCHAR NOT NULL,
            day DATE NOT NULL,
            lo BIGINT NOT NULL,
            hi BIGINT NOT NULL,
            r_in DOUBLE,
            r_read DOUBLE,
            r_out DOUBLE,
            r_w5 DOUBLE,
            r_w1h DOUBLE
        )
        """
    )

@step("012_secret_scans")
def _secret_scans(con: duckdb.DuckDBPyConnection) -> None:
    # What secret detection found in each session's lines, kept so that a line is scanned once, not by
    # every reader of a night (the batch, its apply, the report's three readers). `line_no`: the last
    # line scanned; `detector`: the detector's fingerprint (its rules and detect-secrets' version: a
    # new detector scans again); `rewritten_at`: the session's at the scan (a rewrite since voids it).
    con.execute(
        """
        CREATE TABLE secret_scans (
            session_id VARCHAR PRIMARY KEY,
            line_no BIGINT NOT NULL,
            detector VARCHAR NOT NULL,
            rewritten_at TIMESTAMPTZ,
            scanned_at TIMESTAMPTZ NOT NULL
        )
        """
    )
    con.execute(
        """
        CREATE TABLE secret_values (
            session_id VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            value VARCHAR NOT NULL,
            before VARCHAR NOT NULL,
            after VARCHAR NOT NULL
        )
        """
    )


@step("013_session_usage")
def _session_usage(con: duckdb.DuckDBPyConnection) -> None:
    # Each session's own calls summed and priced (`pipeline.calls.session_sums`), kept by the writer that
    # prices the new days, with the fingerprint of the calls they were summed from: `pipeline sessions`
    # reads them while the fingerprint matches, and sums the calls itself otherwise.
    con.execute(
        """
        CREATE TABLE session_usage (
            session_id VARCHAR PRIMARY KEY,
            models VARCHAR[] NOT NULL,
            uncached BIGINT NOT NULL,
            written BIGINT NOT NULL,
            cached BIGINT NOT NULL,
            completion BIGINT NOT NULL,
            cost DOUBLE NOT NULL,
            unpriced BOOLEAN NOT NULL,
            unrated BOOLEAN NOT NULL
        )
        """
    )
    con.execute("CREATE TABLE session_usage_state (prices VARCHAR NOT NULL, calls BIGINT NOT NULL, digest VARCHAR NOT NULL)")


# -- applying the steps --------------------------------------------------------------------------------


def views_fingerprint() -> str:
    """A hash of the statements `create_views` runs: the SQL itself, so a change in the prompt
    rules it embeds counts too."""
    from pipeline.warehouse.views import create_views

    statements: list[str] = []

    class Capture:
        def execute(self, sql: str, *args: object) -> None:
            statements.append(sql)

    create_views(cast(duckdb.DuckDBPyConnection, Capture()))
    return hashlib.sha256("\n".join(statements).encode("utf-8")).hexdigest()[:16]


def _ensure_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMPTZ)"
    )


def applied(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The recorded steps. Called as a connection opens, outside any transaction: asking for the
    table and taking its absence as an answer costs 0.3 ms, looking it up in information_schema
    first 1.5 ms, on every open."""
    try:
        rows = con.execute("SELECT name FROM schema_migrations").fetchall()
    except duckdb.CatalogException:
        return set()
    return {row[0] for row in rows}


def pending(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The steps this warehouse has not run, `views` when its views are not the code's, and
    `derived` when its derived rows were computed by other rules than the code's."""
    from pipeline.warehouse.derive_version import DERIVE_VERSION

    done = applied(con)
    missing = [name for name, _ in STEPS if name not in done]
    if VIEWS_PREFIX + views_fingerprint() not in done:
        missing.append("views")
    if f"{DERIVED_PREFIX}{DERIVE_VERSION}" not in done:
        missing.append("derived")
    return missing


def migrate(con: duckdb.DuckDBPyConnection, *, stop_before: str | None = None) -> list[str]:
    """Run every step not yet recorded, in order, then rebuild the views if their SQL changed;
    returns the names of the steps run now.

    `stop_before` names a step: the steps before it run, and neither it, the later ones nor the
    views do (a warehouse as it was before that step, for tests of the upgrade path)."""
    names = [name for name, _ in STEPS]
    if stop_before is not None and stop_before not in names:
        raise ValueError(f"no migration step {stop_before!r}; steps: {', '.join(names)}")
    _ensure_table(con)
    done = applied(con)
    ran: list[str] = []
    for name, fn in STEPS:
        if name == stop_before:
            return ran
        if name in done:
            continue
        with atomic(con):
            fn(con)
            con.execute("INSERT INTO schema_migrations VALUES (?, current_timestamp)", [name])
        ran.append(name)
    views = VIEWS_PREFIX + views_fingerprint()
    if views not in done:
        from pipeline.warehouse.views import create_views

        with atomic(con):
            create_views(con)
            con.execute("INSERT INTO schema_migrations VALUES (?, current_timestamp)", [views])
    # Derived rows (sessions' prompts and turns, usage rows) follow the derive rules as views follow
    # their SQL: a warehouse derived under other rules is derived again, once, from its stored lines.
    from pipeline.warehouse.derive import DERIVE_VERSION, rederive

    derived = f"{DERIVED_PREFIX}{DERIVE_VERSION}"
    if derived not in done:
        from pipeline.warehouse import memory

        with memory.bounded(con):
            rederive(con, transaction_per_group=True)
        with atomic(con):
            con.execute("INSERT INTO schema_migrations VALUES (?, current_timestamp)", [derived])
    return ran
