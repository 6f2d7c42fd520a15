"""What counts as a user prompt: the one definition that `sessions.prompts` and `messages.is_prompt` share.

Both the ingest-time counts (`derive`) and the analyst view (`views`) test a user line's text
against these prefixes, so the two can never disagree about which lines a person typed.
"""

from __future__ import annotations

# Claude Code user records that are output of local commands or interruptions, not prompts.
CLAUDE_NOT_PROMPT = ("<local-command-stdout>", "<local-command-stderr>", "[Request interrupted")
# Codex injects these as user/developer messages; they are context, not prompts.
CODEX_INJECTED = ("<environment_context>", "<user_instructions>", "<permissions", "# AGENTS.md", "<INSTRUCTIONS>")
