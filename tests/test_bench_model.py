"""`make bench-model`'s parts that need no model: the pins, the samples gold, and seed 001's session.

The benchmark itself downloads a model and runs for tens of minutes; it is never run here. What it
builds before it talks to the server is checked instead, so that a session that no longer crosses
midnight, or a gold file `pipeline eval` would refuse, shows here rather than at the end of a run.
Nothing here reaches the network.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from pipeline.eval.evaluate import parse_gold
from tests.helpers import REPO


@pytest.fixture(scope="module")
def bench() -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import model_anchoring
        import model_cache
        import model_gold

        yield {"cache": model_cache, "anchoring": model_anchoring, "gold": model_gold}
    finally:
        sys.path.remove(str(REPO / "bench"))


def test_every_download_is_pinned_by_a_full_sha256(bench: dict[str, ModuleType]) -> None:
    cache = bench["cache"]
    full = re.compile(r"[0-9a-f]{64}")
    assert full.fullmatch(cache.SERVER.wheel_sha256)
    for pin in cache.MODELS.values():
        assert full.fullmatch(pin.sha256) and pin.size > 0 and pin.file.endswith(".gguf")
        assert all(full.fullmatch(p.wheel_sha256) for p in pin.parts)
        assert [p.package[-len(str(i)):] for i, p in enumerate(pin.parts, start=1)] == [
            str(i) for i in range(1, len(pin.parts) + 1)]  # part order is download order
    assert set(cache.MODELS) == {"0.5b", "1.5b"}


def test_the_cache_is_outside_the_repository(bench: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("BENCH_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert bench["cache"].cache_dir() == tmp_path / "trace-pipeline" / "bench-model"


def test_the_session_crosses_local_midnight_where_the_bench_measures(bench: dict[str, ModuleType]) -> None:
    anchoring = bench["anchoring"]
    first = anchoring.FIRST_AFTER_MIDNIGHT
    days = [day for day, _ in anchoring.TURNS]
    assert len(days) == 12 and days[first - 1] < days[first] and len(set(days)) == 2
    rolling, anchored = anchoring._requests("rolling"), anchoring._requests("anchored")
    # Without anchoring the date section changes on the new day; with it, only the new user message does.
    assert rolling[first][0].sections != rolling[first - 1][0].sections
    assert anchored[first][0].sections == anchored[first - 1][0].sections
    assert anchored[first][0]["messages"][-1]["content"].startswith("<date-change>")
    assert not any("<date-change>" in str(m.get("content")) for m in rolling[first][0]["messages"])
    # The date sits where the request builder puts it: after the long stable sections, before the tool guidance.
    names = [name for name, _ in anchored[0][0].sections]
    assert names.index("current-date") == len(names) - 2


def test_the_simulator_predicts_the_effect_the_bench_checks(bench: dict[str, ModuleType]) -> None:
    anchoring = bench["anchoring"]
    first = anchoring.FIRST_AFTER_MIDNIGHT
    shares = {}
    for mode in ("rolling", "anchored"):
        predicted = anchoring._predicted(anchoring._requests(mode))[first]
        shares[mode] = predicted["cachedTokens"] / predicted["promptTokens"]
    assert shares["anchored"] >= 0.8 and shares["anchored"] - shares["rolling"] >= 0.3


def test_the_samples_gold_is_one_pipeline_eval_reads(bench: dict[str, ModuleType], tmp_path) -> None:
    gold_module = bench["gold"]
    ids = ["7a6738d0-a8f0-4bb2-bf15-e9ff77de2e75", "94d17458-e734-483d-b466-8395216e13a2"]
    path = gold_module.write_samples_gold(ids, tmp_path / "g.jsonl")
    gold = parse_gold(path.read_text(encoding="utf-8").splitlines(), str(path))
    assert gold.reviewed == ids and gold.memories and gold.commitments and gold.not_commitments
    assert all(e.sessionId in ids for e in gold.evidence())
