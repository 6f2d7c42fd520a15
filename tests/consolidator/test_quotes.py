"""Quote verification: raw text, decoded JSON string values, one level of embedded JSON, nothing else."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipeline.consolidator.quotes import (
    CLOSEST_SCAN_CHARS,
    PASSAGE_CHARS,
    MemoryQuotes,
    QuoteIndex,
    WarehouseQuotes,
    closest_passage,
    escape_safe_needle,
    quote_in_line,
)
from pipeline.warehouse import db

# --- an independent statement of the rule, for differential tests ------------------------------


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def oracle_texts(line: str) -> list[str]:
    """Every text a quote may come from: the raw line, its string values, and theirs one level down."""
    texts = [line]
    try:
        parsed = json.loads(line)
    except ValueError:
        return texts
    for value in _strings(parsed):
        texts.append(value)
        try:
            inner = json.loads(value)
        except ValueError:
            continue
        texts.extend(_strings(inner))
    return texts


def oracle(quote: str, line: str) -> bool:
    return bool(quote) and any(quote in t for t in oracle_texts(line))


# --- strategies ---------------------------------------------------------------------------------

# Text that exercises JSON escaping: quotes, backslashes, control characters, non-ASCII, astral.
tricky_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("ab \"\\/\n\t\r{}[]:,é€😀<>&'")),
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
    ),
    max_size=40,
)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), tricky_text)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=10,
)


@st.composite
def substring_of(draw: st.DrawFn, text: str) -> str:
    start = draw(st.integers(0, len(text) - 1))
    end = draw(st.integers(start + 1, len(text)))
    return text[start:end]


@st.composite
def json_line_with_value(draw: st.DrawFn) -> tuple[str, str]:
    """(line, a string value buried somewhere in it)."""
    value = draw(tricky_text.filter(bool))
    record: Any = value
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            record = [draw(json_values), record]
        else:
            record = {"k": draw(json_values), draw(st.text(max_size=4)): record}
    return json.dumps(record, ensure_ascii=draw(st.booleans())), value


# --- quote_in_line: examples --------------------------------------------------------------------


def test_raw_text_of_any_line() -> None:
    assert quote_in_line("plain", "a plain line, not JSON")
    assert quote_in_line('"type":"user"', '{"type":"user","x":1}')


def test_decoded_string_values_at_any_depth() -> None:
    line = json.dumps({"message": {"content": [{"type": "text", "text": 'say "hi"\nthen leave'}]}})
    assert quote_in_line('say "hi"\nthen leave', line)  # decoded form
    assert quote_in_line('say \\"hi\\"\\nthen leave', line)  # as written on the line


def test_both_forms_of_escaped_characters() -> None:
    line = json.dumps({"t": 'C:\\temp "x" café\ttab'}, ensure_ascii=True)
    assert "\\u00e9" in line
    assert quote_in_line("café", line)
    assert quote_in_line("caf\\u00e9", line)
    assert quote_in_line("C:\\temp", line)
    assert quote_in_line("C:\\\\temp", line)
    assert quote_in_line('"x"', line)
    assert quote_in_line('\\"x\\"', line)
    assert quote_in_line("é\ttab", line)


def test_embedded_json_document_one_level() -> None:
    args = json.dumps({"command": ["bash", "-lc", 'rg "TODO" src/'], "timeout": 10})
    line = json.dumps({"type": "function_call", "name": "shell", "arguments": args})
    assert quote_in_line('rg "TODO" src/', line)
    assert quote_in_line('"command"', line)  # part of the decoded `arguments` string


def test_embedded_decoding_stops_after_one_level() -> None:
    deepest = json.dumps({"c": 'he said "hi"'})
    line = json.dumps({"a": json.dumps({"b": deepest})})
    assert not quote_in_line('he said "hi"', line)
    assert quote_in_line('he said \\"hi\\"', line)  # what the first decoded level shows


def test_object_keys_are_not_values() -> None:
    line = json.dumps({"ké": 1}, ensure_ascii=True)
    assert not quote_in_line("ké", line)


def test_no_folding_of_case_or_whitespace() -> None:
    line = json.dumps({"text": "Run the Tests  now"})
    assert quote_in_line("Run the Tests  now", line)
    assert not quote_in_line("run the tests  now", line)
    assert not quote_in_line("Run the Tests now", line)
    assert not quote_in_line("Run the Tests\tnow", line)
    assert not quote_in_line(" Run the Tests  now ", line)


def test_non_json_line_offers_only_its_raw_text() -> None:
    line = 'broken {"text": "caf\\u00e9"'
    assert quote_in_line("caf\\u00e9", line)
    assert not quote_in_line("café", line)


def test_empty_quote_is_never_verbatim() -> None:
    assert not quote_in_line("", "anything")


# --- quote_in_line: properties ------------------------------------------------------------------


@given(line=st.text(min_size=1), data=st.data())
def test_any_substring_of_the_raw_line_is_accepted(line: str, data: st.DataObject) -> None:
    assert quote_in_line(data.draw(substring_of(line)), line)


@given(pair=json_line_with_value(), data=st.data())
def test_any_substring_of_a_decoded_value_is_accepted(pair: tuple[str, str], data: st.DataObject) -> None:
    line, value = pair
    assert quote_in_line(data.draw(substring_of(value)), line)


@given(
    value=tricky_text.filter(bool),
    inner_ascii=st.booleans(),
    outer_ascii=st.booleans(),
    data=st.data(),
)
def test_any_substring_of_an_embedded_document_value_is_accepted(
    value: str, inner_ascii: bool, outer_ascii: bool, data: st.DataObject
) -> None:
    arguments = json.dumps({"cmd": ["sh", value]}, ensure_ascii=inner_ascii)
    line = json.dumps({"type": "function_call", "arguments": arguments}, ensure_ascii=outer_ascii)
    assert quote_in_line(data.draw(substring_of(value)), line)


@given(value=tricky_text.filter(bool), ascii_only=st.booleans(), data=st.data())
def test_escaped_and_decoded_forms_are_both_accepted(
    value: str, ascii_only: bool, data: st.DataObject
) -> None:
    part = data.draw(substring_of(value))
    line = json.dumps({"text": value}, ensure_ascii=ascii_only)
    escaped = json.dumps(part, ensure_ascii=ascii_only)[1:-1]
    assert quote_in_line(part, line)
    assert quote_in_line(escaped, line)


@given(
    quote=st.text(min_size=1, max_size=12), line=st.one_of(st.text(max_size=60), json_values.map(json.dumps))
)
def test_agrees_with_an_independent_statement_of_the_rule(quote: str, line: str) -> None:
    assert quote_in_line(quote, line) == oracle(quote, line)


@given(
    line=st.one_of(st.text(max_size=60), json_values.map(json.dumps)),
    quote=st.text(min_size=1, max_size=8),
)
def test_text_found_nowhere_is_refused(line: str, quote: str) -> None:
    assume(not any(quote in t for t in oracle_texts(line)))
    assert not quote_in_line(quote, line)


words = st.text(alphabet="abcdefgh", min_size=1, max_size=6)


@given(ws=st.lists(words, min_size=2, max_size=8), as_json=st.booleans(), data=st.data())
def test_changed_case_or_spacing_is_refused(ws: list[str], as_json: bool, data: st.DataObject) -> None:
    text = " ".join(ws)
    line = json.dumps({"msg": text}) if as_json else text
    i = data.draw(st.integers(0, len(ws) - 2))
    j = data.draw(st.integers(i + 1, len(ws) - 1))
    quote = " ".join(ws[i : j + 1])
    assert quote_in_line(quote, line)
    assert not quote_in_line(quote.upper(), line)
    spaced = data.draw(st.sampled_from(["  ", "\t", "\n", " \u00a0"]))
    assert not quote_in_line(quote.replace(" ", spaced, 1), line)


@given(value=tricky_text.filter(bool), ascii_only=st.booleans(), twice=st.booleans(), data=st.data())
def test_the_escape_safe_needle_survives_json_encoding(
    value: str, ascii_only: bool, twice: bool, data: st.DataObject
) -> None:
    quote = data.draw(substring_of(value))
    needle = escape_safe_needle(quote)
    assert needle in quote
    encoded = json.dumps(value, ensure_ascii=ascii_only)
    if twice:
        encoded = json.dumps({"arguments": json.dumps({"v": value}, ensure_ascii=ascii_only)})
    assert needle in encoded


# --- the two QuoteIndex implementations ---------------------------------------------------------


@pytest.fixture(scope="module")
def shared_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    con = db.connect(tmp_path_factory.mktemp("quotes") / "w.duckdb")
    yield con
    con.close()


_ids = itertools.count()


def _store(con: duckdb.DuckDBPyConnection, lines: list[str]) -> str:
    session_id = f"s{next(_ids)}"
    con.executemany(
        "INSERT INTO lines (session_id, line_no, text) VALUES (?, ?, ?)",
        [(session_id, n, text) for n, text in enumerate(lines, start=1)],
    )
    return session_id


def test_both_implementations_are_quote_indexes(shared_warehouse: duckdb.DuckDBPyConnection) -> None:
    assert isinstance(MemoryQuotes({}), QuoteIndex)
    assert isinstance(WarehouseQuotes(shared_warehouse), QuoteIndex)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(
        st.one_of(st.text(max_size=40), json_values.map(lambda v: json.dumps(v, ensure_ascii=True))),
        min_size=1,
        max_size=5,
    ),
    data=st.data(),
)
def test_warehouse_and_memory_agree(
    shared_warehouse: duckdb.DuckDBPyConnection, lines: list[str], data: st.DataObject
) -> None:
    texts = [t for line in lines for t in oracle_texts(line) if t]
    quotes = [data.draw(st.text(min_size=1, max_size=6))]
    if texts:
        quotes.append(data.draw(substring_of(data.draw(st.sampled_from(texts)))))
    session_id = _store(shared_warehouse, lines)
    warehouse = WarehouseQuotes(shared_warehouse)
    memory = MemoryQuotes({session_id: lines})
    for quote in quotes:
        expected = any(oracle(quote, line) for line in lines)
        assert memory.contains(session_id, quote) == expected
        assert warehouse.contains(session_id, quote) == expected


def test_sessions_are_kept_apart(warehouse: duckdb.DuckDBPyConnection) -> None:
    warehouse.execute("INSERT INTO lines VALUES ('a', 1, 'alpha only'), ('b', 1, 'beta only')")
    index = WarehouseQuotes(warehouse)
    assert index.contains("a", "alpha")
    assert not index.contains("a", "beta")
    assert not index.contains("missing", "alpha")
    assert index.session_exists("a")
    assert not index.session_exists("missing")


def test_quote_text_is_never_part_of_the_sql(warehouse: duckdb.DuckDBPyConnection) -> None:
    warehouse.execute("INSERT INTO lines VALUES ('a', 1, 'it''s fine')")
    index = WarehouseQuotes(warehouse)
    hostile = "x'); DROP TABLE lines; --"
    assert not index.contains("a", hostile)
    index.closest("a", hostile)  # ranks lines by words of the quote: must not raise either
    assert index.contains("a", "it's fine")
    assert index.contains("a'; --", "x") is False


def test_quote_without_an_escape_safe_run_scans_the_session(warehouse: duckdb.DuckDBPyConnection) -> None:
    line = json.dumps({"text": "« é »"}, ensure_ascii=True)
    warehouse.execute("INSERT INTO lines VALUES ('a', 1, 'nothing'), ('a', 2, ?)", [line])
    assert escape_safe_needle("«é»") == ""
    index = WarehouseQuotes(warehouse)
    assert index.contains("a", "« é »")
    assert not index.contains("a", "«é»")


def test_closest_points_at_the_line_and_the_passage() -> None:
    lines = [
        json.dumps({"type": "user", "text": "let's get going"}),
        json.dumps({"type": "tool_result", "content": "ERROR: lockfile is out of date, run pnpm install"}),
        "not json: unrelated",
    ]
    index = MemoryQuotes({"s": lines})
    assert not index.contains("s", "Error: lockfile is out of date")
    near = index.closest("s", "Error: lockfile is out of date")
    assert near is not None
    line_no, passage = near
    assert line_no == 2
    assert "lockfile is out of date" in passage
    assert len(passage) <= PASSAGE_CHARS


def test_closest_is_bounded_and_short() -> None:
    assert closest_passage("anything", []) is None
    long_quote = "x" * 600
    near = closest_passage(long_quote, [(1, "x" * 5000)])
    assert near is not None and len(near[1]) <= PASSAGE_CHARS
    assert closest_passage("qqqq", [(1, "abcdefgh" * 10)]) is None  # nothing resembles it


def test_warehouse_closest_and_large_sessions(warehouse: duckdb.DuckDBPyConnection) -> None:
    filler = "lorem ipsum dolor sit amet " * 45_000  # ~1.2 MB in one line
    big = json.dumps(
        {"type": "tool_result", "content": filler + "the build failed: missing libfoo.so.3 " + filler}
    )
    warehouse.execute(
        """INSERT INTO lines SELECT 'big', i, '{"type": "assistant", "text": "step ' || i || ' ' || repeat('z', 2000) || '"}'
           FROM range(1, 2001) AS t(i)"""
    )
    warehouse.execute("INSERT INTO lines VALUES ('big', 2001, ?)", [big])
    index = WarehouseQuotes(warehouse)

    started = time.perf_counter()
    assert index.contains("big", "the build failed: missing libfoo.so.3")
    assert not index.contains("big", "the build failed: missing libfoo.so.4")
    assert not index.contains("big", "«»")  # no escape-safe run: every line is scanned
    near = index.closest("big", "The build failed: missing libfoo.so.3")
    elapsed = time.perf_counter() - started

    assert near is not None and near[0] == 2_001
    assert "missing libfoo.so.3" in near[1]
    assert elapsed < 10, f"quote checks over a 5 MB session took {elapsed:.1f}s"


def test_closest_stops_at_its_budget() -> None:
    rows = [(n, "filler text " * 1_000) for n in range(1, 200)]
    rows.append((200, "the passage we wanted"))
    # 199 lines of 12,000 characters exceed the budget, so line 200 is never reached.
    assert 199 * 12_000 > CLOSEST_SCAN_CHARS
    near = closest_passage("the passage we wanted", rows)
    assert near is None or near[0] != 200


def test_memory_index_from_plain_lists() -> None:
    index = MemoryQuotes({"a": ["one", json.dumps({"m": "two\nlines"})]})
    assert index.contains("a", "two\nlines")
    assert not index.contains("b", "one")
    assert index.session_exists("a") and not index.session_exists("b")
