"""The schema's history: a fresh warehouse has exactly the checked-in schema, a warehouse stopped
before any step upgrades to the same schema with its rows kept, and a shipped step never changes.

After adding a step (see pipeline/warehouse/migrations.py), record it and the new schema with

    .venv/bin/python -m tests.warehouse.test_migrations

which rewrites tests/warehouse/expected_schema.json and refuses to record a change to a step that
is already there.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipeline.errors import UsageError
from pipeline.warehouse import db, migrations

EXPECTED = Path(__file__).with_name("expected_schema.json")
REGENERATE = "run `.venv/bin/python -m tests.warehouse.test_migrations` to record it"


def schema(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, list[str]]]:
    """Every table and view of the warehouse with its columns and their types, in order."""
    kinds = dict(con.execute(
        "SELECT table_name, table_type FROM information_schema.tables WHERE table_catalog = current_database()"
    ).fetchall())
    out: dict[str, dict[str, list[str]]] = {"tables": {}, "views": {}}
    for table, column, kind in con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_catalog = current_database() ORDER BY table_name, ordinal_position"
    ).fetchall():
        group = "views" if kinds[table] == "VIEW" else "tables"
        out[group].setdefault(table, []).append(f"{column} {kind}")
    return out


def step_hashes() -> dict[str, str]:
    """Each step's name with a hash of its source, in order: a shipped step's hash never changes."""
    return {name: hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16] for name, fn in migrations.STEPS}


def fresh_schema(folder: Path) -> dict[str, Any]:
    with db.writing(folder / "fresh.duckdb") as con:
        return schema(con)


def expected() -> dict[str, Any]:
    return json.loads(EXPECTED.read_text(encoding="utf-8"))


def test_a_fresh_warehouse_has_the_expected_tables_columns_and_views(tmp_path: Path) -> None:
    want = expected()
    got = fresh_schema(tmp_path)
    assert got == {"tables": want["tables"], "views": want["views"]}, f"the schema changed; {REGENERATE}"


def test_a_shipped_step_never_changes() -> None:
    recorded = list(expected()["steps"].items())
    current = list(step_hashes().items())
    changed = [name for (name, h), now in zip(recorded, current, strict=False) if (name, h) != now]
    assert not changed, f"shipped migration steps changed: {changed}; add a new step instead"
    assert len(current) >= len(recorded), "a shipped migration step was removed"
    assert len(current) == len(recorded), f"new migration steps are not recorded; {REGENERATE}"


@pytest.mark.parametrize("stop_before", [name for name, _ in migrations.STEPS])
def test_a_warehouse_stopped_before_any_step_upgrades_to_the_fresh_schema(tmp_path: Path, stop_before: str) -> None:
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    ran = migrations.migrate(con, stop_before=stop_before)
    names = [name for name, _ in migrations.STEPS]
    assert ran == names[: names.index(stop_before)]
    assert "views" in migrations.pending(con) and stop_before in migrations.pending(con)
    con.close()
    with pytest.raises(UsageError, match="predates this version"):
        db.connect(path, read_only=True)
    with db.writing(path) as con:
        assert schema(con) == fresh_schema(tmp_path)
        assert migrations.pending(con) == []


def test_rows_of_an_older_warehouse_survive_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    migrations.migrate(con, stop_before="003_consolidation")  # transcripts and llm_calls, no views yet
    at = dt.datetime(2026, 10, 1, 9, 0, tzinfo=dt.UTC)
    line = json.dumps({"type": "user", "sessionId": "s1", "timestamp": at.isoformat(),
                       "message": {"role": "user", "content": "run the migration tests"}})
    reply = json.dumps({"type": "assistant", "sessionId": "s1", "timestamp": at.isoformat(), "requestId": "r1",
                        "message": {"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
                                    "usage": {"input_tokens": 10, "output_tokens": 2}}})
    con.execute("INSERT INTO sessions (session_id, path, format, line_count) VALUES ('s1', '/t/s1.jsonl', 'claude-code', 2)")
    con.execute("INSERT INTO lines VALUES ('s1', 1, ?), ('s1', 2, ?)", [line, reply])
    # the usage row that version derived from line 2 (usage rows are derived again by the upgrade)
    con.execute("INSERT INTO llm_calls (call_id, source, session_id, \"at\", prompt_tokens) "
                "VALUES ('claude-code:s1:m1:r1', 'claude-code', 's1', ?, 10)", [at])
    con.close()
    with db.writing(path) as con:
        assert con.execute("SELECT session_id, line_count FROM sessions").fetchall() == [("s1", 2)]
        assert con.execute("SELECT role, text, is_prompt FROM messages").fetchall() == [
            ("user", "run the migration tests", True), ("assistant", None, False)]
        assert con.execute("SELECT call_id, prompt_tokens FROM usage").fetchall() == [("claude-code:s1:m1:r1", 10)]
        assert con.execute("SELECT count(*) FROM memories").fetchall() == [(0,)]
        assert schema(con) == fresh_schema(tmp_path)


def test_views_are_rebuilt_when_their_sql_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "w.duckdb"
    db.connect(path).close()
    monkeypatch.setattr(migrations, "views_fingerprint", lambda: "changed")
    with pytest.raises(UsageError, match=r"missing steps: views"):
        db.connect(path, read_only=True)
    with db.writing(path) as con:
        assert migrations.VIEWS_PREFIX + "changed" in migrations.applied(con)
    db.connect(path, read_only=True).close()


def test_a_second_step_with_a_taken_name_is_refused() -> None:
    taken = migrations.STEPS[0][0]
    with pytest.raises(ValueError, match="defined twice"):
        migrations.step(taken)
    with pytest.raises(ValueError, match="no migration step 'nope'"):
        migrations.migrate(duckdb.connect(), stop_before="nope")


def _write_expected(folder: Path) -> None:
    recorded = list(expected()["steps"].items()) if EXPECTED.exists() else []
    current = step_hashes()
    for (name, h), now in zip(recorded, current.items(), strict=False):
        if (name, h) != now:
            sys.exit(f"step {name} has shipped and changed: restore it and add a new step instead")
    data = {"steps": current, **fresh_schema(folder)}
    # one column per line, so a new column is a one-line diff
    text = json.dumps(data, indent=1)
    EXPECTED.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {EXPECTED}: {len(current)} steps, {len(data['tables'])} tables, {len(data['views'])} views")


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        _write_expected(Path(tmp))
