"""A deterministic token estimate for the cache simulator (no tokenizer, no download).

Real tokenizers differ by provider and version, and the cache models only need token counts that
are stable, monotone in the text and of the right size. The rule:

* an ASCII character is a quarter of a token (:data:`CHARS_PER_TOKEN` = 4, rounded up per text),
  which is the usual figure for English prose and code;
* every non-ASCII code point is one token (:data:`NON_ASCII_TOKENS`), which is close for CJK text
  and a slight over-count for accented Latin letters;
* every prompt block (a tool definition, a system section, a message) carries a fixed framing
  overhead of :data:`BLOCK_OVERHEAD_TOKENS`, standing in for role markers and separators.

The estimate is a pure function of the text: the same text always gives the same count on any
machine, which is what makes simulated workloads reproducible for a seed.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "BLOCK_OVERHEAD_TOKENS",
    "CHARS_PER_TOKEN",
    "NON_ASCII_TOKENS",
    "block_tokens",
    "estimate_tokens",
]

CHARS_PER_TOKEN = 4
NON_ASCII_TOKENS = 1
BLOCK_OVERHEAD_TOKENS = 3


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: ceil(ASCII chars / 4) + 1 per non-ASCII code point."""
    if not text:
        return 0
    if text.isascii():
        return math.ceil(len(text) / CHARS_PER_TOKEN)
    # encode('ascii', 'ignore') drops exactly the non-ASCII code points, in C, without a Python loop.
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / CHARS_PER_TOKEN) + (len(text) - ascii_chars) * NON_ASCII_TOKENS


def block_tokens(block: Any) -> int:
    """Tokens of one prompt block: a text as is, anything else as its canonical JSON, plus framing."""
    if isinstance(block, str):
        return estimate_tokens(block) + BLOCK_OVERHEAD_TOKENS
    from pipeline.anchoring.request_builder import serialize

    return estimate_tokens(serialize(block).decode("utf-8")) + BLOCK_OVERHEAD_TOKENS
