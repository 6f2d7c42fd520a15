"""Does a new claim say the same as one already written?

Claims are normalised (case, punctuation, digits, whitespace) and compared with rapidfuzz. Two
scores must agree: token_sort_ratio catches rewording and reordering; token_set_ratio alone would
call a short claim a duplicate of any longer claim that contains its words, so it only counts when
the two claims are of similar length.

A claim a reviewer took back (a `drop:` commit) counts too: a later night must not write it again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rapidfuzz import fuzz

from pipeline.corpus.git_corpus import Corpus

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


# -- claims a reviewer took back ---------------------------------------------------------------------
DROP_PREFIX = "drop: "


@dataclass(frozen=True)
class DroppedMemory:
    """A memory a reviewer took back with `pipeline memories drop`: its `drop:` commit says which and why."""

    memory_id: str
    kind: str
    claim: str
    why: str
    path: str
    commit: str


def dropped_memories(corpus: Corpus) -> list[DroppedMemory]:
    """Every memory taken back, newest first, read from the corpus's `drop:` commits."""
    out: list[DroppedMemory] = []
    seen: set[str] = set()
    for c in corpus.commits():
        mid = c.trailers.get("Memory-Id")
        if not c.subject.startswith(DROP_PREFIX) or not mid or mid in seen:
            continue
        seen.add(mid)
        why = c.body.split("\n", 1)[0].removeprefix("Why: ")
        out.append(DroppedMemory(mid, c.trailers.get("Kind", ""), c.subject[len(DROP_PREFIX):], why,
                                 c.trailers.get("Path", ""), c.sha))
    return out


def dropped_match(memory_id: str, claim: str, dropped: Iterable[DroppedMemory]) -> DroppedMemory | None:
    """The dropped memory a new claim repeats (same id, or the same claim reworded), if any."""
    dropped = list(dropped)
    same = next((d for d in dropped if d.memory_id == memory_id), None)
    if same is not None:
        return same
    match = best_match(claim, [(d.memory_id, d.claim) for d in dropped])
    return next((d for d in dropped if match and d.memory_id == match[0]), None)
