"""The DuckDB warehouse: the one place transcript lines are stored and the views analysts query.

Owns: `db` (opening the file, connections in UTC, write sessions), `publish` (the published file
analysts open and the private working file writers use), `lock` (the write lock and who holds
it), `transaction` (`db.atomic()`, the one way to write in a transaction), `migrations` (the
schema as named steps; views rebuilt when they change), `ingest` (the only writer of `lines`),
`formats` (detecting Claude Code, Codex or plain JSONL from content), `prompt_rules` (what counts
as a user prompt), `derive` (session statistics and `llm_calls` rows from new lines), `views`
(messages, tool calls, tool results, usage), `checks` (the invariants `make check-real` verifies
on a folder of real transcripts).

May import: the cross-cutting top-level modules only.
"""
