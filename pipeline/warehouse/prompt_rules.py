"""What counts as a user prompt: the one definition that `sessions.prompts` and `messages.is_prompt` share.

A prompt is a line the person typed. Harnesses also write user lines themselves: command output,
interruption notices, injected context, compaction summaries. Those are never prompts. The rule is
written once, as a DuckDB SQL expression over a line's raw text (:func:`claude_prompt`,
:func:`codex_prompt`, :func:`jsonl_prompt`); the ingest-time counts (`derive`) and the analyst view
(`views`) both evaluate that same expression, so the two cannot disagree.

Claude Code: a `user` record that is not `isMeta` or `isCompactSummary`, whose content is a string,
or a list of blocks without a tool result, with at least one block the person wrote: an image, or a
text that does not start with a harness prefix below (an IDE's `<ide_opened_file>` note beside a
typed text does not hide the typed text). Two more exclusions, both for subagent files:

* A line of a harness-run subagent (`agentId` opening with a prefix in :data:`CLAUDE_HARNESS_AGENTS`,
  the `agent-acompact-*` files a compaction writes) is never a prompt: nobody types into a
  compaction, its one own user line is the summarising instruction the harness writes.
* A line copied from the parent session is the parent's prompt, not the subagent's. Side-question
  and compaction subagents start from the parent's conversation: their file repeats the parent's
  lines with the same `uuid` (and timestamp), only marked `isSidechain` and given the subagent's
  `agentId`, so `isSidechain` cannot tell a copy from the subagent's own line but the `uuid` can.
  Such a copy is left out exactly like the parent's copied responses are left out of usage. This
  needs the parent's lines, so it is a relation (:data:`CLAUDE_COPIED`), not a per-line test:
  `views` leaves its lines out of `messages.is_prompt` and `derive` subtracts them from
  `sessions.prompts` whichever of the two files is ingested first. A side question's own line
  (`<system-reminder>` wrapping the question) stays a prompt: the person typed the question and the
  parent file records only the bare `/btw` command.

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
# `agentId` prefixes of Claude Code subagents the harness runs on its own (no person types into
# them): a compaction (`agent-acompact-<hex>.jsonl`).
CLAUDE_HARNESS_AGENTS = ("acompact-",)
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

_RE_SPECIAL = set("\\.^$|?*+()[]{}")


def _quoted(values: tuple[str, ...]) -> str:
    # The package's own constants, written in as SQL string literals (never user input).
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def _prefix_pattern(prefixes: tuple[str, ...]) -> str:
    """An RE2 pattern, as a SQL literal, matching a text that opens (after blanks) with one of `prefixes`."""
    alternatives = "|".join("".join("\\" + ch if ch in _RE_SPECIAL else ch for ch in p) for p in prefixes)
    return "'" + f"^[ \\t\\r\\n]*(?:{alternatives})".replace("'", "''") + "'"


def _typed(value: str, prefixes: tuple[str, ...]) -> str:
    """SQL: the string `value` (a lambda parameter or column, evaluated once) is text a person
    wrote: not blank, and not opening with a harness prefix."""
    return (f"(regexp_matches({value}, '[^ \\t\\r\\n]') AND NOT regexp_matches({value}, {_prefix_pattern(prefixes)}))")


# The rules below bind each JSON value they extract to a lambda parameter (`list_transform([x],
# lambda v: …)[1]`), so that each is parsed once per line however often the rule looks at it.


# The header values the Claude Code rule reads, in this order; `derive` takes them from its own parse of
# the line instead of parsing it again.
CLAUDE_HEADER_PATHS = ("$.type", "$.isMeta", "$.isCompactSummary", "$.message.content[0].type", "$.agentId")


def claude_prompt(text: str, header: list[str] | None = None) -> str:
    """SQL boolean: the Claude Code line whose raw JSON is `text` is a prompt.

    `header` is, when the caller already has them, one SQL expression per :data:`CLAUDE_HEADER_PATHS`
    value (as `json_extract_string` gives it), cheap enough to be written into the rule where each
    is read; by default the rule extracts them itself, in one parse. The content is then read once,
    as a string: a typed prompt's own text, or an array's JSON. Which of the two it is shows without
    another parse almost always: a first block with a `type` means an array, and a text that opens
    with a quote or is not JSON at all can only be a string. Only a content that reads as a JSON
    array, object or literal (a typed `[]`, `true` or `42`, or an array of untyped blocks) is asked
    its JSON type from the line."""
    h = header or [f"h[{i}]" for i in range(1, len(CLAUDE_HEADER_PATHS) + 1)]
    typed = _typed("coalesce(v[2], '')", CLAUDE_NOT_PROMPT)
    block = (
        "list_transform([json_extract_string(b, ['$.type', '$.text'])], lambda v: v[1] = 'image' OR "
        f"(v[1] = 'text' AND {typed}))[1]"
    )
    kind = (
        f"CASE WHEN {h[3]} IS NOT NULL THEN 'ARRAY' WHEN c IS NULL THEN NULL "
        "WHEN starts_with(c, '\"') OR NOT json_valid(c) THEN 'VARCHAR' "
        f"ELSE json_type({text}, '$.message.content') END"
    )
    content = f"""list_transform([json_extract_string({text}, '$.message.content')], lambda c: CASE {kind}
                WHEN 'VARCHAR' THEN {_typed('c', CLAUDE_NOT_PROMPT)}
                WHEN 'ARRAY' THEN list_bool_or(list_transform(json_extract(c, '$[*]'), lambda b: {block}))
                ELSE false
            END)[1]"""
    # A CASE, not an AND: DuckDB evaluates a THEN only on the rows its WHEN selects, so a tool result
    # (most user lines of a real session) never has its content copied out.
    rule = f"""CASE
        WHEN {h[0]} = 'user' AND coalesce({h[1]}, 'false') <> 'true' AND coalesce({h[2]}, 'false') <> 'true'
            AND {h[3]} IS DISTINCT FROM 'tool_result'
            AND NOT regexp_matches(coalesce({h[4]}, ''), {_prefix_pattern(CLAUDE_HARNESS_AGENTS)})
        THEN {content} ELSE false END"""
    if header:
        # Given expressions are written in where they are read: binding them to a lambda's list, as
        # the default must to parse once, cost a fifth of an ingest's projection.
        return f"coalesce({rule}, false)"
    return f"""coalesce(list_transform([json_extract_string({text}, [{_quoted(CLAUDE_HEADER_PATHS)}])], lambda h: {rule})[1], false)"""


# The lines of Claude Code subagent files (`session_id`, `line_no`, `text`) that copy a user line of
# their parent session: same `uuid` as a user line stored for `sessions.parent_session_id`. Over the
# tables `lines` and `sessions`; callers filter it by session. See the module docstring for why.
CLAUDE_COPIED = """
    SELECT k.session_id, k.line_no, k.text
    FROM lines k JOIN sessions s ON s.session_id = k.session_id
    JOIN (
        SELECT p.session_id, json_extract_string(p.text, '$.uuid') AS uuid
        FROM lines p
        WHERE p.session_id IN (SELECT parent_session_id FROM sessions WHERE format = 'claude-code' AND parent_session_id IS NOT NULL)
          AND json_valid(p.text) AND json_extract_string(p.text, '$.type') = 'user'
    ) pu ON pu.session_id = s.parent_session_id AND pu.uuid = json_extract_string(k.text, '$.uuid')
    WHERE s.format = 'claude-code' AND s.parent_session_id IS NOT NULL
      AND json_valid(k.text) AND json_extract_string(k.text, '$.type') = 'user'
"""


def codex_item(text: str) -> str:
    """SQL JSON: the item a Codex line carries (`payload` of a `response_item`, or a bare 2025 item), else NULL."""
    return (
        f"CASE WHEN json_extract_string({text}, '$.type') = 'response_item' THEN json_extract({text}, '$.payload') "
        f"WHEN json_extract_string({text}, '$.type') IN ({_quoted(CODEX_BARE_ITEMS)}) "
        f"AND json_extract({text}, '$.payload') IS NULL THEN CAST({text} AS JSON) END"
    )


def codex_item_prompt(item: str) -> str:
    """SQL boolean: the Codex item `item` (see :func:`codex_item`) is a prompt."""
    typed = _typed("coalesce(v[2], '')", CODEX_INJECTED)
    block = (
        "list_transform([json_extract_string(b, ['$.type', '$.text'])], lambda v: v[1] = 'input_image' OR "
        f"(v[1] IN ('input_text', 'text') AND {typed}))[1]"
    )
    return f"""coalesce(list_transform([{item}], lambda it:
        json_extract_string(it, ['$.type', '$.role']) = ['message', 'user']
        AND list_bool_or(list_transform(json_extract(it, '$.content[*]'), lambda b: {block})))[1], false)"""


def codex_prompt(text: str) -> str:
    """SQL boolean: the Codex line whose raw JSON is `text` is a prompt (lines copied from a parent
    rollout are excluded by the caller, which knows where they end)."""
    return codex_item_prompt(codex_item(text))


def jsonl_prompt(text: str) -> str:
    """SQL boolean: the plain JSONL line whose raw JSON is `text` is a prompt."""
    return f"coalesce(json_extract_string({text}, '$.role') = 'user', false)"
