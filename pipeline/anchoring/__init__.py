"""The date-anchoring reference: what a harness would import to keep its prompt cache across midnight.

Owns: `rules` (the session's base date, `<date-change>` notices, the current-date section),
`request_builder` (whole requests and the invariants between consecutive ones), `fingerprint`
(stable hashes of prompt sections), `tokens` (token estimates).

The public names of those modules are re-exported here, so a harness writes
`from pipeline.anchoring import apply_date_change_notices`. The one exception is the function
`fingerprint.fingerprint`: re-exporting it would shadow its own module on this package.

May import: the standard library and third-party packages only, so a harness can vendor it alone.
"""

from pipeline.anchoring.fingerprint import canonical_json, request_fingerprints
from pipeline.anchoring.request_builder import (
    COMPACTION_INSTRUCTION,
    MESSAGE_KEYS,
    SECTION_NAMES,
    TOOL_CALL_KEYS,
    ChatRequest,
    PromptSections,
    RequestBuilder,
    build_compaction_request,
    build_request,
    changed_sections,
    derive_compaction_request,
    expand_quick_commands,
    section_texts,
    serialize,
    to_wire_message,
)
from pipeline.anchoring.rules import (
    DATE_CHANGE_CLOSE,
    DATE_CHANGE_OPEN,
    DATE_MODES,
    HANDOFF_HEADING,
    HANDOFF_HEADING_ORIGINAL,
    HANDOFF_HEADINGS,
    SYSTEM_NOTICE_OPEN,
    ChatMessage,
    DateMode,
    MessageStamp,
    apply_date_change_notices,
    current_date_section,
    date_change_notice,
    first_user_id_in_window,
    is_real_user_message,
    message_text,
    previous_user_ymd_before,
    previous_user_ymd_before_id,
    sender_ymd,
    session_base_ymd,
    strip_date_change_notice,
    to_chat_message,
    weekday_name,
)
from pipeline.anchoring.tokens import (
    BLOCK_OVERHEAD_TOKENS,
    CHARS_PER_TOKEN,
    NON_ASCII_TOKENS,
    block_tokens,
    estimate_tokens,
)

__all__ = [
    "BLOCK_OVERHEAD_TOKENS",
    "CHARS_PER_TOKEN",
    "COMPACTION_INSTRUCTION",
    "DATE_CHANGE_CLOSE",
    "DATE_CHANGE_OPEN",
    "DATE_MODES",
    "HANDOFF_HEADING",
    "HANDOFF_HEADINGS",
    "HANDOFF_HEADING_ORIGINAL",
    "MESSAGE_KEYS",
    "NON_ASCII_TOKENS",
    "SECTION_NAMES",
    "SYSTEM_NOTICE_OPEN",
    "TOOL_CALL_KEYS",
    "ChatMessage",
    "ChatRequest",
    "DateMode",
    "MessageStamp",
    "PromptSections",
    "RequestBuilder",
    "apply_date_change_notices",
    "block_tokens",
    "build_compaction_request",
    "build_request",
    "canonical_json",
    "changed_sections",
    "current_date_section",
    "date_change_notice",
    "derive_compaction_request",
    "estimate_tokens",
    "expand_quick_commands",
    "first_user_id_in_window",
    "is_real_user_message",
    "message_text",
    "previous_user_ymd_before",
    "previous_user_ymd_before_id",
    "request_fingerprints",
    "section_texts",
    "sender_ymd",
    "serialize",
    "session_base_ymd",
    "strip_date_change_notice",
    "to_chat_message",
    "to_wire_message",
    "weekday_name",
]
