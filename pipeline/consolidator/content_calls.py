"""Tool calls a model wrote into the text of its reply instead of into `tool_calls`.

Small local models served by llama.cpp (Qwen2.5-Coder among them) often answer a request that
offers tools with the call as JSON in `content`: bare, inside a ```json fence, or between
`<tool_call>` tags the server did not parse. The loop reads such a reply as the call it names (and
records that it did) instead of nudging a model that did, in substance, what it was asked.

Shapes read as calls, each a JSON object:

* `{"name": TOOL, "arguments": {...}}` (also `"parameters"`, or arguments sent as a JSON string);
* the same wrapped as `{"function": {...}}`, `{"tool_call": {...}}` or `{"tool_calls": [...]}`;
* an answer on its own: an object whose keys are answer fields (`candidates`, `commitments`,
  `readSessionIds`) and nothing else, read as `submit_answer` with that object.

Anything else is not a call: `parse_content_calls` returns no calls, and `problem` says why when the
reply held JSON-like text that could not be read (so the nudge can name the fault).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["ANSWER_KEYS", "ContentCall", "ContentCalls", "parse_content_calls"]

ANSWER_KEYS = frozenset({"candidates", "commitments", "readSessionIds"})

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FENCED = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class ContentCall:
    """One call found in the text: the tool's name and its arguments as JSON text."""

    name: str
    arguments: str


@dataclass(frozen=True)
class ContentCalls:
    """What the text held: the calls (possibly none), and why none could be read when it looked like JSON."""

    calls: tuple[ContentCall, ...] = ()
    problem: str | None = None


def _blocks(text: str) -> list[str]:
    """The pieces of the text that may each hold one JSON object, in order."""
    if "<tool_call>" in text:
        return [b for b in _TAGGED.findall(text) if b.strip()]
    fenced = [b for b in _FENCED.findall(text) if b.strip()]
    return fenced or [text.strip()]


def _decode(block: str) -> tuple[Any, str | None]:
    """The JSON value a block holds (tolerating prose around one object), or the reason it holds none."""
    try:
        return json.loads(block), None
    except json.JSONDecodeError as exc:
        first = block.find("{")
        if first < 0:
            return None, None  # prose: no JSON was attempted
        try:
            value, _ = json.JSONDecoder().raw_decode(block[first:])
            return value, None
        except json.JSONDecodeError as inner:
            where = inner if first > 0 else exc
            return None, f"{where.msg} at line {where.lineno}, column {where.colno}"


def _arguments_text(value: Any) -> str | None:
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value  # sent as a JSON string: passed on as is, and checked as any call's arguments
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return None


def _calls_in(value: Any, tools: frozenset[str]) -> list[ContentCall] | None:
    """The calls one decoded object stands for, or None when it is not a call."""
    if isinstance(value, list):
        found = [_calls_in(item, tools) for item in value]
        if found and all(f is not None for f in found):
            return [c for f in found if f for c in f]
        return None
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("tool_calls"), list) and len(value) == 1:
        return _calls_in(value["tool_calls"], tools)
    for wrapper in ("tool_call", "function"):
        if isinstance(value.get(wrapper), dict) and len(value) <= 3:
            inner = _calls_in(value[wrapper], tools)
            if inner is not None:
                return inner
    name = value.get("name")
    if isinstance(name, str) and name in tools:
        arguments = _arguments_text(value.get("arguments", value.get("parameters")))
        if arguments is not None:
            return [ContentCall(name, arguments)]
        return None
    if value and set(value) <= ANSWER_KEYS and "submit_answer" in tools:
        return [ContentCall("submit_answer", json.dumps(value, ensure_ascii=False))]
    return None


def parse_content_calls(content: str | None, tools: Iterable[str]) -> ContentCalls:
    """The tool calls written in `content`, reading only the shapes of the module doc."""
    if not content or not content.strip():
        return ContentCalls()
    names = frozenset(tools)
    calls: list[ContentCall] = []
    problems: list[str] = []
    for block in _blocks(content):
        value, problem = _decode(block)
        if problem is not None:
            problems.append(problem)
            continue
        found = _calls_in(value, names)
        if found is None:
            if value is not None and isinstance(value, dict | list):
                problems.append(
                    "it is JSON but names no tool: write {\"name\": TOOL, \"arguments\": {...}} with TOOL one of "
                    + ", ".join(sorted(names))
                )
            continue
        calls.extend(found)
    if calls:
        return ContentCalls(tuple(calls))
    return ContentCalls(problem="; ".join(problems) if problems else None)

