"""How the rules word what they write: a text cut to a limit, names listed with "and"."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["clip", "listed"]


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def listed(items: Sequence[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
