"""Importers: every format's token convention with hand-computed totals, bad rows with
file:line:field, idempotent re-import, CSV/Parquet/JSONL input, --map, the CLI; and the
transcript-derived `usage` rows read the same way as imported API responses."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pipeline.calls import values as v
from pipeline.calls.importer import import_calls, parse_mapping, read_calls
from pipeline.cli.main import main
from pipeline.errors import BadValue, UsageError
from pipeline.warehouse import db, ingest
from tests.helpers import SAMPLES, copy_samples, write_jsonl

DATA = Path(__file__).parents[1] / "data" / "importers"
TOKENS = "prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens"


def q(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[tuple]:
    return con.execute(sql, params).fetchall() if params is not None else con.execute(sql).fetchall()


def sums(con: duckdb.DuckDBPyConnection, source: str) -> tuple:
    return q(con, f"SELECT count(*), {', '.join(f'sum({c})' for c in TOKENS.split(', '))} FROM llm_calls WHERE source = ?", [source])[0]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# ---- one test per format, totals computed by hand ------------------------------------------------


def test_openai_chat_wrappers_batch_output_and_duplicate(warehouse) -> None:
    report = import_calls(warehouse, DATA / "openai_chat.jsonl", "openai")
    # A1 1200/1024/-/80, A2 1500/1152/300/40 (wrapped), A3 300/-/-/20 (batch output, no details);
    # A1 again on line 5 is the same response: merged. Line 3 is blank.
    assert (report.rows, report.blank, report.bad_rows, report.good_rows, report.duplicates, report.calls) == (4, 1, 0, 4, 1, 3)
    assert (report.new, report.already_present) == (3, 0)
    assert sums(warehouse, "import:openai_chat") == (3, 1200 + 1500 + 300, 1024 + 1152, 300, 80 + 40 + 20)
    rows = q(warehouse, f'SELECT call_id, session_id, "at", model, {TOKENS}, latency_ms, line_no FROM llm_calls ORDER BY call_id')
    assert rows == [
        ("import:openai_chat:chatcmpl-A1", None, utc(2026, 9, 21, 14, 13, 20), "gpt-4.1", 1200, 1024, None, 80, None, 5),
        # the wrapper's own timestamp wins over the response's `created`
        ("import:openai_chat:chatcmpl-A2", "chat-1", utc(2026, 10, 1, 10, 0, 5), "gpt-4.1", 1500, 1152, 300, 40, 950.5, 2),
        # unknown cached count is NULL, not 0
        ("import:openai_chat:chatcmpl-A3", None, utc(2026, 9, 21, 14, 15), "gpt-4.1-mini", 300, None, None, 20, None, 4),
    ]
    assert q(warehouse, "SELECT DISTINCT origin FROM llm_calls") == [(str((DATA / "openai_chat.jsonl").resolve()),)]


def test_openai_responses_cached_is_part_of_input(warehouse) -> None:
    report = import_calls(warehouse, DATA / "openai_responses.jsonl", "openai", name="gpt5")
    assert report.source == "import:gpt5" and report.calls == 2 and not report.problems
    assert sums(warehouse, "import:gpt5") == (2, 5000 + 5400, 4096 + 4992, None, 300 + 120)
    assert q(warehouse, 'SELECT min("at") FROM llm_calls') == [(utc(2026, 9, 21, 14, 16, 40),)]


def test_anthropic_prompt_is_all_three_parts_and_streamed_duplicate_keeps_last(warehouse) -> None:
    report = import_calls(warehouse, DATA / "anthropic.jsonl", "anthropic")
    assert (report.rows, report.duplicates, report.calls, report.bad_rows) == (4, 1, 3, 0)
    # msg_01: 3 + 2000 + 0 (final line: 250 out); msg_02: 5 + 300 + 2000; msg_03: 40, no cache fields.
    assert sums(warehouse, "import:anthropic") == (3, 2003 + 2305 + 40, 0 + 2000, 2000 + 300, 250 + 90 + 12)
    assert q(warehouse, f'SELECT call_id, session_id, "at", {TOKENS}, line_no FROM llm_calls ORDER BY call_id') == [
        ("import:anthropic:msg_01", "cc-1", utc(2026, 10, 1, 9, 0, 9), 2003, 0, 2000, 250, 2),
        ("import:anthropic:msg_02", "cc-1", utc(2026, 10, 1, 9, 1), 2305, 2000, 300, 90, 3),
        ("import:anthropic:msg_03", None, None, 40, None, None, 12, 4),
    ]
    assert report.totals.model_dump() == {
        "prompt_tokens": 4348, "cached_tokens": 2000, "cache_write_tokens": 2300, "completion_tokens": 352,
    }


def test_deepseek_hit_plus_miss_checked_against_prompt_tokens(warehouse) -> None:
    report = import_calls(warehouse, DATA / "deepseek.jsonl", "deepseek")
    # ds-1 640+260 = 900 = prompt_tokens; ds-2 896+104 (no prompt_tokens); ds-3 500+400 ≠ 1000: refused.
    assert sums(warehouse, "import:deepseek") == (2, 900 + 1000, 640 + 896, None, 60 + 75)
    assert [p.message for p in report.problems] == [
        f"{DATA / 'deepseek.jsonl'}:3: usage.prompt_tokens: 1000 ≠ prompt_cache_hit_tokens 500 + prompt_cache_miss_tokens 400"
    ]


def test_columns_csv_with_llm_calls_names(warehouse) -> None:
    report = import_calls(warehouse, DATA / "harness.csv", "columns", name="harness")
    # h1..h4 are good; h4's model spans lines 5-6, so h5 is on line 7 with two bad fields.
    assert (report.read_as, report.rows, report.good_rows, report.bad_rows) == ("csv", 5, 4, 1)
    assert sums(warehouse, "import:harness") == (4, 1000 + 1100 + 1200 + 10, 0 + 1000 + 1100 + 0, 1000 + 100 + 0, 50 + 60 + 70 + 5)
    assert [p.message for p in report.problems] == [
        f"{DATA / 'harness.csv'}:7: at: not an ISO 8601 time or epoch number: 'yesterday'",
        f"{DATA / 'harness.csv'}:7: cached_tokens: cached tokens 20 exceed prompt tokens 10 (prompt counts every input token)",
    ]
    assert q(warehouse, 'SELECT call_id, "at", model, latency_ms, changed_sections, cache_write_tokens, line_no FROM llm_calls ORDER BY call_id') == [
        ("import:harness:h1", utc(2026, 10, 1, 8), "m1", 1200.5, ["current_date"], 1000, 2),
        ("import:harness:h2", utc(2026, 10, 1, 8, 1), "m1", 800.0, None, None, 3),
        ("import:harness:h3", utc(2026, 9, 21, 14, 13, 20), "m1", None, ["tools", "memory"], 100, 4),
        ("import:harness:h4", utc(2026, 10, 1, 7), "a model name\nover two lines", None, None, 0, 5),
    ]


def test_columns_with_map_through_the_cli(db_path: Path, capsys) -> None:
    argv = [
        "import-calls", str(DATA / "harness_mapped.csv"), "--format", "columns", "--db", str(db_path), "--json",
        "--map", "call_id=req", "--map", "session_id=conv,at=ts_ms,model=llm",
        "--map", "prompt_tokens=in_all", "--map", "cached_tokens=in_cached", "--map", "cache_write_tokens=in_written",
        "--map", "completion_tokens=out", "--map", "latency_ms=elapsed", "--map", "changed_sections=sections",
    ]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["calls"], doc["new"], doc["badRows"], doc["source"]) == (2, 2, 0, "import:harness_mapped")
    assert doc["totals"] == {"promptTokens": 8200, "cachedTokens": 7000, "cacheWriteTokens": 200, "completionTokens": 220}
    with db.reading(db_path) as con:
        assert q(con, f'SELECT call_id, session_id, "at", model, {TOKENS}, latency_ms, changed_sections FROM llm_calls ORDER BY call_id') == [
            ("import:harness_mapped:r1", "k1", utc(2026, 9, 21, 14, 13, 20), "m2", 4000, 3000, None, 100, 1500.0, None),
            ("import:harness_mapped:r2", "k1", utc(2026, 9, 21, 14, 14, 20), "m2", 4200, 4000, 200, 120, 1700.0, ["current_date", "tools"]),
        ]


def test_columns_jsonl_dotted_map_and_consolidator_artifact_shape(warehouse, tmp_path: Path) -> None:
    # A harness log with nested fields, mapped by dotted paths.
    f = write_jsonl(tmp_path / "nested.jsonl", [
        {"meta": {"conv": "n1", "when": "2026-10-02T00:00:00+00:00"}, "tokens": {"in": 700, "hit": 512, "out": 9}},
        {"meta": {"conv": "n1", "when": "2026-10-02T00:05:00+00:00"}, "tokens": {"in": 720, "hit": 640, "out": 11}},
    ])
    mapping = parse_mapping(["session_id=meta.conv", "at=meta.when", "prompt_tokens=tokens.in", "cached_tokens=tokens.hit", "completion_tokens=tokens.out"])
    report = import_calls(warehouse, f, "columns", mapping=mapping)
    assert (report.calls, report.bad_rows) == (2, 0)
    assert sums(warehouse, "import:nested") == (2, 1420, 1152, None, 20)
    # The consolidator's llm_calls.jsonl uses llm_calls' own names: no mapping needed.
    g = write_jsonl(tmp_path / "llm_calls.jsonl", [
        {"call_id": "run1:b1:1", "at": "2026-10-02T01:00:00+00:00", "model": "gpt-x", "prompt_tokens": 5000, "cached_tokens": 4096,
         "cache_write_tokens": None, "completion_tokens": 80, "latency_ms": 1234.5, "run_id": "run1", "batch_id": "b1",
         "changed_sections": ["current_date"]},
    ])
    report = import_calls(warehouse, g, "columns", name="night")
    assert q(warehouse, f"SELECT call_id, run_id, batch_id, {TOKENS}, latency_ms, changed_sections FROM llm_calls WHERE source = 'import:night'") == [
        ("import:night:run1:b1:1", "run1", "b1", 5000, 4096, None, 80, 1234.5, ["current_date"]),
    ]


def test_parquet_rows_are_numbered_and_structs_are_read(warehouse, tmp_path: Path) -> None:
    # API responses as Parquet with a nested `usage` struct, and one bad row (row 3).
    frame = pl.DataFrame({
        "id": ["p1", "p2", "p3"],
        "created_at": [datetime(2026, 10, 3, 12, 0), datetime(2026, 10, 3, 12, 1), None],
        "usage": [
            {"input_tokens": 2000, "output_tokens": 30, "input_tokens_details": {"cached_tokens": 1536}},
            {"input_tokens": 2100, "output_tokens": 25, "input_tokens_details": {"cached_tokens": 2048}},
            {"input_tokens": -4, "output_tokens": 1, "input_tokens_details": {"cached_tokens": 0}},
        ],
    })
    f = tmp_path / "responses.parquet"
    frame.write_parquet(f)
    report = import_calls(warehouse, f, "openai")
    assert (report.read_as, report.unit, report.calls) == ("parquet", "row", 2)
    assert [p.message for p in report.problems] == [f"{f}: row 3: usage.input_tokens: negative count: -4"]
    assert sums(warehouse, "import:responses") == (2, 4100, 3584, None, 55)
    # a naive Parquet datetime is UTC
    assert q(warehouse, 'SELECT min("at") FROM llm_calls') == [(utc(2026, 10, 3, 12),)]


def test_api_responses_as_flat_csv_and_as_json_text_cells(warehouse, tmp_path: Path) -> None:
    flat = tmp_path / "flat.csv"
    flat.write_text(
        "id,created,model,usage.prompt_tokens,usage.completion_tokens,usage.prompt_tokens_details.cached_tokens\n"
        "f1,1790000000,gpt-4.1,1000,10,768\n"
        "f2,1790000060,gpt-4.1,1100,12,\n",
        encoding="utf-8",
    )
    assert import_calls(warehouse, flat, "openai").calls == 2
    assert sums(warehouse, "import:flat") == (2, 2100, 768, None, 22)
    # A harness that logged the whole response body as JSON text in one column (TSV, no extension).
    body = json.dumps({"id": "t1", "usage": {"input_tokens": 9, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 0, "output_tokens": 3}})
    tsv = tmp_path / "log_export"
    tsv.write_text(f"ts\tsession_id\tbody\n2026-10-04T10:00:00Z\tw1\t{body}\n", encoding="utf-8")
    report = import_calls(warehouse, tsv, "anthropic")
    assert report.read_as == "tsv" and report.calls == 1
    assert q(warehouse, f"SELECT session_id, {TOKENS} FROM llm_calls WHERE source = 'import:log_export'") == [("w1", 99, 90, 0, 3)]


# ---- bad rows ----------------------------------------------------------------------------------


def test_each_kind_of_bad_row_is_reported_with_file_line_field(warehouse) -> None:
    path = DATA / "anthropic_bad.jsonl"
    report = import_calls(warehouse, path, "anthropic")
    assert [(p.line, p.field, p.reason) for p in report.problems] == [
        (2, None, "not valid JSON: Expecting property name enclosed in double quotes at column 2"),
        (3, "response.usage.output_tokens", "missing"),
        (4, "response.usage.cache_read_input_tokens", "negative count: -5"),
        (5, "timestamp", "not an ISO 8601 time or epoch number: 'tuesday morning'"),
        (6, None, "not a JSON object (found list)"),
        (7, "response.usage.input_tokens", "not a number: '12x'"),
        (8, "usage", "no usage object in this row (looked up to three levels deep)"),
    ]
    assert report.problems[2].message == f"{path}:4: response.usage.cache_read_input_tokens: negative count: -5"
    assert (report.rows, report.bad_rows, report.calls, report.new) == (8, 7, 1, 1)
    # only the good row reached the table
    assert q(warehouse, "SELECT call_id FROM llm_calls") == [("import:anthropic_bad:ok-1",)]


def test_openai_bad_rows_cached_over_prompt_and_non_counts(warehouse) -> None:
    report = import_calls(warehouse, DATA / "openai_bad.jsonl", "openai")
    assert [(p.line, p.field, p.reason) for p in report.problems] == [
        (1, "usage.prompt_tokens_details.cached_tokens", "cached tokens 200 exceed prompt tokens 100 (prompt counts every input token)"),
        (2, "usage.input_tokens_details.cache_write_tokens", "cache-write tokens 50 plus cached 60 exceed prompt tokens 100"),
        (3, "usage.completion_tokens", "not a whole number: 5.5"),
        (4, "usage.prompt_tokens", "not a number: True"),
    ]
    assert report.calls == 0 and q(warehouse, "SELECT count(*) FROM llm_calls") == [(0,)]


def test_another_providers_usage_is_refused_with_the_format_to_use(warehouse) -> None:
    # Anthropic input_tokens exclude cached ones: read as OpenAI Responses they would undercount.
    report = import_calls(warehouse, DATA / "anthropic.jsonl", "openai")
    # msg_01 (twice) and msg_02 are refused; msg_03 has no cache fields, so both conventions agree on it.
    assert (report.bad_rows, report.calls) == (3, 1)
    assert report.problems[0].field == "response.usage.cache_creation_input_tokens"
    assert "--format anthropic" in report.problems[0].reason
    report = import_calls(warehouse, DATA / "deepseek.jsonl", "anthropic")
    assert {p.reason for p in report.problems} == {"this is deepseek usage, which counts tokens differently: import the file with --format deepseek"}


# ---- identity ---------------------------------------------------------------------------------


def test_reimport_adds_nothing(warehouse) -> None:
    first = import_calls(warehouse, DATA / "anthropic.jsonl", "anthropic")
    again = import_calls(warehouse, DATA / "anthropic.jsonl", "anthropic")
    assert (first.new, first.already_present) == (3, 0)
    assert (again.new, again.already_present) == (0, 3)
    assert q(warehouse, "SELECT count(*) FROM llm_calls") == [(3,)]
    # another name is another source: its calls are its own
    other = import_calls(warehouse, DATA / "anthropic.jsonl", "anthropic", name="copy")
    assert other.new == 3 and q(warehouse, "SELECT count(DISTINCT source) FROM llm_calls") == [(2,)]


def test_rows_without_an_id_get_a_content_hash(warehouse, tmp_path: Path) -> None:
    row = {"timestamp": "2026-10-05T10:00:00Z", "usage": {"prompt_tokens": 50, "completion_tokens": 5}}
    f = write_jsonl(tmp_path / "noid.jsonl", [row, {**row, "timestamp": "2026-10-05T10:00:01Z"}, row])
    report = import_calls(warehouse, f, "openai")
    assert (report.good_rows, report.duplicates, report.new) == (3, 1, 2)
    assert import_calls(warehouse, f, "openai").new == 0
    ids = [r[0] for r in q(warehouse, "SELECT call_id FROM llm_calls ORDER BY line_no")]
    assert all(i.startswith("import:noid:sha256:") and len(i) == len("import:noid:sha256:") + 32 for i in ids)


# ---- values --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (1790000000, utc(2026, 9, 21, 14, 13, 20)),             # seconds
        (1790000000.5, datetime(2026, 9, 21, 14, 13, 20, 500000, tzinfo=UTC)),
        (1790000000000, utc(2026, 9, 21, 14, 13, 20)),          # milliseconds
        (1790000000000000, utc(2026, 9, 21, 14, 13, 20)),       # microseconds
        (1790000000000000000, utc(2026, 9, 21, 14, 13, 20)),    # nanoseconds
        ("1790000000", utc(2026, 9, 21, 14, 13, 20)),           # numeric text is epoch
        ("2026-10-01T10:00:00Z", utc(2026, 10, 1, 10)),
        ("2026-10-01T12:00:00+02:00", utc(2026, 10, 1, 10)),
        ("2026-10-01 10:00:00", utc(2026, 10, 1, 10)),            # naive text is UTC
        ("2026-10-01T10:00:00.123456789Z", datetime(2026, 10, 1, 10, 0, 0, 123456, tzinfo=UTC)),
    ],
)
def test_times(raw: object, expected: datetime) -> None:
    assert v.timestamp(raw) == expected


@pytest.mark.parametrize("raw", ["noon", "", True, {"t": 1}, float("nan"), "2026-13-01T00:00:00Z"])
def test_bad_times(raw: object) -> None:
    with pytest.raises(BadValue):
        v.timestamp(raw)


def test_counts() -> None:
    assert [v.count(x) for x in (0, 12, 12.0, "12", " 7 ")] == [0, 12, 12, 12, 7]
    for bad in (-1, "-1", 1.5, "x", True, None, [1], float("inf")):
        with pytest.raises(BadValue):
            v.count(bad)


def test_latency_and_sections() -> None:
    assert [v.duration_ms(x) for x in (0, 812, "950.5")] == [0.0, 812.0, 950.5]
    assert v.duration_ms(1.5, 1000.0) == 1500.0
    with pytest.raises(BadValue, match="negative latency"):
        v.duration_ms(-3)
    assert v.sections(["a", "b"]) == ["a", "b"]
    assert v.sections('["current_date"]') == ["current_date"]
    assert v.sections("tools; memory,date") == ["tools", "memory", "date"]
    assert v.sections("") == []
    for bad in ("[oops", [1], {"a": 1}):
        with pytest.raises(BadValue):
            v.sections(bad)


def test_latency_in_seconds_and_bad_latency(warehouse, tmp_path: Path) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 1}
    f = write_jsonl(tmp_path / "lat.jsonl", [
        {"latency_s": 1.25, "response": {"id": "l1", "usage": usage}},
        {"latency_ms": -1, "response": {"id": "l2", "usage": usage}},
    ])
    report = import_calls(warehouse, f, "openai")
    assert [(p.line, p.field, p.reason) for p in report.problems] == [(2, "latency_ms", "negative latency: -1")]
    assert q(warehouse, "SELECT latency_ms FROM llm_calls") == [(1250.0,)]


def test_byte_order_mark_is_not_part_of_the_first_record(warehouse, tmp_path: Path) -> None:
    body = '{"id": "b1", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}\n'
    (tmp_path / "bom_log").write_bytes(b"\xef\xbb\xbf" + body.encode())  # no extension: sniffed
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbfid,usage.prompt_tokens,usage.completion_tokens\nb2,5,1\n")
    assert import_calls(warehouse, tmp_path / "bom_log", "openai").calls == 1
    assert import_calls(warehouse, tmp_path / "bom.csv", "openai").calls == 1
    assert q(warehouse, "SELECT call_id FROM llm_calls ORDER BY 1") == [("import:bom:b2",), ("import:bom_log:b1",)]


def test_lookup_flat_nested_and_json_text() -> None:
    rec = {"a.b": 1, "c": {"d": {"e": 2}}, "f": '{"g": {"h": 3}}', "n": None}
    assert [v.lookup(rec, p) for p in ("a.b", "c.d.e", "f.g.h")] == [1, 2, 3]
    assert v.lookup(rec, "n") is v.MISSING and v.lookup(rec, "c.x") is v.MISSING


# ---- transcripts vs importers: one analysis reads every source the same way ------------------------


@pytest.fixture(scope="module")
def samples_db(tmp_path_factory, samples_warehouse: Path) -> duckdb.DuckDBPyConnection:
    con = db.connect(copy_samples(samples_warehouse, tmp_path_factory.mktemp("imp")))
    yield con
    con.close()


def _export_claude(con: duckdb.DuckDBPyConnection, out: Path) -> None:
    """Every assistant line of the Claude Code samples as an Anthropic API log: the message is the
    response, wrapped with the line's time and session. Each content block's line repeats the
    usage of its response, as Claude Code writes it; `<synthetic>` messages never came from the API."""
    by_path = dict(q(con, "SELECT path, session_id FROM sessions WHERE format = 'claude-code'"))
    records = []
    owner: dict[str, Path] = {}  # a subagent file that copies its parent's responses did not make them
    for path in sorted((SAMPLES / "claude").rglob("*.jsonl"), key=lambda p: (len(p.parts), p)):  # parents first
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            msg = rec.get("message") if isinstance(rec, dict) else None
            if rec.get("type") == "assistant" and isinstance(msg, dict) and msg.get("model") != "<synthetic>":
                if owner.setdefault(msg["id"], path) != path:
                    continue
                records.append({"timestamp": rec["timestamp"], "session_id": by_path[str(path.absolute())], "response": msg})
    write_jsonl(out, records)


def test_claude_code_usage_equals_its_responses_imported_as_anthropic(samples_db, tmp_path: Path) -> None:
    _export_claude(samples_db, tmp_path / "claude_api.jsonl")
    report = import_calls(samples_db, tmp_path / "claude_api.jsonl", "anthropic")
    assert report.bad_rows == 0 and report.duplicates > 0  # several blocks per response
    per_session = f"""
        SELECT session_id, count(*), {', '.join(f'sum({c})' for c in TOKENS.split(', '))}, min("at"), max("at")
        FROM llm_calls WHERE source = ? GROUP BY session_id ORDER BY session_id
    """
    derived = q(samples_db, per_session, ["claude-code"])
    imported = q(samples_db, per_session, ["import:claude_api"])
    assert derived and imported == derived
    assert q(samples_db, "SELECT count(*) FROM usage WHERE source = 'claude-code'")[0][0] == report.calls


def test_codex_usage_equals_per_response_usage_imported_as_openai_responses(samples_db, tmp_path: Path) -> None:
    """Each Codex token_count event carries the response's own usage (`last_token_usage`), which is
    the OpenAI Responses convention: cached ⊂ input. Exported once per response, it gives what
    derive stores: a running total written before (a repeat, a replay) is no new response, and a
    forked rollout's copy of its parent's lines holds the parent's responses."""
    by_path = dict(q(samples_db, "SELECT path, session_id FROM sessions WHERE format = 'codex'"))
    records = []
    for path in sorted((SAMPLES / "codex").rglob("*.jsonl")):
        seen: list[dict] = []
        own, created = True, 0.0
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            rec = json.loads(line)
            payload = rec.get("payload") or {}
            if n == 1 and payload.get("forked_from_id"):
                own, created = False, datetime.fromisoformat(payload["timestamp"].replace("Z", "+00:00")).timestamp()
            if payload.get("type") == "task_started" and payload["started_at"] >= int(created):
                own = True
            info = payload.get("info") if rec.get("type") == "event_msg" else None
            if not info:
                continue
            total, last = info["total_token_usage"], info["last_token_usage"]
            if total in seen:
                continue
            seen.append(total)
            if not own:
                continue
            records.append({
                "timestamp": rec["timestamp"], "session_id": by_path[str(path.absolute())],
                "response": {"id": f"{path.stem}:{n}", "object": "response", "usage": {
                    "input_tokens": last["input_tokens"], "output_tokens": last["output_tokens"],
                    "input_tokens_details": {"cached_tokens": last["cached_input_tokens"]},
                }},
            })
    write_jsonl(tmp_path / "codex_api.jsonl", records)
    report = import_calls(samples_db, tmp_path / "codex_api.jsonl", "openai")
    assert report.bad_rows == 0
    per_session = f"""
        SELECT session_id, count(*), {', '.join(f'sum({c})' for c in TOKENS.split(', '))}, min("at"), max("at"),
               bool_and(cached_tokens <= prompt_tokens)
        FROM llm_calls WHERE source = ? GROUP BY session_id ORDER BY session_id
    """
    derived = q(samples_db, per_session, ["codex"])
    assert derived and all(r[-1] for r in derived)
    assert q(samples_db, per_session, ["import:codex_api"]) == derived


def test_codex_repeated_cumulative_totals_are_one_response_each(warehouse, tmp_path: Path) -> None:
    """Not the importer's job, but the same figures: derive makes one row per new running total,
    each the response's own last_token_usage, so repeated totals add nothing."""

    def line(kind: str, payload: dict, ts: str) -> dict:
        return {"timestamp": ts, "type": kind, "payload": payload}

    def usage(inp: int, cached: int, out: int) -> dict:
        return {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out, "reasoning_output_tokens": 0,
                "total_tokens": inp + out}

    previous = usage(0, 0, 0)

    def total(inp: int, cached: int, out: int, ts: str) -> dict:
        nonlocal previous
        last = usage(inp - previous["input_tokens"], cached - previous["cached_input_tokens"], out - previous["output_tokens"])
        if inp == previous["input_tokens"]:
            last = previous["_last"]
        t = usage(inp, cached, out)
        previous = {**t, "_last": last}
        return line("event_msg", {"type": "token_count", "info": {"total_token_usage": t, "last_token_usage": last}}, ts)

    f = write_jsonl(tmp_path / "codex" / "rollout-2026-10-06T08-00-00-r1.jsonl", [
        line("session_meta", {"id": "R1", "cwd": "/srv/r"}, "2026-10-06T08:00:00Z"),
        line("turn_context", {"cwd": "/srv/r", "model": "gpt-5-codex"}, "2026-10-06T08:00:00Z"),
        line("event_msg", {"type": "token_count", "info": None}, "2026-10-06T08:00:01Z"),
        total(3000, 0, 40, "2026-10-06T08:00:02Z"),
        total(3000, 0, 40, "2026-10-06T08:00:03Z"),      # repeated
        total(6500, 2944, 90, "2026-10-06T08:00:04Z"),
        total(6500, 2944, 90, "2026-10-06T08:00:05Z"),   # repeated
        total(6500, 2944, 90, "2026-10-06T08:00:06Z"),   # repeated
        total(10400, 6400, 150, "2026-10-06T08:00:07Z"),
    ])
    ingest.ingest(warehouse, [f])
    # responses: 3000/0/40, 3500/2944/50, 3900/3456/60
    assert q(warehouse, f"SELECT {TOKENS} FROM usage ORDER BY line_no") == [
        (3000, 0, None, 40), (3500, 2944, None, 50), (3900, 3456, None, 60),
    ]
    assert q(warehouse, f"SELECT count(*), {', '.join(f'sum({c})' for c in TOKENS.split(', '))} FROM usage") == [
        (3, 10400, 6400, None, 150)
    ]


# ---- the CLI ------------------------------------------------------------------------------------


def test_cli_json_report_and_exit_0_with_bad_rows(db_path: Path, capsys) -> None:
    path = DATA / "anthropic_bad.jsonl"
    assert main(["import-calls", "--json", "--db", str(db_path), str(path), "--format", "anthropic"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)  # exactly one JSON document
    assert (doc["rows"], doc["badRows"], doc["calls"], doc["new"], doc["alreadyPresent"]) == (8, 7, 1, 1, 0)
    assert len(doc["problems"]) == 7 and doc["problems"][1]["message"] == f"{path}:3: response.usage.output_tokens: missing"
    assert f"bad row: {path}:3: response.usage.output_tokens: missing" in captured.err
    # again: nothing new, still exit 0
    assert main(["import-calls", str(path), "--format", "anthropic", "--db", str(db_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "0 new, 1 already present" in captured.err


def _responses(n: int, *, dated: int = 0, with_session: bool = False) -> list[dict]:
    """OpenAI chat completions as a harness might log them: the first `dated` carry a time."""
    rows = []
    for i in range(n):
        row: dict = {"id": f"chatcmpl-{i}", "object": "chat.completion", "model": "gpt-5",
                     "usage": {"prompt_tokens": 10_000 + 100 * i, "completion_tokens": 20,
                               "prompt_tokens_details": {"cached_tokens": 9_000 if i else 0}}}
        if i < dated:
            row["created"] = 1_792_000_000 + 30 * i
        if with_session:
            row["conversation_id"] = "conv-1"
        rows.append(row)
    return rows


def test_missing_time_and_conversation_are_warned_with_their_meaning(db_path: Path, tmp_path: Path, capsys) -> None:
    path = write_jsonl(tmp_path / "bare.jsonl", _responses(10))
    assert main(["import-calls", str(path), "--format", "openai", "--json", "--db", str(db_path)]) == 0
    captured = capsys.readouterr()
    warnings = json.loads(captured.out)["warnings"]
    assert [w.split(" (")[0] for w in warnings] == ["10 of 10 calls have no time", "10 of 10 calls have no conversation id"]
    assert "leaves them out of every time-based figure" in warnings[0] and "--map at=FIELD" in warnings[0]
    assert "cold start" in warnings[1] and "--map session_id=FIELD" in warnings[1]
    assert captured.err.count("warning: ") == 2
    # nothing time-based can be said about these calls: cache-report says why, instead of 10 cold starts
    code = main(["cache-report", "--db", str(db_path), "--cutover", "2026-10-13", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and "none of the 10 llm_calls rows can be analysed: 10 have no time" in doc["error"]


def test_a_mapped_time_is_named_in_the_warning(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "some.jsonl", [{**r, "ts": r.get("created")} for r in _responses(4, dated=2, with_session=True)])
    report = read_calls(path, "openai", mapping={"at": "ts"}).report
    assert report.warnings == [
        "2 of 4 calls have no time (no value in 'ts', the field --map at=ts names): cache-report leaves them out of every time-based "
        "figure (miss causes, TTL expiry, daily rates, the effect of anchoring) and says how many. Map the time with --map at=FIELD"
    ]
    complete = write_jsonl(tmp_path / "all.jsonl", _responses(3, dated=3, with_session=True))
    assert read_calls(complete, "openai").report.warnings == []


def test_cli_db_anywhere_before_double_dash(db_path: Path, capsys) -> None:
    path = str(DATA / "openai_responses.jsonl")
    assert main(["import-calls", "--db", str(db_path), "--format", "openai", "--name", "r", "--", path]) == 0
    assert "import:r: 2 rows, 0 bad, 2 calls; 2 new" in capsys.readouterr().err
    with db.reading(db_path) as con:
        assert sums(con, "import:r") == (2, 10400, 9088, None, 420)


def test_cli_every_row_bad_is_a_negative_outcome(db_path: Path, capsys) -> None:
    assert main(["import-calls", str(DATA / "deepseek.jsonl"), "--format", "anthropic", "--db", str(db_path)]) == 1
    assert "is --format right?" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["import-calls", "missing.jsonl", "--format", "openai"], "no such file"),
        (["import-calls", str(DATA / "openai_chat.jsonl"), "--format", "gemini"], "invalid choice"),
        (["import-calls", str(DATA / "openai_chat.jsonl")], "required"),
        (["import-calls", str(DATA / "openai_chat.jsonl"), "--format", "openai", "--map", "session_id"], "COLUMN=FIELD"),
        (["import-calls", str(DATA / "openai_chat.jsonl"), "--format", "openai", "--map", "sessions=x"], "not an llm_calls column"),
        (["import-calls", str(DATA / "openai_chat.jsonl"), "--format", "openai", "--map", "prompt_tokens=x"], "only with --format columns"),
        (["import-calls", str(DATA / "harness_mapped.csv"), "--format", "columns"], "pass --map prompt_tokens=COLUMN"),
        (["import-calls", str(DATA / "harness.csv"), "--format", "columns", "--map", "session_id=conv"], "has no column 'conv'"),
    ],
)
def test_cli_usage_errors_exit_2(db_path: Path, capsys, argv: list[str], needle: str) -> None:
    try:
        code = main([*argv, "--db", str(db_path)])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert not db_path.exists()  # a wrong invocation never creates a warehouse


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("array.json", b'[{"id": 1}]', "one JSON array"),
        ("log.jsonl.gz", b"\x1f\x8b\x08\x00", "gzip-compressed"),
        ("broken.parquet", b"PAR1 not really", "cannot read"),
        ("notes.txt", b"just some words\n", "cannot tell the format"),
    ],
)
def test_unreadable_or_unknown_files_are_usage_errors(tmp_path: Path, name: str, content: bytes, needle: str) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(UsageError, match=needle):
        read_calls(tmp_path / name, "openai")


def test_empty_file_reads_as_nothing(warehouse, tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    report = import_calls(warehouse, tmp_path / "empty.jsonl", "openai")
    assert (report.rows, report.calls, report.new, report.already_present) == (0, 0, 0, 0)


def test_imported_log_and_transcript_usage_give_the_same_cache_report(samples_db, tmp_path: Path) -> None:
    """Issue 6 acceptance: one analysis reads every source the same way."""
    import datetime as dt

    from pipeline.cache.analysis import AnalysisConfig, analyze

    _export_claude(samples_db, tmp_path / "harness.jsonl")
    import_calls(samples_db, tmp_path / "harness.jsonl", "anthropic")
    calls = db.frame(samples_db, 'SELECT * EXCLUDE (line_no, origin) FROM llm_calls')
    reports = {}
    for source in ("claude-code", "import:harness"):
        cfg = AnalysisConfig(cutover=dt.date(2026, 10, 25), source=source, bootstrap=50)
        report, _ = analyze(calls, cfg)
        doc = _rounded(report.model_dump(mode="json", exclude={"config", "inputs"}))
        # Only the transcripts say how cache writes split by TTL (the import reads no split): what
        # each price was applied to differs; on the samples every write is a 5-minute one, so the
        # prices are the same.
        split = doc["cost"].pop("write_split")
        doc["notes"] = [n for n in doc["notes"] if not n.startswith("cache writes ")]
        reports[source] = doc | {"split_calls": split["calls_split"] + split["calls_unsplit"], "split_1h": split["write_1h_tokens"]}
    assert reports["claude-code"]["calls"] > 100
    assert reports["claude-code"] == reports["import:harness"]


def _rounded(value):
    """Floats to 9 places: the two sources sum the same numbers in a different order."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
