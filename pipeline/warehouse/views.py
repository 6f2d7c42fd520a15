"""Analyst views over `lines`: messages, tool calls, tool results, and usage.

They parse the stored JSON on the fly, so they always agree with the verbatim lines. Each view is
the union of a Claude Code branch and a Codex branch, keyed by the session's detected format.
"""

from __future__ import annotations

import duckdb

from pipeline.warehouse import cache_calls, prompt_rules

# Codex results that record no exit status but are failures: a patch that did not apply, a command
# the sandbox refused (the status, when the message gives one, is still read into exit_code).
CODEX_FAILURES = (
    "apply_patch verification failed",
    "failed in sandbox",
    "exec_command failed",
    "error: Failed to find expected lines",
    "error: invalid hunk",
    "error: invalid patch",
    "Script failed",  # code mode: the `exec` script stopped (a command's status, when it had one, is read too)
)


# A tool result that is a user's refusal or an abort, not the tool's failure (`tool_results.rejected`).
# Claude Code writes these texts in place of the output (and marks them is_error); Codex writes a
# refusal or a Ctrl-C as the call's output, after a `Wall time:` header when the command had started.
CLAUDE_REJECTIONS = (
    "The user doesn't want to proceed with this tool use",
    "The user doesn't want to take this action right now",
    "[Request interrupted by user",
)
CODEX_REJECTION_RE = r"^(Wall time: [^\n]*\n)?(aborted|aborted by user|(exec command|patch) (rejected|aborted) by user)(\n|$)"


def _literals(values: tuple[str, ...]) -> str:
    # The package's own constants, written in as SQL string literals.
    return "[" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + "]"


# Text of a Claude Code message: the string content, or its text blocks joined by newlines.
_CLAUDE_TEXT = """
    CASE json_type(l.text, '$.message.content')
        WHEN 'VARCHAR' THEN json_extract_string(l.text, '$.message.content')
        WHEN 'ARRAY' THEN array_to_string(
            list_filter(json_extract_string(l.text, '$.message.content[*].text'), lambda x: x IS NOT NULL), chr(10))
    END
"""

# Codex lines as items: the `payload` of a `response_item`, or a bare item of the 2025 format.
# `inherited_lines` (kept in `sessions.state` by derive) is how many leading lines a forked rollout
# copied from its parent: they are the parent's prompts, not this session's.
_CODEX_ITEMS = f"""
    SELECT l.session_id, l.line_no, l.text, s.inherited_lines, {prompt_rules.codex_item("l.text")} AS item
    FROM lines l JOIN (
        SELECT session_id, coalesce(TRY_CAST(json_extract_string(state, '$.inherited_lines') AS BIGINT), 0) AS inherited_lines
        FROM sessions WHERE format = 'codex'
    ) s USING (session_id)
    WHERE json_valid(l.text)
"""

# Codex writes an assistant reply twice (a `message` item and an `agent_message` event) and a
# prompt twice (a `message` item and a `user_message` event): messages holds the item only. A
# Claude Code subagent's copies of its parent's lines (`prompt_rules.CLAUDE_COPIED`) stay in
# messages but are not its prompts.
MESSAGES = f"""
CREATE OR REPLACE VIEW messages AS
SELECT l.session_id, l.line_no,
       json_extract_string(l.text, '$.message.role') AS role,
       TRY_CAST(json_extract_string(l.text, '$.timestamp') AS TIMESTAMPTZ) AS "at",
       NULLIF({_CLAUDE_TEXT}, '') AS text,
       {prompt_rules.claude_prompt("l.text")} AND cp.line_no IS NULL AS is_prompt
FROM lines l JOIN sessions s USING (session_id)
LEFT JOIN ({prompt_rules.CLAUDE_COPIED}) cp ON cp.session_id = l.session_id AND cp.line_no = l.line_no
WHERE s.format = 'claude-code' AND json_valid(l.text)
  AND json_extract_string(l.text, '$.type') IN ('user', 'assistant')
  AND json_extract_string(l.text, '$.message.content[0].type') IS DISTINCT FROM 'tool_result'
UNION ALL
SELECT session_id, line_no,
       json_extract_string(item, '$.role') AS role,
       TRY_CAST(json_extract_string(text, '$.timestamp') AS TIMESTAMPTZ) AS "at",
       NULLIF(array_to_string(list_filter(json_extract_string(item, '$.content[*].text'), lambda x: x IS NOT NULL), chr(10)), ''),
       line_no > inherited_lines AND {prompt_rules.codex_item_prompt("item")}
FROM ({_CODEX_ITEMS}) c
WHERE json_extract_string(item, '$.type') = 'message'
UNION ALL
SELECT l.session_id, l.line_no,
       json_extract_string(l.text, '$.role'),
       TRY_CAST(coalesce(json_extract_string(l.text, '$.timestamp'), json_extract_string(l.text, '$.created_at')) AS TIMESTAMPTZ),
       coalesce(json_extract_string(l.text, '$.content'), json_extract_string(l.text, '$.text')),
       {prompt_rules.jsonl_prompt("l.text")}
FROM lines l JOIN sessions s USING (session_id)
WHERE s.format = 'jsonl' AND json_valid(l.text) AND json_extract_string(l.text, '$.role') IS NOT NULL
"""

TOOL_CALLS = f"""
CREATE OR REPLACE VIEW tool_calls AS
WITH cc AS (
    SELECT l.session_id, l.line_no, unnest(json_extract(l.text, '$.message.content[*]')) AS block
    FROM lines l JOIN sessions s USING (session_id)
    WHERE s.format = 'claude-code' AND contains(l.text, '"tool_use"') AND json_valid(l.text)
      AND json_extract_string(l.text, '$.type') = 'assistant'
)
SELECT session_id, line_no, json_extract_string(block, '$.name') AS name,
       json_extract_string(block, '$.id') AS call_id, json_extract(block, '$.input') AS input
FROM cc WHERE json_extract_string(block, '$.type') = 'tool_use'
UNION ALL
SELECT session_id, line_no, json_extract_string(item, '$.name'),
       json_extract_string(item, '$.call_id'),
       coalesce(TRY_CAST(json_extract_string(item, '$.arguments') AS JSON),
                json_extract(item, '$.input'), json_extract(item, '$.action'))
FROM ({_CODEX_ITEMS}) c
WHERE json_extract_string(item, '$.type') IN ('function_call', 'custom_tool_call', 'local_shell_call')
"""

# Where each Codex format records a command's exit status: `metadata.exit_code` of a JSON output
# (older CLIs, apply_patch), an `Exit code: N` or `Process exited with code N` line in the header of
# a text output (newer CLIs; the header is what precedes the `Output:` line), the status a
# sandbox refusal quotes, and in code mode (an `exec` script whose output is a list of text items,
# one per command it ran) the first non-zero status of its commands. Claude Code records a Bash failure's status as the `Exit code N` that
# opens its error text.
_CODEX_HEADER = "split_part(output, chr(10) || 'Output:' || chr(10), 1)"
# A command's status line in a Codex output's header (also each command's, in a code-mode script).
_STATUS_LINE = "'(?m)^(?:Exit code:|Process exited with code) (-?[0-9]+)$'"
_CODEX_EXIT = f"""coalesce(
    meta_exit,
    TRY_CAST(NULLIF(regexp_extract({_CODEX_HEADER}, {_STATUS_LINE}, 1), '') AS INTEGER),
    CASE WHEN starts_with(output, 'failed in sandbox') OR starts_with(output, 'exec_command failed')
         THEN TRY_CAST(NULLIF(regexp_extract(output, 'exit[ _]code:? (-?[0-9]+)', 1), '') AS INTEGER) END
)"""

TOOL_RESULTS = f"""
CREATE OR REPLACE VIEW tool_results AS
WITH cc AS (
    SELECT l.session_id, l.line_no, unnest(json_extract(l.text, '$.message.content[*]')) AS block
    FROM lines l JOIN sessions s USING (session_id)
    WHERE s.format = 'claude-code' AND contains(l.text, '"tool_result"') AND json_valid(l.text)
      AND json_extract_string(l.text, '$.type') = 'user'
), cc_text AS (
    SELECT session_id, line_no, json_extract_string(block, '$.tool_use_id') AS call_id,
           coalesce(TRY_CAST(json_extract_string(block, '$.is_error') AS BOOLEAN), false) AS is_error,
           CASE json_type(block, '$.content')
               WHEN 'VARCHAR' THEN json_extract_string(block, '$.content')
               ELSE array_to_string(list_filter(json_extract_string(block, '$.content[*].text'), lambda x: x IS NOT NULL), chr(10))
           END AS text
    FROM cc WHERE json_extract_string(block, '$.type') = 'tool_result'
), cx AS (
    SELECT session_id, line_no, json_extract_string(item, '$.call_id') AS call_id,
           json_extract_string(item, '$.output') AS output
    FROM ({_CODEX_ITEMS}) c
    WHERE json_extract_string(item, '$.type') IN ('function_call_output', 'custom_tool_call_output')
), cx_typed AS (
    -- one parse to know the output's shape: plain text, an object (older CLIs) or a list (code mode)
    SELECT *, CASE WHEN json_valid(output) THEN json_type(output) END AS out_type FROM cx
), cx_items AS (
    -- code mode (`exec`): the script's text items, the script's own header and each command's, as one text
    SELECT *, CASE WHEN out_type = 'ARRAY'
                   THEN array_to_string(list_filter(json_extract_string(output, '$[*].text'), lambda x: x IS NOT NULL), chr(10))
              END AS items_text
    FROM cx_typed
), cx_parsed AS (
    SELECT *,
           CASE WHEN out_type = 'ARRAY' THEN items_text
                WHEN out_type IS NOT NULL THEN json_extract_string(output, '$.output') END AS inner_output,
           CASE WHEN out_type = 'ARRAY'
                -- the first command of the script that failed, else the first that ran
                THEN TRY_CAST(coalesce(
                    list_filter(regexp_extract_all(items_text, {_STATUS_LINE}, 1),
                                lambda x: x <> '0')[1],
                    regexp_extract(items_text, {_STATUS_LINE}, 1)) AS INTEGER)
                WHEN out_type IS NOT NULL
                THEN TRY_CAST(json_extract_string(output, '$.metadata.exit_code') AS INTEGER) END AS meta_exit
    FROM cx_items
), cx_status AS (
    SELECT *, {_CODEX_EXIT} AS exit_code FROM cx_parsed
)
SELECT session_id, line_no, call_id,
       is_error,
       CASE WHEN is_error THEN TRY_CAST(NULLIF(regexp_extract(text, '^Exit code (-?[0-9]+)', 1), '') AS INTEGER) END AS exit_code,
       text,
       list_bool_or([starts_with(coalesce(text, ''), p) FOR p IN {_literals(CLAUDE_REJECTIONS)}]) AS rejected
FROM cc_text
UNION ALL
SELECT session_id, line_no, call_id,
       coalesce(exit_code <> 0, false)
           OR list_bool_or([starts_with(coalesce(inner_output, output, ''), p) FOR p IN {_literals(CODEX_FAILURES)}]) AS is_error,
       exit_code,
       coalesce(inner_output, output) AS text,
       regexp_matches(coalesce(inner_output, output, ''), '{CODEX_REJECTION_RE}') AS rejected
FROM cx_status
"""

USAGE = """
CREATE OR REPLACE VIEW usage AS
SELECT * FROM llm_calls WHERE source IN ('claude-code', 'codex')
"""


# The views over `lines` and `sessions` alone (a batch's input has those tables and no llm_calls).
TRANSCRIPT_VIEWS = (MESSAGES, TOOL_CALLS, TOOL_RESULTS)


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    for ddl in (*TRANSCRIPT_VIEWS, USAGE, cache_calls.view_sql()):
        con.execute(ddl)
