"""The Claude Code prompt rule, as SQL, against its plain-Python reading (`checks.claude_prompt`).

The SQL rule reads a line's content once, as a string, and tells a typed text from an array's JSON
without a second parse where it can (`prompt_rules.claude_prompt`). These properties hold it to the
Python reading on generated lines, both as the views evaluate it (the rule parses the header itself)
and as an ingest does (the header comes from the projection's own parse).
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.warehouse import checks, derive, prompt_rules

BLANKS = st.text(alphabet=" \t\r\n", max_size=3)
# Texts that a cheap test could take for another JSON type: they must still count as typed strings.
JSON_LOOKING = st.sampled_from(["[]", "[1, 2]", "{}", '{"a": 1}', "true", "false", "null", "42", "-1.5", '"quoted"',
                                "[Request", "t", "nul", "1e3x"])
WORDS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
TEXT = st.one_of(
    WORDS,
    st.builds(lambda b, p, w: b + p + w, BLANKS, st.sampled_from(prompt_rules.CLAUDE_NOT_PROMPT), WORDS),
    st.builds(lambda b, w: b + w, BLANKS, JSON_LOOKING),
    BLANKS,
)
BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
    st.fixed_dictionaries({"type": st.just("image"), "source": st.just({"type": "base64", "data": "AAAA"})}),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": st.just("t1"), "content": TEXT}),
    st.fixed_dictionaries({"type": st.sampled_from(["document", "thinking"]), "text": TEXT}),
    st.fixed_dictionaries({"text": TEXT}),  # a block without a type
    TEXT, st.integers(), st.none(),  # not blocks at all
)
CONTENT = st.one_of(TEXT, st.lists(BLOCK, max_size=4), st.integers(), st.booleans(), st.none(),
                    st.just({"text": "an object"}))
FLAG = st.one_of(st.none(), st.booleans())


@st.composite
def claude_lines(draw: Any) -> str:
    rec: dict[str, Any] = {"type": draw(st.sampled_from(["user", "user", "user", "assistant", "system"])),
                           "uuid": "u-1", "timestamp": "2026-11-01T10:00:00Z"}
    for key in ("isMeta", "isCompactSummary"):
        flag = draw(FLAG)
        if flag is not None:
            rec[key] = flag
    agent = draw(st.sampled_from([None, "acompact-1f2e", "a9b8c7"]))
    if agent is not None:
        rec["agentId"] = agent
    shape = draw(st.sampled_from(["content", "content", "content", "no content", "no message", "message not an object"]))
    if shape == "content":
        rec["message"] = {"role": "user", "content": draw(CONTENT)}
    elif shape == "no content":
        rec["message"] = {"role": "user"}
    elif shape == "message not an object":
        rec["message"] = "hello"
    return json.dumps(rec, ensure_ascii=draw(st.booleans()))


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(claude_lines(), min_size=1, max_size=20))
def test_the_sql_rule_reads_each_line_as_python_does(con: duckdb.DuckDBPyConnection, lines: list[str]) -> None:
    expected = [checks.claude_prompt(json.loads(line)) for line in lines]
    standalone = con.execute(
        f"SELECT {prompt_rules.claude_prompt('text')} FROM unnest($t) WITH ORDINALITY AS u(text, n) ORDER BY n",
        {"t": lines},
    ).fetchall()
    assert [r[0] for r in standalone] == expected
    batch = pa.table({"session_id": ["s"] * len(lines), "line_no": list(range(1, len(lines) + 1)), "text": lines})
    con.register("_prompt_lines", batch)
    try:
        projected = derive.project(con, "_prompt_lines").sort("line_no")
        claude_only = derive.project(con, "_prompt_lines", {"claude-code"}).sort("line_no")
    finally:
        con.unregister("_prompt_lines")
    assert projected["claude_prompt"].to_list() == expected
    assert claude_only["claude_prompt"].to_list() == expected


def test_a_typed_text_that_reads_as_json_is_still_a_prompt(con: duckdb.DuckDBPyConnection) -> None:
    for text in ("[]", "true", "42", "null", '{"a": 1}', '"quoted"', " [Request for a change"):
        line = json.dumps({"type": "user", "message": {"role": "user", "content": text}})
        assert con.execute(f"SELECT {prompt_rules.claude_prompt('$t')}", {"t": line}).fetchone() == (True,), text
    for content in ([], {"a": 1}, 42, True):
        line = json.dumps({"type": "user", "message": {"role": "user", "content": content}})
        assert con.execute(f"SELECT {prompt_rules.claude_prompt('$t')}", {"t": line}).fetchone() == (False,), content
