"""Secret scans kept in the warehouse: a line is scanned once, the next reader scans only the lines
after the kept scan, and a rewritten file or another detector voids what was kept. Whatever was
kept, a reader gets the same secrets as a scan of every line."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.consolidator import batch_secrets
from pipeline.consolidator.batch_input import snapshot
from pipeline.secrets import scan as secret_scan
from pipeline.secrets.gate import SecretSet
from pipeline.warehouse import db, ingest
from tests.helpers import write_jsonl

RNG = random.Random(5)


def key() -> str:
    chars = string.ascii_letters + string.digits
    while True:
        body = "".join(RNG.choice(chars) for _ in range(30))
        if any(c.isdigit() for c in body) and any(c.islower() for c in body) and any(c.isupper() for c in body):
            return f"sk_live_51{body}"


def record(text: str) -> dict[str, str]:
    return {"role": "tool", "content": text}


def session_ids(path: Path) -> list[str]:
    with db.reading(path) as con:
        return [sid for (sid,) in con.execute("SELECT session_id FROM sessions ORDER BY session_id").fetchall()]


def ingested(folder: Path, path: Path) -> None:
    with db.writing(path) as con:
        assert not ingest.ingest(con, [folder]).errors


def land(path: Path, ids: list[str]) -> SecretSet:
    """What an apply does: scan outside the writer, keep the scan inside it."""
    scan = batch_secrets.scan_warehouse(path, ids)
    with db.writing(path) as con:
        batch_secrets.store(con, scan)
    return scan.known


def lines_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The lines secret detection runs on from now on."""
    seen: list[str] = []
    real = batch_secrets.line_secrets

    def counting(text: str) -> frozenset[secret_scan.Secret]:
        seen.append(text)
        return real(text)

    monkeypatch.setattr(batch_secrets, "line_secrets", counting)
    return seen


def test_a_kept_scan_is_read_back_and_only_later_lines_are_scanned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = key(), key()
    src, path = tmp_path / "src", tmp_path / "w.duckdb"
    write_jsonl(src / "s.jsonl", [record("deploy"), record(f"Invalid API Key provided: {first}")])
    ingested(src, path)
    ids = session_ids(path)
    assert {s.value for s in land(path, ids).secrets} == {first}
    with db.reading(path) as con:
        assert con.execute("SELECT line_no FROM secret_scans").fetchall() == [(2,)]
        assert [v for (v,) in con.execute("SELECT value FROM secret_values").fetchall()] == [first]

    seen = lines_read(monkeypatch)
    with db.reading(path) as con:
        assert {s.value for s in batch_secrets.scan_sessions(con, ids).secrets} == {first}
    assert seen == []  # everything came from the kept scan

    write_jsonl(src / "s.jsonl", [record("deploy"), record(f"Invalid API Key provided: {first}"),
                                  record(f"retry with {second}")])
    ingested(src, path)  # appended: line 3 only
    assert {s.value for s in land(path, ids).secrets} == {first, second}
    assert len(seen) == 1 and second in seen[0]
    with db.reading(path) as con:
        assert con.execute("SELECT line_no FROM secret_scans").fetchall() == [(3,)]
        assert sorted(v for (v,) in con.execute("SELECT value FROM secret_values").fetchall()) == sorted([first, second])


def test_a_rewritten_file_and_another_detector_void_the_kept_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = key(), key()
    src, path = tmp_path / "src", tmp_path / "w.duckdb"
    write_jsonl(src / "s.jsonl", [record(f"token {old}"), record("done")])
    ingested(src, path)
    ids = session_ids(path)
    land(path, ids)
    write_jsonl(src / "s.jsonl", [record(f"a new start with {new}")])  # shorter: the file was rewritten
    ingested(src, path)
    with db.reading(path) as con:
        assert con.execute("SELECT count(*) FROM secret_scans").fetchall() == [(0,)]
        assert {s.value for s in batch_secrets.scan_sessions(con, ids).secrets} == {new}
    land(path, ids)

    seen = lines_read(monkeypatch)
    monkeypatch.setattr(batch_secrets, "detector_fingerprint", lambda: "another-detector")
    with db.reading(path) as con:
        assert {s.value for s in batch_secrets.scan_sessions(con, ids).secrets} == {new}
    assert len(seen) == 1  # scanned again from line 1


def test_a_batch_input_carries_the_kept_scans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = key()
    src, path = tmp_path / "src", tmp_path / "w.duckdb"
    write_jsonl(src / "s.jsonl", [record(f"export STRIPE_KEY={secret}"), record("ok")])
    ingested(src, path)
    ids = session_ids(path)
    land(path, ids)
    batch = snapshot(path, ids, tmp_path / "input")
    seen = lines_read(monkeypatch)
    with batch.reading() as con:
        assert secret in {s.value for s in batch_secrets.scan_sessions(con, ids).secrets}
    assert seen == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.sampled_from(["plain", "KEY", "pw", "url"]), min_size=1, max_size=8),
       cuts=st.lists(st.integers(min_value=1, max_value=8), max_size=3))
def test_kept_and_incremental_scans_equal_one_scan_of_every_line(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], cuts: list[int]
) -> None:
    # The file grows in steps (cut points), each step landed as a night would; at every step the
    # secrets read back equal those of one scan of every stored line.
    tmp = tmp_path_factory.mktemp("kept")
    made = {"KEY": lambda: f"Invalid API Key provided: {key()}", "pw": lambda: f"DB_PASSWORD={key()[10:22]}#q",
            "url": lambda: f"postgres://admin:{key()[12:24]}@db.internal:5432/app", "plain": lambda: "nothing here"}
    records = [record(made[t]()) for t in texts]
    src, path = tmp / "src", tmp / "w.duckdb"
    for end in [*sorted(c for c in cuts if c < len(records)), len(records)]:
        write_jsonl(src / "s.jsonl", records[:end])
        ingested(src, path)
        ids = session_ids(path)
        got = land(path, ids)
        with db.reading(path) as con:
            every = SecretSet.from_lines(t for (t,) in con.execute("SELECT text FROM lines ORDER BY line_no").fetchall())
            again = batch_secrets.scan_sessions(con, ids)
        assert got.secrets == every.secrets == again.secrets
