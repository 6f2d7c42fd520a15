"""Does a new claim say the same as one already written?

Claims are normalised (case, punctuation, digits, whitespace) and compared with rapidfuzz. Two
scores must agree: token_sort_ratio catches rewording and reordering; token_set_ratio alone would
call a short claim a duplicate of any longer claim that contains its words, so it only counts when
the two claims are of similar length.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rapidfuzz import fuzz

THRESHOLD = 85.0  # token_sort_ratio at or above this: the same claim reworded
SET_THRESHOLD = 92.0  # token_set_ratio at or above this, with lengths within LENGTH_RATIO
LENGTH_RATIO = 0.75


def normalise(text: str) -> str:
    text = text.lower()
    text = re.sub(r"\d+", "0", text)
    text = re.sub(r"[^\w\s]", " ", text)
    return " ".join(text.split())


def similarity(a: str, b: str) -> float:
    na, nb = normalise(a), normalise(b)
    if not na or not nb:
        return 0.0
    score = fuzz.token_sort_ratio(na, nb)
    shorter, longer = sorted((len(na), len(nb)))
    if longer and shorter / longer >= LENGTH_RATIO:
        score = max(score, fuzz.token_set_ratio(na, nb) if fuzz.token_set_ratio(na, nb) >= SET_THRESHOLD else 0)
    return float(score)


def is_duplicate(a: str, b: str) -> bool:
    return similarity(a, b) >= THRESHOLD


def best_match(claim: str, existing: Iterable[tuple[str, str]]) -> tuple[str, float] | None:
    """The id of the most similar existing claim at or above the threshold, with its score."""
    best: tuple[str, float] | None = None
    for key, other in existing:
        s = similarity(claim, other)
        if s >= THRESHOLD and (best is None or s > best[1]):
            best = (key, s)
    return best
