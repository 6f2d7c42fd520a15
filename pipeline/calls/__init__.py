"""`llm_calls` as a log: reading call logs from any provider or harness, and pricing calls.

Owns: `importer` (the `import-calls` entry point: `import_calls`, `read_calls`, `store_calls`),
`conventions` (each provider's token convention), `files` (the one suffix → reader table for JSONL, CSV and
Parquet, which `cache` reads call files with too), `values` (parsing one cell), `prices` (what a token costs).

May import: `pipeline.warehouse` and the cross-cutting top-level modules. Nothing above it.
"""
