"""A task statement tidied of the sentence it was cut from.

Apart from the commitment rules that retell a promise, because writing a task file (`pipeline apply`
and every night) needs only this, not the rules' hundred compiled patterns.
"""

from __future__ import annotations

import re

__all__ = ["tidy_statement"]

# A request for a reminder tacked on at the end ("…, remind me", "(remind me later)") is not part of the work.
_REMINDER = re.compile(
    r"(?:\s*[,;:(\u2013\u2014-]\s*|\s+(?:and|so|please)\s+)(?:please\s+)?remind\s+(?:me|us)"
    r"(?:\s+(?:later|tomorrow|about\s+(?:it|this|that)|of\s+(?:it|this|that)|to\s+do\s+(?:it|this|that)))?"
    r"[\s).!?]*$",
    re.IGNORECASE,
)
_TRAILING_MARKS = " \t.,;:!?\u2026\u2013\u2014-"
_PAIRS = {")": "(", "]": "[", "}": "{", "\u201d": "\u201c", "\u2019": "\u2018"}


def _unbalanced_closer(text: str) -> bool:
    """Does `text` end with a quote or bracket that closes nothing inside it (a leftover of the sentence
    the statement was cut from, such as `"}]` after quoted JSON)?"""
    last = text[-1]
    if last in ('"', "`"):
        return text.count(last) % 2 == 1
    if last in _PAIRS:
        return text.count(last) > text.count(_PAIRS[last])
    return False


def tidy_statement(text: str) -> str:
    """A task statement without the leftovers of the sentence it came from: a trailing request for a
    reminder, stray punctuation, quotes or brackets that close nothing. It ends with a period when it
    ends in a word; a statement that ends in code (`f()`) or a closed quotation keeps that ending."""
    text = " ".join(text.split())
    while True:
        before = text
        text = _REMINDER.sub("", text).rstrip(_TRAILING_MARKS)
        while text and _unbalanced_closer(text):
            text = text[:-1].rstrip(_TRAILING_MARKS)
        if text == before:
            break
    if not text:
        return text
    return f"{text}." if text[-1].isalnum() else text
