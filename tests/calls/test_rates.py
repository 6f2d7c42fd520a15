"""The list rates every ingest keeps in `price_rates`, and the reports that read them: the same answer
whether the rates come from the table or are priced as the report runs (a warehouse last written under
another genai-prices release, which a read-only report cannot update)."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pytest

from pipeline.calls import rates as price_rates
from pipeline.consolidator import tools
from pipeline.usage import usage_report
from pipeline.usage.session_table import session_table
from pipeline.warehouse import db
from tests.helpers import SAMPLES


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return set(a) == set(b) and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def _answers(path: Path) -> list[Any]:
    with db.reading(path) as con:
        return [usage_report(con, kind) for kind in ("daily", "weekly", "monthly", "session", "blocks")] + [
            session_table(con, tools.list_sessions(con, redact=False))]


def test_every_ingest_prices_every_day_of_the_calls(tmp_path: Path) -> None:
    from pipeline.cli import main

    wh = tmp_path / "w.duckdb"
    assert main(["ingest", str(SAMPLES), "--db", str(wh)]) == 0
    with db.reading(wh) as con:
        release = price_rates.release()
        unpriced = con.execute(
            """SELECT count(*) FROM (SELECT DISTINCT coalesce(model, 'unknown') m, source s, make_timestamp(epoch_us("at"))::DATE d
               FROM llm_calls WHERE "at" IS NOT NULL) k
               WHERE NOT EXISTS (SELECT 1 FROM price_rates r WHERE r.prices = ? AND r.model = k.m AND r.source = k.s AND r.day = k.d)""",
            [release]).fetchone()[0]  # type: ignore[index]
        stored = con.execute("SELECT count(*), count(r_in) FROM price_rates WHERE prices = ?", [release]).fetchone()
        assert price_rates.missing(con, ["claude-code", "codex"], release)["model"] == []
    assert unpriced == 0
    assert stored is not None and stored[0] > 0 and stored[1] > 0  # priced models, and NULL rows for the unknown


def test_a_report_prices_what_the_table_lacks_as_it_runs(samples_copy: Path) -> None:
    kept = _answers(samples_copy)
    with db.writing(samples_copy) as con:  # as if the last ingest had run under an older genai-prices
        con.execute("UPDATE price_rates SET prices = 'genai_prices-0.0.1'")
    assert _close(_answers(samples_copy), kept)
    with db.writing(samples_copy) as con:  # or before the table existed
        con.execute("DELETE FROM price_rates")
    assert _close(_answers(samples_copy), kept)


def test_a_writer_drops_the_rates_of_other_releases(samples_copy: Path) -> None:
    with db.writing(samples_copy) as con:
        con.execute("UPDATE price_rates SET prices = 'genai_prices-0.0.1'")
        added = price_rates.store(con)
        releases = {r[0] for r in con.execute("SELECT DISTINCT prices FROM price_rates").fetchall()}
    assert added > 0 and releases == {price_rates.release()}


@pytest.mark.parametrize("prompt", [0, 1, 199_999, 200_000, 200_001, 10**7])
def test_a_tiered_price_gives_one_rate_row_per_tier_covering_every_prompt(prompt: int) -> None:
    rows = price_rates.priced([("claude-sonnet-4-5", "claude-code", dt.date(2026, 1, 5))])
    bounds = list(zip(rows["lo"], rows["hi"], strict=True))
    assert len(bounds) >= 2  # this model has a long-context tier
    assert sum(lo < prompt <= hi for lo, hi in bounds) == 1
