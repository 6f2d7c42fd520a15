"""Why each model call hit or missed the prompt cache, read from what its transcript records.

One SQL statement classifies every `llm_calls` row; the view `cache_calls` is that statement with
the default thresholds, and `pipeline cache-report`, the cache notebook and the night report run
the same statement with their own (bound) thresholds, so every reader sees one classification.

The previous call is the previous call of the same *conversation*: a Claude Code sidechain
(`isSidechain`, per `agentId`) interleaved in its parent's file, and a Codex `/review`
sub-session (between `entered_review_mode` and `exited_review_mode`), are conversations of their
own. Between a call and its previous one, the transcript's lines say what else happened:

- a compaction (Claude Code `compact_boundary` or a compact summary, Codex `compacted`);
- a date notice (Claude Code 2.1's `date_change` attachment, a new `<current_date>` in a Codex
  environment context);
- a new Codex user turn (a `user_message` event): Codex stops resending the earlier turn's
  reasoning then, so the part of the request that stayed the same ends at the previous turn's first
  request, and a read that stops there is the request changing, not the provider forgetting;
- the harness version (Claude Code's per-record `version`, Codex's `session_meta.cli_version`).

Causes, the first that applies (`CAUSES`): `cold_start`, `hit` (read at least `hit_share` of the
previous prompt, whatever the gap), `no_cache_reported` (the session's model never reports a cached
or written token: not a miss), `ttl_expiry` (a gap beyond the TTL in force: an hour after a call
that wrote with a 1-hour TTL, else the provider's default; a long gap outranks the rest),
`compaction` (a marker, or a prompt below half the previous one), `model_switch`,
`ttl_tier_switch` (the previous call wrote with one TTL, this one rewrote with the other),
`date_change` (a date notice, or a new local date for a harness that puts the date in its system
prompt: Claude Code before 2.1, and any log whose harness is unknown), `harness_update`,
then for a transcript `prefix_change` (a new user turn that read up to the previous turn's first
request, or a request that shrank mid-turn with no marker: its content changed) or `provider_miss`
(less was read than the part that stayed the same, with nothing in the records to explain it), and
for a log without a transcript `prefix_change`. One exception to "a long gap outranks the rest":
OpenAI evicts after 5 to 10 minutes idle, and inside that window a new turn that still read up to
the previous turn's first request shows the entry outlived the gap (`prefix_change`); past 10
minutes the gap decides.

Time zones, per session: a Codex `<timezone>`; else the offset a Claude Code date notice implies
(its new date's midnight is the last whole hour before it); else a Codex rollout's file name, which
is local time while its records are UTC; else a local time a program printed in the session
("17:32:24 GMT-0600 (Central Standard Time)", as JavaScript dates print); else the default (`--tz`). `seen_date` is the date the
model was last told, where the transcript records it.

Placeholders `{hit_share}`, `{ttl}`, `{tz}`, `{openai_ttl}` are filled either with bound
parameters (`classify_sql`) or with the package's default constants (the view).
"""

from __future__ import annotations

from pipeline.warehouse import prompt_rules

CAUSES: tuple[str, ...] = (
    "cold_start", "hit", "no_cache_reported", "ttl_expiry", "compaction", "model_switch", "ttl_tier_switch",
    "date_change", "harness_update", "provider_miss", "prefix_change",
)
MISS_CAUSES: tuple[str, ...] = tuple(c for c in CAUSES if c not in ("cold_start", "hit", "no_cache_reported"))

HIT_SHARE = 0.8
# Anthropic's default prompt-cache TTL, and the one-hour tier.
SHORT_TTL_SECONDS = 300
LONG_TTL_SECONDS = 3600
# OpenAI keeps a prefix for 5 to 10 minutes of inactivity (up to an hour off-peak): past its
# documented minimum, an eviction is within its rules, so a miss after more than 5 minutes idle is
# an expiry (a hit after an hour still counts as a hit: the read decides first).
OPENAI_TTL_SECONDS = 300
OPENAI_MAX_TTL_SECONDS = 600
DEFAULT_TZ = "UTC"
# The section name a simulated or instrumented call gives to the system prompt's date.
DATE_SECTION = "current-date"

# Claude Code wrote `Today's date` into its system prompt before 2.1.
_DATE_IN_SYSTEM = "[2, 1, 0]"

_TEMPLATE = """
WITH{scope_cte}
base AS (
    SELECT c.call_id, c.source, c.session_id, c."at", c.model, c.prompt_tokens, c.cached_tokens,
           c.cache_write_tokens, c.cache_write_1h_tokens, c.completion_tokens, c.line_no,
           c.changed_sections, c.true_cause, s.format, s.path, s.first_at AS session_first_at,
           c.source IN ('claude-code', 'codex') AND s.format IN ('claude-code', 'codex') AND c.line_no IS NOT NULL
               AS transcript
    FROM llm_calls c LEFT JOIN {scope} s ON s.session_id = c.session_id
    WHERE c."at" IS NOT NULL AND c.session_id IS NOT NULL{c_in_range}
),
-- Transcript lines that may be markers: plain substring tests first, JSON only on what passes.
cand AS MATERIALIZED (
    SELECT l.session_id, l.line_no, l.text, s.format
    FROM lines l JOIN {scope} s USING (session_id)
    WHERE s.format IN ('claude-code', 'codex'){l_in_range}
      AND (contains(l.text, 'compact_boundary') OR contains(l.text, 'isCompactSummary') OR contains(l.text, '"compacted"')
           OR contains(l.text, '"date_change"') OR contains(l.text, '<current_date>') OR contains(l.text, '<timezone>')
           OR contains(l.text, ' GMT-') OR contains(l.text, ' GMT+')
           OR contains(l.text, '"session_meta"') OR contains(l.text, '"user_message"') OR contains(l.text, '_review_mode"')
           OR (s.format = 'claude-code' AND contains(l.text, '"type":"user"') AND NOT contains(l.text, '"tool_result"'))
           OR (s.format = 'claude-code' AND contains(l.text, '"tool_reference"')))
      AND json_valid(l.text)
),
marks AS MATERIALIZED (
    SELECT session_id, line_no, side_line,
           TRY_CAST(json_extract_string(text, '$.timestamp') AS TIMESTAMPTZ) AS m_at,
           CASE
               WHEN format = 'claude-code' AND (json_extract_string(text, '$.subtype') = 'compact_boundary'
                                                OR json_extract_string(text, '$.isCompactSummary') = 'true') THEN 'compaction'
               WHEN format = 'codex' AND json_extract_string(text, '$.type') = 'compacted' THEN 'compaction'
               WHEN format = 'claude-code' AND json_extract_string(text, '$.attachment.type') = 'date_change' THEN 'date_notice'
               -- ToolSearch's result loads deferred tools: the next request's tool list is longer
               WHEN format = 'claude-code' AND json_extract_string(text, '$.type') = 'user' AND contains(text, '"tool_reference"')
                    AND list_contains(json_extract_string(text, '$.message.content[*].content[*].type'), 'tool_reference') THEN 'tool_load'
               WHEN format = 'claude-code' AND json_extract_string(text, '$.type') = 'user' AND {claude_prompt} THEN 'turn'
               WHEN format = 'codex' AND json_extract_string(text, '$.type') = 'session_meta' THEN 'version'
               WHEN format = 'codex' AND json_extract_string(text, '$.payload.type') = 'user_message' THEN 'turn'
               WHEN format = 'codex' AND json_extract_string(text, '$.payload.type') = 'entered_review_mode' THEN 'review_start'
               WHEN format = 'codex' AND json_extract_string(text, '$.payload.type') = 'exited_review_mode' THEN 'review_end'
               WHEN env_context AND contains(text, '<current_date>') THEN 'env_date'
           END AS kind,
           CASE
               WHEN format = 'claude-code' THEN TRY_CAST(json_extract_string(text, '$.attachment.newDate') AS DATE)
               ELSE TRY_CAST(NULLIF(regexp_extract(text, '<current_date>([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}})</current_date>', 1), '') AS DATE)
           END AS told_date,
           CASE WHEN env_context THEN NULLIF(regexp_extract(text, '<timezone>([A-Za-z0-9_+/-]+)</timezone>', 1), '') END AS tz_name,
           -- A local time a program printed on the user's machine ("17:32:24 GMT-0600 (Central …)").
           NULLIF(regexp_extract(text, '[0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}} GMT([+-][0-9]{{4}}) \\(', 1), '') AS printed_offset,
           json_extract_string(text, '$.payload.cli_version') AS cli_version,
           -- Claude Code 1.x switched extended thinking on for a request whose prompt says "think"
           -- (or a stronger form), and off again for the next one that does not.
           format = 'claude-code' AND regexp_matches(lower(coalesce(json_extract_string(text, '$.message.content'), '')),
                                                     '\\b(think|ultrathink|megathink)\\b') AS asks_thinking,
           TRY_CAST(json_extract_string(text, '$.payload.timestamp') AS TIMESTAMPTZ) AS created
    FROM (
        -- A Codex environment context is a user-role message item; the same tags quoted in a tool
        -- result or a reply are not the session's date or zone.
        SELECT *, format = 'codex' AND json_extract_string(text, '$.type') = 'response_item'
                  AND json_extract_string(text, '$.payload.type') = 'message'
                  AND json_extract_string(text, '$.payload.role') = 'user' AS env_context,
               format = 'claude-code' AND json_extract_string(text, '$.isSidechain') = 'true' AS side_line
        FROM cand
    )
),
markers AS (SELECT * FROM marks WHERE kind IS NOT NULL),
tz_printed AS (
    SELECT session_id, arg_min(printed_offset, line_no) AS off FROM marks WHERE printed_offset IS NOT NULL GROUP BY session_id
),
told AS (
    SELECT session_id, line_no, told_date FROM markers WHERE kind IN ('date_notice', 'env_date') AND told_date IS NOT NULL
),
versions AS (SELECT session_id, line_no, cli_version FROM markers WHERE kind = 'version' AND cli_version IS NOT NULL),
turns AS (
    -- Numbered per side of the file: an interleaved sidechain's prompts are turns of its own.
    SELECT m.session_id, m.line_no, m.side_line AND s.parent_session_id IS NULL AS side, m.asks_thinking,
           row_number() OVER (PARTITION BY m.session_id, m.side_line AND s.parent_session_id IS NULL ORDER BY m.line_no) AS turn_no
    FROM markers m JOIN {scope} s USING (session_id) WHERE m.kind = 'turn'
),
reviews AS (
    SELECT session_id, line_no, kind = 'review_start' AS in_review FROM markers WHERE kind IN ('review_start', 'review_end')
),
-- Time zone of a session, from the strongest evidence its transcript has.
tz_named AS (
    -- Only names the time-zone database knows: one odd environment must not break every session.
    SELECT session_id, arg_min(tz_name, line_no) AS tz FROM marks
    WHERE tz_name IN (SELECT name FROM pg_timezone_names()) GROUP BY session_id
),
tz_notice AS (
    SELECT session_id, arg_min(hours, line_no) AS hours FROM (
        SELECT session_id, line_no,
               ceil((epoch(told_date::TIMESTAMP) - epoch(m_at::TIMESTAMP)) / 3600.0)::INTEGER AS hours
        FROM markers WHERE kind = 'date_notice' AND told_date IS NOT NULL AND m_at IS NOT NULL
    ) WHERE hours BETWEEN -12 AND 14 GROUP BY session_id
),
tz_file AS (
    SELECT session_id, (round(secs / 900.0) * 15)::INTEGER AS minutes FROM (
        SELECT s.session_id,
               epoch(TRY_STRPTIME(regexp_extract(s.path, 'rollout-([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}T[0-9]{{2}}-[0-9]{{2}}-[0-9]{{2}})', 1),
                                  '%Y-%m-%dT%H-%M-%S'))
               - epoch(timezone('UTC', coalesce(m.created, s.first_at))) AS secs
        FROM {scope} s
        LEFT JOIN (SELECT session_id, arg_min(coalesce(created, m_at), line_no) AS created FROM markers WHERE kind = 'version' GROUP BY session_id) m
            USING (session_id)
        WHERE s.format = 'codex' AND s.first_at IS NOT NULL
    ) WHERE secs IS NOT NULL AND abs(secs) <= 14 * 3600 + 900
),
session_tz AS (
    SELECT s.session_id,
           CASE
               WHEN n.tz IS NOT NULL THEN n.tz
               WHEN d.hours IS NOT NULL THEN CASE WHEN d.hours = 0 THEN 'UTC'
                   ELSE printf('GMT%s%02d:00', CASE WHEN d.hours < 0 THEN '-' ELSE '+' END, abs(d.hours)) END
               WHEN f.minutes IS NOT NULL THEN CASE WHEN f.minutes = 0 THEN 'UTC'
                   ELSE printf('GMT%s%02d:%02d', CASE WHEN f.minutes < 0 THEN '-' ELSE '+' END, abs(f.minutes) // 60, abs(f.minutes) % 60) END
               WHEN o.off IS NOT NULL THEN CASE WHEN o.off IN ('+0000', '-0000') THEN 'UTC'
                   ELSE 'GMT' || substr(o.off, 1, 3) || ':' || substr(o.off, 4, 2) END
           END AS tz,
           CASE WHEN n.tz IS NOT NULL THEN 'environment' WHEN d.hours IS NOT NULL THEN 'date_notice'
                WHEN f.minutes IS NOT NULL THEN 'file_name' WHEN o.off IS NOT NULL THEN 'printed_time' END AS tz_source
    FROM {scope} s LEFT JOIN tz_named n USING (session_id) LEFT JOIN tz_notice d USING (session_id)
    LEFT JOIN tz_file f USING (session_id) LEFT JOIN tz_printed o USING (session_id)
),
cc_line AS (
    SELECT b.call_id, json_extract_string(l.text, '$.version') AS version,
           coalesce(json_extract_string(l.text, '$.isSidechain') = 'true', false) AS sidechain,
           json_extract_string(l.text, '$.agentId') AS agent_id
    FROM base b JOIN lines l ON l.session_id = b.session_id AND l.line_no = b.line_no
    WHERE b.format = 'claude-code' AND b.transcript{l_in_range}
),
-- What the transcript says at each call: the latest marker of each kind at or before its line
-- (ASOF joins on narrow keys of transcript calls only: a wide or foreign row would be sorted for each).
keys AS (
    SELECT b.call_id, b.session_id, b.line_no, coalesce(cc.sidechain, false) AND s.parent_session_id IS NULL AS side
    FROM base b LEFT JOIN cc_line cc USING (call_id) LEFT JOIN {scope} s ON s.session_id = b.session_id
    WHERE b.transcript
),
at_call AS (
    SELECT k.call_id, t.told_date AS seen_date, t.line_no AS seen_line, v.cli_version,
           u.turn_no, u.line_no AS turn_line, u.asks_thinking, r.in_review, r.line_no AS review_line
    FROM keys k
    ASOF LEFT JOIN told t ON t.session_id = k.session_id AND k.line_no >= t.line_no
    ASOF LEFT JOIN versions v ON v.session_id = k.session_id AND k.line_no >= v.line_no
    ASOF LEFT JOIN turns u ON u.session_id = k.session_id AND u.side = k.side AND k.line_no >= u.line_no
    ASOF LEFT JOIN reviews r ON r.session_id = k.session_id AND k.line_no >= r.line_no
),
placed AS (
    SELECT b.*, a.seen_date, a.seen_line,
           CASE WHEN b.source = 'claude-code' THEN cc.version WHEN b.source = 'codex' THEN a.cli_version END AS harness_version,
           coalesce(a.turn_no, 0) AS turn_no, a.turn_line, coalesce(a.asks_thinking, false) AS asks_thinking,
           coalesce(a.in_review, false) AS in_review, a.review_line,
           coalesce(cc.sidechain, false) AS sidechain, cc.agent_id
    FROM base b LEFT JOIN at_call a USING (call_id) LEFT JOIN cc_line cc USING (call_id)
),
conv0 AS (
    SELECT p.*,
           p.session_id
           || CASE WHEN p.source = 'claude-code' AND p.sidechain AND s.parent_session_id IS NULL
                   THEN ':sidechain:' || coalesce(p.agent_id, '') ELSE '' END
           || CASE WHEN p.in_review THEN ':review:' || p.review_line ELSE '' END AS conversation,
           CASE WHEN p.transcript THEN p.source END AS harness,
           coalesce(z.tz, {tz}) AS tz, coalesce(z.tz_source, 'default') AS tz_source,
           bool_or(coalesce(p.cached_tokens, 0) > 0 OR coalesce(p.cache_write_tokens, 0) > 0)
               OVER (PARTITION BY p.session_id, p.model) AS cache_reported
    FROM placed p LEFT JOIN {scope} s ON s.session_id = p.session_id LEFT JOIN session_tz z ON z.session_id = p.session_id
),
-- A Codex side request (a review, a check Codex asks of the model between two turns of the main
-- conversation): a much smaller prompt with no compaction before it, after which the main
-- conversation reads its whole earlier prompt from the cache again. It is a conversation of its own.
side_cand AS (
    SELECT call_id, session_id, line_no, prompt_tokens,
           lag(line_no) OVER w AS p_line, lag(prompt_tokens) OVER w AS p_prompt, lead(cached_tokens) OVER w AS n_read
    FROM conv0 WHERE transcript AND source = 'codex'
    WINDOW w AS (PARTITION BY conversation ORDER BY line_no NULLS LAST, "at", call_id)
),
side AS (
    SELECT c.call_id FROM side_cand c
    WHERE c.prompt_tokens < 0.5 * c.p_prompt AND coalesce(c.n_read, 0) >= {hit_share} * c.p_prompt
      AND NOT EXISTS (SELECT 1 FROM markers m WHERE m.session_id = c.session_id AND m.kind = 'compaction'
                      AND m.line_no > c.p_line AND m.line_no < c.line_no)
),
conv AS (
    SELECT c.* REPLACE (CASE WHEN d.call_id IS NULL THEN c.conversation
                             ELSE c.conversation || ':side:' || c.line_no END AS conversation),
           d.call_id IS NOT NULL AS side_request
    FROM conv0 c LEFT JOIN side d USING (call_id)
),
dated AS (
    SELECT *, timezone(tz, "at")::DATE AS local_date,
           first_value(prompt_tokens) OVER (PARTITION BY conversation, turn_no ORDER BY line_no, "at", call_id) AS turn_first_prompt
    FROM conv
),
paired AS (
    SELECT *,
           lag(call_id) OVER w AS prev_call_id, lag(line_no) OVER w AS prev_line, lag("at") OVER w AS prev_at,
           lag(prompt_tokens) OVER w AS prev_prompt, lag(model) OVER w AS prev_model,
           lag(harness_version) OVER w AS prev_version, lag(local_date) OVER w AS prev_local_date,
           lag(seen_date) OVER w AS prev_seen_date, lag(turn_no) OVER w AS prev_turn_no,
           lag(turn_first_prompt) OVER w AS prev_turn_first_prompt,
           lag(cache_write_tokens) OVER w AS prev_write, lag(cache_write_1h_tokens) OVER w AS prev_write_1h,
           lag(asks_thinking) OVER w AS prev_asks_thinking
    FROM dated
    WINDOW w AS (PARTITION BY conversation ORDER BY line_no NULLS LAST, "at", call_id)
),
between_marks AS (
    SELECT p.call_id,
           min(m.line_no) FILTER (WHERE m.kind = 'compaction') AS compaction_line,
           min(m.line_no) FILTER (WHERE m.kind = 'date_notice') AS notice_line,
           max(m.line_no) FILTER (WHERE m.kind = 'version') AS version_line,
           min(m.line_no) FILTER (WHERE m.kind = 'tool_load') AS tool_load_line
    FROM paired p JOIN markers m
      ON m.session_id = p.session_id AND p.transcript AND m.line_no > p.prev_line AND m.line_no < p.line_no
    GROUP BY p.call_id
),
facts AS (
    SELECT p.*, bm.compaction_line, bm.notice_line, bm.version_line, bm.tool_load_line,
           (epoch(p."at") - epoch(p.prev_at)) AS gap_s,
           coalesce(p.cached_tokens, 0) AS read,
           CASE
               WHEN {ttl} IS NOT NULL THEN {ttl}
               WHEN coalesce(p.prev_write_1h, 0) > 0 THEN {long_ttl}
               WHEN p.source = 'codex' THEN {openai_ttl}
               ELSE {short_ttl}
           END AS ttl_s,
           -- The end of the provider's uncertain window: OpenAI's default alone has one.
           CASE WHEN {ttl} IS NULL AND coalesce(p.prev_write_1h, 0) = 0 AND p.source = 'codex'
                THEN {openai_max_ttl} ELSE ttl_s END AS ttl_max_s,
           p.seen_date IS NOT NULL AND p.prev_seen_date IS NOT NULL AND p.seen_date <> p.prev_seen_date AS told_new_date,
           p.local_date <> p.prev_local_date AS local_date_moved,
           (p.harness IS NULL OR (p.harness = 'claude-code' AND p.harness_version IS NOT NULL
               AND list_transform(string_split(regexp_extract(p.harness_version, '^[0-9.]+'), '.'), lambda x: TRY_CAST(x AS INTEGER))
                   < {date_in_system})) AS date_in_system,
           list_contains(coalesce(p.changed_sections, []::VARCHAR[]), '{date_section}') AS date_named,
           p.turn_no <> p.prev_turn_no AS new_turn,
           p.harness = 'claude-code' AND p.turn_no <> p.prev_turn_no AND p.asks_thinking <> coalesce(p.prev_asks_thinking, false)
               AND TRY_CAST(regexp_extract(p.harness_version, '^([0-9]+)\\.', 1) AS INTEGER) < 2 AS thinking_toggled
    FROM paired p LEFT JOIN between_marks bm USING (call_id)
),
classified AS (
    SELECT *,
           CASE
               WHEN prev_call_id IS NULL THEN 'cold_start'
               WHEN read >= {hit_share} * coalesce(prev_prompt, 0) THEN 'hit'
               WHEN NOT cache_reported THEN 'no_cache_reported'
               -- Inside a provider's uncertain window, a read up to the previous turn's first
               -- request shows the entry outlived the gap; past the window the gap decides.
               WHEN gap_s > ttl_s AND (gap_s > ttl_max_s
                    OR NOT (transcript AND new_turn AND read >= {hit_share} * prev_turn_first_prompt)) THEN 'ttl_expiry'
               WHEN compaction_line IS NOT NULL OR prompt_tokens < 0.5 * prev_prompt THEN 'compaction'
               -- A model reads only its own cache entries: a switch that still read most of the prompt
               -- found an entry of the new model, and the switch explains nothing.
               WHEN model IS NOT NULL AND prev_model IS NOT NULL AND model <> prev_model
                    AND read < 0.5 * coalesce(prev_prompt, 0) THEN 'model_switch'
               WHEN coalesce(cache_write_tokens, 0) > 0 AND coalesce(prev_write, 0) > 0
                    AND cache_write_1h_tokens IS NOT NULL AND prev_write_1h IS NOT NULL
                    AND (cache_write_1h_tokens > 0) <> (prev_write_1h > 0) THEN 'ttl_tier_switch'
               WHEN notice_line IS NOT NULL OR told_new_date OR date_named OR (date_in_system AND local_date_moved) THEN 'date_change'
               WHEN harness_version IS NOT NULL AND prev_version IS NOT NULL AND harness_version <> prev_version THEN 'harness_update'
               -- The request itself changed, and the transcript says how: tools loaded, thinking toggled.
               WHEN tool_load_line IS NOT NULL OR thinking_toggled THEN 'prefix_change'
               WHEN transcript AND new_turn AND read >= {hit_share} * prev_turn_first_prompt THEN 'prefix_change'
               -- The request shrank without a marker: its content changed, the provider did not forget.
               WHEN transcript AND NOT new_turn AND prompt_tokens < prev_prompt THEN 'prefix_change'
               WHEN transcript THEN 'provider_miss'
               ELSE 'prefix_change'
           END AS cause
    FROM facts
)
SELECT call_id, source, session_id, conversation, line_no, "at", model, harness, harness_version,
       prompt_tokens, cached_tokens, cache_write_tokens, cache_write_1h_tokens, completion_tokens,
       prev_call_id, prev_line, prev_prompt, gap_s, ttl_s,
       cached_tokens::DOUBLE / NULLIF(prompt_tokens, 0) AS share,
       cache_reported, cause,
       CASE cause
           WHEN 'ttl_expiry' THEN prev_line
           WHEN 'compaction' THEN coalesce(compaction_line, line_no)
           WHEN 'date_change' THEN coalesce(notice_line, CASE WHEN told_new_date THEN seen_line END, line_no)
           WHEN 'harness_update' THEN coalesce(version_line, line_no)
           WHEN 'prefix_change' THEN coalesce(tool_load_line, CASE WHEN new_turn THEN turn_line ELSE line_no END)
           ELSE line_no
       END AS evidence_line_no,
       tz, tz_source, local_date, seen_date,
       prev_call_id IS NOT NULL AND (local_date_moved OR notice_line IS NOT NULL OR told_new_date) AS crossing,
       prev_call_id IS NOT NULL AND gap_s <= ttl_s AS continuation,
       date_in_system, changed_sections, true_cause, side_request,
       CASE WHEN cause = 'prefix_change' AND tool_load_line IS NOT NULL THEN 'tools_loaded'
            WHEN cause = 'prefix_change' AND thinking_toggled THEN 'thinking_toggled' END AS change_kind
FROM classified
"""

_DEFAULTS = {
    "short_ttl": str(SHORT_TTL_SECONDS),
    "openai_max_ttl": str(OPENAI_MAX_TTL_SECONDS),
    "long_ttl": str(LONG_TTL_SECONDS),
    "date_in_system": _DATE_IN_SYSTEM,
    "date_section": DATE_SECTION,
    "claude_prompt": prompt_rules.claude_prompt("text"),
}


def _ranges(*, lower: bool, upper: bool) -> dict[str, str]:
    """The placeholders that restrict the statement to the sessions whose id is in [$lo, $hi), with
    only the bounds a range has so that each reaches the table scans as a plain comparison; without
    bounds they vanish, and the statement is the view's text exactly."""
    if not (lower or upper):
        return {"scope_cte": "", "scope": "sessions", "c_in_range": "", "l_in_range": ""}

    def test(column: str) -> str:
        return "".join(([f" AND {column} >= $lo"] if lower else []) + ([f" AND {column} < $hi"] if upper else []))

    # Every window below is per session, so the ranges' results together are the whole's.
    return {
        "scope_cte": f"\nscope AS (SELECT * FROM sessions WHERE TRUE{test('session_id')}),",
        "scope": "scope",
        "c_in_range": test("c.session_id"),
        "l_in_range": test("l.session_id"),
    }


def classify_sql(*, lower: bool = False, upper: bool = False) -> str:
    """The classification with bound parameters `$hit_share`, `$ttl` (NULL: the TTL in force),
    `$tz` (the default time zone) and `$openai_ttl`; with `lower`/`upper`, of the sessions whose id
    is at least `$lo` / below `$hi` only."""
    return _TEMPLATE.format(hit_share="$hit_share", ttl="$ttl::INTEGER", tz="$tz::VARCHAR", openai_ttl="$openai_ttl",
                            **_ranges(lower=lower, upper=upper), **_DEFAULTS)


def view_sql() -> str:
    """`CREATE VIEW cache_calls`: the classification with the default thresholds (constants of this
    module, not user input)."""
    body = _TEMPLATE.format(
        hit_share=repr(HIT_SHARE), ttl="NULL::INTEGER", tz=f"'{DEFAULT_TZ}'", openai_ttl=str(OPENAI_TTL_SECONDS),
        **_ranges(lower=False, upper=False), **_DEFAULTS,
    )
    return f"CREATE OR REPLACE VIEW cache_calls AS\n{body}"


def parameters(*, hit_share: float = HIT_SHARE, ttl: int | None = None, tz: str = DEFAULT_TZ,
               openai_ttl: int = OPENAI_TTL_SECONDS) -> dict[str, object]:
    return {"hit_share": hit_share, "ttl": ttl, "tz": tz, "openai_ttl": openai_ttl}
