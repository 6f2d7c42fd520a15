"""read_lines masks each shown line exactly as masking the whole stored line and cutting it at `width`
would, and stops where those masked lines reach MAX_RESULT_CHARS, however the lines, secrets, width and
budget fall (a secret straddling the cut, a mask longer or shorter than its secret, the budget ending
on a masked line)."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.consolidator import tools
from pipeline.secrets.gate import SecretSet
from pipeline.secrets.redact import LineMasker
from pipeline.secrets.scan import Secret, render

SECRETS = ["sk_live_51Hq8ZtK2mXb7Yw0cVd3RfLp9", "ghp_4Tz9LmQx2Vb8Nc1Rd6Wy0Ks3Jh7Pf5Ga2EuA", "AKIAIOSFODNN7Q2XK4ZB"]
KNOWN = SecretSet(frozenset({Secret("password", "hunter2#Qx9")}))

# A secret stands apart from its neighbours (a detector needs the key's edges to see it).
piece = st.one_of(st.text(alphabet="abc xyz=:\"'{}", max_size=40), st.sampled_from([*SECRETS, "hunter2#Qx9"]).map(" {} ".format))
line = st.lists(piece, max_size=8).map("".join)


def reference(texts: list[str], start: int, width: int, masker: LineMasker) -> tuple[list[dict[str, Any]], bool]:
    """What the tool must show: every line masked whole, cut at `width`, up to the budget."""
    shown: list[dict[str, Any]] = []
    used = 0
    for n, text in enumerate(texts[start - 1 : start - 1 + tools.MAX_READ_LINES], start):
        head = render(text, masker.spans(text), 0, width)
        if used + len(head) > tools.MAX_RESULT_CHARS:
            return shown, True
        shown.append({"line": n, "text": head, "cut": len(text) > width})
        used += len(head)
    return shown, False


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("CREATE TABLE sessions (session_id VARCHAR PRIMARY KEY, line_count BIGINT)")
    c.execute("CREATE TABLE lines (session_id VARCHAR, line_no BIGINT, text VARCHAR)")
    return c


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(line, min_size=1, max_size=12), width=st.integers(1, 120), start=st.integers(1, 12),
       budget=st.integers(1, 400), known=st.booleans())
def test_read_lines_masks_what_masking_each_whole_line_masks(con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch,
                                                              texts: list[str], width: int, start: int, budget: int,
                                                              known: bool) -> None:
    start = min(start, len(texts))
    con.execute("DELETE FROM sessions")
    con.execute("DELETE FROM lines")
    con.execute("INSERT INTO sessions VALUES ('S', ?)", [len(texts)])
    con.executemany("INSERT INTO lines VALUES ('S', ?, ?)", [[n, t] for n, t in enumerate(texts, 1)])
    monkeypatch.setattr(tools, "MAX_RESULT_CHARS", budget)
    got = tools.read_lines(con, "S", start, len(texts), width, known=KNOWN if known else None)
    shown, stopped = reference(texts, start, width, LineMasker(KNOWN if known else None))
    assert got["lines"] == shown
    assert got["truncated"] == stopped
    for item in got["lines"]:
        assert not any(s in item["text"] for s in SECRETS)
        assert not known or "hunter2#Qx9" not in item["text"]
