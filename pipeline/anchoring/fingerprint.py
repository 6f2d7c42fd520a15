"""Fingerprints of what a model request carries, so cache analysis can tell which part changed.

A fingerprint is the sha256 of a value's canonical JSON (sorted keys, no insignificant whitespace,
non-ASCII kept as is). Two requests with the same system prompt get the same `system_fp` whatever
order a dict happened to be built in, and any change of one character gives a different one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["canonical_json", "fingerprint", "request_fingerprints"]


def canonical_json(value: Any) -> str:
    """The one JSON spelling of `value` that fingerprints are taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def fingerprint(value: Any) -> str:
    """sha256 (hex) of the canonical JSON of `value`; a str is fingerprinted as a JSON string."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def request_fingerprints(
    system: str, tools: Sequence[Mapping[str, Any]], messages: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """`system_fp`, `tools_fp` and `prefix_fp` of one chat request.

    `prefix_fp` covers everything the provider's prefix cache sees: the tools and every message
    sent, the system message included.
    """
    return {
        "system_fp": fingerprint(system),
        "tools_fp": fingerprint(list(tools)),
        "prefix_fp": fingerprint({"tools": list(tools), "messages": list(messages)}),
    }
