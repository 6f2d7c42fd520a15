"""pipeline cache-eval: agreement of the cache causes with labels given from the raw lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from pipeline.cache import causes
from pipeline.cache.cause_eval import load_gold, score, score_text
from pipeline.errors import UsageError


def _log() -> pl.DataFrame:
    t0 = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
    # s1: cold start, hit, a miss 20 minutes later (ttl_expiry), a miss right after (prefix_change: no transcript)
    rows = [
        ("s1", 1, t0, 1000, 0), ("s1", 2, t0 + timedelta(seconds=10), 1100, 1000),
        ("s1", 3, t0 + timedelta(minutes=20), 1200, 0), ("s1", 4, t0 + timedelta(minutes=20, seconds=5), 1300, 100),
    ]
    return pl.DataFrame(
        [{"call_id": f"{s}:{n}", "source": "import:x", "session_id": s, "line_no": n, "at": at,
          "prompt_tokens": p, "cached_tokens": c, "cache_write_tokens": p - c} for s, n, at, p, c in rows]
    )


def _gold(path: Path, labels: list[tuple[str, int, str]]) -> Path:
    path.write_text("".join(json.dumps({"sessionId": s, "line": n, "cause": c, "note": "read"}) + "\n" for s, n, c in labels))
    return path


def test_agreement_per_cause_both_ways(tmp_path: Path) -> None:
    classified = causes.classify(_log())
    gold = _gold(tmp_path / "g.jsonl", [("s1", 1, "cold_start"), ("s1", 2, "hit"), ("s1", 3, "ttl_expiry"),
                                        ("s1", 4, "provider_miss"), ("s9", 1, "hit")])
    result = score(gold, classified)
    assert (result.labelled, result.matched, result.agree) == (5, 4, 3)
    assert result.rate == pytest.approx(0.75)
    assert result.by_cause["provider_miss"] == {"labelled": 1, "predicted": 0, "agree": 0, "recall": 0.0, "precision": None}
    assert result.by_cause["prefix_change"]["precision"] == 0.0
    assert result.confusion["provider_miss"] == {"prefix_change": 1}
    assert [d["line"] for d in result.disagreements] == [4]
    assert result.unmatched == [{"sessionId": "s9", "line": 1, "gold": "hit"}]
    assert result.hits_with_miss_cause == 0
    text = score_text(result)
    assert "3/4 labelled calls agree (75.0 %)" in text and "1 labels match no call" in text
    assert "s1 line 4: labelled provider_miss, classified prefix_change — read" in text


def test_a_bad_label_names_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text('{"sessionId": "s1", "line": 1, "cause": "cold_start"}\n{"sessionId": "s1", "line": 2, "cause": "weather"}\n')
    with pytest.raises(UsageError, match=r"g\.jsonl:2: cause 'weather' is not one of"):
        load_gold(path)
    path.write_text('{"sessionId": "s1"}\n')
    with pytest.raises(UsageError, match=r"g\.jsonl:1: not a cause label"):
        load_gold(path)
