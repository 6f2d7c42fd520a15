"""A gold file for `pipeline eval` over sessions of the bundled samples, from what the generator planted.

`data/samples/expected.json` records, line by line, what `data/samples/generate.py` planted in the
samples: error patterns repeated across sessions, workarounds, corrections, commitments (with their
actor and whether they were resolved) and sentences that only look like commitments. For the
sessions asked for, this writes them in the gold format of `pipeline eval` (bench/eval/README.md),
so an engine's answers on the samples can be scored without transcripts from outside the
repository. It scores what was planted, not everything a reviewer might find.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["write_samples_gold"]

REPO = Path(__file__).resolve().parent.parent
EXPECTED = REPO / "data" / "samples" / "expected.json"


def _evidence(occurrences: Iterable[dict[str, Any]], reviewed: set[str]) -> list[dict[str, Any]]:
    return [{"sessionId": o["sessionId"], "line": o["line"], "quote": o["quote"]}
            for o in occurrences if o.get("sessionId") in reviewed]


def samples_gold(session_ids: Sequence[str], expected: Path = EXPECTED) -> list[dict[str, Any]]:
    """The gold records for `session_ids` (their planted items only)."""
    data = json.loads(expected.read_text(encoding="utf-8"))
    reviewed = set(session_ids)
    records: list[dict[str, Any]] = [{"type": "reviewed", "sessionId": s} for s in session_ids]
    for pattern in data["patterns"]:
        evidence = _evidence(pattern["occurrences"], reviewed)
        if len({e["sessionId"] for e in evidence}) >= 2:  # a pattern across sessions of this batch
            records.append({"type": "memory", "kind": "error_pattern", "claim": pattern["description"],
                            "certainty": "clear", "rulesDetectable": True, "evidence": evidence})
    for item in [*data["workarounds"], *data["corrections"]]:
        evidence = _evidence(item["occurrences"], reviewed)
        if len({e["sessionId"] for e in evidence}) >= 2:
            records.append({"type": "memory", "kind": "procedural", "claim": item["statement"],
                            "certainty": "clear", "rulesDetectable": True, "evidence": evidence})
    for c in data["commitments"]:
        if c["sessionId"] in reviewed:
            records.append({"type": "commitment", "actor": c["actor"], "resolved": bool(c["resolved"]), "certainty": "clear",
                            "evidence": [{"sessionId": c["sessionId"], "line": c["line"], "quote": c["quote"]}]})
    for n in data["non_commitments"]:
        if n["sessionId"] in reviewed:
            records.append({"type": "not_commitment",
                            "evidence": [{"sessionId": n["sessionId"], "line": n["line"], "quote": n["quote"]}]})
    return records


def write_samples_gold(session_ids: Sequence[str], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in samples_gold(session_ids)), encoding="utf-8")
    return path
