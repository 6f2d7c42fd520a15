"""What counts as a user prompt: the one definition that `sessions.prompts` and `messages.is_prompt` share.

A prompt is a line the person typed. Harnesses also write user lines themselves: command output,
interruption notices, injected context, compaction summaries. Those are never prompts. The rule is
written once, as a DuckDB SQL expression over a line's raw text (:func:`claude_prompt`,
:func:`codex_prompt`, :func:`jsonl_prompt`); the ingest-time counts (`derive`) and the analyst view
(`views`) both evaluate that same expression, so the two cannot disagree.

Claude Code: a `user` record that is not `isMeta` or `isCompactSummary`, whose content is a string,
or a list of blocks without a tool result, with at least one block the person wrote: an image, or a
text that does not start with a harness prefix below (an IDE's `<ide_opened_file>` note beside a
typed text does not hide the typed text).

Codex: a user `message` item (`response_item` in current rollouts, a bare item in the 2025 format)
with at least one image or one text that does not start with an injected-context prefix below.
Codex also logs each prompt as a `user_message` event; only the item counts, so a prompt is
counted once.

Plain JSONL: a record whose `role` is `user`.
"""

from __future__ import annotations

# Claude Code user records written by the harness, not typed: command output, notifications,
# interruptions, the local-command caveat, and context an IDE attaches to a typed prompt.
CLAUDE_NOT_PROMPT = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<task-notification>",
    "<local-command-caveat>",
    "Caveat: The messages below were generated",
    "[Request interrupted",
    "<ide_opened_file>",
    "<ide_selection>",
)
# Codex user messages written by the harness: injected instructions and environment, the notice
# of an aborted turn, the result of a review, a shell command the user ran outside the model.
CODEX_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions",
    "# AGENTS.md",
    "<INSTRUCTIONS>",
    "<turn_aborted>",
    "<user_action>",
    "<user_shell_command>",
)
# Bare item types of the 2025 Codex rollout format (no `payload` wrapper).
CODEX_BARE_ITEMS = (
    "message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
    "local_shell_call", "reasoning", "web_search_call",
)

_WHITESPACE = "chr(32) || chr(9) || chr(10) || chr(13)"


def _quoted(values: tuple[str, ...]) -> str:
    # The package's own constants, written in as SQL string literals (never user input).
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def _literals(values: tuple[str, ...]) -> str:
    return f"[{_quoted(values)}]"


def _typed(expr: str, prefixes: tuple[str, ...]) -> str:
    """SQL: the string `expr` is text a person wrote (non-blank, no harness prefix)."""
    trimmed = f"ltrim({expr}, {_WHITESPACE})"
    return (
        f"(coalesce({trimmed}, '') <> '' AND NOT list_bool_or([starts_with({trimmed}, p) FOR p IN {_literals(prefixes)}]))"
    )


def claude_prompt(text: str) -> str:
    """SQL boolean: the Claude Code line whose raw JSON is `text` is a prompt."""
    block_typed = (
        "json_extract_string(b, '$.type') = 'image' OR (json_extract_string(b, '$.type') = 'text' AND "
        + _typed("json_extract_string(b, '$.text')", CLAUDE_NOT_PROMPT)
        + ")"
    )
    return f"""coalesce(
        json_extract_string({text}, '$.type') = 'user'
        AND coalesce(json_extract_string({text}, '$.isMeta'), 'false') <> 'true'
        AND coalesce(json_extract_string({text}, '$.isCompactSummary'), 'false') <> 'true'
        AND CASE json_type({text}, '$.message.content')
            WHEN 'VARCHAR' THEN {_typed(f"json_extract_string({text}, '$.message.content')", CLAUDE_NOT_PROMPT)}
            WHEN 'ARRAY' THEN json_extract_string({text}, '$.message.content[0].type') IS DISTINCT FROM 'tool_result'
                AND list_bool_or([{block_typed} FOR b IN json_extract({text}, '$.message.content[*]')])
            ELSE false
        END, false)"""


def codex_item(text: str) -> str:
    """SQL JSON: the item a Codex line carries (`payload` of a `response_item`, or a bare 2025 item), else NULL."""
    return (
        f"CASE WHEN json_extract_string({text}, '$.type') = 'response_item' THEN json_extract({text}, '$.payload') "
        f"WHEN json_extract_string({text}, '$.type') IN ({_quoted(CODEX_BARE_ITEMS)}) "
        f"AND json_extract({text}, '$.payload') IS NULL THEN CAST({text} AS JSON) END"
    )


def codex_prompt(text: str) -> str:
    """SQL boolean: the Codex line whose raw JSON is `text` is a prompt (lines copied from a parent
    rollout are excluded by the caller, which knows where they end)."""
    item = codex_item(text)
    block_typed = (
        "json_extract_string(b, '$.type') = 'input_image' OR (json_extract_string(b, '$.type') IN ('input_text', 'text') AND "
        + _typed("json_extract_string(b, '$.text')", CODEX_INJECTED)
        + ")"
    )
    return f"""coalesce(
        json_extract_string({item}, '$.type') = 'message' AND json_extract_string({item}, '$.role') = 'user'
        AND list_bool_or([{block_typed} FOR b IN json_extract({item}, '$.content[*]')]), false)"""


def jsonl_prompt(text: str) -> str:
    """SQL boolean: the plain JSONL line whose raw JSON is `text` is a prompt."""
    return f"coalesce(json_extract_string({text}, '$.role') = 'user', false)"
