"""Memories and transcripts handed to agents.

Owns: `mcp_server` (`pipeline mcp`: the MCP server on stdio), `memory_reads` (memories by review
state and words, one memory with its evidence at its transcript lines), `agent_files` (the export
into AGENTS.md, or a file CLAUDE.md imports). Everything here only reads the published warehouse and
the corpus's last commit; every value leaves masked.

May import: `corpus`, `consolidator` (the transcript tools and quote lookup), `warehouse`, `show`
(Markdown escapes), `usage` (the sessions table), `secrets` and the cross-cutting top-level modules.
"""
