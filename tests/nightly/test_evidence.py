"""An evidence quote in its transcript context: found where the contract finds it, shown as readable lines,
highlighted, redacted, and cut around the quote."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.nightly.evidence import CONTEXT_BEFORE, evidence_html, evidence_view
from pipeline.warehouse import db, ingest
from tests import helpers as A
from tests.helpers import write_jsonl

PG = A.occurrences("pg-connection-refused")


def test_a_sample_quote_in_context(wh: Path) -> None:
    occ = PG[0]
    with db.reading(wh) as con:
        view = evidence_view(con, occ["sessionId"], occ["quote"])
    assert view.found and view.line_no == occ["line"] and view.slug == "-home-ana-src-checkout-api" and view.at
    [hit] = [s for s in view.shown if s.is_quote]
    assert hit.mark == occ["quote"] and hit.line_no == occ["line"] and hit.label == "tool result (error)"
    before = [s for s in view.shown if s.line_no < occ["line"]]
    assert len(before) == CONTEXT_BEFORE and [s.label for s in before][-1] == "tool call Bash"
    assert any(s.line_no > occ["line"] for s in view.shown)
    page = evidence_html(view)
    assert "<mark>psycopg.OperationalError" in page and f"line {occ['line']}" in page
    assert f"pipeline show {occ['sessionId']} " in page


def test_secrets_are_masked_and_long_text_is_cut_around_the_quote(tmp_path: Path) -> None:
    secret = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34"
    lines = [
        {"type": "user", "sessionId": "S", "timestamp": "2026-10-01T10:00:00Z",
         "message": {"role": "user", "content": f"my key is {secret}, keep it safe"}},
        {"type": "assistant", "sessionId": "S", "timestamp": "2026-10-01T10:00:05Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "x" * 5000 + " I will rotate the key tomorrow. " + "y" * 5000}]}},
    ]
    write_jsonl(tmp_path / "t" / "s.jsonl", lines)
    with db.writing(tmp_path / "w.duckdb") as con:
        ingest.ingest(con, [tmp_path / "t"])
    with db.reading(tmp_path / "w.duckdb") as con:
        view = evidence_view(con, "S", "I will rotate the key tomorrow.")
        missing = evidence_view(con, "S", "never said anywhere in this session")
    page = evidence_html(view)
    assert secret not in page and "[REDACTED:openai-key]" in page
    [hit] = [s for s in view.shown if s.is_quote]
    assert len(hit.before) < 400 and len(hit.after) < 400 and hit.before.startswith("…")
    assert not missing.found and "no longer found" in evidence_html(missing)


def test_a_quote_spanning_the_json_of_its_line_shows_that_raw_stretch(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "t" / "s.jsonl", [{"type": "user", "sessionId": "S", "message": {"role": "user", "content": "hello there"}}])
    with db.writing(tmp_path / "w.duckdb") as con:
        ingest.ingest(con, [tmp_path / "t"])
    with db.reading(tmp_path / "w.duckdb") as con:
        view = evidence_view(con, "S", json.dumps({"role": "user"})[1:-1] + ', "content"')
    [hit] = [s for s in view.shown if s.is_quote]
    assert hit.label == "raw line" and '"role": "user"' in hit.mark


def test_the_nights_known_secrets_are_masked_where_the_detectors_alone_would_miss_them(tmp_path: Path) -> None:
    from pipeline.secrets.gate import SecretSet

    password = "Zx9qT4pLmW2rK7"
    said = [
        {"type": "user", "sessionId": "S", "message": {"role": "user", "content": f"the dsn is postgres://app:{password}@db/app"}},
        {"type": "assistant", "sessionId": "S", "message": {"role": "assistant", "content": f"So the password is {password}."}},
        {"type": "user", "sessionId": "S", "message": {"role": "user", "content": "I will rotate the database password tomorrow."}},
    ]
    write_jsonl(tmp_path / "t" / "s.jsonl", said)
    with db.writing(tmp_path / "w.duckdb") as con:
        ingest.ingest(con, [tmp_path / "t"])
    with db.reading(tmp_path / "w.duckdb") as con:
        lines = [t for (t,) in con.execute("SELECT text FROM lines WHERE session_id = 'S'").fetchall()]
        bare = evidence_html(evidence_view(con, "S", "I will rotate the database password tomorrow."))
        known = evidence_html(evidence_view(con, "S", "I will rotate the database password tomorrow.",
                                            known=SecretSet.from_lines(lines)))
    assert "postgres://app:[REDACTED:" in bare and f"password is {password}" in bare  # detected on its line only
    assert password not in known and known.count("[REDACTED:") == 2
