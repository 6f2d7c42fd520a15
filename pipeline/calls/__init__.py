"""LLM call logs from any provider or harness into `llm_calls`, read the way transcripts are.

`import_calls(con, path, fmt, name=..., mapping=...)` is the entry point (the CLI verb
`pipeline import-calls` wraps it); `read_calls` and `store_calls` are its two halves. Each
provider's token convention is in `conventions`, file reading in `files`, value parsing in
`values`.
"""

from __future__ import annotations

from pipeline.importers.calls import (
    CallBatch,
    ImportReport,
    Problem,
    Totals,
    check_mapping,
    import_calls,
    parse_mapping,
    read_calls,
    store_calls,
)
from pipeline.importers.conventions import FORMATS, MAPPABLE, TOKEN_COLUMNS

__all__ = [
    "FORMATS",
    "MAPPABLE",
    "TOKEN_COLUMNS",
    "CallBatch",
    "ImportReport",
    "Problem",
    "Totals",
    "check_mapping",
    "import_calls",
    "parse_mapping",
    "read_calls",
    "store_calls",
]
