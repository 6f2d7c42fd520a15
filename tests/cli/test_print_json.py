"""`--json` output: any JSON document comes back as it was, objects spread over lines down to the first
array, each item of an array one line."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli.main import print_json
from tests.strategies import value

documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | value,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(value, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(doc=documents)
def test_any_document_reads_back_as_it_was(doc: object) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_json(doc)
    assert json.loads(out.getvalue()) == doc


def test_a_report_has_a_line_per_row(capsys: pytest.CaptureFixture[str]) -> None:
    print_json({"daily": [{"period": "2026-01-01", "models": ["a", "b"]}, {"period": "2026-01-02", "models": []}],
                "totals": {"totalTokens": 3}})
    assert capsys.readouterr().out.splitlines() == [
        "{", '  "daily": [', '    {"period": "2026-01-01", "models": ["a", "b"]},', '    {"period": "2026-01-02", "models": []}',
        "  ],", '  "totals": {', '    "totalTokens": 3', "  }", "}",
    ]
