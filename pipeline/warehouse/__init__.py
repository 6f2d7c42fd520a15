"""The DuckDB warehouse: the one place transcript lines are stored and the views analysts query.

Owns: `db` (opening the file, transactions, connections in UTC), `migrations` (the schema as
named steps), `ingest` (the only writer of `lines`), `formats` (detecting Claude Code, Codex or
plain JSONL from content), `prompt_rules` (what counts as a user prompt), `derive` (session
statistics and `llm_calls` rows from new lines), `views` (messages, tool calls, tool results,
usage).

May import: the cross-cutting top-level modules only.
"""
