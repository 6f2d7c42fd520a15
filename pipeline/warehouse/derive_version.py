"""The version of the rules `pipeline.warehouse.derive` applies, apart from them: a read-only open checks
it on every command, and `derive` itself imports polars and pyarrow."""

# The rules `derive` applies, as a version recorded in the warehouse (`derived:<version>` in
# schema_migrations). Bump it when a change alters what is stored for lines already ingested
# (prompts, turns, models, usage rows, derive's problems): the next writing open of an older
# warehouse derives every stored session again (`rederive`). 2: the rules learnt on real logs.
# 3: a Claude Code subagent's copies of its parent's prompts and a compaction's order are not prompts.
# 4: Claude Code's cache writes split by TTL (`cache_write_1h_tokens`).
# 5: each session's tool calls and harness versions (`sessions.tool_calls`, `sessions.harness_versions`).
DERIVE_VERSION = 5

__all__ = ["DERIVE_VERSION"]
