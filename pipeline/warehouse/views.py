"""Analyst views over `lines`: messages, tool calls, tool results, and usage.

They parse the stored JSON on the fly, so they always agree with the verbatim lines. Each view is
the union of a Claude Code branch and a Codex branch, keyed by the session's detected format.
"""

from __future__ import annotations

import duckdb

from pipeline.warehouse.prompt_rules import CLAUDE_NOT_PROMPT, CODEX_INJECTED


def _starts_with_any(expr: str, prefixes: tuple[str, ...]) -> str:
    # The prefixes are the package's own constants, written in as SQL string literals.
    literals = ", ".join("'" + p.replace("'", "''") + "'" for p in prefixes)
    return f"list_bool_or([starts_with({expr}, p) FOR p IN [{literals}]])"


# `is_prompt` marks exactly the lines that `sessions.prompts` counts (pipeline/warehouse/derive.py): what the
# user typed, not command output, interruptions, meta lines or context the harness injects.
_CLAUDE_IS_PROMPT = f"""
    json_extract_string(l.text, '$.type') = 'user'
    AND coalesce(json_extract_string(l.text, '$.isMeta'), 'false') <> 'true'
    AND CASE WHEN json_extract_string(l.text, '$.message.content[0].type') IS NULL
             THEN coalesce(json_extract_string(l.text, '$.message.content'), '') <> ''
                  AND NOT {_starts_with_any("json_extract_string(l.text, '$.message.content')", CLAUDE_NOT_PROMPT)}
             ELSE json_extract_string(l.text, '$.message.content[0].type') IN ('text', 'image')
                  AND NOT {_starts_with_any("coalesce(json_extract_string(l.text, '$.message.content[0].text'), '')", CLAUDE_NOT_PROMPT)}
        END
"""
_CODEX_IS_PROMPT = f"""
    json_extract_string(l.text, '$.payload.role') = 'user'
    AND json_extract_string(l.text, '$.payload.content[0].text') IS NOT NULL
    AND NOT {_starts_with_any("ltrim(json_extract_string(l.text, '$.payload.content[0].text'), chr(32) || chr(9) || chr(10) || chr(13))", CODEX_INJECTED)}
"""

# Text of a Claude Code message: the string content, or its text blocks joined by newlines.
_CLAUDE_TEXT = """
    CASE json_type(l.text, '$.message.content')
        WHEN 'VARCHAR' THEN json_extract_string(l.text, '$.message.content')
        WHEN 'ARRAY' THEN array_to_string(
            list_filter(json_extract_string(l.text, '$.message.content[*].text'), lambda x: x IS NOT NULL), chr(10))
    END
"""

MESSAGES = f"""
CREATE OR REPLACE VIEW messages AS
SELECT l.session_id, l.line_no,
       json_extract_string(l.text, '$.message.role') AS role,
       TRY_CAST(json_extract_string(l.text, '$.timestamp') AS TIMESTAMPTZ) AS "at",
       NULLIF({_CLAUDE_TEXT}, '') AS text,
       coalesce({_CLAUDE_IS_PROMPT}, false) AS is_prompt
FROM lines l JOIN sessions s USING (session_id)
WHERE s.format = 'claude-code' AND json_valid(l.text)
  AND json_extract_string(l.text, '$.type') IN ('user', 'assistant')
  AND json_extract_string(l.text, '$.message.content[0].type') IS DISTINCT FROM 'tool_result'
UNION ALL
SELECT l.session_id, l.line_no,
       json_extract_string(l.text, '$.payload.role') AS role,
       TRY_CAST(json_extract_string(l.text, '$.timestamp') AS TIMESTAMPTZ) AS "at",
       array_to_string(list_filter(json_extract_string(l.text, '$.payload.content[*].text'), lambda x: x IS NOT NULL), chr(10)),
       coalesce({_CODEX_IS_PROMPT}, false)
FROM lines l JOIN sessions s USING (session_id)
WHERE s.format = 'codex' AND json_valid(l.text)
  AND json_extract_string(l.text, '$.type') = 'response_item'
  AND json_extract_string(l.text, '$.payload.type') = 'message'
UNION ALL
SELECT l.session_id, l.line_no,
       json_extract_string(l.text, '$.role'),
       TRY_CAST(coalesce(json_extract_string(l.text, '$.timestamp'), json_extract_string(l.text, '$.created_at')) AS TIMESTAMPTZ),
       coalesce(json_extract_string(l.text, '$.content'), json_extract_string(l.text, '$.text')),
       json_extract_string(l.text, '$.role') = 'user'
FROM lines l JOIN sessions s USING (session_id)
WHERE s.format = 'jsonl' AND json_valid(l.text) AND json_extract_string(l.text, '$.role') IS NOT NULL
"""

TOOL_CALLS = """
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
SELECT l.session_id, l.line_no, json_extract_string(l.text, '$.payload.name'),
       json_extract_string(l.text, '$.payload.call_id'),
       coalesce(TRY_CAST(json_extract_string(l.text, '$.payload.arguments') AS JSON),
                json_extract(l.text, '$.payload.input'), json_extract(l.text, '$.payload.action'))
FROM lines l JOIN sessions s USING (session_id)
WHERE s.format = 'codex' AND json_valid(l.text) AND json_extract_string(l.text, '$.type') = 'response_item'
  AND json_extract_string(l.text, '$.payload.type') IN ('function_call', 'custom_tool_call', 'local_shell_call')
"""

TOOL_RESULTS = """
CREATE OR REPLACE VIEW tool_results AS
WITH cc AS (
    SELECT l.session_id, l.line_no, unnest(json_extract(l.text, '$.message.content[*]')) AS block
    FROM lines l JOIN sessions s USING (session_id)
    WHERE s.format = 'claude-code' AND contains(l.text, '"tool_result"') AND json_valid(l.text)
      AND json_extract_string(l.text, '$.type') = 'user'
)
SELECT session_id, line_no, json_extract_string(block, '$.tool_use_id') AS call_id,
       coalesce(TRY_CAST(json_extract_string(block, '$.is_error') AS BOOLEAN), false) AS is_error,
       CASE json_type(block, '$.content')
           WHEN 'VARCHAR' THEN json_extract_string(block, '$.content')
           ELSE array_to_string(list_filter(json_extract_string(block, '$.content[*].text'), lambda x: x IS NOT NULL), chr(10))
       END AS text
FROM cc WHERE json_extract_string(block, '$.type') = 'tool_result'
UNION ALL
SELECT session_id, line_no, call_id,
       CASE WHEN exit_code IS NULL THEN NULL ELSE exit_code <> 0 END AS is_error,
       coalesce(inner_output, output) AS text
FROM (
    SELECT l.session_id, l.line_no, json_extract_string(l.text, '$.payload.call_id') AS call_id,
           json_extract_string(l.text, '$.payload.output') AS output,
           CASE WHEN json_valid(json_extract_string(l.text, '$.payload.output'))
                THEN json_extract_string(json_extract_string(l.text, '$.payload.output'), '$.output') END AS inner_output,
           CASE WHEN json_valid(json_extract_string(l.text, '$.payload.output'))
                THEN TRY_CAST(json_extract_string(json_extract_string(l.text, '$.payload.output'), '$.metadata.exit_code') AS INTEGER)
           END AS exit_code
    FROM lines l JOIN sessions s USING (session_id)
    WHERE s.format = 'codex' AND json_valid(l.text) AND json_extract_string(l.text, '$.type') = 'response_item'
      AND json_extract_string(l.text, '$.payload.type') IN ('function_call_output', 'custom_tool_call_output')
)
"""

USAGE = """
CREATE OR REPLACE VIEW usage AS
SELECT * FROM llm_calls WHERE source IN ('claude-code', 'codex')
"""


# The views over `lines` and `sessions` alone (a batch's input has those tables and no llm_calls).
TRANSCRIPT_VIEWS = (MESSAGES, TOOL_CALLS, TOOL_RESULTS)


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    for ddl in (*TRANSCRIPT_VIEWS, USAGE):
        con.execute(ddl)
