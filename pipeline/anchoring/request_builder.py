"""A small request builder that plays the harness, for replaying sessions through a prompt cache model.

One build turns the session history into a chat-completions style body::

    {"messages": [system, *history], "tools": [...]}

Steps, in the harness's order:

1. the system prompt, made of named sections in a fixed order (persona, experience, memory,
   environment, current-date, tool-guidance) and sent as ``messages[0]``;
2. a copy of the history (the caller's list and dicts are never modified);
3. quick-command marker expansion (``$name$`` / ``#{name}#``) on user messages, keeping every other
   field of an expanded message;
4. in anchored mode only, the ``<date-change>`` notices of :mod:`pipeline.anchoring.rules`;
5. projection of each message onto the protocol keys, which drops ``sender_ymd`` and every other
   internal field.

Each step is copy-on-write: a message that a step leaves alone is passed along as the same object,
so a build costs one list copy plus one small dict per message. The body shares nested values
(content part lists, tool schemas) with the inputs; treat both as read-only.

The returned body is a :class:`ChatRequest`, a plain ``dict`` that also remembers its system
sections, so :func:`changed_sections` can say which sections differ between two builds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.anchoring.rules import DATE_MODES, DateMode, apply_date_change_notices, current_date_section

__all__ = [
    "COMPACTION_INSTRUCTION",
    "MESSAGE_KEYS",
    "SECTION_NAMES",
    "TOOL_CALL_KEYS",
    "ChatRequest",
    "PromptSections",
    "RequestBuilder",
    "build_compaction_request",
    "build_request",
    "changed_sections",
    "derive_compaction_request",
    "expand_quick_commands",
    "section_texts",
    "serialize",
    "to_wire_message",
]

# System prompt sections, in the order the harness assembles them.
SECTION_NAMES: tuple[str, ...] = (
    "persona",
    "experience",
    "memory",
    "environment",
    "current-date",
    "tool-guidance",
)

# Keys a message may carry into a request body; anything else is internal.
MESSAGE_KEYS: tuple[str, ...] = ("role", "content", "name", "tool_calls", "tool_call_id")
# Keys a tool call may carry into a request body (harness-only notes such as summaries stay behind).
TOOL_CALL_KEYS: tuple[str, ...] = ("id", "type", "function")

SECTION_SEPARATOR = "\n\n"

COMPACTION_INSTRUCTION = (
    "Summarise this session so far for a hand-off: the user's goals and key wording (taken only from"
    " the user's own messages, not from system-inserted notes), decisions made, the current state of"
    " the work and the next steps."
)

# `$skill$` and `#{command}#` markers; names have no whitespace or marker punctuation.
_MARKER_RE = re.compile(r"\$[^\s$#{}]+\$|#\{[^\s$#{}]+\}#")


@dataclass(frozen=True, slots=True)
class PromptSections:
    """The caller-supplied system sections; the current-date section is rendered by the builder.

    Each text is used as is (include its heading). Empty sections are still recorded by name but
    contribute nothing to the system text.
    """

    persona: str = ""
    experience: str = ""
    memory: str = ""
    environment: str = ""
    tool_guidance: str = ""


class ChatRequest(dict[str, Any]):
    """A JSON-ready request body that also remembers its system sections as ``(name, text)`` pairs.

    It is an ordinary dict for ``json.dumps`` and ``==``; ``sections`` never reaches the wire.
    """

    __slots__ = ("sections",)

    sections: tuple[tuple[str, str], ...]

    def __init__(self, body: Mapping[str, Any], sections: tuple[tuple[str, str], ...]) -> None:
        super().__init__(body)
        self.sections = sections


# --------------------------------------------------------------------------- helpers


def _expand_text(text: str, expansions: Mapping[str, str]) -> str:
    if "$" not in text and "#{" not in text:
        return text
    return _MARKER_RE.sub(lambda m: expansions.get(m.group(0), m.group(0)), text)


def expand_quick_commands(messages: Sequence[Mapping[str, Any]], expansions: Mapping[str, str]) -> list[Any]:
    """Return a new list with quick-command markers in user messages replaced by their expansion.

    ``expansions`` maps a whole marker token (``"$review$"``, ``"#{deploy}#"``) to its text; unknown
    markers are left alone. An expanded message is rebuilt as ``{**message, "content": replaced}``,
    so ``sender_ymd`` and every other field survive; untouched messages keep their identity and the
    inputs are never mutated.
    """
    out: list[Any] = list(messages)
    if not expansions:
        return out
    for index, message in enumerate(out):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        replaced: Any = content
        if isinstance(content, str):
            replaced = _expand_text(content, expansions)
        elif isinstance(content, list | tuple):
            parts: list[Any] = []
            changed = False
            for part in content:
                if (
                    isinstance(part, Mapping)
                    and part.get("type") == "text"
                    and isinstance(part.get("text"), str)
                ):
                    new_text = _expand_text(part["text"], expansions)
                    if new_text != part["text"]:
                        part = {**part, "text": new_text}
                        changed = True
                parts.append(part)
            if changed:
                replaced = parts
        if replaced is not content and replaced != content:
            out[index] = {**message, "content": replaced}
    return out


def to_wire_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """Project a chat message onto :data:`MESSAGE_KEYS` (in that order); internal fields are dropped."""
    wire = {key: message[key] for key in MESSAGE_KEYS if key in message}
    tool_calls = wire.get("tool_calls")
    if isinstance(tool_calls, list | tuple):
        wire["tool_calls"] = [
            {key: call[key] for key in TOOL_CALL_KEYS if key in call} if isinstance(call, Mapping) else call
            for call in tool_calls
        ]
    return wire


# json.dumps with any non-default option builds a new JSONEncoder per call, which costs more than
# encoding a typical message; an encoder holds only its options, so one instance serves every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def serialize(request: Mapping[str, Any]) -> bytes:
    """Canonical bytes of a request body: compact JSON, non-ASCII kept, key order as built, UTF-8."""
    return _ENCODER.encode(request).encode("utf-8")


def section_texts(request: ChatRequest | Mapping[str, str]) -> dict[str, str]:
    """Section name → text of a built request (a mapping of section texts is returned as a copy)."""
    if isinstance(request, ChatRequest):
        return dict(request.sections)
    if "messages" in request:
        raise TypeError(
            "this request body carries no section record (it was not built by build_request, or it"
            " went through JSON); rebuild it or pass the section texts directly"
        )
    return dict(request)


def changed_sections(
    previous: ChatRequest | Mapping[str, str], new: ChatRequest | Mapping[str, str]
) -> list[str]:
    """Names of system sections whose text differs (or which exist in only one of the two requests).

    Known sections come first in prompt order, any others after them in sorted order.
    """
    before, after = section_texts(previous), section_texts(new)
    names = [name for name in SECTION_NAMES if name in before or name in after]
    names += sorted((before.keys() | after.keys()) - set(SECTION_NAMES))
    return [name for name in names if before.get(name) != after.get(name)]


# --------------------------------------------------------------------------- builder


class RequestBuilder:
    """Holds what stays fixed for a session (tools, marker expansions, shell-clock permission).

    Cheap to construct; build as many requests from one instance as needed.
    """

    __slots__ = ("_allow_shell_clock", "_expansions", "_tools")

    def __init__(
        self,
        tools: Iterable[Mapping[str, Any]] = (),
        expansions: Mapping[str, str] | None = None,
        *,
        allow_shell_clock: bool = True,
    ) -> None:
        self._tools: tuple[Mapping[str, Any], ...] = tuple(tools)
        self._expansions: Mapping[str, str] = dict(expansions or {})
        self._allow_shell_clock = allow_shell_clock

    @property
    def tools(self) -> tuple[Mapping[str, Any], ...]:
        return self._tools

    def system_sections(
        self,
        sections: PromptSections,
        *,
        mode: DateMode,
        today: str | None = None,
        base_ymd: str | None = None,
    ) -> tuple[tuple[str, str], ...]:
        """The ``(name, text)`` pairs of the system prompt for one turn, in prompt order."""
        date_ymd = _date_for_mode(mode, today, base_ymd)
        date_text = current_date_section(date_ymd, mode, self._allow_shell_clock)
        return (
            ("persona", sections.persona),
            ("experience", sections.experience),
            ("memory", sections.memory),
            ("environment", sections.environment),
            ("current-date", date_text),
            ("tool-guidance", sections.tool_guidance),
        )

    def build_request(
        self,
        history: Sequence[Mapping[str, Any]],
        sections: PromptSections | None = None,
        *,
        mode: DateMode,
        today: str | None = None,
        base_ymd: str | None = None,
        previous_user_ymd_before: str | None = None,
    ) -> ChatRequest:
        """Build the body of one model call.

        ``mode="rolling"``: the date section shows ``today`` (required) and no notices are added.
        ``mode="anchored"``: the date section shows ``base_ymd`` (required; see
        :func:`pipeline.anchoring.rules.session_base_ymd`) and ``<date-change>`` notices are applied,
        starting from ``previous_user_ymd_before`` when given.
        """
        system = self.system_sections(sections or PromptSections(), mode=mode, today=today, base_ymd=base_ymd)
        system_text = SECTION_SEPARATOR.join(text for _, text in system if text)
        messages = expand_quick_commands(history, self._expansions)
        if mode == "anchored" and base_ymd is not None:  # base_ymd presence checked above
            messages = apply_date_change_notices(
                messages, base_ymd, previous_user_ymd_before, allow_shell_clock=self._allow_shell_clock
            )
        wire = [{"role": "system", "content": system_text}]
        wire += [to_wire_message(message) for message in messages]
        return ChatRequest({"messages": wire, "tools": list(self._tools)}, system)

    def build_compaction_request(
        self,
        history: Sequence[Mapping[str, Any]],
        sections: PromptSections | None = None,
        *,
        mode: DateMode,
        today: str | None = None,
        base_ymd: str | None = None,
        previous_user_ymd_before: str | None = None,
        instruction: str = COMPACTION_INSTRUCTION,
    ) -> ChatRequest:
        """The compaction request: the main request for the same inputs plus a trailing instruction."""
        main = self.build_request(
            history,
            sections,
            mode=mode,
            today=today,
            base_ymd=base_ymd,
            previous_user_ymd_before=previous_user_ymd_before,
        )
        return derive_compaction_request(main, instruction)


def _date_for_mode(mode: str, today: str | None, base_ymd: str | None) -> str:
    if mode == "rolling":
        if today is None:
            raise ValueError("rolling mode needs today's date (today='YYYY-MM-DD')")
        return today
    if mode == "anchored":
        if base_ymd is None:
            raise ValueError("anchored mode needs the session base date (base_ymd='YYYY-MM-DD')")
        return base_ymd
    raise ValueError(f"unknown date mode {mode!r}; expected one of {', '.join(DATE_MODES)}")


def derive_compaction_request(
    main: Mapping[str, Any], instruction: str = COMPACTION_INSTRUCTION
) -> ChatRequest:
    """A compaction request derived from an already built main request: same messages, plus the
    instruction as a trailing user message. The main request is not modified."""
    sections = main.sections if isinstance(main, ChatRequest) else ()
    body = dict(main)
    body["messages"] = [*main["messages"], {"role": "user", "content": instruction}]
    return ChatRequest(body, sections)


# --------------------------------------------------------------------------- one-shot helpers


def build_request(
    history: Sequence[Mapping[str, Any]],
    sections: PromptSections | None = None,
    *,
    mode: DateMode,
    today: str | None = None,
    base_ymd: str | None = None,
    previous_user_ymd_before: str | None = None,
    tools: Iterable[Mapping[str, Any]] = (),
    expansions: Mapping[str, str] | None = None,
    allow_shell_clock: bool = True,
) -> ChatRequest:
    """One-shot form of :meth:`RequestBuilder.build_request`."""
    builder = RequestBuilder(tools, expansions, allow_shell_clock=allow_shell_clock)
    return builder.build_request(
        history,
        sections,
        mode=mode,
        today=today,
        base_ymd=base_ymd,
        previous_user_ymd_before=previous_user_ymd_before,
    )


def build_compaction_request(
    history: Sequence[Mapping[str, Any]],
    sections: PromptSections | None = None,
    *,
    mode: DateMode,
    today: str | None = None,
    base_ymd: str | None = None,
    previous_user_ymd_before: str | None = None,
    tools: Iterable[Mapping[str, Any]] = (),
    expansions: Mapping[str, str] | None = None,
    allow_shell_clock: bool = True,
    instruction: str = COMPACTION_INSTRUCTION,
) -> ChatRequest:
    """One-shot form of :meth:`RequestBuilder.build_compaction_request`."""
    builder = RequestBuilder(tools, expansions, allow_shell_clock=allow_shell_clock)
    return builder.build_compaction_request(
        history,
        sections,
        mode=mode,
        today=today,
        base_ymd=base_ymd,
        previous_user_ymd_before=previous_user_ymd_before,
        instruction=instruction,
    )
